package mcpbridge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/internal/streamscope"
)

// ServiceName is the resource-manager service of /nova/mcp/1.0.0 streams,
// both the ones a peer opens and the ones this node opens.
const ServiceName = "nova.mcp"

const (
	// streamFirstTimeout bounds the wait for a session stream's first
	// bytes: a client sends initialize as soon as the stream is open, and
	// the server answers it.
	streamFirstTimeout = 30 * time.Second
	// streamWriteTimeout bounds one write of a JSON-RPC message.
	streamWriteTimeout = 30 * time.Second
	// lineBuffer is what a session stream holds from its start: the read
	// buffer of its line codec (lineConn), which takes a longer line in a
	// buffer of that line's size (at most MaxLine).
	lineBuffer = 4 << 10
)

// errClosed is the answer of a closed Bridge.
var errClosed = errors.New("mcpbridge: closed")

// sessionStream is a /nova/mcp/1.0.0 stream under an MCP session (its
// lineConn reads and writes it): attached to ServiceName, with
// the decoder's buffer reserved in the stream's scope as lines grow, a
// read deadline that a line's bytes push idle ahead, and a write deadline
// per write. The lineConn reads from one goroutine and serialises writes.
type sessionStream struct {
	s       network.Stream
	mem     *streamscope.Memory
	idle    time.Duration
	closing func() bool // the bridge is closing: its sessions end cleanly
	eof     atomic.Bool // the peer closed its side: the session ends cleanly
	ended   atomic.Bool // Close ran: later calls do nothing

	retiring atomic.Bool  // this node ends the session: it ends cleanly
	peak     atomic.Int64 // reserved, for other goroutines

	rdl, wdl streamscope.Deadline
	got      bool // bytes were read: the idle timeout replaces streamFirstTimeout
	line     int  // bytes of the line being read
	reserved int  // line bytes reserved in mem: the longest line so far, rounded up
}

// attachStream attaches s to ServiceName, reserves its first buffer and
// arms its first read deadline. On failure the caller resets s.
func (b *Bridge) attachStream(s network.Stream) (*sessionStream, error) {
	if err := s.Scope().SetService(ServiceName); err != nil {
		return nil, fmt.Errorf("attach stream to %s: %w", ServiceName, err)
	}
	mem, err := streamscope.Reserve(s.Scope(), lineBuffer)
	if err != nil {
		return nil, fmt.Errorf("reserve memory for stream: %w", err)
	}
	ss := &sessionStream{s: s, mem: mem, idle: b.cfg.StreamIdleTimeout, closing: func() bool { return b.ctx.Err() != nil }}
	ss.rdl.Extend(min(streamFirstTimeout, ss.idle), s.SetReadDeadline)
	return ss, nil
}

func (ss *sessionStream) Read(p []byte) (int, error) {
	if ss.got {
		ss.rdl.Extend(ss.idle, ss.s.SetReadDeadline)
	}
	n, err := ss.s.Read(p)
	if errors.Is(err, io.EOF) {
		ss.eof.Store(true)
	}
	if n == 0 {
		return n, err
	}
	ss.got = true
	longest := ss.line
	if i := bytes.IndexByte(p[:n], '\n'); i < 0 {
		ss.line += n
		longest = ss.line
	} else {
		longest += i
		ss.line = n - 1 - bytes.LastIndexByte(p[:n], '\n')
	}
	if longest > ss.reserved {
		r := (min(longest, MaxLine) + 4<<10 - 1) &^ (4<<10 - 1)
		if gerr := ss.mem.Grow(lineBuffer + r); gerr != nil {
			log.Debugw("cannot reserve memory for MCP line", "peer", ss.s.Conn().RemotePeer(), "bytes", r, "err", gerr)
			return n, gerr
		}
		ss.reserved = r
		ss.peak.Store(int64(r))
	}
	return n, err
}

func (ss *sessionStream) Write(p []byte) (int, error) {
	ss.wdl.Extend(streamWriteTimeout, ss.s.SetWriteDeadline)
	return ss.s.Write(p)
}

// writeBy writes p by deadline; the next Write arms its own deadline
// afresh. Writes are serialised by the session's line codec.
func (ss *sessionStream) writeBy(p []byte, deadline time.Time) (int, error) {
	ss.wdl = streamscope.Deadline{}
	if err := ss.s.SetWriteDeadline(deadline); err != nil {
		return ss.Write(p)
	}
	defer func() { _ = ss.s.SetWriteDeadline(time.Time{}) }()
	return ss.s.Write(p)
}

// Close ends the stream when its session ends; the go-sdk calls it once
// for each direction. A session ends cleanly when the peer closed the
// stream or this bridge is closing; any other end (a malformed message,
// an idle or write deadline, a refused reservation, an unanswered
// keepalive ping) is a protocol error, and resets the stream. A session
// this node retires (see retireLine) ends cleanly too.
func (ss *sessionStream) Close() error {
	if ss.ended.Swap(true) {
		return nil
	}
	if ss.eof.Load() || ss.closing() || ss.retiring.Load() {
		return ss.s.Close()
	}
	log.Debugw("MCP session stream reset", "peer", ss.s.Conn().RemotePeer())
	return ss.s.Reset()
}

// end ends the stream, if its session did not, and releases its memory.
// Call it once the session is over.
func (ss *sessionStream) end() {
	_ = ss.Close()
	ss.mem.Release()
}
