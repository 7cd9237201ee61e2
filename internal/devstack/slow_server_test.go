package devstack

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
)

// A call the server did not answer in time is made again until it is
// answered; any other error, or the end of the caller's context, ends it
// at once (a devserver restarted on a loaded machine: its demo schedule's
// Describe timed out in a CI rehearsal).
func TestWhileSlowAsksAgainOnlyWhileTheServerIsSlow(t *testing.T) {
	ctx := context.Background()
	calls := 0
	got, err := whileSlow(ctx, func() (string, error) {
		calls++
		switch calls {
		case 1:
			return "", serviceerror.NewDeadlineExceeded("context deadline exceeded")
		case 2:
			return "", context.DeadlineExceeded
		}
		return "described", nil
	})
	if err != nil || got != "described" || calls != 3 {
		t.Fatalf("whileSlow = %q, %v after %d calls; want the third call's answer", got, err, calls)
	}
	refused := errors.New("pipeline x has no schedule")
	calls = 0
	if _, err := whileSlow(ctx, func() (string, error) { calls++; return "", refused }); !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("whileSlow on a refusal = %v after %d calls; want the refusal at once", err, calls)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	calls = 0
	if _, err := whileSlow(stopped, func() (string, error) { calls++; return "", context.DeadlineExceeded }); err == nil || calls != 1 {
		t.Fatalf("whileSlow after its context ended = %v after %d calls; want the error at once", err, calls)
	}
	defer func(p time.Duration) { slowServerPatience = p }(slowServerPatience)
	slowServerPatience = 0
	calls = 0
	if _, err := whileSlow(ctx, func() (string, error) { calls++; return "", context.DeadlineExceeded }); err == nil || calls != 1 {
		t.Fatalf("whileSlow with its patience spent = %v after %d calls; want the error", err, calls)
	}
}
