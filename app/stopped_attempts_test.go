package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
)

// Issue 38 §5: Ctrl-C logged an ERROR line per running activity (the SDK's
// "Activity error." of its context cancelled by the worker's stop). An
// attempt the stop ended is a benign, retryable WorkerStopped, logged
// below ERROR; an attempt cancelled otherwise is left as it was.
func TestAnAttemptTheWorkersStopEndedIsNoError(t *testing.T) {
	// What a waiting activity (AwaitPaidTask) returns when its context
	// ends; the SDK cancels it once the worker's stop has begun.
	waitForTheStop := func(ctx context.Context) error {
		return context.Canceled
	}
	for _, stopped := range []bool{true, false} {
		var logs strings.Builder
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		env := suite.NewTestActivityEnvironment()
		env.SetWorkerOptions(WorkerOptions())
		stop := make(chan struct{})
		if stopped {
			close(stop)
		}
		env.SetWorkerStopChannel(stop)
		env.RegisterActivityWithOptions(waitForTheStop, activity.RegisterOptions{Name: "AwaitPaidTask"})
		_, err := env.ExecuteActivity("AwaitPaidTask")
		var appErr *temporal.ApplicationError
		switch {
		case stopped && (!errors.As(err, &appErr) || appErr.Type() != allot.WorkerStopped || appErr.NonRetryable() || appErr.Category() != temporal.ApplicationErrorCategoryBenign):
			t.Errorf("an attempt the stop ended: %v, want a benign, retryable %s", err, allot.WorkerStopped)
		case stopped && strings.Contains(logs.String(), "level=ERROR"):
			t.Errorf("an attempt the stop ended is logged as an error:\n%s", logs.String())
		case !stopped && (err == nil || errors.As(err, &appErr) && appErr.Type() == allot.WorkerStopped):
			t.Errorf("an attempt cancelled while the worker runs: %v, want it left as it was", err)
		}
	}
}
