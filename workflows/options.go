package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
)

// Activity timeouts are sized to the work, so that a killed worker's
// activity is retried elsewhere within seconds (docs/design.md, "Timeouts"):
// ledger work is milliseconds, so 20 s (the SQLite busy timeout is 10 s);
// anything that waits on a vendor heartbeats every 2 s against a 10 s
// heartbeat timeout.
const (
	ledgerStartToClose = 20 * time.Second
	vendorHeartbeat    = 10 * time.Second
	vendorStartToClose = 5 * time.Minute
	awaitStartToClose  = 24 * time.Hour
)

func retryPolicy() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: append([]string{}, allot.NonRetryableErrorTypes...),
	}
}

// ledgerActivityOptions are for activities that only touch the ledger and
// the worker's disk.
func ledgerActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{StartToCloseTimeout: ledgerStartToClose, RetryPolicy: retryPolicy()}
}

// vendorActivityOptions are for one call to a vendor (submit, look up,
// adopt): heartbeats while the call waits bring a killed worker's attempt
// back in seconds.
func vendorActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{StartToCloseTimeout: vendorStartToClose, HeartbeatTimeout: vendorHeartbeat, RetryPolicy: retryPolicy()}
}

// senderHeartbeat is the heartbeat timeout of a submit whose vendor's
// send_timeout is d: a killed sender's attempt is retried within it, and a
// short send_timeout (a vendor that answers fast and can be asked by key)
// brings that down from 10 s to 2 s.
func senderHeartbeat(d time.Duration) time.Duration {
	return min(vendorHeartbeat, max(2*time.Second, d*2/3))
}

// senderRetry is the first retry interval of such a submit.
const senderRetry = 200 * time.Millisecond

// awaitActivityOptions let a paid task run long; the heartbeat timeout brings
// a crashed worker's poll back quickly, and the retry resumes by reference.
func awaitActivityOptions() workflow.ActivityOptions {
	o := vendorActivityOptions()
	o.StartToCloseTimeout = awaitStartToClose
	return o
}

func (e *episode) ledgerCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, ledgerActivityOptions())
}

// localOptions are o for a local activity. A local activity without a
// schedule-to-close timeout gets its start-to-close one (the SDK's default),
// which would end its retries after one attempt's time; the regular
// activity it replaces retries until its policy says no, and so does it.
func localOptions(o workflow.ActivityOptions) workflow.LocalActivityOptions {
	lo := workflow.LocalActivityOptions{StartToCloseTimeout: o.StartToCloseTimeout, ScheduleToCloseTimeout: o.ScheduleToCloseTimeout, RetryPolicy: o.RetryPolicy}
	if lo.ScheduleToCloseTimeout == 0 {
		lo.ScheduleToCloseTimeout = unboundedRetries
	}
	return lo
}

// unboundedRetries is the schedule-to-close timeout of a local activity that
// retries for as long as its retry policy allows.
const unboundedRetries = 10 * 365 * 24 * time.Hour

// bookkeep runs one of allot's ledger bookkeeping activities for the
// Episode (load, outcomes, completion) under opts: a local activity from
// localBookkeepingChange on, so that the bookkeeping costs no round trip
// through the task queue, and a regular one in histories before it. Every
// bookkeeping activity is idempotent: a local activity whose workflow task
// is lost runs again.
func (e *episode) bookkeep(ctx workflow.Context, opts workflow.ActivityOptions, activity, in any) workflow.Future {
	if e.localBookkeeping {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localOptions(opts)), activity, in)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activity, in)
}

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
