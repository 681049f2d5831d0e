package mcpbridge

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"sync"
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

	closeOnce sync.Once
	closeErr  error
}

func (p *processPipes) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *processPipes) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// writeBy writes b to the server's stdin, giving up at deadline (a pipe
// supports write deadlines; anything else writes without one).
func (p *processPipes) writeBy(b []byte, deadline time.Time) (int, error) {
	d, ok := p.stdin.(interface{ SetWriteDeadline(time.Time) error })
	if !ok || d.SetWriteDeadline(deadline) != nil {
		return p.stdin.Write(b)
	}
	defer func() { _ = d.SetWriteDeadline(time.Time{}) }()
	return p.stdin.Write(b)
}

// Close ends the server as MCP's stdio transport asks: closes its stdin,
// waits for it to exit, then sends SIGTERM, then SIGKILL. Its exit closes
// stdout, which ends a read in progress. Later calls return the first
// one's error.
func (p *processPipes) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

func (p *processPipes) close() error {
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
