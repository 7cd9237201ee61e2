//go:build !unix

package execstep

import (
	"os"
	"os/exec"
)

// Without process groups only the command itself can be stopped.
type selfTracker struct{ pid int }

func newTracker() tracker { return &selfTracker{} }

func (t *selfTracker) env() []string     { return nil }
func (t *selfTracker) prepare(*exec.Cmd) {}
func (t *selfTracker) started(pid int)   { t.pid = pid }
func (t *selfTracker) record()           {}
func (t *selfTracker) leaderExited()     { t.pid = 0 }
func (t *selfTracker) alive() bool       { return false }

func (t *selfTracker) signal(bool) {
	if t.pid == 0 {
		return
	}
	if p, err := os.FindProcess(t.pid); err == nil {
		_ = p.Kill()
	}
}
