package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"

	"github.com/nova-node/nova-node/agentcard"
)

// ProtocolID is the libp2p protocol of MCP between nodes: newline-delimited
// JSON-RPC (the go-sdk's IOTransport framing), one line at most MaxLine
// bytes; see wire.go.
const ProtocolID = "/nova/mcp/1.0.0"

// MaxLine caps one JSON-RPC message on /nova/mcp/1.0.0 and on the byte
// streams of the local faces (`nova-node mcp`): 12 MiB, so that a stream's
// longest line plus its buffers stays within libp2p's default memory limit
// of one stream (16 MiB) with room for the muxer's receive window. A tool
// result, resource or prompt larger than maxPeerResult is refused by the
// node that hosts it with RESULT_TOO_LARGE, for that call alone: the
// session, which other calls share, never sees an oversized line.
const MaxLine = 12 << 20

// maxPeerResult is the largest result (its JSON) sent to a peer: MaxLine
// less room for the JSON-RPC envelope around it.
const maxPeerResult = MaxLine - 16<<10

// CodeResultTooLarge: a tool result, resource or prompt is too large to
// cross to another node in one message (MaxLine).
const CodeResultTooLarge = "RESULT_TOO_LARGE"

// TooLargeError: the result of What (a tool, resource or prompt) named
// Name is Size bytes of JSON, over the limit of one message between nodes.
type TooLargeError struct {
	What, Name string
	Size       int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: the result of %s %q is %.1f MiB, over the %d MiB a message between nodes may carry; ask for less (a range, a page, a smaller file) or call it on the node that hosts it",
		CodeResultTooLarge, e.What, e.Name, float64(e.Size)/(1<<20), MaxLine>>20)
}
func (e *TooLargeError) Code() string { return CodeResultTooLarge }

// checkPeerSize is a *TooLargeError when v's JSON is over maxPeerResult.
func checkPeerSize(what, name string, v any) error {
	var c countWriter
	if err := json.NewEncoder(&c).Encode(v); err != nil {
		return nil // the SDK reports it
	}
	if c > maxPeerResult {
		return &TooLargeError{What: what, Name: name, Size: int(c)}
	}
	return nil
}

// countWriter counts the bytes written to it.
type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// peerProtocolVersion is spoken between nodes: the initialize handshake, so
// list_changed notifications flow on the long-lived session.
const peerProtocolVersion = "2025-11-25"

// servePeer answers one /nova/mcp/1.0.0 stream: an MCP server holding the
// tools, resources and prompts of this node's agents (never remote ones, so
// nothing loops), with every call checked against the calling peer.
func (b *Bridge) servePeer(s network.Stream) {
	p := s.Conn().RemotePeer()
	st, err := b.attachStream(s)
	if err != nil {
		log.Debugw("MCP stream refused", "peer", p, "err", err)
		_ = s.Reset()
		return
	}
	srv, subs := b.newPeerServer(p)
	defer b.endPeerSubs(subs)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = s.Reset()
		st.end()
		return
	}
	b.served[srv] = p
	b.mu.Unlock()
	// Fill once registered: a change between here and a fill before
	// registration would never reach this session.
	b.fillPeerServer(srv, p)
	defer func() {
		b.mu.Lock()
		delete(b.served, srv)
		b.mu.Unlock()
	}()
	sctx, scancel := context.WithCancel(b.ctx)
	defer scancel()
	lc := newLineConn(st)
	var sess atomic.Pointer[mcp.ServerSession]
	lc.hosted = b.hostCalls(sctx, lc, p, srv, &sess)
	ss, err := srv.Connect(b.ctx, lineTransport{lc}, nil)
	if err != nil {
		st.end()
		return
	}
	sess.Store(ss)
	stop := context.AfterFunc(b.ctx, func() { _ = ss.Close() })
	defer stop()
	if err := ss.Wait(); err != nil && b.ctx.Err() == nil {
		log.Debugw("MCP session from peer ended", "peer", p, "err", err)
	}
	st.end()
}

