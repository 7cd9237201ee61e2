package workflows

// The Episode's retries and parking: a step's activity is tried in
// batches, shown as retrying between them, and a failure a retry cannot
// fix parks the episode until an operator's command (docs/design.md,
// "Every parked state has an exit").

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
)

// retryBatch is how many attempts Temporal makes of a step's activity before
// the workflow hears of the failures and shows the step as retrying;
// retryPause is how long it waits before the next batch.
const (
	retryBatch = 4
	retryPause = time.Minute
)

// call runs one activity of a step, under the options of ctx, and keeps it
// going through failures a retry may fix: after every retryBatch failed
// attempts the episode shows the step as retrying (stage and AllotOutcome
// "retrying", the last error, the attempt count and since when, also in the
// ledger) and tries again after retryPause, for as long as it takes. A
// non-retryable error (a named type) or a cancellation ends it at once.
func (e *episode) call(ctx workflow.Context, step, name string, activity, in, out any) error {
	opts := workflow.GetActivityOptions(ctx)
	waitOpts := opts
	policy := *opts.RetryPolicy
	policy.MaximumAttempts = retryBatch
	// A vendor that takes no request now comes back at once, to be shown
	// as a wait (waitForVendor), not retried as a failure.
	policy.NonRetryableErrorTypes = append(slices.Clone(policy.NonRetryableErrorTypes), allot.VendorWaiting)
	opts.RetryPolicy = &policy
	actx := workflow.WithActivityOptions(ctx, opts)
	return e.callBatches(ctx, step, name, func() error {
		err := workflow.ExecuteActivity(actx, activity, in).Get(ctx, out)
		if errorType(err) == allot.VendorWaiting {
			err = e.waitForVendor(ctx, step, waitOpts, activity, in, out, err)
		}
		return err
	})
}

// callBookkeeping is call for a bookkeeping activity (see bookkeep) under
// ledgerActivityOptions.
func (e *episode) callBookkeeping(ctx workflow.Context, step, name string, activity, in, out any) error {
	opts := ledgerActivityOptions()
	opts.RetryPolicy.MaximumAttempts = retryBatch
	return e.callBatches(ctx, step, name, func() error { return e.bookkeep(ctx, opts, activity, in).Get(ctx, out) })
}

// callBatches runs one batch of attempts after another until exec
// succeeds or fails for good (see call).
func (e *episode) callBatches(ctx workflow.Context, step, name string, exec func() error) error {
	attempts := 0
	var since time.Time
	for {
		start := workflow.Now(ctx)
		err := exec()
		if err == nil || !retryable(err) {
			if e.state.Retrying != nil {
				e.state.Retrying = nil
				if e.state.Stage == allot.StageRetrying {
					if serr := e.setStage(ctx, allot.StageRunning); serr != nil && err == nil {
						err = serr
					}
				}
			}
			return err
		}
		attempts += retryBatch
		if since.IsZero() {
			since = start
		}
		e.state.Retrying = &Retrying{Step: step, Activity: name, ErrorType: errorType(err), Error: rootMessage(err), Attempts: attempts, Since: since}
		e.showRetrying(ctx)
		if err := workflow.Sleep(ctx, retryPause); err != nil {
			return err
		}
	}
}

// showRetrying puts the retrying step where operators look: the stage and
// AllotOutcome, the current details, and (best effort, since the ledger may
// be what fails) the episode's outcome in the ledger.
func (e *episode) showRetrying(ctx workflow.Context) {
	r := e.state.Retrying
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**Retrying** %s of step **%s**: %d attempts since %s; last error (%s): %s",
		r.Activity, r.Step, r.Attempts, r.Since.UTC().Format(time.RFC3339), r.ErrorType, r.Error))
	if e.state.Stage == allot.StageRetrying || e.state.Stage == allot.StageLoading {
		return
	}
	e.state.Stage = allot.StageRetrying
	if err := workflow.UpsertTypedSearchAttributes(ctx, OutcomeAttr.ValueSet(string(allot.OutcomeRetrying))); err != nil {
		workflow.GetLogger(ctx).Error("setting the retrying outcome failed", "error", err)
	}
	if !e.recordsOutcomes {
		return
	}
	var a *activities.Activities
	opts := ledgerActivityOptions()
	opts.ScheduleToCloseTimeout = 30 * time.Second
	opts.RetryPolicy.MaximumAttempts = 2
	if err := e.bookkeep(ctx, opts, a.RecordEpisodeOutcome, activities.EpisodeOutcomeInput{
		Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID, Outcome: allot.OutcomeRetrying, Reason: r.ErrorType, At: r.Since,
	}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("recording the retrying outcome failed", "error", err)
	}
}

