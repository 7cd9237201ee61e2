package app

import (
	"context"
	"errors"
	"fmt"
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
// below ERROR, whatever its error says: "context canceled", or a vendor
// call's error carrying the SDK's cause ("Get ...: worker is now
// shutdown", which is not context.Canceled). A decision (a non-retryable
// error) is kept during a stop, and an attempt cancelled while the worker
// runs is left as it was.
func TestAnAttemptTheWorkersStopEndedIsNoError(t *testing.T) {
	decision := temporal.NewNonRetryableApplicationError("over budget", allot.BudgetExhausted, nil)
	for _, c := range []struct {
		name     string
		err      error // what the attempt returns
		stopped  bool
		wantStop bool // a WorkerStopped
	}{
		// What a waiting activity (AwaitPaidTask) returns when its
		// context ends; the SDK cancels it once the worker's stop has
		// begun.
		{"canceled during the stop", context.Canceled, true, true},
		{"a vendor call cut by the stop", fmt.Errorf("poll vendor task vt_1: Get %q: %w", "http://127.0.0.1:1/v1/tasks/vt_1", errors.New("worker is now shutdown")), true, true},
		{"a decision during the stop", decision, true, false},
		{"canceled while running", context.Canceled, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs strings.Builder
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			env := suite.NewTestActivityEnvironment()
			env.SetWorkerOptions(WorkerOptions())
			stop := make(chan struct{})
			if c.stopped {
				close(stop)
			}
			env.SetWorkerStopChannel(stop)
			env.RegisterActivityWithOptions(func(context.Context) error { return c.err }, activity.RegisterOptions{Name: "AwaitPaidTask"})
			_, err := env.ExecuteActivity("AwaitPaidTask")
			var appErr *temporal.ApplicationError
			isStop := errors.As(err, &appErr) && appErr.Type() == allot.WorkerStopped
			switch {
			case c.wantStop && (!isStop || appErr.NonRetryable() || appErr.Category() != temporal.ApplicationErrorCategoryBenign):
				t.Errorf("%v, want a benign, retryable %s", err, allot.WorkerStopped)
			case c.wantStop && strings.Contains(logs.String(), "level=ERROR"):
				t.Errorf("logged as an error:\n%s", logs.String())
			case !c.wantStop && (err == nil || isStop):
				t.Errorf("%v, want it left as it was (%v)", err, c.err)
			case errors.Is(c.err, decision) && (!errors.As(err, &appErr) || appErr.Type() != allot.BudgetExhausted || !appErr.NonRetryable()):
				t.Errorf("%v, want the decision as it was", err)
			}
		})
	}
}

// The devserver's Ctrl-C logged "sql: database is closed" for an attempt
// still writing the ledger: the SDK's Stop does not wait for the attempts
// it cancels, and the worker closed the ledger right after it. The
// interceptor counts the attempts that run, and Serve waits on it.
func TestTheWorkerWaitsForTheAttemptsItStopped(t *testing.T) {
	attempts := &stoppedAttempts{}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(workerOptions(attempts))
	started, release := make(chan struct{}), make(chan struct{})
	env.RegisterActivityWithOptions(func(context.Context) error {
		close(started)
		<-release
		return nil
	}, activity.RegisterOptions{Name: "SubmitPaidTask"})
	done := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity("SubmitPaidTask")
		done <- err
	}()
	<-started
	over, cancel := context.WithCancel(context.Background())
	cancel()
	if attempts.wait(over) {
		t.Fatal("wait reported no attempt running while one ran")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !attempts.wait(context.Background()) {
		t.Fatal("wait did not see the attempt return")
	}
}