// newPeerServer builds the server of one peer session.
func (b *Bridge) newPeerServer(p peer.ID) (*mcp.Server, *peerSubs) {
	subs := &peerSubs{uris: map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "nova-node", Version: b.cfg.Version}, &mcp.ServerOptions{
		HasTools: true, HasResources: true, HasPrompts: true,
		CompletionHandler:  b.completePeer(p),
		SubscribeHandler:   b.peerSubscribe(p, subs),
		UnsubscribeHandler: b.peerUnsubscribe(subs),
	})
	srv.AddReceivingMiddleware(b.peerMiddleware(p))
	return srv, subs
}

// fillPeerServer (re)loads srv with the local registry's items.
func (b *Bridge) fillPeerServer(srv *mcp.Server, p peer.ID) {
	b.fillMu.Lock()
	defer b.fillMu.Unlock()
	var tools, uris, prompts []string
	for _, t := range b.reg.ListTools() {
		t := t
		tool := &mcp.Tool{Name: t.Canonical, Title: t.Canonical, Description: t.Description, InputSchema: json.RawMessage(t.InputSchema)}
		if len(t.OutputSchema) > 0 {
			tool.OutputSchema = json.RawMessage(t.OutputSchema)
		}
		tool.Meta = mcp.Meta{"nova/agent": t.Agent}
		if safeAddTool(srv, tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// A node of this version answers its peers' tool calls in
			// hostCalls; this serves any other MCP client of the stream.
			raw, err := b.peerToolCall(ctx, p, t, metaCaller(req), serverRelay(ctx, req), req.Params.Arguments)
			if err != nil {
				return nil, err
			}
			var out mcp.CallToolResult
			if err := json.Unmarshal(raw, &out); err != nil {
				return nil, RPCError(fmt.Errorf("mcpbridge: encode tool result: %w", err))
			}
			return &out, nil
		}) {
			tools = append(tools, t.Canonical)
		}
	}
	for _, r := range b.reg.ListResources() {
		r := r
		srv.AddResource(&mcp.Resource{URI: r.URI, Name: r.Name, MIMEType: r.MIMEType, Meta: mcp.Meta{"nova/agent": r.Agent}},
			func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				if err := b.authorize(p, metaCaller(req), r.Agent); err != nil {
					return nil, RPCError(err)
				}
				rc, err := b.reg.ReadResource(ctx, r.URI)
				if err != nil {
					return nil, RPCError(err)
				}
				out := toResourceResult(rc)
				if err := checkPeerSize("resource", r.URI, out); err != nil {
					return nil, RPCError(err)
				}
				return out, nil
			})
		uris = append(uris, r.URI)
	}
	var tmpls []string
	for _, tm := range b.reg.ListTemplates() {
		tm := tm
		srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: tm.URITemplate, Name: tm.Name, Description: tm.Description, MIMEType: tm.MIMEType, Meta: mcp.Meta{"nova/agent": tm.Agent}},
			func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				if err := b.authorize(p, metaCaller(req), tm.Agent); err != nil {
					return nil, RPCError(err)
				}
				rc, err := b.reg.ReadTemplate(ctx, tm.URITemplate, req.Params.URI)
				if err != nil {
					return nil, RPCError(err)
				}
				out := toResourceResult(rc)
				if err := checkPeerSize("resource", req.Params.URI, out); err != nil {
					return nil, RPCError(err)
				}
				return out, nil
			})
		tmpls = append(tmpls, tm.URITemplate)
	}
	for _, pr := range b.reg.ListPrompts() {
		pr := pr
		srv.AddPrompt(&mcp.Prompt{Name: pr.Canonical, Title: pr.Canonical, Description: pr.Description, Arguments: promptArgs(pr.Arguments), Meta: mcp.Meta{"nova/agent": pr.Agent}},
			func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				if err := b.authorize(p, metaCaller(req), pr.Agent); err != nil {
					return nil, RPCError(err)
				}
				out, err := b.reg.GetPromptResult(ctx, pr.Canonical, req.Params.Arguments)
				if err != nil {
					return nil, RPCError(err)
				}
				if err := checkPeerSize("prompt", pr.Canonical, out); err != nil {
					return nil, RPCError(err)
				}
				return out, nil
			})
		prompts = append(prompts, pr.Canonical)
	}
	b.mu.Lock()
	old := b.servedItems[srv]
	b.servedItems[srv] = servedItems{tools: tools, uris: uris, tmpls: tmpls, prompts: prompts}
	b.mu.Unlock()
	srv.RemoveTools(missing(old.tools, tools)...)
	srv.RemoveResources(missing(old.uris, uris)...)
	srv.RemoveResourceTemplates(missing(old.tmpls, tmpls)...)
	srv.RemovePrompts(missing(old.prompts, prompts)...)
}

