package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// metaCall is the _meta key naming a call on a node-to-node session, so
// that the log messages the hosting node relays for it find their way back
// to the calling client. Its value is the calling node's own token.
const metaCall = "nova/call"

// relayLevel is the logging level asked of backends and of peers' sessions:
// every message comes, and the face sends each client only what its own
// logging/setLevel asks for.
const relayLevel mcp.LoggingLevel = "debug"

// relay carries the notifications of one tool call back toward the client
// that made it: progress (only when that client sent a progress token) and
// log messages (each client's level applies at the face).
type relay struct {
	progress func(*mcp.ProgressNotificationParams) // nil: the client asked for none
	log      func(*mcp.LoggingMessageParams)
	ask      *asker // sampling and elicitation; nil: nobody to ask
}

type relayKey struct{}

// withRelay is ctx carrying r to the handler that runs the call.
func withRelay(ctx context.Context, r *relay) context.Context {
	return context.WithValue(ctx, relayKey{}, r)
}

// relayFrom is the relay of the call running under ctx, or nil.
func relayFrom(ctx context.Context) *relay {
	r, _ := ctx.Value(relayKey{}).(*relay)
	return r
}

// serverRelay is the relay of a call that req brought to one of this
// node's MCP servers (the face or a peer's session): progress goes back
// with the client's own token, log messages through the session (whose
// level the SDK applies), tagged with the caller's metaCall when a peer
// sent one. hctx is the request's context, which ties notifications to
// its HTTP response stream.
func serverRelay(hctx context.Context, req *mcp.CallToolRequest) *relay {
	call, _ := req.Params.Meta[metaCall].(string)
	return sessionRelay(hctx, req.Session, req.Params.GetProgressToken(), call)
}

// sessionRelay is the relay of a call that came on ss with progress token
// tok (nil: none) and, from a peer, the calling node's token call.
func sessionRelay(hctx context.Context, ss *mcp.ServerSession, tok any, call string) *relay {
	r := &relay{}
	if tok != nil {
		r.progress = func(p *mcp.ProgressNotificationParams) {
			q := *p
			q.ProgressToken = tok
			q.Meta = nil
			_ = ss.NotifyProgress(hctx, &q)
		}
	}
	r.ask = sessionAsker(hctx, ss, call)
	r.log = func(p *mcp.LoggingMessageParams) {
		q := *p
		q.Meta = nil
		if call != "" {
			q.Meta = mcp.Meta{metaCall: call}
		}
		_ = ss.Log(hctx, &q)
	}
	return r
}

// calls tracks the calls in flight on a set of client connections, keyed
// by the token this node gave each: progress notifications and log
// messages that name a token go to its call's relay, and only when they
// come on the connection the call was sent on.
type calls struct {
	next atomic.Uint64
	mu   sync.Mutex
	m    map[string]*tracked
}

type tracked struct {
	r  *relay
	ln *link
}

// add tracks a call sent on ln; the returned func forgets it.
func (c *calls) add(ln *link, r *relay) (string, func()) {
	tok := "nova-" + strconv.FormatUint(c.next.Add(1), 10)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*tracked{}
	}
	c.m[tok] = &tracked{r: r, ln: ln}
	c.mu.Unlock()
	return tok, func() {
		c.mu.Lock()
		delete(c.m, tok)
		c.mu.Unlock()
	}
}

// get is the relay of the call tok sent on ln, or nil.
func (c *calls) get(ln *link, tok any) *relay {
	s, ok := tok.(string)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.m[s]; t != nil && t.ln == ln {
		return t.r
	}
	return nil
}

// all is the relays of every call in flight on ln.
func (c *calls) all(ln *link) []*relay {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*relay
	for _, t := range c.m {
		if t.ln == ln {
			out = append(out, t.r)
		}
	}
	return out
}

// progressTo relays a progress notification that came on ln to its call.
func (c *calls) progressTo(ln *link, p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	if r := c.get(ln, p.ProgressToken); r != nil && r.progress != nil {
		r.progress(p)
	}
}

