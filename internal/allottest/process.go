package allottest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// BuildBinary compiles the main package pkg ("allot/worker") into the test's
// temporary directory and returns the binary's path.
func BuildBinary(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "allot-"+filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Process is a real binary running in its own OS process, as a user or a
// process manager would start it.
type Process struct {
	Cmd *exec.Cmd
	// Output collects the process's stdout and stderr.
	Output *SyncBuffer

	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

// StartProcess starts cmd with its stdout and stderr going to Output. The
// process is killed when the test ends, if it still runs.
func StartProcess(t *testing.T, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, Output: &SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Output, p.Output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// Signal sends sig to the process.
func (p *Process) Signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Wait waits up to timeout (stretched by Within) for the process to exit and returns how it
// exited (nil for status 0). It fails the test if the process keeps running.
func (p *Process) Wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	timeout = Within(t, timeout)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v; output:\n%s", filepath.Base(p.Cmd.Path), timeout, p.Output.String())
		return nil
	}
}

// WaitOutput waits up to timeout (stretched by Within) for the output to match re and returns the
// match and its submatches. It fails the test if the process exits first or
// nothing matches in time.
func (p *Process) WaitOutput(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	timeout = Within(t, timeout)
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := re.FindStringSubmatch(p.Output.String()); m != nil {
			return m
		}
		select {
		case <-p.exited:
			if m := re.FindStringSubmatch(p.Output.String()); m != nil {
				return m
			}
			t.Fatalf("%s exited (%v) before printing %q:\n%s", filepath.Base(p.Cmd.Path), p.err, re, p.Output.String())
		case <-deadline:
			t.Fatalf("%s did not print %q within %v:\n%s", filepath.Base(p.Cmd.Path), re, timeout, p.Output.String())
		case <-tick.C:
		}
	}
}