type servedItems struct{ tools, uris, tmpls, prompts []string }

// missing returns the elements of old that are not in now.
func missing(old, now []string) []string {
	keep := make(map[string]bool, len(now))
	for _, s := range now {
		keep[s] = true
	}
	var out []string
	for _, s := range old {
		if !keep[s] {
			out = append(out, s)
		}
	}
	return out
}

// safeAddTool adds a tool, refusing (instead of panicking) one the SDK
// rejects.
func safeAddTool(srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			log.Warnw("tool refused by the MCP SDK", "tool", t.Name, "err", p)
			ok = false
		}
	}()
	srv.AddTool(t, h)
	return true
}

// idString is a peer ID and its String().
type idString struct {
	p peer.ID
	s string
}

// peerString is p.String(), kept for the last peer asked about: the
// policy compares it on every call, and encoding it costs microseconds.
func (b *Bridge) peerString(p peer.ID) string {
	if p == b.self {
		return b.selfID
	}
	if last := b.lastID.Load(); last != nil && last.p == p {
		return last.s
	}
	s := p.String()
	b.lastID.Store(&idString{p, s})
	return s
}

// authorize checks a call from the claimed caller on peer p to a local
// agent's item: caller hosted by p, tier and sandbox rules.
// It reads the cards in place (no copies: it runs on every call).
func (b *Bridge) authorize(p peer.ID, caller, agent string) error {
	c, err := b.pol.resolveCaller(p, b.peerString(p), caller)
	if err != nil {
		return b.pol.refuse(err, p)
	}
	target, ok := b.pol.Cards.GetShared(agent)
	if !ok || target.Host != b.selfID {
		return &agentcard.NotFoundError{Query: agent}
	}
	return b.pol.Check(p, c, target)
}

// peerMiddleware filters list results by [Policy.Visible] for the caller
// named in the request's _meta, whom peer p must host.
func (b *Bridge) peerMiddleware(p peer.ID) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil || !isList(method) {
				return res, err
			}
			caller, cerr := b.pol.Caller(p, metaCaller(req))
			b.filterList(res, caller, cerr == nil)
			return res, nil
		}
	}
}

// isList reports whether method lists tools, resources, resource templates
// or prompts.
func isList(method string) bool {
	switch method {
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		return true
	}
	return false
}

// filterList removes from the list result res every item whose agent (in
// its _meta "nova/agent") caller may not see by [Policy.Visible]: all of
// them when the caller is unknown (ok false), and those of agents the
// registry does not know.
func (b *Bridge) filterList(res mcp.Result, caller agentcard.Card, ok bool) {
	visible := func(m mcp.Meta) bool {
		if !ok {
			return false
		}
		a, _ := m["nova/agent"].(string)
		t, found := b.pol.Cards.Get(a)
		return found && b.pol.Visible(caller, t)
	}
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		r.Tools = filter(r.Tools, func(t *mcp.Tool) bool { return visible(t.Meta) })
	case *mcp.ListResourcesResult:
		r.Resources = filter(r.Resources, func(x *mcp.Resource) bool { return visible(x.Meta) })
	case *mcp.ListResourceTemplatesResult:
		r.ResourceTemplates = filter(r.ResourceTemplates, func(x *mcp.ResourceTemplate) bool { return visible(x.Meta) })
	case *mcp.ListPromptsResult:
		r.Prompts = filter(r.Prompts, func(x *mcp.Prompt) bool { return visible(x.Meta) })
	}
}