// retryable reports whether err is one a later attempt may not get: not a
// named, non-retryable type, not a cancellation.
func retryable(err error) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && (appErr.NonRetryable() || slices.Contains(allot.NonRetryableErrorTypes, appErr.Type())) {
		return false
	}
	// The activity's retry policy named the error's type non-retryable.
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE {
		return false
	}
	var canceled *temporal.CanceledError
	return !errors.As(err, &canceled) && !errors.Is(err, workflow.ErrCanceled)
}

// rootMessage is the message of the innermost cause, which says what went
// wrong without the activity wrapping.
func rootMessage(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// needsOperator lists the paid failures a retry cannot fix and a person can.
func needsOperator(errType string) bool {
	switch errType {
	case allot.OutcomeUnknown, allot.IdempotencyHorizonPassed, allot.BatchResultLost, allot.VendorRejected, allot.VendorTaskFailed,
		allot.ResultHashMismatch, allot.InvalidRemoteRef, allot.VendorNotConfigured, allot.BudgetExhausted, allot.StepFailure:
		return true
	}
	return false
}

// parkedTaskState is the paid-task state an episode parked for errType
// leaves its step in, where the result of the failed activity does not say.
func parkedTaskState(errType string, cur allot.PaidTaskState) allot.PaidTaskState {
	switch errType {
	case allot.OutcomeUnknown, allot.IdempotencyHorizonPassed, allot.BatchResultLost:
		return allot.PaidIntent
	case allot.VendorRejected, allot.BudgetExhausted:
		return allot.PaidPlanned
	case allot.VendorTaskFailed, allot.ResultHashMismatch, allot.StepFailure:
		return allot.PaidFailed
	case allot.InvalidRemoteRef:
		return allot.PaidSubmitted
	}
	if cur == "" {
		return allot.PaidPlanned
	}
	return cur
}

// park shows why the episode needs attention and waits until an operator's
// update clears it.
func (e *episode) park(ctx workflow.Context, i int, errType string, cause error) error {
	step := &e.state.Steps[i]
	msg := cause.Error()
	var appErr *temporal.ApplicationError
	if errors.As(cause, &appErr) {
		msg = appErr.Message()
	}
	// The ledger's state of the task, as the failed activity read it; a
	// worker that does not send it leaves the state to be inferred.
	var details activities.ParkDetails
	if errors.As(cause, &appErr) && appErr.HasDetails() && appErr.Details(&details) == nil && details.TaskState != "" {
		step.TaskState = details.TaskState
		step.Status = activities.PaidTaskResult{State: details.TaskState, Kind: allot.StepKind(step.Kind)}.StepStatus()
	} else {
		step.TaskState = parkedTaskState(errType, step.TaskState)
	}
	switch errType {
	case allot.OutcomeUnknown, allot.IdempotencyHorizonPassed, allot.BatchResultLost:
		step.Status = allot.StepIntent
	case allot.StepFailure:
		step.Status = allot.StepFailed
	}
	remedies := Remedies(e.input.Pipeline, e.input.EpisodeID, step.Name, step.TaskState, errType)
	if errType == allot.BudgetExhausted {
		remedies = append(BudgetRemedies(e.input.Pipeline, e.input.EpisodeID, step.Name, details.Budgets), remedies...)
	}
	e.state.Attention = &Attention{
		Step: step.Name, Revision: step.Revision, ErrorType: errType, Reason: msg,
		Since: workflow.Now(ctx), TaskState: step.TaskState, Remedies: remedies, Budgets: details.Budgets,
	}
	if len(remedies) > 0 {
		e.state.Attention.Remedy = remedies[0]
	}
	if err := e.setStage(ctx, allot.StageNeedsAttention, errType); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**Needs attention** (%s) on step **%s** revision %d: %s\n\nTo continue, run one of:\n", errType, step.Name, step.Revision, msg))
	for _, r := range remedies {
		b.WriteString(fmt.Sprintf("\n- `%s`", r))
	}
	workflow.SetCurrentDetails(ctx, b.String())
	workflow.GetLogger(ctx).Warn("episode needs attention", "step", step.Name, "type", errType)
	if errType == allot.BudgetExhausted && len(details.Budgets) > 0 {
		if err := e.waitForBudget(ctx, i, details.Budgets); err != nil {
			return err
		}
	} else if err := e.waitIdle(ctx, func() bool { return e.state.Attention == nil }); err != nil {
		return err
	}
	return e.setStage(ctx, allot.StageRunning)
}
