//go:build !unix

package execstep

import "os/exec"

func ownProcessGroup(*exec.Cmd) {}

// signalGroup can only reach the command itself where there are no process
// groups.
func signalGroup(cmd *exec.Cmd, _ bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