func filter[T any](xs []T, keep func(T) bool) []T {
	out := xs[:0:0]
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// peerConn is one outbound MCP session to a peer.
type peerConn struct {
	cs      *mcp.ClientSession
	lc      *lineConn // the session's connection, which carries tool calls itself
	st      *sessionStream
	ln      *link       // its calls' notifications
	tools   []*mcp.Tool // cached list (nil: unknown)
	res     []*mcp.Resource
	tmpls   []*mcp.ResourceTemplate
	prompts []*mcp.Prompt
	fetched time.Time
	calls   int  // calls in flight on it
	retired bool // no new calls: closed when the last one ends
}

// retireLine: a session to a peer whose stream read a line longer than
// this is retired once its calls end (the next call opens a new one),
// since the stream keeps its memory reservation at the longest line read
// for as long as the session lives.
const retireLine = 1 << 20

// acquire is the session to p for one call, counted on it until end; a
// retired session is never handed out.
func (b *Bridge) acquire(ctx context.Context, p peer.ID) (*peerConn, error) {
	for {
		pc, err := b.session(ctx, p)
		if err != nil {
			return nil, err
		}
		b.mu.Lock()
		ok := !pc.retired
		if ok {
			pc.calls++
		}
		b.mu.Unlock()
		if ok {
			return pc, nil
		}
	}
}

// end ends a call on pc. After a line over retireLine the session takes no
// new calls, and is closed with its last one, freeing its buffers.
func (b *Bridge) end(p peer.ID, pc *peerConn) {
	b.mu.Lock()
	pc.calls--
	if !pc.retired && pc.st.peak.Load() > retireLine {
		pc.retired = true
		if b.peers[p] == pc {
			delete(b.peers, p)
		}
	}
	closeNow := pc.retired && pc.calls == 0
	b.mu.Unlock()
	if closeNow {
		log.Debugw("MCP session to peer retired after a large message", "peer", p, "bytes", pc.st.peak.Load())
		pc.st.retiring.Store(true)
		_ = pc.cs.Close()
	}
}

// session returns the long-lived session to p, opening it if needed.
// Concurrent callers share one dial.
func (b *Bridge) session(ctx context.Context, p peer.ID) (*peerConn, error) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, errClosed
		}
		if pc := b.peers[p]; pc != nil {
			b.mu.Unlock()
			return pc, nil
		}
		wait, dialing := b.dialing[p]
		if !dialing {
			wait = make(chan struct{})
			b.dialing[p] = wait
		}
		b.mu.Unlock()
		if dialing {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		pc, err := b.dial(ctx, p)
		b.mu.Lock()
		delete(b.dialing, p)
		if err == nil {
			b.peers[p] = pc
			b.byClient[pc.cs] = p
		}
		b.mu.Unlock()
		close(wait)
		if err != nil {
			return nil, &unreachableError{Peer: p, Err: err}
		}
		b.wg.Go(func() {
			ctx, cancel := context.WithTimeout(b.ctx, b.cfg.CallTimeout)
			defer cancel()
			b.resubscribePeer(ctx, p, pc.cs)
		})
		b.wg.Go(func() {
			if err := pc.cs.Wait(); err != nil && b.ctx.Err() == nil {
				log.Debugw("MCP session to peer ended", "peer", p, "err", err)
			}
			pc.st.end()
			b.mu.Lock()
			if b.peers[p] == pc {
				delete(b.peers, p)
			}
			delete(b.byClient, pc.cs)
			b.mu.Unlock()
		})
		return pc, nil
	}
}

