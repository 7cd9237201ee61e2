package app

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"allot"
)

// WorkerOptions are the options of allot's workers: an activity attempt
// that the worker's own stop ended is said to be that (stoppedAttempts).
func WorkerOptions() worker.Options {
	return worker.Options{Interceptors: []interceptor.WorkerInterceptor{&stoppedAttempts{}}}
}

// stoppedAttempts turn the error of an activity attempt that ended because
// its worker is stopping (its context cancelled after the stop began) into
// a benign, retryable WorkerStopped: the SDK logged the bare "context
// canceled" as an "Activity error." at ERROR on every Ctrl-C, and
// docs/operating.md promises no ERROR in normal operation. The attempt is
// retried on the next worker, as it was before.
type stoppedAttempts struct {
	interceptor.WorkerInterceptorBase
}

func (*stoppedAttempts) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &stoppedAttempt{}
	i.Next = next
	return i
}

type stoppedAttempt struct {
	interceptor.ActivityInboundInterceptorBase
}

func (i *stoppedAttempt) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := i.Next.ExecuteActivity(ctx, in)
	if err == nil || !errors.Is(err, context.Canceled) || !stopping(ctx) {
		return out, err
	}
	return out, temporal.NewApplicationErrorWithOptions("the worker stopped during this attempt: the next attempt, on any worker, goes on from the ledger",
		allot.WorkerStopped, temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign, Cause: err})
}

// stopping reports whether the activity's worker has begun to stop.
func stopping(ctx context.Context) bool {
	select {
	case <-activity.GetWorkerStopChannel(ctx):
		return true
	default:
		return false
	}
}
