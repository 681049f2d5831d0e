package mcpbridge

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that a Ctrl-C in
// the node's console does not reach it before the node stops it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// killGroup ends a stdio server. On Windows only the server's own process:
// what it started itself outlives it unless it ends its children (a job
// object would be needed to take them down with it).
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
}
