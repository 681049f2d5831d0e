package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// The node-to-node session (/nova/mcp/1.0.0) is newline-delimited JSON-RPC,
// the framing of the go-sdk's IOTransport, read and written by nova's own
// line codec (lineConn) under the go-sdk's client and server sessions.
// Tool calls, the hot path, bypass the sessions at both ends: the calling
// node writes the tools/call line itself (lineCall) and takes its answer
// off the stream; the hosting node answers it itself (hostCall), checking
// the same policy, and sends a backend's result as the bytes it already
// holds. Everything else (initialize, lists, reads, prompts, completion,
// subscriptions, pings, sampling, elicitation, notifications) goes through
// the sessions. The messages are plain JSON-RPC either way, so a node of
// either kind answers a call of the other.

// keepLine: a line buffer larger than this is dropped after its line, so
// that one large message does not keep its memory for the session's life.
const keepLine = 64 << 10

// wireMsg is the decoded form of one JSON-RPC message: only its envelope;
// params, result and error data stay raw.
type wireMsg struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decodeLine decodes one JSON-RPC message (not a batch: batches are not
// spoken between nodes, at protocol 2025-06-18 and later) as the go-sdk's
// jsonrpc.DecodeMessage reads it: its JSON library (segmentio's, several
// times faster than encoding/json on the envelope around params or a
// result it keeps raw) and its flags (field names matched exactly). A line
// nested deeper than the go-sdk accepts is decoded by encoding/json, which
// bounds its own depth, so that no line can exhaust the stack.
func decodeLine(line []byte) (jsonrpc.Message, error) {
	var w wireMsg
	var err error
	if withinDepth(line, sdkMaxDepth) {
		var rest []byte
		rest, err = segjson.Parse(line, &w, segjson.DontMatchCaseInsensitiveStructFields)
		if err == nil && len(bytes.TrimSpace(rest)) > 0 {
			err = fmt.Errorf("invalid character %q after top-level value", rest[0])
		}
	} else {
		err = json.Unmarshal(line, &w)
	}
	if err != nil {
		return nil, fmt.Errorf("mcpbridge: malformed JSON-RPC message: %w", err)
	}
	if w.Version != "2.0" {
		return nil, fmt.Errorf("mcpbridge: JSON-RPC message with version %q, want \"2.0\"", w.Version)
	}
	id, err := decodeID(w.ID)
	if err != nil {
		return nil, err
	}
	if w.Method != nil {
		return &jsonrpc.Request{ID: id, Method: *w.Method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("mcpbridge: JSON-RPC response without an id")
	}
	r := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		r.Error = w.Error
	}
	return r, nil
}

// decodeID is a JSON-RPC id: absent or null (a notification), a string or
// an integer (as the go-sdk reads it: a number's integer part). raw is a
// JSON value its line's decoder checked.
func decodeID(raw json.RawMessage) (jsonrpc.ID, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return jsonrpc.ID{}, nil
	}
	var v any
	if raw[0] == '"' {
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
			v = string(raw[1 : len(raw)-1]) // no escapes: the text is the string
		} else {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return jsonrpc.ID{}, fmt.Errorf("mcpbridge: malformed JSON-RPC id: %w", err)
			}
			v = s
		}
	} else {
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return jsonrpc.ID{}, fmt.Errorf("mcpbridge: JSON-RPC id is neither a string nor a number: %s", truncate(raw, 40))
		}
		v = f
	}
	return jsonrpc.MakeID(v)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// appendID appends id's JSON.
func appendID(dst []byte, id jsonrpc.ID) []byte {
	switch v := id.Raw().(type) {
	case string:
		return strconv.AppendQuote(dst, v)
	case int64:
		return strconv.AppendInt(dst, v, 10)
	}
	return append(dst, "null"...)
}

