package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
	"allot/workflows"
)

// Issue 17 §4: check flags an intent older than its step's vendor keeps
// idempotency keys, with the command that asks the vendor; a younger one,
// or one of a vendor without a horizon, is not flagged.
func TestCheckFlagsIntentsPastTheirVendorsHorizon(t *testing.T) {
	ctx := context.Background()
	c := newCheckedLedger(t, ledgertest.DriverURL(t, "sqlite"))
	// The studio vendor (the cover) keeps keys 30 minutes.
	set, err := pipeline.Parse([]byte(strings.Replace(checkPipelines, `api_key_env = "STUDIO_API_KEY"`, `api_key_env = "STUDIO_API_KEY"
idempotency_horizon = "30m"`, 1)), "test")
	if err != nil || set.Limits("studio").Horizon() != 30*time.Minute {
		t.Fatalf("%v", err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: c.live.ID, Step: "cover"}
	task, err := c.led.WriteIntent(ctx, ref, allot.IdempotencyKey("weekly-video", c.live.ID, "cover", 0), "attempt-1")
	if err != nil {
		t.Fatal(err)
	}
	check := func(at time.Time) []ledger.Violation {
		t.Helper()
		res, err := Audit(ctx, c.led, CheckInput{Pipelines: set, Now: at, StaleIntent: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		var out []ledger.Violation
		for _, v := range res.Violations {
			if v.Kind == ledger.KindPastHorizon {
				out = append(out, v)
			}
		}
		return out
	}
	// An intent never sent has no horizon, however old (issue 24): the
	// horizon counts from the first send.
	if vs := check(task.CreatedAt.Add(40 * time.Hour)); len(vs) != 0 {
		t.Fatalf("an intent never sent: %+v", vs)
	}
	if task, err = c.led.MarkSending(ctx, ref, "attempt-1", time.Now().Add(time.Minute)); err != nil || task.FirstSentAt.IsZero() {
		t.Fatalf("%+v, %v", task, err)
	}
	if vs := check(task.FirstSentAt.Add(20 * time.Minute)); len(vs) != 0 {
		t.Fatalf("within the horizon: %+v", vs)
	}
	vs := check(task.FirstSentAt.Add(40 * time.Minute))
	if len(vs) != 1 || vs[0].Episode != c.live.ID || vs[0].Fix != allot.LookupCommand("weekly-video", c.live.ID, "cover") {
		t.Fatalf("past the horizon: %+v", vs)
	}
	if _, err := workflows.SplitCommand(vs[0].Fix); err != nil {
		t.Fatal(err)
	}
	// Without the pipeline file no horizon is known, and none is flagged.
	res, err := Audit(ctx, c.led, CheckInput{Now: task.FirstSentAt.Add(40 * time.Minute), StaleIntent: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		if v.Kind == ledger.KindPastHorizon {
			t.Fatalf("flagged without horizons: %+v", v)
		}
	}
}
