package execstep

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Issue 15: a child that leaves the command's process group (setsid) is
// found and killed on Linux: at timeout, on cancel and after the command
// exits 0; Run returns each time (it used to wait for the child forever).
func TestSetsidChildIsKilled(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid binary on this machine")
	}
	// The child writes its PID itself, once it is in its own session.
	const setsidChild = `setsid sh -c 'echo $$ > child.pid; exec sleep 300' &`
	t.Run("timeout", func(t *testing.T) {
		s := leftChild(t, setsidChild)
		s.Timeout = 3 * time.Second
		err := runBounded(t, context.Background(), s)
		if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("timeout: %v", err)
		}
		waitGone(t, childPID(t, s))
	})
	t.Run("cancel", func(t *testing.T) {
		s := leftChild(t, setsidChild)
		s.Timeout = 10 * time.Minute
		ctx, cancel := context.WithCancel(context.Background())
		go func() { waitPID(s); cancel() }()
		if err := runBounded(t, ctx, s); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancel: %v, want context.Canceled", err)
		}
		waitGone(t, childPID(t, s))
	})
	t.Run("exit 0", func(t *testing.T) {
		s := spec(t, setsidChild+` while [ ! -s child.pid ]; do sleep 0.01; done; exit 0`)
		s.Timeout = 10 * time.Minute
		if err := runBounded(t, context.Background(), s); err != nil {
			t.Fatalf("exit 0: %v, want success", err)
		}
		waitGone(t, childPID(t, s))
	})
	t.Run("ignores SIGTERM", func(t *testing.T) {
		// Orphaned at once (its parent exits), out of the group, deaf
		// to SIGTERM: SIGKILL after the grace period ends it.
		s := spec(t, `setsid sh -c 'trap "" TERM; echo $$ > child.pid; while :; do sleep 1; done' & while [ ! -s child.pid ]; do sleep 0.01; done; exit 0`)
		s.Timeout = 10 * time.Minute
		if err := runBounded(t, context.Background(), s); err != nil {
			t.Fatalf("exit 0: %v, want success", err)
		}
		waitGone(t, childPID(t, s))
	})
}
