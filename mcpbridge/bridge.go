package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/agentcard"
)

var log = golog.Logger("nova/mcp")

// faceTTL is how stale the aggregated face may be when a client lists it;
// peers' own lists are cached longer (Config.ListTTL) and dropped on their
// list_changed notifications.
const faceTTL = 2 * time.Second

// Config configures a [Bridge].
type Config struct {
	// Host carries /nova/mcp/1.0.0.
	Host host.Host
	// Registry holds the tools, resources and prompts of this node's agents.
	Registry *Registry
	// Policy is enforced on every call from a peer and from the local faces.
	Policy *Policy
	// As names the local agent that the node's own MCP faces (stdio, HTTP,
	// CLI) call as: its tier and sandbox apply to those calls.
	As func() string
	// Version is the server version shown to MCP clients.
	Version string
	// ListTTL is how long a peer's tool list is cached (list_changed
	// notifications invalidate it sooner). Default 30 s.
	ListTTL time.Duration
	// SessionTimeout closes idle HTTP sessions. Default 10 minutes.
	SessionTimeout time.Duration
	// MaxHTTPSessions bounds the sessions the HTTP face holds at once
	// (default [DefaultMaxHTTPSessions]). A new session past it takes the
	// place of the session idle longest, if one has been idle (no request
	// open, none begun) for a minute; otherwise it is refused with HTTP 503
	// and a JSON-RPC error carrying [CodeTooManySessions].
	MaxHTTPSessions int
	// CallTimeout bounds a call to a remote tool. Default 2 minutes.
	CallTimeout time.Duration
	// StreamIdleTimeout closes a /nova/mcp/1.0.0 session's stream when
	// nothing was read on it for this long (between half of it and all of
	// it: the deadline is pushed ahead once half has passed); the first
	// bytes must come within 30 s, or within it if shorter. This node's
	// sessions to peers ping every third of it, so a live session stays
	// open. Default 10 minutes.
	StreamIdleTimeout time.Duration
	// OnLocalChange, when set, is called after the local registry changed
	// (a backend's tools appeared, changed or went away).
	OnLocalChange func()
}

// Bridge shares MCP tools, resources and prompts across the mesh: it serves
// this node's agents' items to peers over /nova/mcp/1.0.0 (one long-lived
// session per peer pair), and offers every item of the swarm to local MCP
// clients through one aggregated server (stdio relay and streamable HTTP).
type Bridge struct {
	cfg    Config
	h      host.Host
	self   peer.ID
	selfID string                   // self.String(), which encodes it anew on every call
	lastID atomic.Pointer[idString] // see peerString
	reg    *Registry
	pol    *Policy
	client *mcp.Client
	agg    *mcp.Server

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	mu          sync.Mutex
	closed      bool
	served      map[*mcp.Server]peer.ID
	fillMu      sync.Mutex // one fillPeerServer at a time, so an older registry never lands last
	servedItems map[*mcp.Server]servedItems
	peers       map[peer.ID]*peerConn
	dialing     map[peer.ID]chan struct{}
	byClient    map[*mcp.ClientSession]peer.ID
	face        faceState
	refreshMu   sync.Mutex
	refreshed   time.Time
	dirty       bool
	calls       calls // remote calls in flight, for their notifications

	// Subscriptions (subscribe.go). Lock order: subMu, then faceMu.
	subMu    sync.Mutex                               // subscriptions; held while one is made upstream
	faceMu   sync.Mutex                               // faceSubs, which is written under both; never held across a call
	faceSubs map[*mcp.ServerSession]map[string]uint64 // face session -> URI -> updSeq when it subscribed
	upSubs   map[string]int                           // uri -> face sessions subscribed to it
	updSeq   atomic.Uint64                            // stamps of the face's updates, in the order taken
	updates  updateQueue                              // the face's updates not yet sent
}

