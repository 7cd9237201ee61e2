package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/importer"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/pipeline"
)

// TestImportedTimeIsReusedAndPaysNothing is the reproduction of issue 15:
// an old run is imported for 2026-07-13T02:00:00Z; a backfill's dry run
// counts that time as existing; `starter run --nominal-time` for it gets
// the imported episode back (reused), its Episode resumes from the ledger
// as completed, and the vendor charges nothing.
func TestImportedTimeIsReusedAndPaysNothing(t *testing.T) {
	c := allottest.NewCluster(t)
	ctx := c.Ctx()
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := allottest.WritePipelines(t, t.TempDir())
	nominal := time.Date(2026, 7, 13, 2, 0, 0, 0, time.UTC)
	from := filepath.Join(t.TempDir(), "old.jsonl")
	if err := os.WriteFile(from, []byte(`{"old_id": "2026-W29", "nominal_time": "2026-07-13T02:00:00Z", "completed_at": "2026-07-14T10:12:00Z",`+
		` "references": [{"step": "video", "remote_ref": "vt_old_video"}, {"step": "cover", "remote_ref": "vt_old_cover"}],`+
		` "costs": [{"remote_ref": "vt_old_video", "amount": 250, "currency": "USD"}, {"remote_ref": "vt_old_cover", "amount": 40, "currency": "USD"}],`+
		` "approvals": [{"decision": "approved", "by": "maria", "at": "2026-07-14T09:55:00Z"}]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := starterCmd(t, bin, c, pipelinesFile, "import", "--pipeline", "weekly-paid", "--from", from, "--in-place", "--json")
	var imp importer.ImportResult
	if code != 0 || json.Unmarshal([]byte(out), &imp) != nil || len(imp.Imported) != 1 || !imp.Imported[0].Scheduled {
		t.Fatalf("starter import: exit %d\n%s", code, out)
	}
	imported := imp.Imported[0].EpisodeID

	// The backfill's dry run over the imported time and the hour after it.
	if _, err := c.Schedules().Create(ctx, operator.ScheduleInput{Pipeline: "weekly-paid", Override: pipeline.Schedule{Interval: "1h"}, Paused: true}); err != nil {
		t.Fatal(err)
	}
	code, out = starterCmd(t, bin, c, pipelinesFile, "schedule", "backfill", "--pipeline", "weekly-paid",
		"--from", nominal.Format(time.RFC3339), "--to", nominal.Add(2*time.Hour).Format(time.RFC3339), "--dry-run", "--json")
	var dry operator.BackfillResult
	if code != 0 || json.Unmarshal([]byte(out), &dry) != nil || dry.Runs != 2 || dry.Existing == nil || *dry.Existing != 1 || dry.Sent {
		t.Fatalf("backfill --dry-run: exit %d, want 2 runs of which 1 exists\n%s", code, out)
	}

	// A run for the imported time: the imported episode, nothing paid.
	code, out = starterCmd(t, bin, c, pipelinesFile, "run", "--pipeline", "weekly-paid", "--nominal-time", nominal.Format(time.RFC3339), "--wait", "--json")
	var run operator.RunResult
	if code != 0 || json.Unmarshal([]byte(out), &run) != nil || run.Result == nil ||
		run.Result.Outcome != allot.OutcomeReused || run.Result.EpisodeID != imported {
		t.Fatalf("starter run --nominal-time %s: exit %d, want the imported episode %s reused\n%s", nominal.Format(time.RFC3339), code, imported, out)
	}
	if final := c.WaitEpisode("weekly-paid", imported); final.Stage != allot.StageCompleted {
		t.Fatalf("the imported episode's workflow ended %s, want completed", final.Stage)
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 0 {
		t.Fatalf("the vendor charged %d times for an imported time, want 0", n)
	}
	if eps := c.Episodes("weekly-paid"); len(eps) != 1 {
		t.Fatalf("episodes after the run: %+v, want only the imported one", eps)
	}
	costs, err := report.Costs(ctx, c.Ledger, report.CostsInput{Pipeline: "weekly-paid"})
	if err != nil || costs.Totals["USD"] != 290 {
		t.Fatalf("costs after the run: %+v, %v; want the imported 2.90 USD only", costs, err)
	}
	c.MustCheck()
}
