package e2e

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/allottest"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/workflows"
)

// Issue 8: two ledgers on one namespace and task queue fail loudly instead
// of stranding episodes. A run stamped with another ledger is refused by
// this ledger's worker; an Episode of another ledger that already runs
// under the ID this ledger allocated is reported by the ScheduledRun.
func TestWorkOfAnotherLedgerIsRefusedLoudly(t *testing.T) {
	c := allottest.NewCluster(t)
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	other := &operator.Runs{Client: c.Client, Pipelines: c.Pipelines, TaskQueue: workflows.TaskQueue, LedgerID: "0b7a-another-ledger"}
	_, err := other.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal, Wait: true})
	if allottest.ErrorType(err) != allot.LedgerMismatch {
		t.Fatalf("a run of another ledger: %v, want %s", err, allot.LedgerMismatch)
	}
	if eps := c.Episodes("weekly-video"); len(eps) != 0 {
		t.Fatalf("a run of another ledger allocated %+v", eps)
	}
	if outcomes, err := c.Ledger.RunOutcomes(c.Ctx(), "weekly-video", time.Time{}); err != nil || len(outcomes) != 0 {
		t.Fatalf("a run of another ledger recorded %+v, %v in this ledger", outcomes, err)
	}

	// Another ledger's Episode 2026-W32-0 runs (on a queue no worker of
	// this ledger serves); this ledger then allocates its own 2026-W32-0.
	foreign := allot.EpisodeWorkflowID("weekly-video", "2026-W32-0")
	if _, err := c.Client.ExecuteWorkflow(c.Ctx(), client.StartWorkflowOptions{
		ID: foreign, TaskQueue: "another-ledgers-queue", Memo: map[string]any{allot.LedgerMemo: "0b7a-another-ledger"},
	}, workflows.EpisodeWorkflow, workflows.EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-0", LedgerID: "0b7a-another-ledger"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal.Add(time.Hour), Wait: true})
	if allottest.ErrorType(err) != allot.LedgerMismatch {
		t.Fatalf("this ledger's run whose episode another ledger runs: %v, want %s", err, allot.LedgerMismatch)
	}
	outcomes, err := c.Ledger.RunOutcomes(c.Ctx(), "weekly-video", time.Time{})
	if err != nil || len(outcomes) != 1 || outcomes[0].Outcome != allot.OutcomeFailed || outcomes[0].Reason != allot.LedgerMismatch {
		t.Fatalf("the run's outcome %+v, %v; want failed/%s", outcomes, err, allot.LedgerMismatch)
	}
}

// Issue 8: check --workflows finds the unsettled episodes that nothing will
// move on: one whose workflow never started (its remedy, run as printed,
// starts it and the episode completes), and one whose workflow ID runs
// another ledger's episode. Resume leaves a running workflow alone and
// refuses a settled episode.
func TestCheckFindsEpisodesWithoutTheirWorkflow(t *testing.T) {
	c := allottest.NewCluster(t)
	ctx := c.Ctx()
	nominal := time.Date(2026, 8, 7, 5, 0, 0, 0, time.UTC)
	// Allocated in the ledger, as by a ScheduledRun killed before it
	// started the Episode: no workflow.
	alloc, err := c.Ledger.Allocate(ctx, ledger.AllocateInput{Pipeline: "capped", Key: allot.AllocationKey("capped", nominal), Period: "2026-08-07", NominalTime: nominal, MaxPerPeriod: 1})
	if err != nil {
		t.Fatal(err)
	}
	orphan := alloc.Episode.ID
	// Another ledger's Episode runs under the ID of this ledger's next one.
	foreignID := c.Allocate("weekly-video", time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC))
	if err := c.Client.TerminateWorkflow(ctx, allot.EpisodeWorkflowID("weekly-video", foreignID), "", "make room for another ledger's episode"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: allot.EpisodeWorkflowID("weekly-video", foreignID), TaskQueue: "another-ledgers-queue", Memo: map[string]any{allot.LedgerMemo: "0b7a-another-ledger"},
	}, workflows.EpisodeWorkflow, workflows.EpisodeInput{Pipeline: "weekly-video", EpisodeID: foreignID, LedgerID: "0b7a-another-ledger"}); err != nil {
		t.Fatal(err)
	}

	check := func() map[string]ledger.Violation {
		t.Helper()
		res, err := report.Audit(ctx, c.Ledger, report.CheckInput{
			Now: time.Now().Add(time.Hour), Workflows: &report.WorkflowCheckInput{Client: c.Client, LedgerID: c.Ledger.ID()},
		})
		if err != nil || !res.WorkflowsChecked {
			t.Fatalf("check: %+v, %v", res, err)
		}
		found := map[string]ledger.Violation{}
		for _, v := range res.Violations {
			if v.Kind == report.KindWorkflowMissing || v.Kind == report.KindWorkflowForeign || v.Kind == report.KindWorkflowEnded {
				found[v.Pipeline+"/"+v.Episode] = v
			}
		}
		return found
	}
	found := check()
	missing, foreign := found["capped/"+orphan], found["weekly-video/"+foreignID]
	if len(found) != 2 || missing.Kind != report.KindWorkflowMissing || foreign.Kind != report.KindWorkflowForeign {
		t.Fatalf("check found %+v; want %s for capped/%s and %s for weekly-video/%s", found, report.KindWorkflowMissing, orphan, report.KindWorkflowForeign, foreignID)
	}

	starter := newStarterEnv(t, c)
	if out := starter.run(missing.Fix); !strings.Contains(out, operator.ResumeStarted) {
		t.Fatalf("%s printed %q", missing.Fix, out)
	}
	if res := c.WaitEpisode("capped", orphan); res.Stage != allot.StageCompleted {
		t.Fatalf("the resumed episode ended %s", res.Stage)
	}
	if found := check(); len(found) != 1 {
		t.Fatalf("after the resume check still finds %+v", found)
	}

	cmds := c.Commands
	if _, err := cmds.Resume(ctx, "capped", orphan); allottest.ErrorType(err) != allot.NotReady {
		t.Fatalf("resume of a completed episode: %v, want %s", err, allot.NotReady)
	}
	if _, err := cmds.Resume(ctx, "weekly-video", foreignID); allottest.ErrorType(err) != allot.LedgerMismatch {
		t.Fatalf("resume over another ledger's workflow: %v, want %s", err, allot.LedgerMismatch)
	}
	running := c.Allocate("weekly-paid", time.Date(2026, 8, 10, 2, 0, 0, 0, time.UTC))
	c.WaitStage("weekly-paid", running, allot.StageWaitingApproval)
	if res, err := cmds.Resume(ctx, "weekly-paid", running); err != nil || res.Action != operator.ResumeRunning {
		t.Fatalf("resume of a running episode: %+v, %v; want %s", res, err, operator.ResumeRunning)
	}
	if n := c.CountRuns(allot.EpisodeWorkflowID("weekly-paid", running)); n != 1 {
		t.Fatalf("resume of a running episode left %d runs", n)
	}
}