// New returns a Bridge; Start serves it.
func New(cfg Config) (*Bridge, error) {
	if cfg.Host == nil || cfg.Registry == nil || cfg.Policy == nil || cfg.Policy.Cards == nil {
		return nil, errors.New("mcpbridge: New needs a host, a registry and a policy with cards")
	}
	if cfg.As == nil {
		cfg.As = func() string { return "" }
	}
	if cfg.ListTTL <= 0 {
		cfg.ListTTL = 30 * time.Second
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 10 * time.Minute
	}
	if cfg.MaxHTTPSessions <= 0 {
		cfg.MaxHTTPSessions = DefaultMaxHTTPSessions
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = 10 * time.Minute
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{
		cfg: cfg, h: cfg.Host, self: cfg.Host.ID(), selfID: cfg.Host.ID().String(), reg: cfg.Registry, pol: cfg.Policy,
		ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1),
		served: map[*mcp.Server]peer.ID{}, servedItems: map[*mcp.Server]servedItems{},
		peers: map[peer.ID]*peerConn{}, dialing: map[peer.ID]chan struct{}{},
		byClient: map[*mcp.ClientSession]peer.ID{}, dirty: true,
		faceSubs: map[*mcp.ServerSession]map[string]uint64{}, upSubs: map[string]int{},
		updates: updateQueue{stamp: map[string]uint64{}, kick: make(chan struct{}, 1)},
	}
	b.client = mcp.NewClient(&mcp.Implementation{Name: "nova-node", Version: cfg.Version}, &mcp.ClientOptions{
		ToolListChangedHandler:     func(_ context.Context, req *mcp.ToolListChangedRequest) { b.invalidateSession(req.Session) },
		ResourceListChangedHandler: func(_ context.Context, req *mcp.ResourceListChangedRequest) { b.invalidateSession(req.Session) },
		PromptListChangedHandler:   func(_ context.Context, req *mcp.PromptListChangedRequest) { b.invalidateSession(req.Session) },
		CreateMessageHandler:       b.peerSample,
		ElicitationHandler:         b.peerElicit,
		KeepAlive:                  cfg.StreamIdleTimeout / 3, // within the peer's idle timeout (10 minutes by default)
	})
	b.agg = mcp.NewServer(&mcp.Implementation{Name: "nova-node", Title: "nova-node: every MCP tool of the swarm", Version: cfg.Version}, &mcp.ServerOptions{
		HasTools: true, HasResources: true, HasPrompts: true,
		CompletionHandler:  b.completeFace,
		SubscribeHandler:   b.faceSubscribe,
		UnsubscribeHandler: b.faceUnsubscribe,
		Instructions:       "Tools, resources and prompts of every agent in this nova-node swarm. Tool titles give the canonical agent.tool name; calls accept it too.",
	})
	b.agg.AddReceivingMiddleware(b.faceMiddleware)
	b.agg.AddSendingMiddleware(b.faceSend)
	b.face = newFaceState()
	return b, nil
}

// Start serves /nova/mcp/1.0.0 and keeps the aggregated face current.
func (b *Bridge) Start() {
	b.h.SetStreamHandler(ProtocolID, b.servePeer)
	b.reg.OnChange(b.localChanged)
	b.reg.OnResourceUpdated(b.localUpdated)
	b.wg.Go(b.refresher)
	b.wg.Go(b.deliverUpdates)
}

// Close stops serving and closes every session. Safe to call twice.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	peers := make([]*peerConn, 0, len(b.peers))
	for _, pc := range b.peers {
		peers = append(peers, pc)
	}
	b.mu.Unlock()
	b.h.RemoveStreamHandler(ProtocolID)
	b.reg.OnChange(nil)
	b.reg.OnResourceUpdated(nil)
	b.cancel()
	for _, pc := range peers {
		_ = pc.cs.Close()
	}
	for ss := range b.agg.Sessions() {
		_ = ss.Close()
	}
	b.wg.Wait()
	return nil
}

// Invalidate marks the aggregated face stale (cards or peers changed); it is
// rebuilt in the background and list_changed goes to its clients.
func (b *Bridge) Invalidate() {
	b.mu.Lock()
	b.dirty = true
	for _, pc := range b.peers {
		pc.tools = nil
	}
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// localChanged reloads every peer session's server and the face.
func (b *Bridge) localChanged() {
	for srv, p := range b.servedServers() {
		b.fillPeerServer(srv, p)
	}
	b.Invalidate()
	if b.cfg.OnLocalChange != nil {
		b.cfg.OnLocalChange()
	}
}

// refresher rebuilds the face when kicked, debounced.
func (b *Bridge) refresher() {
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.kick:
		}
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		b.refresh(ctx)
		cancel()
	}
}

