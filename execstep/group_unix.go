//go:build unix

package execstep

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup makes the command the leader of a new process group, so
// that stopping it reaches every process it started.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func signalGroup(cmd *exec.Cmd, kill bool) {
	if cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	// The group's ID is the leader's PID; a negative PID signals the group.
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
