package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
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