// Entry is one tool, resource or prompt on the aggregated face.
type Entry struct {
	// Kind is "tool", "resource" or "prompt".
	Kind string `json:"kind"`
	// Name is the name on the face: the wire name of a tool or prompt, the
	// URI of a resource.
	Name string `json:"name"`
	// Canonical is "agent.tool" (or "agent.prompt"); empty for resources.
	Canonical string `json:"canonical,omitempty"`
	// Agent is the source agent's address ("name@peerID").
	Agent       string          `json:"agent"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	MIMEType    string          `json:"mimeType,omitempty"`
	Local       bool            `json:"local"`
	// AliasOf, on a tool or prompt listed under its bare name (see
	// [Bridge.Entries]), is its prefixed wire name.
	AliasOf string `json:"aliasOf,omitempty"`

	bare      string // the tool or prompt name without its agent, made legal for the wire
	peer      peer.ID
	remote    string // the item's name on the peer's server
	arguments []*mcp.PromptArgument
	output    json.RawMessage
}

// faceState is the aggregated face's current content.
type faceState struct {
	tools     map[string]Entry    // wire -> entry
	byCanon   map[string][]string // canonical -> wire names
	resources map[string]Entry    // uri -> entry
	templates map[string]Entry    // uri template -> entry
	prompts   map[string]Entry
}

func newFaceState() faceState {
	return faceState{tools: map[string]Entry{}, byCanon: map[string][]string{}, resources: map[string]Entry{}, templates: map[string]Entry{}, prompts: map[string]Entry{}}
}

// Entries returns the face's tools, resources and prompts, refreshed if
// stale, sorted by kind and name; a tool or prompt listed also under its
// bare name appears once, under its prefixed name.
func (b *Bridge) Entries(ctx context.Context) []Entry {
	b.ensureFresh(ctx)
	b.mu.Lock()
	var out []Entry
	for _, m := range []map[string]Entry{b.face.tools, b.face.resources, b.face.prompts} {
		for _, e := range m {
			if e.AliasOf == "" {
				out = append(out, e)
			}
		}
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind > out[j].Kind // tools, then resources, then prompts
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (b *Bridge) ensureFresh(ctx context.Context) {
	b.mu.Lock()
	stale := b.dirty || time.Since(b.refreshed) > faceTTL
	b.mu.Unlock()
	if stale {
		b.refresh(ctx)
	}
}

// refresh rebuilds the face from the local registry and every MCP peer,
// then updates the aggregated server (which notifies its sessions).
func (b *Bridge) refresh(ctx context.Context) {
	b.refreshMu.Lock()
	defer b.refreshMu.Unlock()
	b.mu.Lock()
	b.dirty = false
	b.mu.Unlock()
	as := b.cfg.As()
	next := newFaceState()
	takenTool := func(s string) bool { _, ok := next.tools[s]; return ok }
	takenPrompt := func(s string) bool { _, ok := next.prompts[s]; return ok }
	selfStr := b.self.String()
	addTool := func(e Entry, agent, tool string) {
		e.Kind, e.Canonical, e.bare = "tool", agent+"."+tool, sanitize(tool)
		if len(next.byCanon[e.Canonical]) > 0 {
			agent += "-" + shortPeer(e.peer)
		}
		e.Name = WireName(agent, tool, takenTool)
		next.tools[e.Name] = e
		next.byCanon[e.Canonical] = append(next.byCanon[e.Canonical], e.Name)
	}
	addPrompt := func(e Entry, agent, name string) {
		e.Kind, e.Canonical, e.bare = "prompt", agent+"."+name, sanitize(name)
		if _, dup := next.prompts[WireName(agent, name, nil)]; dup {
			agent += "-" + shortPeer(e.peer)
		}
		e.Name = WireName(agent, name, takenPrompt)
		next.prompts[e.Name] = e
	}
	for _, t := range b.reg.ListTools() {
		addTool(Entry{Agent: t.Agent + "@" + selfStr, Description: t.Description, InputSchema: t.InputSchema, output: t.OutputSchema, Local: true, peer: b.self, remote: t.Canonical}, t.Agent, t.Name)
	}
	for _, r := range b.reg.ListResources() {
		next.resources[r.URI] = Entry{Kind: "resource", Name: r.URI, Agent: r.Agent + "@" + selfStr, Description: r.Name, MIMEType: r.MIMEType, Local: true, peer: b.self, remote: r.URI}
	}
	for _, tm := range b.reg.ListTemplates() {
		next.templates[tm.URITemplate] = Entry{Kind: "resource-template", Name: tm.URITemplate, Agent: tm.Agent + "@" + selfStr, Description: tm.Name, MIMEType: tm.MIMEType, Local: true, peer: b.self, remote: tm.URITemplate}
	}
	for _, p := range b.reg.ListPrompts() {
		addPrompt(Entry{Agent: p.Agent + "@" + selfStr, Description: p.Description, Local: true, peer: b.self, remote: p.Canonical, arguments: promptArgs(p.Arguments)}, p.Agent, p.Name)
	}
	for _, p := range b.mcpPeers() {
		pc, err := b.peerLists(ctx, p, as)
		if err != nil {
			log.Debugw("peer MCP lists unavailable", "peer", p, "err", err)
			continue
		}
		b.mu.Lock()
		tools, res, tmpls, prompts := pc.tools, pc.res, pc.tmpls, pc.prompts
		b.mu.Unlock()
		for _, tm := range tmpls {
			if _, dup := next.templates[tm.URITemplate]; dup {
				continue // local first, then peers in ID order
			}
			agent, _ := tm.Meta["nova/agent"].(string)
			next.templates[tm.URITemplate] = Entry{Kind: "resource-template", Name: tm.URITemplate, Agent: agent + "@" + p.String(), Description: tm.Name, MIMEType: tm.MIMEType, peer: p, remote: tm.URITemplate}
		}
		for _, t := range tools {
			agent, name, err := SplitCanonical(t.Name)
			if err != nil {
				continue
			}
			schema, _ := json.Marshal(t.InputSchema)
			var out json.RawMessage
			if t.OutputSchema != nil {
				out, _ = json.Marshal(t.OutputSchema)
			}
			addTool(Entry{Agent: agent + "@" + p.String(), Description: t.Description, InputSchema: schema, output: out, peer: p, remote: t.Name}, agent, name)
		}
		for _, r := range res {
			if _, dup := next.resources[r.URI]; dup {
				continue // local first, then peers in ID order
			}
			agent, _ := r.Meta["nova/agent"].(string)
			next.resources[r.URI] = Entry{Kind: "resource", Name: r.URI, Agent: agent + "@" + p.String(), Description: r.Name, MIMEType: r.MIMEType, peer: p, remote: r.URI}
		}
		for _, pr := range prompts {
			agent, name, err := SplitCanonical(pr.Name)
			if err != nil {
				continue
			}
			addPrompt(Entry{Agent: agent + "@" + p.String(), Description: pr.Description, peer: p, remote: pr.Name, arguments: pr.Arguments}, agent, name)
		}
	}
	addBareNames(next.tools)
	addBareNames(next.prompts)
	b.mu.Lock()
	old := b.face
	b.face = next
	b.refreshed = time.Now()
	b.mu.Unlock()
	b.applyFace(old, next)
}

// addBareNames lists each tool (or prompt) of m also under its bare name,
// without the agent, when no other item of m has that bare name and no
// item's wire name is that name: a client that knows a tool by its own
// server's name (the MCP conformance suite, a prompt written for one
// server) finds it. The prefixed name stays for every item, and is the one
// canonical names resolve to.
func addBareNames(m map[string]Entry) {
	count := map[string]int{}
	for _, e := range m {
		count[e.bare]++
	}
	var aliases []Entry
	for name, e := range m {
		if _, taken := m[e.bare]; count[e.bare] != 1 || taken || !ValidWireName(e.bare) {
			continue
		}
		e.AliasOf, e.Name = name, e.bare
		aliases = append(aliases, e)
	}
	for _, e := range aliases {
		m[e.Name] = e
	}
}

func shortPeer(p peer.ID) string {
	s := p.String()
	if len(s) > 6 {
		s = s[len(s)-6:]
	}
	return s
}

// goneKeys appends to buf[:0] the keys of old that next lacks.
func goneKeys[V any](old, next map[string]V, buf []string) []string {
	buf = buf[:0]
	for k := range old {
		if _, ok := next[k]; !ok {
			buf = append(buf, k)
		}
	}
	return buf
}

// applyFace brings the aggregated server in line with next.
func (b *Bridge) applyFace(old, next faceState) {
	gone := goneKeys(old.tools, next.tools, nil)
	b.agg.RemoveTools(gone...)
	for name, e := range next.tools {
		if o, ok := old.tools[name]; ok && sameEntry(o, e) {
			continue
		}
		schema := e.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		t := &mcp.Tool{Name: name, Title: e.Canonical, Description: e.Description, InputSchema: schema,
			Meta: mcp.Meta{"nova/canonical": e.Canonical, "nova/agent": e.Agent}}
		if hasSchema(e.output) {
			t.OutputSchema = e.output
		}
		e := e
		safeAddTool(b.agg, t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return b.callEntry(withRelay(ctx, serverRelay(ctx, req)), e, b.cfg.As(), req.Params.Arguments)
		})
	}
	gone = goneKeys(old.resources, next.resources, gone)
	b.agg.RemoveResources(gone...)
	for uri, e := range next.resources {
		if o, ok := old.resources[uri]; ok && sameEntry(o, e) {
			continue
		}
		e := e
		b.agg.AddResource(&mcp.Resource{URI: uri, Name: e.Description, MIMEType: e.MIMEType, Meta: mcp.Meta{"nova/agent": e.Agent}},
			func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return b.readEntry(ctx, e)
			})
	}
	gone = goneKeys(old.templates, next.templates, gone)
	b.agg.RemoveResourceTemplates(gone...)
	for ut, e := range next.templates {
		if o, ok := old.templates[ut]; ok && sameEntry(o, e) {
			continue
		}
		e := e
		b.agg.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: ut, Name: e.Description, MIMEType: e.MIMEType, Meta: mcp.Meta{"nova/agent": e.Agent}},
			func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return b.readTemplateEntry(ctx, e, req.Params.URI)
			})
	}
	gone = goneKeys(old.prompts, next.prompts, gone)
	b.agg.RemovePrompts(gone...)
	for name, e := range next.prompts {
		if o, ok := old.prompts[name]; ok && sameEntry(o, e) {
			continue
		}
		e := e
		b.agg.AddPrompt(&mcp.Prompt{Name: name, Title: e.Canonical, Description: e.Description, Arguments: e.arguments, Meta: mcp.Meta{"nova/canonical": e.Canonical, "nova/agent": e.Agent}},
			func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return b.promptEntry(ctx, e, req.Params.Arguments)
			})
	}
}

// hasSchema reports whether a tool's output schema is declared.
func hasSchema(s json.RawMessage) bool {
	t := bytes.TrimSpace(s)
	return len(t) > 0 && string(t) != "null"
}

func sameEntry(a, b Entry) bool {
	return a.Agent == b.Agent && a.Description == b.Description && string(a.InputSchema) == string(b.InputSchema) &&
		a.peer == b.peer && a.remote == b.remote && a.MIMEType == b.MIMEType && string(a.output) == string(b.output) && len(a.arguments) == len(b.arguments)
}

// faceMiddleware lets calls and prompt gets name items by their canonical
// "agent.tool" as well as by their wire name, and keeps out of lists what
// the face's agent may not call by [Policy.Visible] (a call still reaches
// the item and is refused with its code).
func (b *Bridge) faceMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
			b.ensureFresh(ctx)
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			caller, cerr := b.pol.resolveCaller(b.self, b.selfID, b.cfg.As())
			b.filterList(res, caller, cerr == nil)
			return res, nil
		case "tools/call":
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				name, err := b.faceName(ctx, p.Name)
				if err != nil {
					return nil, RPCError(err)
				}
				p.Name = name
			}
		case "resources/read":
			if p, ok := req.GetParams().(*mcp.ReadResourceParams); ok {
				b.ensureFresh(ctx)
				b.mu.Lock()
				_, known := b.face.resources[p.URI]
				templated := len(b.face.templates) > 0
				b.mu.Unlock()
				if !known && !templated {
					return nil, resourceNotFound(p.URI)
				}
				if !known {
					// A template may match it; the SDK's own not-found
					// error becomes ours, with the code.
					res, err := next(ctx, method, req)
					var je *jsonrpc.Error
					if errors.As(err, &je) && je.Code == mcp.CodeResourceNotFound && je.Message == "Resource not found" {
						return nil, resourceNotFound(p.URI)
					}
					return res, err
				}
			}
		case "prompts/get":
			if p, ok := req.GetParams().(*mcp.GetPromptParams); ok {
				b.ensureFresh(ctx)
				name, err := b.facePrompt(ctx, p.Name)
				if err != nil {
					// PROMPT_NOT_FOUND, like tools and resources (not the
					// SDK's "unknown prompt", which carries no code).
					return nil, RPCError(err)
				}
				p.Name = name
			}
		}
		return next(ctx, method, req)
	}
}

// faceName maps a tool name given by a client (wire or canonical) to its
// wire name.
func (b *Bridge) faceName(ctx context.Context, name string) (string, error) {
	for attempt := 0; attempt < 2; attempt++ {
		b.mu.Lock()
		_, isWire := b.face.tools[name]
		wires := b.face.byCanon[name]
		b.mu.Unlock()
		switch {
		case isWire:
			return name, nil
		case len(wires) == 1:
			return wires[0], nil
		case len(wires) > 1:
			return "", &agentcard.AmbiguousError{Name: name, Candidates: wires}
		}
		if attempt == 0 {
			b.refresh(ctx)
		}
	}
	return "", &ToolNotFoundError{Name: name}
}

// facePrompt maps a prompt name given by a client (wire or canonical) to
// its wire name, or is a *[PromptNotFoundError].
func (b *Bridge) facePrompt(ctx context.Context, name string) (string, error) {
	for attempt := 0; attempt < 2; attempt++ {
		b.mu.Lock()
		_, isWire := b.face.prompts[name]
		wire := ""
		for w, e := range b.face.prompts {
			if e.Canonical == name {
				wire = w
				break
			}
		}
		b.mu.Unlock()
		switch {
		case isWire:
			return name, nil
		case wire != "":
			return wire, nil
		}
		if attempt == 0 {
			b.refresh(ctx)
		}
	}
	return "", &PromptNotFoundError{Name: name}
}

// CallTool calls a tool of the swarm by wire or canonical name, as the
// face's agent; used by the CLI through the local API.
func (b *Bridge) CallTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	return b.CallToolAs(ctx, b.cfg.As(), name, args)
}

// CallToolAs is CallTool as the local agent as (an address).
func (b *Bridge) CallToolAs(ctx context.Context, as, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	b.ensureFresh(ctx)
	wire, err := b.faceName(ctx, name)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	e := b.face.tools[wire]
	b.mu.Unlock()
	return b.callEntry(ctx, e, as, args)
}

// Metrics is the invocation metrics of calls served or made by this node.
func (b *Bridge) Metrics() MetricsSnapshot { return b.reg.Metrics().Snapshot() }

// callEntry runs a face tool: locally through the registry (after the same
// policy checks a peer would get), or on its peer. Never retried.
func (b *Bridge) callEntry(ctx context.Context, e Entry, as string, args json.RawMessage) (*mcp.CallToolResult, error) {
	if e.Local {
		agent, _, _ := SplitCanonical(e.remote)
		if err := b.authorize(b.self, as, agent); err != nil {
			return nil, RPCError(err)
		}
		res, err := b.reg.CallTool(ctx, e.remote, args)
		if err != nil {
			return nil, RPCError(err)
		}
		return toMCPResult(res, hasSchema(e.output)), nil
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CallTimeout)
	defer cancel()
	out, raw, err := b.callRemote(ctx, e, as, args)
	rec := InvocationRecord{Tool: e.Canonical, Agent: e.Agent, Arguments: args, DurationMs: float64(time.Since(start)) / float64(time.Millisecond), Time: start.UnixMilli()}
	if len(rec.Arguments) == 0 {
		rec.Arguments = json.RawMessage(`{}`)
	}
	switch {
	case err != nil:
		rec.Error = CodeOf(err) + ": " + err.Error()
	case out.IsError:
		r, _ := fromMCPResult(out)
		rec.Error = r.Error.ErrCode + ": " + r.Error.Message
	default:
		rec.Success = true
		rec.Result = raw
	}
	b.reg.record(rec)
	if err != nil {
		return nil, RPCError(err)
	}
	fitError(out, hasSchema(e.output))
	return out, nil
}

// callRemote calls e on its peer: the tools/call goes on the peer
// session's connection itself (lineConn.call), past the go-sdk's client.
// It returns the result and its JSON as the peer sent it.
func (b *Bridge) callRemote(ctx context.Context, e Entry, as string, args json.RawMessage) (*mcp.CallToolResult, json.RawMessage, error) {
	pc, err := b.acquire(ctx, e.peer)
	if err != nil {
		return nil, nil, err
	}
	defer b.end(e.peer, pc)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if len(args) > maxPeerResult {
		return nil, nil, &TooLargeError{What: "arguments of tool", Name: e.Canonical, Size: len(args)}
	}
	var tok string
	progress := false
	if rl := relayFrom(ctx); rl != nil {
		var done func()
		tok, done = b.calls.add(pc.ln, rl)
		defer done()
		progress = rl.progress != nil
	}
	p, err := peerCallParams(as, e.remote, args, tok, progress)
	if err != nil {
		return nil, nil, &ArgumentsError{Tool: e.Canonical, Reason: "not valid JSON"}
	}
	raw, err := pc.lc.call(ctx, "tools/call", p)
	if err != nil {
		return nil, nil, err
	}
	var out mcp.CallToolResult
	if err := decodeToolResult(raw, &out); err != nil {
		// A server's result crosses undecoded: one the SDK cannot read
		// (an unknown content type) fails the call like a failing tool.
		bad := toMCPResult(Result{IsError: true, Error: &ToolError{ErrCode: CodeToolFailed, Message: "the tool's result is malformed: " + err.Error(), Agent: e.Agent, Tool: e.Canonical}}, hasSchema(e.output))
		return bad, nil, nil
	}
	return &out, raw, nil
}

// peerNotified relays a progress notification or log message that peer p
// sent on ln for one of this node's calls, and an update of a resource p
// serves to the face.
func (b *Bridge) peerNotified(p peer.ID, ln *link, r *jsonrpc.Request) {
	if r.Method == methodResourceUpdated {
		b.peerUpdated(p, updatedURI(r))
		return
	}
	b.calls.dispatch(ln, r, func(ln *link, p *mcp.LoggingMessageParams) {
		if rl := b.calls.get(ln, p.Meta[metaCall]); rl != nil {
			rl.log(p)
		}
	})
}

// ReadResource reads a resource of the swarm by URI, as the face's agent.
func (b *Bridge) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	b.ensureFresh(ctx)
	b.mu.Lock()
	e, ok := b.face.resources[uri]
	b.mu.Unlock()
	if !ok {
		return nil, &ResourceNotFoundError{URI: uri}
	}
	return b.readEntry(ctx, e)
}

func (b *Bridge) readEntry(ctx context.Context, e Entry) (*mcp.ReadResourceResult, error) {
	return b.read(ctx, e, e.remote, func(ctx context.Context) (ResourceContent, error) {
		return b.reg.ReadResource(ctx, e.remote)
	})
}

// readTemplateEntry reads uri, which the face's template e matched: on
// this node, or on e's peer with the caller's rights.
func (b *Bridge) readTemplateEntry(ctx context.Context, e Entry, uri string) (*mcp.ReadResourceResult, error) {
	return b.read(ctx, e, uri, func(ctx context.Context) (ResourceContent, error) {
		return b.reg.ReadTemplate(ctx, e.remote, uri)
	})
}

// read reads a resource of entry e as the face's caller: with local, once
// the caller may read e's agent, when e is this node's; else as uri on
// e's peer, which checks the caller's rights itself.
func (b *Bridge) read(ctx context.Context, e Entry, uri string, local func(context.Context) (ResourceContent, error)) (*mcp.ReadResourceResult, error) {
	as := b.cfg.As()
	if e.Local {
		agent := strings.SplitN(e.Agent, "@", 2)[0]
		if err := b.authorize(b.self, as, agent); err != nil {
			return nil, RPCError(err)
		}
		rc, err := local(ctx)
		if err != nil {
			return nil, RPCError(err)
		}
		return toResourceResult(rc), nil
	}
	pc, err := b.acquire(ctx, e.peer)
	if err != nil {
		return nil, RPCError(err)
	}
	defer b.end(e.peer, pc)
	return pc.cs.ReadResource(ctx, &mcp.ReadResourceParams{Meta: mcp.Meta{MetaCaller: as}, URI: uri})
}

// GetPrompt renders a prompt of the swarm by wire or canonical name.
func (b *Bridge) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	b.ensureFresh(ctx)
	b.mu.Lock()
	e, ok := b.face.prompts[name]
	if !ok {
		for _, x := range b.face.prompts {
			if x.Canonical == name {
				e, ok = x, true
				break
			}
		}
	}
	b.mu.Unlock()
	if !ok {
		return nil, &PromptNotFoundError{Name: name}
	}
	return b.promptEntry(ctx, e, args)
}

func (b *Bridge) promptEntry(ctx context.Context, e Entry, args map[string]string) (*mcp.GetPromptResult, error) {
	as := b.cfg.As()
	if e.Local {
		agent, _, _ := SplitCanonical(e.remote)
		if err := b.authorize(b.self, as, agent); err != nil {
			return nil, RPCError(err)
		}
		res, err := b.reg.GetPromptResult(ctx, e.remote, args)
		if err != nil {
			return nil, RPCError(err)
		}
		return res, nil
	}
	pc, err := b.acquire(ctx, e.peer)
	if err != nil {
		return nil, RPCError(err)
	}
	defer b.end(e.peer, pc)
	return pc.cs.GetPrompt(ctx, &mcp.GetPromptParams{Meta: mcp.Meta{MetaCaller: as}, Name: e.remote, Arguments: args})
}

// ServeConn serves the aggregated face on one byte stream (newline-delimited
// JSON-RPC, as on stdio) until the client leaves or the bridge closes: what
// `nova-node mcp` relays to.
func (b *Bridge) ServeConn(ctx context.Context, rwc io.ReadWriteCloser) error {
	ss, err := b.agg.Connect(ctx, &mcp.IOTransport{Reader: rwc, Writer: rwc, MaxLineLength: MaxLine}, nil)
	if err != nil {
		return fmt.Errorf("mcpbridge: serve connection: %w", err)
	}
	stop := context.AfterFunc(b.ctx, func() { _ = ss.Close() })
	defer stop()
	return ss.Wait()
}

// HTTPHandler is the streamable HTTP face. Each request is routed by its
// Mcp-Protocol-Version header: clients of spec 2026-07-28 and later go to
// the SDK's stateless handler (the stateful one refuses them); older ones,
// and initialize requests without the header, to the stateful handler,
// which can push notifications and whose idle sessions time out. The
// stateful handler holds at most MaxHTTPSessions sessions (see
// [Config.MaxHTTPSessions]).
func (b *Bridge) HTTPHandler() http.Handler { return b.httpHandler(time.Now) }

// httpHandler is HTTPHandler with the clock of the session bound.
func (b *Bridge) httpHandler(now func() time.Time) http.Handler {
	get := func(*http.Request) *mcp.Server { return b.agg }
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{SessionTimeout: b.cfg.SessionTimeout, MaxRequestBodyBytes: 4 << 20})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true, MaxRequestBodyBytes: 4 << 20})
	sessions := &httpSessions{max: b.cfg.MaxHTTPSessions, agg: b.agg, now: now, live: map[string]*httpSession{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.serve(stateful, w, r)
	})
}

// DefaultMaxHTTPSessions is the default of [Config.MaxHTTPSessions]: far
// more MCP clients than one machine's user runs against one node, few
// enough that the sessions' memory stays small (each holds a few buffers
// and goroutines, tens of kB).
const DefaultMaxHTTPSessions = 64

// CodeTooManySessions: the HTTP face holds MaxHTTPSessions sessions, each
// busy within the last minute; close unused sessions (HTTP DELETE with
// their Mcp-Session-Id) or retry after a minute.
const CodeTooManySessions = "TOO_MANY_SESSIONS"

// sessionEvictIdle is how long a session must have been idle before a new
// one may take its place at the bound.
const sessionEvictIdle = time.Minute

// httpSessions bounds the stateful HTTP face's sessions. The SDK's handler
// makes a session for every POST without an Mcp-Session-Id; this wrapper
// admits such a POST only below the bound (counting the ones under way),
// learns the new session's id from the response header, and tracks when
// each session was last used and how many of its requests are open. A
// session the SDK closed (idle timeout, DELETE, failed initialize) is
// forgotten at the next admission. mu is never held while calling the SDK.
type httpSessions struct {
	max int
	agg *mcp.Server
	now func() time.Time

	mu      sync.Mutex
	live    map[string]*httpSession
	pending int // admitted POSTs whose session id is not known yet
}

type httpSession struct {
	used time.Time // the last request's start or end
	open int       // requests under way (a GET event stream stays open)
}

func (s *httpSessions) serve(h http.Handler, w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		s.use(id, 1)
		defer s.use(id, -1)
		h.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		h.ServeHTTP(w, r) // the SDK refuses it: no session to serve
		return
	}
	evict, ok := s.admit()
	if !ok {
		writeTooManySessions(w, s.max)
		return
	}
	if evict != nil {
		_ = evict.Close()
	}
	defer func() { s.settle(w.Header().Get("Mcp-Session-Id")) }()
	h.ServeHTTP(w, r)
}

// use marks a request of session id starting (delta 1) or ending (-1).
func (s *httpSessions) use(id string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.live[id]; e != nil {
		e.open += delta
		e.used = s.now()
	}
}

// admit reserves room for a new session, choosing one idle session to
// close when the face is full, or reports that there is none.
func (s *httpSessions) admit() (evict *mcp.ServerSession, ok bool) {
	open := map[string]*mcp.ServerSession{}
	for ss := range s.agg.Sessions() {
		if id := ss.ID(); id != "" {
			open[id] = ss
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.live {
		if open[id] == nil {
			delete(s.live, id) // closed by the SDK
		}
	}
	if len(s.live)+s.pending < s.max {
		s.pending++
		return nil, true
	}
	oldest := ""
	for id, e := range s.live {
		if e.open == 0 && (oldest == "" || e.used.Before(s.live[oldest].used)) {
			oldest = id
		}
	}
	if oldest == "" || s.now().Sub(s.live[oldest].used) < sessionEvictIdle {
		return nil, false
	}
	delete(s.live, oldest)
	s.pending++
	return open[oldest], true
}

// settle ends an admission: id is the session the POST made, or "" when
// it made none (a refused or failed initialize).
func (s *httpSessions) settle(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	if id != "" {
		s.live[id] = &httpSession{used: s.now()}
	}
}

// writeTooManySessions answers a new session's POST at the bound: HTTP 503
// with a JSON-RPC error (id null: the request was not read).
func writeTooManySessions(w http.ResponseWriter, max int) {
	data, _ := json.Marshal(map[string]string{"code": CodeTooManySessions})
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": &jsonrpc.Error{
		Code: -32000, Data: data,
		Message: fmt.Sprintf("%s: this node's MCP face holds %d sessions, all in use within the last minute; close unused sessions (HTTP DELETE with their Mcp-Session-Id) or retry in a minute", CodeTooManySessions, max),
	}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "60")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// resourceNotFound is MCP's resource-not-found error (-32002), naming the
// URI in the message and in data, with the seed code.
func resourceNotFound(uri string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"uri": uri, "code": CodeResourceNotFound})
	return &jsonrpc.Error{Code: -32002, Message: fmt.Sprintf("resource not found: %s (list resources to see what the swarm offers)", uri), Data: data}
}

// peerCallParams is the JSON of a tools/call's params to a peer: the
// caller (as), the call's token (tok, when it has a relay; the progress
// token too when progress is asked for), the tool's name on the peer and
// the arguments, compacted onto one line. It is the JSON json.Marshal
// makes of the go-sdk's CallToolParams, without its reflection on every
// call; arguments that are not JSON are an error.
func peerCallParams(as, remote string, args json.RawMessage, tok string, progress bool) ([]byte, error) {
	b := make([]byte, 0, len(as)+len(remote)+len(args)+96)
	b = append(b, `{"_meta":{`...)
	if tok != "" {
		b = append(b, `"nova/call":`...)
		b = appendJSONString(b, tok)
		b = append(b, ',')
	}
	b = append(b, `"nova/caller":`...)
	b = appendJSONString(b, as)
	if tok != "" && progress {
		b = append(b, `,"progressToken":`...)
		b = appendJSONString(b, tok)
	}
	b = append(b, `},"name":`...)
	b = appendJSONString(b, remote)
	b = append(b, `,"arguments":`...)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, args); err != nil {
		return nil, err
	}
	return append(buf.Bytes(), '}'), nil
}

// appendJSONString appends s as a JSON string, as json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