func (b *Bridge) dial(ctx context.Context, p peer.ID) (*peerConn, error) {
	s, err := b.h.NewStream(ctx, p, ProtocolID)
	if err != nil {
		return nil, err
	}
	st, err := b.attachStream(s)
	if err != nil {
		_ = s.Reset()
		return nil, err
	}
	ln := &link{}
	lc := newLineConn(st)
	notified := func(ln *link, r *jsonrpc.Request) { b.peerNotified(p, ln, r) }
	cs, err := b.client.Connect(ctx, notifyTransport{lineTransport{lc}, ln, notified}, &mcp.ClientSessionOptions{ProtocolVersion: peerProtocolVersion})
	if err != nil {
		st.end()
		return nil, err
	}
	// Every log message of a call comes back; the face filters by each
	// client's level. A peer that does not log answers with an error.
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: relayLevel}); err != nil {
		log.Debugw("peer session without logging", "peer", p, "err", err)
	}
	return &peerConn{cs: cs, lc: lc, st: st, ln: ln}, nil
}

type unreachableError struct {
	Peer peer.ID
	Err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("mcpbridge: cannot open an MCP session to %s: %v (is the node up and connected? try `nova-node ping`)", e.Peer, e.Err)
}
func (e *unreachableError) Code() string  { return CodePeerUnreachable }
func (e *unreachableError) Unwrap() error { return e.Err }

// peerLists returns p's tools, resources and prompts as visible to caller,
// from the cache when fresh.
func (b *Bridge) peerLists(ctx context.Context, p peer.ID, caller string) (*peerConn, error) {
	pc, err := b.session(ctx, p)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	fresh := pc.tools != nil && time.Since(pc.fetched) < b.cfg.ListTTL
	b.mu.Unlock()
	if fresh {
		return pc, nil
	}
	meta := mcp.Meta{MetaCaller: caller}
	var tools []*mcp.Tool
	for t, err := range pc.cs.Tools(ctx, &mcp.ListToolsParams{Meta: meta}) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	var res []*mcp.Resource
	for r, err := range pc.cs.Resources(ctx, &mcp.ListResourcesParams{Meta: meta}) {
		if err != nil {
			return nil, err
		}
		res = append(res, r)
	}
	var tmpls []*mcp.ResourceTemplate
	for tm, err := range pc.cs.ResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Meta: meta}) {
		if err != nil {
			return nil, err
		}
		tmpls = append(tmpls, tm)
	}
	var prompts []*mcp.Prompt
	for pr, err := range pc.cs.Prompts(ctx, &mcp.ListPromptsParams{Meta: meta}) {
		if err != nil {
			return nil, err
		}
		prompts = append(prompts, pr)
	}
	if tools == nil {
		tools = []*mcp.Tool{}
	}
	b.mu.Lock()
	pc.tools, pc.res, pc.tmpls, pc.prompts, pc.fetched = tools, res, tmpls, prompts, time.Now()
	b.mu.Unlock()
	return pc, nil
}

// invalidatePeer drops the cached lists of the session's peer.
func (b *Bridge) invalidateSession(cs *mcp.ClientSession) {
	b.mu.Lock()
	if p, ok := b.byClient[cs]; ok {
		if pc := b.peers[p]; pc != nil {
			pc.tools = nil
		}
	}
	b.mu.Unlock()
	b.Invalidate()
}

