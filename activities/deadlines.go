package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"

	"allot"
	"allot/internal/deadline"
	"allot/pipeline"
)

// The DeadlineWatch's activities (docs/design.md, "Period deadlines"): thin
// over the worker's deadline.Watcher, which plans and judges from the
// ledger and Temporal. Here its errors become Temporal's: a start that is
// wrong (a bad pipeline name, period or kind) is refused at once; the
// ledger's or Temporal's trouble is retried, because the judgement must
// eventually be written.

// PlanDeadline is the pipeline's next period to judge after in.After
// (deadline.Watcher.Plan); Declared false ends the watch.
func (a *Activities) PlanDeadline(ctx context.Context, in deadline.PlanInput) (deadline.PlanResult, error) {
	w, err := a.deadlines(in.Pipeline, in.LedgerID)
	if err != nil {
		return deadline.PlanResult{}, err
	}
	res, err := w.Plan(ctx, in)
	if err != nil {
		return deadline.PlanResult{}, classify(err)
	}
	return res, nil
}

// JudgeDeadline judges one period at its warning time or its deadline and
// writes its record once (deadline.Watcher.Judge).
func (a *Activities) JudgeDeadline(ctx context.Context, in deadline.JudgeInput) (deadline.JudgeResult, error) {
	w, err := a.deadlines(in.Pipeline, in.LedgerID)
	if err != nil {
		return deadline.JudgeResult{}, err
	}
	if in.Kind != allot.DeadlineWarning && in.Kind != allot.DeadlineLate {
		return deadline.JudgeResult{}, nonRetryable(allot.InvalidInput, "period %s of %s: a deadline is judged as a %s or a %s, not %q",
			in.Period, in.Pipeline, allot.DeadlineWarning, allot.DeadlineLate, in.Kind)
	}
	if in.DueAt.IsZero() {
		return deadline.JudgeResult{}, nonRetryable(allot.InvalidInput, "period %s of %s: the judgement names no deadline (due_at)", in.Period, in.Pipeline)
	}
	// A period of another kind (a day for a weekly pipeline) would be
	// recorded under a name no report finds. A pipeline gone from the file
	// is the watcher's to answer (nothing to judge).
	p, err := w.Pipelines.Get(in.Pipeline)
	var unknown *pipeline.UnknownError
	switch {
	case errors.As(err, &unknown):
	case err != nil:
		return deadline.JudgeResult{}, classify(err)
	default:
		if err := p.CheckPeriod(in.Period); err != nil {
			return deadline.JudgeResult{}, nonRetryable(allot.InvalidInput, "%v", err)
		}
	}
	res, err := w.Judge(ctx, in)
	if err != nil {
		return deadline.JudgeResult{}, classify(err)
	}
	if r := res.Record; res.Recorded && r.Kind != allot.DeadlineOnTime && activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn("period short of its completed episodes", "pipeline", r.Pipeline, "period", r.Period, "kind", r.Kind,
			"due_at", r.DueAt, "completed", r.Completed, "needed", r.Needed, "cause", r.Cause, "episode", r.EpisodeID, "command", r.Command)
	}
	return res, nil
}

// deadlines is the worker's watcher, after checking the pipeline's name
// and that the watch belongs to this worker's ledger.
func (a *Activities) deadlines(name, ledgerID string) (*deadline.Watcher, error) {
	if a.Deadlines == nil {
		return nil, nonRetryable(allot.InvalidInput, "this worker has no deadline watcher (Activities.Deadlines is nil): run the worker built by app.RunWorker (`go run ./worker`), which sets it")
	}
	if err := a.checkLedger(ledgerID); err != nil {
		return nil, err
	}
	if err := pipeline.ValidateName(name); err != nil {
		return nil, nonRetryable(allot.InvalidPipelineName, "%v", err)
	}
	return a.Deadlines, nil
}
