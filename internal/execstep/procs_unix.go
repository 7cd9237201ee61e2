//go:build unix && !linux

package execstep

import (
	"os/exec"
	"syscall"
)

// Outside Linux the worker knows the command's process group only: the
// command leads a group of its own, and that group is signalled. A process
// that leaves the group (setsid) is not found (docs/design.md, "Steps").
type groupTracker struct{ group int }

func newTracker() tracker { return &groupTracker{} }

func (t *groupTracker) env() []string { return nil }

func (t *groupTracker) prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func (t *groupTracker) started(pid int) { t.group = pid }
func (t *groupTracker) record()         {}
func (t *groupTracker) leaderExited()   {}

func (t *groupTracker) signal(kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	// A negative PID signals the group.
	_ = syscall.Kill(-t.group, sig)
}

func (t *groupTracker) alive() bool { return syscall.Kill(-t.group, 0) == nil }
