package app

import (
	"context"
	"errors"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"allot"
)

// WorkerOptions are the options of allot's workers: an activity attempt
// that the worker's own stop ended is said to be that (stoppedAttempts).
func WorkerOptions() worker.Options {
	return workerOptions(&stoppedAttempts{})
}

func workerOptions(attempts *stoppedAttempts) worker.Options {
	return worker.Options{Interceptors: []interceptor.WorkerInterceptor{attempts}}
}

// stoppedAttempts turn the error of an activity attempt that ended because
// its worker is stopping into a benign, retryable WorkerStopped: the SDK
// logged the attempt's error ("context canceled", or a vendor call's "Get
// ...: worker is now shutdown") as an "Activity error." at ERROR on every
// Ctrl-C, and docs/operating.md promises no ERROR in normal operation. The
// attempt is retried on the next worker, as it was before.
//
// They also count the attempts that run: the SDK's Stop cancels them
// (WorkerStopTimeout is 0) and returns without waiting for them, so Serve
// waits here, and what they use, the ledger first, is closed after the
// last of them has returned.
type stoppedAttempts struct {
	interceptor.WorkerInterceptorBase
	mu      sync.Mutex
	running int
	idle    chan struct{} // closed when running drops back to 0
}

func (s *stoppedAttempts) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &stoppedAttempt{attempts: s}
	i.Next = next
	return i
}

func (s *stoppedAttempts) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == 0 {
		s.idle = make(chan struct{})
	}
	s.running++
}

func (s *stoppedAttempts) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if s.running == 0 {
		close(s.idle)
	}
}

// wait waits until no attempt runs, or ctx ends first: then it is false.
func (s *stoppedAttempts) wait(ctx context.Context) bool {
	s.mu.Lock()
	if s.running == 0 {
		s.mu.Unlock()
		return true
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}

type stoppedAttempt struct {
	interceptor.ActivityInboundInterceptorBase
	attempts *stoppedAttempts
}

func (i *stoppedAttempt) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	i.attempts.begin()
	defer i.attempts.end()
	out, err := i.Next.ExecuteActivity(ctx, in)
	if err == nil || !stopping(ctx) || decided(err) {
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

// decided reports whether err is an attempt's decision rather than a
// failure to finish: a non-retryable application error (a budget, a
// refusal) is kept as it is even during a stop.
func decided(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}