// lineConn is an mcp.Connection on a byte stream: one JSON-RPC message a
// line, at most MaxLine bytes. hosted, when set, takes the requests the
// node answers itself (hostCall's); responses to lineCall's requests go to
// their callers. The go-sdk reads from one goroutine.
type lineConn struct {
	rwc io.ReadWriteCloser
	r   *bufio.Reader
	buf []byte // a line longer than r's buffer
	max int    // longest line read

	wsem chan struct{} // held while a line is written
	wbuf []byte

	hosted func(*jsonrpc.Request) bool // consumes what it answers itself

	pending // call's calls in flight
}

func newLineConn(rwc io.ReadWriteCloser) *lineConn {
	c := &lineConn{rwc: rwc, max: MaxLine, r: bufio.NewReaderSize(rwc, lineBuffer), wsem: make(chan struct{}, 1)}
	c.init("n")
	return c
}

// lineTransport connects an MCP session to c.
type lineTransport struct{ c *lineConn }

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

func (c *lineConn) SessionID() string { return "" }

// readLine is the next non-blank line, without its line end.
func (c *lineConn) readLine() ([]byte, error) {
	for {
		line, err := c.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			c.buf = append(c.buf[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(c.buf) > c.max {
					return nil, c.tooLong()
				}
				line, err = c.r.ReadSlice('\n')
				c.buf = append(c.buf, line...)
			}
			line = c.buf
		}
		if len(line) > c.max+1 {
			return nil, c.tooLong()
		}
		if err != nil && (err != io.EOF || len(bytes.TrimSpace(line)) == 0) {
			return nil, err
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			return t, nil
		}
	}
}

// tooLong ends a session whose peer sent a line over c.max.
func (c *lineConn) tooLong() error {
	return fmt.Errorf("mcpbridge: a JSON-RPC line exceeded %d MiB, the most one message may carry", c.max>>20)
}

// Read is the next message for the session, past those answered here.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line, err := c.readLine()
		if err != nil {
			c.end(err)
			return nil, err
		}
		if len(line) > 0 && line[0] == '[' {
			err := errors.New("mcpbridge: JSON-RPC batch (not spoken at protocol 2025-06-18 and later)")
			c.end(err)
			return nil, err
		}
		m, err := decodeLine(line)
		if cap(c.buf) > keepLine {
			c.buf = nil
		}
		if err != nil {
			c.end(err)
			return nil, err
		}
		switch m := m.(type) {
		case *jsonrpc.Response:
			if c.answer(m) {
				c.yieldIfIdle()
				continue
			}
		case *jsonrpc.Request:
			if c.hosted != nil && c.hosted(m) {
				continue
			}
		}
		return m, nil
	}
}

// yieldIfIdle lets the caller that an answer just woke run before this
// reader's next read, when nothing more is buffered to decode: the caller
// would otherwise wait on this CPU until that read blocks, which on a
// pipe is a system call (tens of microseconds on a busy machine), while
// the next line is seldom due before the caller has used its answer.
func (c *lineConn) yieldIfIdle() {
	if c.r.Buffered() == 0 {
		runtime.Gosched()
	}
}

// Write sends one message.
func (c *lineConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		return fmt.Errorf("mcpbridge: encode JSON-RPC message: %w", err)
	}
	return c.writeLine(func(b []byte) []byte { return append(b, data...) })
}

// writeLine writes the line that fill appends.
func (c *lineConn) writeLine(fill func([]byte) []byte) error {
	c.wsem <- struct{}{}
	defer func() { <-c.wsem }()
	c.wbuf = append(fill(c.wbuf[:0]), '\n')
	_, err := c.rwc.Write(c.wbuf)
	if cap(c.wbuf) > keepLine {
		c.wbuf = nil
	}
	return err
}

// deadlineWriter is a connection that can bound one write by a deadline
// of its own (a session stream; its other writes keep their own bound).
type deadlineWriter interface {
	writeBy(p []byte, deadline time.Time) (int, error)
}

