package deadline

import (
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
)

var nominal = time.Date(2026, 8, 4, 9, 0, 0, 0, time.UTC)

// Each cause, from what allot knows: the verdict names the cause, the
// episode and the complete command that moves the period on.
func TestJudgeNamesEachCause(t *testing.T) {
	parked := Episode{ID: "2026-W32-0", Outcome: allot.OutcomeNeedsAttention, Reason: allot.BudgetExhausted,
		Remedies: []string{allot.BudgetRaiseCommand("video", "2026-W32", 5000, "more"), allot.ShowCommand("weekly", "2026-W32-0")}}
	for _, c := range []struct {
		name string
		f    Facts
		want Verdict
	}{
		{"schedule paused, with its note", Facts{Schedule: Schedule{Exists: true, Paused: true, Note: "holiday freeze"}},
			Verdict{Cause: allot.CauseSchedulePaused, Detail: "the pipeline's Schedule is paused: holiday freeze", Command: "starter schedule unpause --pipeline weekly"}},
		{"a run no worker picked up", Facts{Schedule: Schedule{Exists: true}, Started: []UnpickedRun{{WorkflowID: "weekly/scheduled-run-2026-08-04T09:00:00Z", TaskQueue: "media"}}},
			Verdict{Cause: allot.CauseNoWorker, Detail: "run weekly/scheduled-run-2026-08-04T09:00:00Z was started but no worker polls task queue media", Command: allot.StartWorkerCommand("media")}},
		{"skipped by catch-up", Facts{Schedule: Schedule{Exists: true}, Runs: []ledger.RunOutcome{
			{Outcome: allot.OutcomeSkipped, Reason: allot.ReasonMissedCatchUp, NominalTime: nominal.Add(24 * time.Hour)},
			{Outcome: allot.OutcomeSkipped, Reason: allot.ReasonMissedCatchUp, NominalTime: nominal}}},
			Verdict{Cause: allot.CauseSkippedCatchUp, Detail: "2 scheduled time(s) passed while nothing ran and the catch-up policy skipped them, the first at 2026-08-04T09:00:00Z",
				Command: allot.BackfillCommand("weekly", nominal, nominal.Add(24*time.Hour+time.Second))}},
		{"skipped for want of an input", Facts{Schedule: Schedule{Exists: true}, Runs: []ledger.RunOutcome{{RunID: "r1", Outcome: allot.OutcomeSkipped, Reason: allot.ReasonNoReadyInput}}},
			Verdict{Cause: allot.CauseRunSkipped, Detail: "run r1 was skipped: no_ready_input", Command: allot.InputListCommand("weekly")}},
		{"no schedule, no run", Facts{},
			Verdict{Cause: allot.CauseNoRun, Detail: "no run started for the period, and the pipeline has no Schedule", Command: "starter run --pipeline weekly --nominal-time 2026-08-03T00:00:00Z"}},
		{"a schedule whose times have not come", Facts{Schedule: Schedule{Exists: true}},
			Verdict{Cause: allot.CauseNoRun, Detail: "no run started for the period", Command: "starter run --pipeline weekly --nominal-time 2026-08-03T00:00:00Z"}},
		{"parked: its first remedy", Facts{Episodes: []Episode{parked}},
			Verdict{Cause: allot.CauseParked, Detail: "episode 2026-W32-0 needs attention: BudgetExhausted", EpisodeID: "2026-W32-0", Command: parked.Remedies[0]}},
		{"waiting for approval", Facts{Episodes: []Episode{{ID: "2026-W32-1", Outcome: allot.OutcomeWaitingApproval}}},
			Verdict{Cause: allot.CauseWaitingApproval, Detail: "episode 2026-W32-1 waits for approval", EpisodeID: "2026-W32-1", Command: allot.ApproveCommand("weekly", "2026-W32-1")}},
		{"a paused vendor", Facts{Episodes: []Episode{{ID: "2026-W32-0", Outcome: allot.OutcomeWaitingVendor, Reason: allot.ReasonVendorPaused, Vendor: "videogen"}}},
			Verdict{Cause: allot.CauseWaitingVendor, Detail: "episode 2026-W32-0 waits for vendor videogen: vendor_paused", EpisodeID: "2026-W32-0", Command: allot.VendorResumeCommand("videogen")}},
		{"an open breaker", Facts{Episodes: []Episode{{ID: "2026-W32-0", Outcome: allot.OutcomeWaitingVendor, Reason: allot.ReasonVendorTripped, Vendor: "videogen"}}},
			Verdict{Cause: allot.CauseWaitingVendor, Detail: "episode 2026-W32-0 waits for vendor videogen: vendor_tripped", EpisodeID: "2026-W32-0", Command: allot.ShowCommand("weekly", "2026-W32-0")}},
		{"failed", Facts{Episodes: []Episode{{ID: "2026-W32-0", Outcome: allot.OutcomeFailed, Reason: "StepFailed"}}},
			Verdict{Cause: allot.CauseFailed, Detail: "episode 2026-W32-0 failed: StepFailed", EpisodeID: "2026-W32-0", Command: allot.ShowCommand("weekly", "2026-W32-0")}},
		{"an episode whose workflow no worker polls", Facts{Episodes: []Episode{{ID: "2026-W32-0", Outcome: allot.OutcomeRunning, NoWorker: "media"}}},
			Verdict{Cause: allot.CauseNoWorker, Detail: "episode 2026-W32-0 waits: no worker polls task queue media", EpisodeID: "2026-W32-0", Command: allot.StartWorkerCommand("media")}},
		{"still running", Facts{Episodes: []Episode{{ID: "2026-W32-0", Outcome: allot.OutcomeRetrying}}},
			Verdict{Cause: allot.CauseRunning, Detail: "episode 2026-W32-0 is still retrying", EpisodeID: "2026-W32-0", Command: allot.ShowCommand("weekly", "2026-W32-0")}},
		// The episode furthest from done is named, whatever else is true.
		{"parked beats running and a paused schedule", Facts{Schedule: Schedule{Exists: true, Paused: true},
			Episodes: []Episode{{ID: "2026-W32-0", Outcome: allot.OutcomeRunning}, parked}},
			Verdict{Cause: allot.CauseParked, Detail: "episode 2026-W32-0 needs attention: BudgetExhausted", EpisodeID: "2026-W32-0", Command: parked.Remedies[0]}},
		{"failed beats waiting for approval", Facts{Episodes: []Episode{
			{ID: "2026-W32-0", Outcome: allot.OutcomeWaitingApproval}, {ID: "2026-W32-1", Outcome: allot.OutcomeRejected, Reason: allot.ReasonApprovalRejected}}},
			Verdict{Cause: allot.CauseFailed, Detail: "episode 2026-W32-1 rejected: approval_rejected", EpisodeID: "2026-W32-1", Command: allot.ShowCommand("weekly", "2026-W32-1")}},
		// A paused schedule explains no run before an unpicked run does.
		{"paused beats unpicked", Facts{Schedule: Schedule{Exists: true, Paused: true}, Started: []UnpickedRun{{WorkflowID: "w", TaskQueue: "q"}}},
			Verdict{Cause: allot.CauseSchedulePaused, Detail: "the pipeline's Schedule is paused", Command: "starter schedule unpause --pipeline weekly"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.f.Pipeline, c.f.Period, c.f.Nominal = "weekly", "2026-W32", time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)
			if got := Judge(c.f); got != c.want {
				t.Fatalf("Judge = %+v\nwant    %+v", got, c.want)
			}
			if !c.want.Cause.Valid() {
				t.Fatalf("cause %q is not in allot.LateCauses", c.want.Cause)
			}
		})
	}
}