// mcpPeers returns the peers hosting agents that serve MCP, sorted.
func (b *Bridge) mcpPeers() []peer.ID {
	seen := map[string]bool{}
	var out []peer.ID
	for _, c := range b.pol.Cards.Remote() {
		if seen[c.Host] || !hasProtocol(c, ProtocolID) {
			continue
		}
		seen[c.Host] = true
		p, err := peer.Decode(c.Host)
		if err == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func hasProtocol(c agentcard.Card, id string) bool {
	for _, p := range c.Protocols {
		if p == id {
			return true
		}
	}
	return false
}

// servedServers returns the live peer servers with their peers.
func (b *Bridge) servedServers() map[*mcp.Server]peer.ID {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[*mcp.Server]peer.ID, len(b.served))
	for s, p := range b.served {
		out[s] = p
	}
	return out
}

// peerToolCall runs local tool t for caller on peer p (after the policy
// checks) and returns its result's JSON: see runPeerTool.
func (b *Bridge) peerToolCall(ctx context.Context, p peer.ID, t ToolInfo, caller string, rl *relay, args json.RawMessage) ([]byte, error) {
	if err := b.authorize(p, caller, t.Agent); err != nil {
		return nil, RPCError(err)
	}
	return b.runPeerTool(ctx, t, rl, args)
}

// runPeerTool runs local tool t for a peer's caller the policy let call
// it, and returns its result's JSON: a backend's answer as the bytes the
// registry holds, any other result encoded once. A result over
// maxPeerResult becomes an isError result with RESULT_TOO_LARGE, for this
// call alone. The error is a JSON-RPC error with the code.
func (b *Bridge) runPeerTool(ctx context.Context, t ToolInfo, rl *relay, args json.RawMessage) ([]byte, error) {
	res, err := b.reg.CallTool(withRelay(ctx, rl), t.Canonical, args)
	if err != nil {
		return nil, RPCError(err)
	}
	schema := hasSchema(t.OutputSchema)
	var raw []byte
	if !res.IsError && (res.sent || res.call != nil && res.call.Content != nil) && len(res.Content) > 0 {
		raw = res.Content // a backend's result as it sent it, or the JSON of res.call
	} else {
		out := toMCPResult(res, schema)
		if out.Content == nil {
			out.Content = []mcp.Content{} // "content" is required: never null
		}
		if raw, err = json.Marshal(out); err != nil {
			return nil, RPCError(fmt.Errorf("mcpbridge: encode tool result: %w", err))
		}
	}
	if len(raw) > maxPeerResult {
		tooBig := &TooLargeError{What: "tool", Name: t.Canonical, Size: len(raw)}
		out := toMCPResult(Result{IsError: true, Error: &ToolError{ErrCode: CodeResultTooLarge, Message: strings.TrimPrefix(tooBig.Error(), "mcpbridge: "+CodeResultTooLarge+": "), Agent: t.Agent, Tool: t.Canonical}}, schema)
		if raw, err = json.Marshal(out); err != nil {
			return nil, RPCError(fmt.Errorf("mcpbridge: encode tool result: %w", err))
		}
	}
	return raw, nil
}

// hostedCall is what the hosting node reads of a peer's tools/call: the
// tool, its arguments (raw, passed on as they came) and the _meta keys the
// policy and the relays need.
type hostedCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		Caller        any `json:"nova/caller"`
		Call          any `json:"nova/call"`
		ProgressToken any `json:"progressToken"`
	} `json:"_meta"`
}

