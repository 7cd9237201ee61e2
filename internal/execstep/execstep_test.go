//go:build unix

package execstep

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func spec(t *testing.T, script string) Spec {
	t.Helper()
	dir := t.TempDir()
	return Spec{
		Command: []string{"/bin/sh", "-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "ALLOT_PERIOD=2026-08-07"},
		Stdin: []byte(`{"step":"settle"}`), Stdout: filepath.Join(dir, "settle.stdout"), Stderr: filepath.Join(dir, "settle.stderr"),
		Timeout: 10 * time.Second, RetryExitCodes: []int{75}, KillGrace: 500 * time.Millisecond,
	}
}

func TestExitZeroWithEnvStdinAndLogs(t *testing.T) {
	s := spec(t, `read -r in; echo "$in $ALLOT_PERIOD $(pwd)"; echo warn >&2; echo done > out.txt`)
	if err := Run(context.Background(), s, 0, nil); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(s.Stdout)
	if got, want := strings.TrimSpace(string(out)), `{"step":"settle"} 2026-08-07 `+s.Dir; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if errOut, _ := os.ReadFile(s.Stderr); strings.TrimSpace(string(errOut)) != "warn" {
		t.Errorf("stderr %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "out.txt")); err != nil {
		t.Errorf("the command did not run in its directory: %v", err)
	}
}

func TestExitCodesAreSorted(t *testing.T) {
	err := Run(context.Background(), spec(t, `echo "source table locked" >&2; exit 75`), 0, nil)
	var e *Error
	if !errors.Is(err, ErrRetry) || !errors.As(err, &e) || e.ExitCode != 75 {
		t.Fatalf("exit 75: %v, want ErrRetry", err)
	}
	err = Run(context.Background(), spec(t, `for i in $(seq 1 30); do echo "line $i" >&2; done; exit 3`), 0, nil)
	if !errors.Is(err, ErrFailed) || !errors.As(err, &e) || e.ExitCode != 3 {
		t.Fatalf("exit 3: %v, want ErrFailed", err)
	}
	if lines := strings.Split(e.Tail, "\n"); len(lines) != tailLines || lines[len(lines)-1] != "line 30" || lines[0] != "line 11" {
		t.Fatalf("tail %q, want the last %d lines", e.Tail, tailLines)
	}
	err = Run(context.Background(), Spec{Command: []string{"/no/such/program"}, Dir: t.TempDir(), Stdout: filepath.Join(t.TempDir(), "o"), Stderr: filepath.Join(t.TempDir(), "e")}, 0, nil)
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("missing program: %v, want ErrFailed", err)
	}
}

// alive reports whether a process exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// runBounded runs s in the background and returns what Run returned, or
// fails the test if Run has not returned within a minute (far longer than
// any of these commands takes when it is stopped as it should be).
func runBounded(t *testing.T, ctx context.Context, s Spec) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, s, 0, nil) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Run did not return")
		return nil
	}
}

// childPID reads the PID a command wrote to child.pid in its directory,
// waiting for it to be written.
func childPID(t *testing.T, s Spec) int {
	t.Helper()
	pid, ok := waitPID(s)
	if !ok {
		t.Fatal("the command did not start its child")
	}
	return pid
}

func waitPID(s Spec) (int, bool) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(filepath.Join(s.Dir, "child.pid")); err == nil && len(data) > 0 && data[len(data)-1] == '\n' {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			return pid, err == nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, false
}

// leftChild is a command that starts a sleeping child with start, which
// writes the child's PID to child.pid, and then waits for it.
func leftChild(t *testing.T, start string) Spec {
	t.Helper()
	return spec(t, start+` wait`)
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	s := leftChild(t, "sleep 300 & echo $! > child.pid;")
	// Time for the child to be started and its PID written; a command
	// stopped before that fails the test without proving anything.
	s.Timeout = 3 * time.Second
	err := runBounded(t, context.Background(), s)
	var e *Error
	if !errors.Is(err, ErrFailed) || !errors.As(err, &e) || e.ExitCode != -1 || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("timeout: %v", err)
	}
	waitGone(t, childPID(t, s))
}

func TestCancelKillsTheProcessGroup(t *testing.T) {
	s := leftChild(t, "sleep 300 & echo $! > child.pid;")
	s.Timeout = 10 * time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	go func() { waitPID(s); cancel() }()
	if err := runBounded(t, ctx, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v, want context.Canceled", err)
	}
	waitGone(t, childPID(t, s))
}

// Issue 15: a command that exits 0 and leaves a background child holding
// its stdout and stderr completes (it used to wait for the child, then
// time out), and the child does not outlive it.
func TestExitZeroWithABackgroundChildCompletes(t *testing.T) {
	s := spec(t, `sleep 300 & echo $! > child.pid; echo done; exit 0`)
	s.Timeout = 10 * time.Minute
	if err := runBounded(t, context.Background(), s); err != nil {
		t.Fatalf("exit 0 with a background child: %v, want success", err)
	}
	waitGone(t, childPID(t, s))
	if out, _ := os.ReadFile(s.Stdout); string(out) != "done\n" {
		t.Fatalf("stdout %q", out)
	}
}

// waitGone waits until the process is gone: neither running nor a zombie
// (kill(pid, 0) succeeds on both).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %d outlived it", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBeatWhileRunning(t *testing.T) {
	beats := 0
	if err := Run(context.Background(), spec(t, "sleep 0.3"), 50*time.Millisecond, func() { beats++ }); err != nil {
		t.Fatal(err)
	}
	if beats < 2 {
		t.Fatalf("%d heartbeats in 300 ms at 50 ms", beats)
	}
}

func TestExpand(t *testing.T) {
	got, err := Expand([]string{"./settle", "--date", "{period}", "{{literal}}", "x{param.region}y"}, map[string]string{"period": "2026-08-07", "param.region": "eu"})
	if err != nil || strings.Join(got, " ") != "./settle --date 2026-08-07 {literal} xeuy" {
		t.Fatalf("Expand = %q, %v", got, err)
	}
	if _, err := Expand([]string{"{perod}"}, map[string]string{"period": "x"}); err == nil || !strings.Contains(err.Error(), "{period}") {
		t.Fatalf("a misspelt placeholder: %v", err)
	}
	if _, err := Expand([]string{"{period"}, nil); err == nil {
		t.Fatal("an unclosed brace was accepted")
	}
	names, err := Placeholders([]string{"./settle", "{period}-{param.region}", "{{literal}}", "{period}"})
	if err != nil || strings.Join(names, " ") != "period param.region" {
		t.Fatalf("Placeholders = %q, %v", names, err)
	}
	if _, err := Placeholders([]string{"x{period"}); err == nil {
		t.Fatal("Placeholders accepted an unclosed brace")
	}
}
