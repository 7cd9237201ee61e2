// Package deadline judges the periods of the pipelines that declare a
// deadline (docs/design.md, "Period deadlines"): at each period's warning
// time and deadline, a period short of its completed episodes gets a
// record in the ledger, once, naming its cause, the episode and the
// command that moves it on.
//
// The judgement is a pure function of what allot knows then (Facts →
// Verdict: Judge), so each cause is tested alone; the Watcher gathers the
// facts from the ledger and, through the functions it is given, from
// Temporal, and writes the record. The DeadlineWatch workflow calls it at
// the right times, whether or not any run of the period ever started.
package deadline

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
)

// Facts are what allot knows of one period when it judges it.
type Facts struct {
	Pipeline string
	Period   string
	// Nominal is a nominal time in the period: a run at it counts there.
	Nominal time.Time
	// Schedule is the pipeline's Temporal Schedule as described now.
	Schedule Schedule
	// Runs are the period's ScheduledRun outcomes in the ledger.
	Runs []ledger.RunOutcome
	// Started are ScheduledRun workflows started for the period that no
	// worker has picked up (their workflow task waits, and no worker
	// polls their task queue).
	Started []UnpickedRun
	// Episodes are the period's episodes that have not completed, with
	// what their workflows say now.
	Episodes []Episode
}

// Schedule is what Temporal says of a pipeline's Schedule.
type Schedule struct {
	Exists bool
	Paused bool
	Note   string // the note of the pause, as Temporal keeps it
}

// UnpickedRun is a run Temporal started that waits for a worker.
type UnpickedRun struct {
	WorkflowID string
	TaskQueue  string
}

// Episode is one episode of the period that has not completed.
type Episode struct {
	ID string
	// Outcome and Reason are its outcome as the ledger holds it (the
	// workflow reports each change).
	Outcome allot.Outcome
	Reason  string
	// Remedies are the commands `episode show` prints for it (the
	// workflow's attention remedies, its approval commands), first
	// first; Vendor is the vendor it waits for.
	Remedies []string
	Vendor   string
	// NoWorker names the task queue its workflow waits on when no worker
	// polls it.
	NoWorker string
}

// Verdict is the cause of a short period.
type Verdict struct {
	Cause     allot.LateCause
	Detail    string
	EpisodeID string
	Command   string
}

// Judge names the cause of a period short of its completed episodes: an
// episode that has not completed, the one furthest from done first;
// otherwise why no run started.
func Judge(f Facts) Verdict {
	if ep, ok := stuckest(f.Episodes); ok {
		return episodeVerdict(f.Pipeline, ep)
	}
	if f.Schedule.Paused {
		detail := "the pipeline's Schedule is paused"
		if f.Schedule.Note != "" {
			detail += ": " + f.Schedule.Note
		}
		return Verdict{Cause: allot.CauseSchedulePaused, Detail: detail, Command: allot.ScheduleUnpauseCommand(f.Pipeline)}
	}
	if len(f.Started) > 0 {
		r := f.Started[0]
		return Verdict{Cause: allot.CauseNoWorker,
			Detail:  fmt.Sprintf("run %s was started but no worker polls task queue %s", r.WorkflowID, r.TaskQueue),
			Command: allot.StartWorkerCommand(r.TaskQueue)}
	}
	var missed []time.Time
	var skipped []ledger.RunOutcome
	for _, r := range f.Runs {
		if r.Outcome != allot.OutcomeSkipped {
			continue
		}
		if r.Reason == allot.ReasonMissedCatchUp {
			missed = append(missed, r.NominalTime)
		} else {
			skipped = append(skipped, r)
		}
	}
	if len(missed) > 0 {
		slices.SortFunc(missed, func(a, b time.Time) int { return a.Compare(b) })
		return Verdict{Cause: allot.CauseSkippedCatchUp,
			Detail: fmt.Sprintf("%d scheduled time(s) passed while nothing ran and the catch-up policy skipped them, the first at %s", len(missed), missed[0].UTC().Format(time.RFC3339)),
			// The backfill's --to is exclusive: a second past the last.
			Command: allot.BackfillCommand(f.Pipeline, missed[0], missed[len(missed)-1].Add(time.Second))}
	}
	if len(skipped) > 0 {
		r := skipped[len(skipped)-1]
		v := Verdict{Cause: allot.CauseRunSkipped, Detail: fmt.Sprintf("run %s was skipped: %s", r.RunID, r.Reason), Command: allot.EpisodesCommand(f.Pipeline)}
		if r.Reason == allot.ReasonNoReadyInput {
			v.Command = allot.InputListCommand(f.Pipeline)
		}
		return v
	}
	detail := "no run started for the period"
	if !f.Schedule.Exists {
		detail += ", and the pipeline has no Schedule"
	}
	return Verdict{Cause: allot.CauseNoRun, Detail: detail, Command: allot.RunCommand(f.Pipeline, f.Nominal)}
}

// rank orders an episode's state from furthest from done (0) to nearest.
func rank(ep Episode) int {
	switch {
	case ep.Outcome == allot.OutcomeFailed || ep.Outcome == allot.OutcomeRejected:
		return 0
	case ep.Outcome == allot.OutcomeNeedsAttention:
		return 1
	case ep.NoWorker != "":
		return 2
	case ep.Outcome == allot.OutcomeWaitingVendor:
		return 3
	case ep.Outcome == allot.OutcomeWaitingApproval:
		return 4
	}
	return 5 // running, retrying, or not reported yet
}

func stuckest(eps []Episode) (Episode, bool) {
	if len(eps) == 0 {
		return Episode{}, false
	}
	return slices.MinFunc(eps, func(a, b Episode) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.ID, b.ID))
	}), true
}

func episodeVerdict(pipeline string, ep Episode) Verdict {
	v := Verdict{EpisodeID: ep.ID, Command: allot.ShowCommand(pipeline, ep.ID)}
	if len(ep.Remedies) > 0 {
		v.Command = ep.Remedies[0]
	}
	reason := ""
	if ep.Reason != "" {
		reason = ": " + ep.Reason
	}
	switch rank(ep) {
	case 0:
		v.Cause, v.Detail = allot.CauseFailed, fmt.Sprintf("episode %s %s%s", ep.ID, ep.Outcome, reason)
	case 1:
		v.Cause, v.Detail = allot.CauseParked, fmt.Sprintf("episode %s needs attention%s", ep.ID, reason)
	case 2:
		v.Cause, v.Detail = allot.CauseNoWorker, fmt.Sprintf("episode %s waits: no worker polls task queue %s", ep.ID, ep.NoWorker)
		v.Command = allot.StartWorkerCommand(ep.NoWorker)
	case 3:
		v.Cause, v.Detail = allot.CauseWaitingVendor, fmt.Sprintf("episode %s waits for vendor %s%s", ep.ID, cmp.Or(ep.Vendor, "?"), reason)
		if ep.Reason == allot.ReasonVendorPaused && ep.Vendor != "" {
			v.Command = allot.VendorResumeCommand(ep.Vendor)
		}
	case 4:
		v.Cause, v.Detail = allot.CauseWaitingApproval, fmt.Sprintf("episode %s waits for approval", ep.ID)
		if len(ep.Remedies) == 0 {
			v.Command = allot.ApproveCommand(pipeline, ep.ID)
		}
	default:
		v.Cause, v.Detail = allot.CauseRunning, fmt.Sprintf("episode %s is still %s", ep.ID, cmp.Or(string(ep.Outcome), "starting"))
	}
	return v
}
