package mcpbridge

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// commandTransport runs a stdio MCP server as cmd and speaks to it with
// nova's line codec (lineConn): the go-sdk's CommandTransport, whose
// connection decodes every line twice with a fresh 32 KiB decoder, with
// the same shutdown (stdin closed, then SIGTERM, then SIGKILL, each after
// terminate) and the same line cap (mcp.DefaultMaxLineLength).
type commandTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration
}

func (t *commandTransport) Connect(context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	c := newLineConn(&processPipes{cmd: t.cmd, stdout: stdout, stdin: stdin, terminate: t.terminate})
	c.max = mcp.DefaultMaxLineLength
	return c, nil
}

// processPipes is a server process's stdout and stdin.
type processPipes struct {
	cmd       *exec.Cmd
	stdout    io.Reader
	stdin     io.WriteCloser
	terminate time.Duration
}

func (p *processPipes) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *processPipes) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close ends the server as MCP's stdio transport asks: closes its stdin,
// waits for it to exit, then sends SIGTERM, then SIGKILL. Its exit closes
// stdout, which ends a read in progress.
func (p *processPipes) Close() error {
	if err := p.stdin.Close(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(p.terminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("mcpbridge: the MCP server process does not exit")
}
