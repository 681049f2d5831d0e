package mcpbridge

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sampling (sampling/createMessage) and elicitation (elicitation/create)
// that a server sends while it runs a tool call go back the way the call
// came: from a backend to the call in flight on that backend (its only
// one: a server's request does not say which call it serves), from
// a peer to the call its _meta["nova/call"] names, and from the face to
// the client that made the call, which answers. A request that no single
// call can own is refused.

// CodeNoCaller: a server asked for sampling or elicitation while no call
// (or more than one) was in flight on its connection, so nobody can
// answer.
const CodeNoCaller = "NO_CALLER"

type noCallerError struct{ Method string }

func (e *noCallerError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: %s came while this node had no single tool call in flight on the connection; only a server's request made during exactly one call of a client is relayed to that client", CodeNoCaller, e.Method)
}
func (e *noCallerError) Code() string { return CodeNoCaller }

// only is the relay of the one call in flight on ln, or nil.
func (c *calls) only(ln *link) *relay {
	all := c.all(ln)
	if len(all) != 1 {
		return nil
	}
	return all[0]
}

// askRelay is the relay that a server's request for sampling or
// elicitation goes to, or an error naming method.
func askRelay(rl *relay, method string) (*relay, error) {
	if rl == nil || rl.ask == nil {
		return nil, RPCError(&noCallerError{Method: method})
	}
	return rl, nil
}

// asker sends a server's sampling or elicitation request to the client of
// the call it came for.
type asker struct {
	sample func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	elicit func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)
}

// sessionAsker asks ss, the session of the call's client, under hctx (the
// call's request, which ties the request to its HTTP response stream),
// tagging the request with the caller's call token when a peer sent one.
func sessionAsker(hctx context.Context, ss *mcp.ServerSession, call string) *asker {
	meta := func() mcp.Meta {
		if call == "" {
			return nil
		}
		return mcp.Meta{metaCall: call}
	}
	return &asker{
		sample: func(_ context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			q := *p
			q.Meta = meta()
			return ss.CreateMessage(hctx, &q)
		},
		elicit: func(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			q := *p
			q.Meta = meta()
			return ss.Elicit(hctx, &q)
		},
	}
}

// backendSample answers a backend's sampling/createMessage through the
// call in flight on it.
func (b *Backend) sample(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	rl, err := askRelay(b.calls.only(b.linkFor(req.Session)), "sampling/createMessage")
	if err != nil {
		return nil, err
	}
	return rl.ask.sample(ctx, req.Params)
}

// elicit answers a backend's elicitation/create through the call in
// flight on it.
func (b *Backend) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	rl, err := askRelay(b.calls.only(b.linkFor(req.Session)), "elicitation/create")
	if err != nil {
		return nil, err
	}
	return rl.ask.elicit(ctx, req.Params)
}

// peerRelay is the relay of the call of this node that a peer's request
// on cs names in its _meta, or nil.
func (b *Bridge) peerRelay(cs *mcp.ClientSession, meta mcp.Meta) *relay {
	b.mu.Lock()
	var ln *link
	if p, ok := b.byClient[cs]; ok {
		if pc := b.peers[p]; pc != nil && pc.cs == cs {
			ln = pc.ln
		}
	}
	b.mu.Unlock()
	if ln == nil {
		return nil
	}
	return b.calls.get(ln, meta[metaCall])
}

// peerSample answers a peer's sampling/createMessage for one of this
// node's calls.
func (b *Bridge) peerSample(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var meta mcp.Meta
	if req.Params != nil {
		meta = req.Params.Meta
	}
	rl, err := askRelay(b.peerRelay(req.Session, meta), "sampling/createMessage")
	if err != nil {
		return nil, err
	}
	return rl.ask.sample(ctx, req.Params)
}

// peerElicit answers a peer's elicitation/create for one of this node's
// calls.
func (b *Bridge) peerElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	var meta mcp.Meta
	if req.Params != nil {
		meta = req.Params.Meta
	}
	rl, err := askRelay(b.peerRelay(req.Session, meta), "elicitation/create")
	if err != nil {
		return nil, err
	}
	return rl.ask.elicit(ctx, req.Params)
}