// writeLineBy writes the line that fill appends if it can by ctx's
// deadline: it waits for the line until then, and the write is bounded by
// it where the connection allows (a [deadlineWriter]). A write cut short
// after part of the line went out ends the connection: the rest of the
// line would run into the next message.
func (c *lineConn) writeLineBy(ctx context.Context, fill func([]byte) []byte) error {
	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return mcp.ErrConnectionClosed
	}
	defer func() { <-c.wsem }()
	c.wbuf = append(fill(c.wbuf[:0]), '\n')
	var (
		n   int
		err error
	)
	dl, ok := ctx.Deadline()
	if dw, isDW := c.rwc.(deadlineWriter); ok && isDW {
		n, err = dw.writeBy(c.wbuf, dl)
	} else {
		n, err = c.rwc.Write(c.wbuf)
	}
	if err != nil && n > 0 {
		c.end(err)
		_ = c.rwc.Close()
	}
	return err
}

// writeResult answers request id with result, JSON the caller built.
func (c *lineConn) writeResult(id jsonrpc.ID, result []byte) error {
	return c.writeLine(func(b []byte) []byte {
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = appendID(b, id)
		b = append(b, `,"result":`...)
		b = append(b, result...)
		return append(b, '}')
	})
}

// writeRequest writes a request for method with params (JSON) under id.
func (c *lineConn) writeRequest(id, method string, params []byte) error {
	return c.writeLine(func(b []byte) []byte {
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = strconv.AppendQuote(b, id)
		b = append(b, `,"method":`...)
		b = strconv.AppendQuote(b, method)
		b = append(b, `,"params":`...)
		b = append(b, params...)
		return append(b, '}')
	})
}

// Close ends the connection and its stream, and waits for the
// cancellation notices still being written.
func (c *lineConn) Close() error {
	c.end(mcp.ErrConnectionClosed)
	err := c.rwc.Close()
	c.wait()
	return err
}

// call sends a request for method with params (JSON) under an id of its
// own (a string; the go-sdk's are numbers) and waits for its answer. When
// ctx ends first, the peer is told with notifications/cancelled.
func (c *lineConn) call(ctx context.Context, method string, params []byte) (json.RawMessage, error) {
	return c.pending.call(ctx, method, func(id string) error {
		return c.writeRequest(id, method, params)
	}, func(id string) {
		c.tellCancelled(id, ctx.Err().Error())
	})
}

// cancelNoticeTimeout bounds a notifications/cancelled: the wait for the
// line (another message being written) and its write.
const cancelNoticeTimeout = 5 * time.Second

// tellCancelled tells the peer, with notifications/cancelled, that this
// node gave up its call id. It runs on a goroutine of the connection's
// (pending.call's notify), which Close waits for, and takes at most
// cancelNoticeTimeout: a notice that cannot have the line, or that the
// peer does not take, by then is dropped (the peer answers the call, and
// the answer is discarded); one the peer took only part of ends the
// connection (see writeLineBy).
func (c *lineConn) tellCancelled(id, reason string) {
	p, err := json.Marshal(&mcp.CancelledParams{RequestID: id, Reason: reason})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelNoticeTimeout)
	defer cancel()
	err = c.writeLineBy(ctx, func(b []byte) []byte {
		b = append(b, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":`...)
		b = append(b, p...)
		return append(b, '}')
	})
	if err != nil {
		log.Debugw("cannot tell the peer a call was cancelled", "id", id, "err", err)
	}
}

// hostCalls tracks the calls a node answers itself on one connection, so
// that a notifications/cancelled for one of them cancels it.
type hostCalls struct {
	mu sync.Mutex
	m  map[jsonrpc.ID]context.CancelFunc
}

func (h *hostCalls) add(id jsonrpc.ID, cancel context.CancelFunc) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[jsonrpc.ID]context.CancelFunc{}
	}
	if _, dup := h.m[id]; dup {
		return false
	}
	h.m[id] = cancel
	return true
}

func (h *hostCalls) remove(id jsonrpc.ID) {
	h.mu.Lock()
	delete(h.m, id)
	h.mu.Unlock()
}

// cancel cancels the call a notifications/cancelled names, reporting
// whether it was one of these.
func (h *hostCalls) cancel(params json.RawMessage) bool {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return false
	}
	h.mu.Lock()
	cancel, ok := h.m[id]
	h.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}
