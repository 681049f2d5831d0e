//go:build !windows

package mcpbridge

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, which killGroup ends
// with everything the server started.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup ends a stdio server's whole process group.
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