// dispatch relays a progress notification or log message read on ln:
// progress to the call its token names, a log message to onLog.
func (c *calls) dispatch(ln *link, r *jsonrpc.Request, onLog func(*link, *mcp.LoggingMessageParams)) {
	switch r.Method {
	case "notifications/progress":
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(r.Params, &p) == nil {
			c.progressTo(ln, &p)
		}
	case "notifications/message":
		var p mcp.LoggingMessageParams
		if json.Unmarshal(r.Params, &p) == nil {
			onLog(ln, &p)
		}
	}
}

// link is one client connection (to a backend or a peer) whose calls'
// notifications, and resource updates, are relayed. With a byte-stream
// transport, they are relayed as the connection reads them (see
// notifyTransport), before the result that follows them; otherwise
// (streamable HTTP) through the SDK's handlers, which run beside the
// delivery of results, so a notification sent just before a result can
// come after it: a call's is then dropped, an update relayed late.
type link struct {
	onRead bool        // notifyTransport relays; the SDK's handlers leave them
	conn   *notifyConn // the connection, when notifyTransport made it: it carries tool calls itself
}

// notifyTransport is a client transport whose connection hands each
// progress notification, log message and resource update to on as it
// reads it, on the reading goroutine: the SDK delivers a result to its
// caller as soon as it reads it, while its handlers of earlier
// notifications may still be queued. on must not wait for a face client.
// Only for byte-stream connections, which hold no SDK state beyond the
// mcp.Connection interface.
type notifyTransport struct {
	mcp.Transport
	ln *link
	on func(*link, *jsonrpc.Request)
}

func (t notifyTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	nc := &notifyConn{Connection: c, ln: t.ln, on: t.on}
	nc.init("nova-b")
	t.ln.onRead = true
	t.ln.conn = nc
	return nc, nil
}

// notifyConn also carries tool calls past the go-sdk's client session
// (call): a backend's result reaches the registry as the bytes it sent.
type notifyConn struct {
	mcp.Connection
	ln *link
	on func(*link, *jsonrpc.Request)

	pending // call's calls in flight
}

func (c *notifyConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		m, err := c.Connection.Read(ctx)
		if err != nil {
			c.end(err)
			return m, err
		}
		switch r := m.(type) {
		case *jsonrpc.Request:
			if !r.IsCall() && (r.Method == "notifications/progress" || r.Method == "notifications/message" || r.Method == methodResourceUpdated) {
				c.on(c.ln, r)
			}
		case *jsonrpc.Response:
			if c.answer(r) {
				if lc, ok := c.Connection.(*lineConn); ok {
					lc.yieldIfIdle()
				}
				continue
			}
		}
		return m, nil
	}
}

func (c *notifyConn) Close() error {
	c.end(mcp.ErrConnectionClosed)
	err := c.Connection.Close()
	c.wait()
	return err
}

// call sends a request for method with params (a value, or JSON on one
// line as a json.RawMessage) under an id of its own (a
// string; the go-sdk's are numbers) and waits for its answer, telling the
// server with notifications/cancelled when ctx ends first.
func (c *notifyConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	raw, ok := params.(json.RawMessage) // already JSON, on one line
	if !ok {
		var err error
		if raw, err = json.Marshal(params); err != nil {
			return nil, fmt.Errorf("mcpbridge: encode %s: %w", method, err)
		}
	}
	return c.pending.call(ctx, method, func(id string) error {
		if lc, ok := c.Connection.(*lineConn); ok {
			if err := ctx.Err(); err != nil {
				return err
			}
			// A stdio server: the request is written as one line, without
			// the go-sdk's encoder re-encoding params it was given as JSON.
			return lc.writeRequest(id, method, raw)
		}
		return c.Connection.Write(ctx, &jsonrpc.Request{ID: mustID(id), Method: method, Params: raw})
	}, func(id string) {
		if lc, ok := c.Connection.(*lineConn); ok {
			lc.tellCancelled(id, ctx.Err().Error())
			return
		}
		p, err := json.Marshal(&mcp.CancelledParams{RequestID: id, Reason: ctx.Err().Error()})
		if err == nil {
			n := &jsonrpc.Request{Method: "notifications/cancelled", Params: p}
			wctx, cancel := context.WithTimeout(context.Background(), cancelNoticeTimeout)
			defer cancel()
			_ = c.Connection.Write(wctx, n)
		}
	})
}

func mustID(s string) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(s)
	return id
}