// hostCalls answers, on a peer's session (lc, served by srv, whose session
// sess holds once connected), the tools/call requests the peer sends and
// the notifications/cancelled that name them, without the go-sdk's server:
// the same checks as its tool handlers (fillPeerServer), the same relays
// of progress, log messages, sampling and elicitation (through sess), and
// the result written as the bytes peerToolCall gives. Requests before the
// session is initialized, and every other message, go to the session.
func (b *Bridge) hostCalls(sctx context.Context, lc *lineConn, p peer.ID, srv *mcp.Server, sess *atomic.Pointer[mcp.ServerSession]) func(*jsonrpc.Request) bool {
	var inflight hostCalls
	workers := &hostWorkers{ctx: sctx}
	return func(r *jsonrpc.Request) bool {
		switch r.Method {
		case "notifications/cancelled":
			return !r.IsCall() && inflight.cancel(r.Params)
		case "tools/call":
		default:
			return false
		}
		ss := sess.Load()
		if !r.IsCall() || ss == nil || ss.InitializeParams() == nil {
			return false
		}
		ctx, cancel := context.WithCancel(sctx)
		if !inflight.add(r.ID, cancel) {
			cancel()
			return false // an id in use: the session answers it
		}
		// The checks run here, on the reading goroutine, whose stack has
		// grown to what they need: on the call's own goroutine they would
		// grow a fresh stack on every call. They neither block nor wait.
		c, t, err := b.checkHostedCall(p, srv, r.Params)
		workers.run(func() {
			defer cancel()
			defer inflight.remove(r.ID)
			var raw []byte
			if err == nil {
				call, _ := c.Meta.Call.(string)
				raw, err = b.runPeerTool(ctx, t, sessionRelay(ctx, ss, c.Meta.ProgressToken, call), c.Arguments)
			}
			if err == nil {
				err = lc.writeResult(r.ID, raw)
			} else {
				err = lc.Write(context.WithoutCancel(ctx), &jsonrpc.Response{ID: r.ID, Error: err})
			}
			if err != nil {
				log.Debugw("cannot answer a peer's tool call", "peer", p, "err", err)
			}
		})
		return true
	}
}

// checkHostedCall reads a peer's tools/call of a tool that srv serves
// and checks it: the tool must be one srv serves, its caller one the
// policy lets call it from p.
func (b *Bridge) checkHostedCall(p peer.ID, srv *mcp.Server, params json.RawMessage) (hostedCall, ToolInfo, error) {
	var c hostedCall
	// As the go-sdk's server reads params: its JSON library, its flags.
	if _, err := segjson.Parse(params, &c, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return c, ToolInfo{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid tools/call params: " + err.Error()}
	}
	b.mu.Lock()
	served := slices.Contains(b.servedItems[srv].tools, c.Name)
	b.mu.Unlock()
	t, ok := b.reg.Lookup(c.Name)
	if !served || !ok || t.Canonical != c.Name {
		return c, ToolInfo{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", c.Name)}
	}
	caller, _ := c.Meta.Caller.(string)
	if err := b.authorize(p, caller, t.Agent); err != nil {
		return c, ToolInfo{}, RPCError(err)
	}
	return c, t, nil
}

// maxIdleHostWorkers is how many goroutines a peer session keeps waiting
// for its next tool call (see hostWorkers).
const maxIdleHostWorkers = 4

// hostWorkers runs the tool calls a peer sends on one session, each on a
// goroutine of its own, and keeps up to maxIdleHostWorkers of those
// goroutines waiting for the next call once theirs ended: a fresh
// goroutine grows its stack to what a call needs on every call (about
// 10 us of a call's critical path with its start and exit). A waiting
// goroutine ends with the session (ctx); one that finds maxIdleHostWorkers
// others waiting ends at once. So a session holds at most one goroutine a
// call in flight plus maxIdleHostWorkers.
type hostWorkers struct {
	ctx  context.Context
	mu   sync.Mutex
	idle []chan func() // each waiting goroutine's: it takes one call on it
}

// run runs f on a waiting goroutine, or on a new one.
func (w *hostWorkers) run(f func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- f // buffered: never blocks
		return
	}
	w.mu.Unlock()
	go w.work(make(chan func(), 1), f)
}

// work runs f, then the calls handed to it on ch while it waits.
func (w *hostWorkers) work(ch chan func(), f func()) {
	for {
		f()
		w.mu.Lock()
		if len(w.idle) >= maxIdleHostWorkers || w.ctx.Err() != nil {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		select {
		case f = <-ch:
		case <-w.ctx.Done():
			w.mu.Lock()
			i := slices.Index(w.idle, ch)
			if i >= 0 {
				w.idle = slices.Delete(w.idle, i, i+1)
			}
			w.mu.Unlock()
			if i >= 0 {
				return
			}
			f = <-ch // run took ch before the session ended: its call comes
		}
	}
}
