package allot

import "time"

// DeadlineKind is what a deadline record says of one period of a pipeline
// that declares a deadline (docs/design.md, "Period deadlines"). The ledger
// stores these strings, once per (pipeline, period, kind), and the metrics
// label with them: never rename one.
type DeadlineKind string

// Deadline kinds.
const (
	// DeadlineWarning: at warn_before the deadline, the period had fewer
	// completed episodes than it needs.
	DeadlineWarning DeadlineKind = "warning"
	// DeadlineLate: at the deadline, the period had fewer completed
	// episodes than it needs.
	DeadlineLate DeadlineKind = "late"
	// DeadlineOnTime: at the deadline, the period had the completed
	// episodes it needs. With DeadlineLate, the periods judged.
	DeadlineOnTime DeadlineKind = "on_time"
	// DeadlineCompletedLate: a late period got its completed episodes
	// after the deadline; the record says when and by how much.
	DeadlineCompletedLate DeadlineKind = "completed_late"
)

// DeadlineKinds lists every kind, in the order reports show them.
var DeadlineKinds = []DeadlineKind{DeadlineWarning, DeadlineLate, DeadlineOnTime, DeadlineCompletedLate}

// Valid reports whether k is one of DeadlineKinds.
func (k DeadlineKind) Valid() bool {
	for _, v := range DeadlineKinds {
		if k == v {
			return true
		}
	}
	return false
}

// LateCause is why a period was short of its completed episodes at its
// warning time or its deadline, as allot knows it then. The ledger stores
// these strings: never rename one.
type LateCause string

// Late causes, from no run at all to a run still under way. Each record
// names exactly one: the one furthest from done.
const (
	// CauseSchedulePaused: no run started because the pipeline's Schedule
	// is paused (the record's detail is its note).
	CauseSchedulePaused LateCause = "schedule_paused"
	// CauseNoWorker: a run was started but no worker polled its task
	// queue, so nothing ran it.
	CauseNoWorker LateCause = "no_worker"
	// CauseSkippedCatchUp: the period's scheduled times passed while
	// nothing ran and the catch-up policy skipped them.
	CauseSkippedCatchUp LateCause = "skipped_catch_up"
	// CauseRunSkipped: runs were skipped for the period by allot's own
	// rules (no ready input; the period's cap).
	CauseRunSkipped LateCause = "run_skipped"
	// CauseNoRun: nothing started a run for the period: the pipeline has
	// no Schedule, or its times have not come.
	CauseNoRun LateCause = "no_run"
	// CauseParked: an episode waits for an operator (an unknown outcome,
	// an exhausted budget, a step that keeps failing); the detail is its
	// reason.
	CauseParked LateCause = "parked"
	// CauseWaitingApproval: an episode waits at its approval gate.
	CauseWaitingApproval LateCause = "waiting_approval"
	// CauseWaitingVendor: an episode waits for a vendor that is paused or
	// whose breaker is open.
	CauseWaitingVendor LateCause = "waiting_vendor"
	// CauseFailed: an episode failed or was rejected.
	CauseFailed LateCause = "failed"
	// CauseRunning: an episode is still under way.
	CauseRunning LateCause = "running"
)

// LateCauses lists every cause.
var LateCauses = []LateCause{CauseSchedulePaused, CauseNoWorker, CauseSkippedCatchUp, CauseRunSkipped, CauseNoRun,
	CauseParked, CauseWaitingApproval, CauseWaitingVendor, CauseFailed, CauseRunning}

// Valid reports whether c is one of LateCauses.
func (c LateCause) Valid() bool {
	for _, v := range LateCauses {
		if c == v {
			return true
		}
	}
	return false
}

// RunsCommand lists a pipeline's recent runs and its periods' deadline
// records.
func RunsCommand(pipeline string) string { return "starter runs --pipeline " + pipeline }

// RunCommand starts one run of a pipeline at a nominal time (which picks
// its period and its key).
func RunCommand(pipeline string, nominal time.Time) string {
	return "starter run --pipeline " + pipeline + " --nominal-time " + nominal.UTC().Format(time.RFC3339)
}

// StartWorkerCommand starts an allot worker on a task queue (with the
// worker's usual environment: TEMPORAL_ADDRESS, ALLOT_LEDGER, ...).
func StartWorkerCommand(taskQueue string) string {
	return "go run ./worker --task-queue " + ShellQuote(taskQueue)
}
