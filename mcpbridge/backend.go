package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerConfig declares one MCP server of an agent, in the mcpServers shape
// of Claude Desktop and Claude Code: Command (+ Args, Env, Cwd) for a stdio
// server, or Type "http" + URL (+ Headers) for streamable HTTP.
type ServerConfig struct {
	Command string            `json:"command,omitempty" yaml:"command,omitempty"`
	Args    []string          `json:"args,omitempty" yaml:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty" yaml:"cwd,omitempty"`
	Type    string            `json:"type,omitempty" yaml:"type,omitempty"`
	URL     string            `json:"url,omitempty" yaml:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`
}

// Validate reports a declaration that cannot work.
func (c ServerConfig) Validate() error {
	switch c.Type {
	case "", "stdio":
		if c.Command == "" {
			return errors.New(`a stdio MCP server needs "command" (or "type: http" with "url")`)
		}
		if c.URL != "" {
			return errors.New(`"url" needs "type: http"`)
		}
	case "http", "streamable-http", "streamableHttp":
		if c.URL == "" {
			return errors.New(`an http MCP server needs "url"`)
		}
		if c.Command != "" {
			return errors.New(`give "command" or "url", not both`)
		}
	case "sse":
		return errors.New(`the legacy SSE transport is not supported: use "type: http" (streamable HTTP)`)
	default:
		return fmt.Errorf("unknown MCP server type %q (use stdio or http)", c.Type)
	}
	return nil
}

// backendProtocolVersion is offered to backends: probing a legacy server
// with server/discover (2026-07-28) can hang it.
const backendProtocolVersion = "2025-11-25"

// BackendStatus is a backend's state as shown to operators.
type BackendStatus struct {
	Agent     string `json:"agent"`
	Server    string `json:"server"`
	Up        bool   `json:"up"`
	Tools     int    `json:"tools"`
	Resources int    `json:"resources"`
	Prompts   int    `json:"prompts"`
	Restarts  int    `json:"restarts"`
	LastError string `json:"lastError,omitempty"`
}

// Backend is one MCP server serving an agent. It connects, publishes the
// server's tools, resources and prompts in the registry under the agent,
// follows list_changed, and reconnects with backoff when the server dies;
// meanwhile its tools stay listed and calls fail with BACKEND_UNAVAILABLE.
type Backend struct {
	agent, name string
	cfg         ServerConfig
	reg         *Registry
	client      *mcp.Client

	mu       sync.Mutex
	cs       *mcp.ClientSession
	ln       *link           // cs's calls' notifications
	tools    map[string]bool // canonical names registered
	uris     map[string]bool
	tmpls    map[string]bool // resource templates registered
	prompts  map[string]bool
	subs     map[string]bool // URIs subscribed to, again after a restart
	restarts int
	lastErr  string

	calls  calls // calls in flight, for their notifications
	resync chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// StartBackend starts serving agent with the server declared as name. The
// backend runs until Close.
func StartBackend(agent, name string, cfg ServerConfig, reg *Registry, version string) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mcpbridge: agent %s, MCP server %q: %w", agent, name, err)
	}
	if !ValidAgentName(agent) {
		return nil, &NameError{Kind: "agent", Name: agent, Reason: "not a valid agent name for tools"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Backend{agent: agent, name: name, cfg: cfg, reg: reg, tools: map[string]bool{}, uris: map[string]bool{}, tmpls: map[string]bool{}, prompts: map[string]bool{}, subs: map[string]bool{},
		resync: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	kick := func() {
		select {
		case b.resync <- struct{}{}:
		default:
		}
	}
	b.client = mcp.NewClient(&mcp.Implementation{Name: "nova-node", Version: version}, &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { kick() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { kick() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { kick() },
		// Streamable HTTP servers' notifications; a stdio server's are
		// relayed as they are read (notifyTransport), resource updates
		// included.
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if ln := b.linkOf(req.Session); ln != nil {
				b.calls.progressTo(ln, req.Params)
			}
		},
		CreateMessageHandler: b.sample,
		ElicitationHandler:   b.elicit,
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req.Params != nil && b.linkOf(req.Session) != nil {
				b.updated(req.Params.URI)
			}
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			if ln := b.linkOf(req.Session); ln != nil {
				b.relayLog(ln, req.Params)
			}
		},
	})
	go b.run(ctx) // owned by the Backend: Close cancels and waits on done
	return b, nil
}

// Status reports the backend's state.
func (b *Backend) Status() BackendStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BackendStatus{Agent: b.agent, Server: b.name, Up: b.cs != nil, Tools: len(b.tools), Resources: len(b.uris), Prompts: len(b.prompts), Restarts: b.restarts, LastError: b.lastErr}
}

// Close stops the server (its whole process group for stdio) and removes
// its items from the registry.
func (b *Backend) Close() error {
	b.cancel()
	<-b.done
	b.mu.Lock()
	tools, uris, tmpls, prompts := keys(b.tools), keys(b.uris), keys(b.tmpls), keys(b.prompts)
	b.tools, b.uris, b.tmpls, b.prompts = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	b.mu.Unlock()
	for _, t := range tmpls {
		b.reg.UnregisterTemplate(t)
		b.reg.SetCompleter("ref/resource", t, nil)
	}
	for _, t := range tools {
		b.reg.UnregisterTool(t)
	}
	for _, u := range uris {
		b.reg.UnregisterResource(u)
	}
	for _, p := range prompts {
		b.reg.UnregisterPrompt(p)
		b.reg.SetCompleter("ref/prompt", p, nil)
	}
	return nil
}

// completes reports whether the server of cs offers completion/complete.
func completes(cs *mcp.ClientSession) bool {
	init := cs.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Completions != nil
}

// completer completes arguments of the server's item ref.
func (b *Backend) completer(ref *mcp.CompleteReference) Completer {
	return func(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
		cs, err := b.current()
		if err != nil {
			return nil, err
		}
		q := *params
		q.Ref = ref
		q.Meta = nil
		return cs.Complete(ctx, &q)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (b *Backend) run(ctx context.Context) {
	defer close(b.done)
	delay := 250 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := b.session(ctx)
		if ctx.Err() != nil {
			return
		}
		b.mu.Lock()
		b.restarts++
		if err != nil {
			b.lastErr = err.Error()
		}
		b.mu.Unlock()
		log.Warnw("MCP server down; restarting with backoff", "agent", b.agent, "server", b.name, "err", err, "in", delay)
		if time.Since(started) > time.Minute {
			delay = 250 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 30*time.Second)
	}
}

// session runs one connection to the server until it ends.
func (b *Backend) session(ctx context.Context) error {
	var t mcp.Transport
	var cmd *exec.Cmd
	if b.cfg.URL != "" {
		t = &mcp.StreamableClientTransport{Endpoint: b.cfg.URL, HTTPClient: &http.Client{Transport: headerTransport{b.cfg.Headers}}}
	} else {
		cmd = exec.Command(b.cfg.Command, b.cfg.Args...)
		cmd.Dir = b.cfg.Cwd
		cmd.Env = os.Environ()
		for k, v := range b.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &logWriter{agent: b.agent, server: b.name}
		ownGroup(cmd) // its own process group: stopped with the node
		t = &commandTransport{cmd: cmd, terminate: 2 * time.Second}
	}
	ln := &link{}
	if cmd != nil {
		t = notifyTransport{t, ln, func(ln *link, r *jsonrpc.Request) {
			if r.Method == methodResourceUpdated {
				b.updated(updatedURI(r))
				return
			}
			b.calls.dispatch(ln, r, b.relayLog)
		}}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cs, err := b.client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: backendProtocolVersion})
	cancel()
	if err != nil {
		killGroup(cmd)
		return fmt.Errorf("connect: %w", err)
	}
	if init := cs.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Logging != nil {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := cs.SetLoggingLevel(lctx, &mcp.SetLoggingLevelParams{Level: relayLevel}); err != nil {
			log.Debugw("MCP server refused logging/setLevel", "agent", b.agent, "server", b.name, "err", err)
		}
		cancel()
	}
	b.mu.Lock()
	b.cs, b.ln = cs, ln
	b.lastErr = ""
	b.mu.Unlock()
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }() // ends when the session does; drained below
	defer func() {
		b.mu.Lock()
		b.cs, b.ln = nil, nil
		b.mu.Unlock()
		b.reg.changed() // tools now show as unavailable
		_ = cs.Close()
		killGroup(cmd)
		<-ended
	}()
	if err := b.sync(ctx, cs); err != nil {
		log.Warnw("MCP server lists", "agent", b.agent, "server", b.name, "err", err)
	}
	if subscribes(cs) {
		b.resubscribe(ctx, cs)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-ended:
			ended <- err
			if err == nil {
				err = errors.New("the server closed the session")
			}
			return err
		case <-b.resync:
			if err := b.sync(ctx, cs); err != nil {
				log.Warnw("MCP server lists", "agent", b.agent, "server", b.name, "err", err)
			}
		}
	}
}

type headerTransport struct{ h map[string]string }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header.Set(k, os.ExpandEnv(v))
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

type logWriter struct{ agent, server string }

func (w *logWriter) Write(p []byte) (int, error) {
	log.Debugw("MCP server stderr", "agent", w.agent, "server", w.server, "line", string(p))
	return len(p), nil
}

// relayLog passes a log message of the server to every call in flight on
// its connection ln (each caller may call the agent, so may read its logs),
// with the agent's name ahead of the logger's. A message that comes while
// no call is in flight goes to the node's own log, at Debug.
func (b *Backend) relayLog(ln *link, p *mcp.LoggingMessageParams) {
	if p == nil {
		return
	}
	q := *p
	q.Logger = b.agent
	if p.Logger != "" {
		q.Logger += "/" + p.Logger
	}
	rs := b.calls.all(ln)
	if len(rs) == 0 {
		log.Debugw("MCP server log message", "agent", b.agent, "server", b.name, "level", p.Level, "logger", p.Logger, "data", p.Data)
	}
	for _, r := range rs {
		r.log(&q)
	}
}

// linkOf is the link of cs when it is the live session and its
// notifications come through the SDK's handlers; nil otherwise.
func (b *Backend) linkOf(cs *mcp.ClientSession) *link {
	if ln := b.linkFor(cs); ln != nil && !ln.onRead {
		return ln
	}
	return nil
}

// linkFor is the link of cs when it is the live session, else nil.
func (b *Backend) linkFor(cs *mcp.ClientSession) *link {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cs != cs {
		return nil
	}
	return b.ln
}

// current returns the live session or a BACKEND_UNAVAILABLE error.
func (b *Backend) current() (*mcp.ClientSession, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cs == nil {
		return nil, &unavailableError{Agent: b.agent, Server: b.name, Last: b.lastErr}
	}
	return b.cs, nil
}

type unavailableError struct{ Agent, Server, Last string }

func (e *unavailableError) Error() string {
	s := fmt.Sprintf("MCP server %q of agent %s is not running; it is being restarted", e.Server, e.Agent)
	if e.Last != "" {
		s += " (last error: " + e.Last + ")"
	}
	return s
}
func (e *unavailableError) Code() string { return CodeBackendUnavailable }

// sync lists the server's items and brings the registry in line.
func (b *Backend) sync(ctx context.Context, cs *mcp.ClientSession) error {
	init := cs.InitializeResult()
	var caps *mcp.ServerCapabilities
	if init != nil {
		caps = init.Capabilities
	}
	var errs []error
	if caps == nil || caps.Tools != nil {
		errs = append(errs, b.syncTools(ctx, cs))
	}
	if caps != nil && caps.Resources != nil {
		errs = append(errs, b.syncResources(ctx, cs), b.syncTemplates(ctx, cs))
	}
	if caps != nil && caps.Prompts != nil {
		errs = append(errs, b.syncPrompts(ctx, cs))
	}
	return errors.Join(errs...)
}

func (b *Backend) syncTools(ctx context.Context, cs *mcp.ClientSession) error {
	seen := map[string]bool{}
	var errs []error
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		canon, err := Canonical(b.agent, t.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seen[canon] = true
		in, _ := json.Marshal(t.InputSchema)
		var out json.RawMessage
		if t.OutputSchema != nil {
			out, _ = json.Marshal(t.OutputSchema)
		}
		tool := Tool{Agent: b.agent, Name: t.Name, Description: t.Description, InputSchema: in, OutputSchema: out}
		name := t.Name
		nameJSON, _ := json.Marshal(name)
		b.mu.Lock()
		had := b.tools[canon]
		b.mu.Unlock()
		if had {
			if cur, ok := b.reg.Lookup(canon); ok && string(cur.InputSchema) == string(in) && cur.Description == t.Description && string(cur.OutputSchema) == string(out) {
				continue
			}
			b.reg.unregisterTool(canon)
		}
		err = b.reg.RegisterTool(tool, func(ctx context.Context, args json.RawMessage) (Result, error) {
			cs, err := b.current()
			if err != nil {
				return Result{}, err
			}
			params := &mcp.CallToolParams{Name: name, Arguments: args}
			ln := b.linkFor(cs)
			if rl := relayFrom(ctx); ln != nil && rl != nil {
				tok, done := b.calls.add(ln, rl)
				defer done()
				if rl.progress != nil {
					params.SetProgressToken(tok)
				}
			}
			if ln != nil && ln.conn != nil {
				// A stdio server: the call goes on its connection itself,
				// and its result comes back as the bytes it sent.
				p, err := toolCallParams(nameJSON, args, params.GetProgressToken())
				if err != nil {
					return Result{}, err
				}
				raw, err := ln.conn.call(ctx, "tools/call", p)
				if err != nil {
					return Result{}, err
				}
				return fromSentResult(raw)
			}
			r, err := cs.CallTool(ctx, params)
			if err != nil {
				return Result{}, err
			}
			return fromMCPResult(r)
		})
		b.mu.Lock()
		if err == nil {
			b.tools[canon] = true
		} else {
			delete(b.tools, canon)
		}
		b.mu.Unlock()
		if err != nil {
			errs = append(errs, err) // DUPLICATE_TOOL, bad schema: refused, logged, the rest goes on
		}
	}
	gone := b.dropUnseen(b.tools, seen)
	for _, c := range gone {
		b.reg.UnregisterTool(c)
	}
	return errors.Join(errs...)
}

func (b *Backend) syncResources(ctx context.Context, cs *mcp.ClientSession) error {
	seen := map[string]bool{}
	var errs []error
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			return err
		}
		seen[r.URI] = true
		b.mu.Lock()
		had := b.uris[r.URI]
		b.mu.Unlock()
		if had {
			continue
		}
		uri := r.URI
		name := r.Name
		if name == "" {
			name = uri
		}
		err := b.reg.RegisterResource(Resource{URI: uri, Name: name, MIMEType: r.MIMEType, Agent: b.agent}, func(ctx context.Context) ([]byte, error) {
			cs, err := b.current()
			if err != nil {
				return nil, err
			}
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				return nil, err
			}
			return fromResourceResult(uri, res).Data, nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.mu.Lock()
		b.uris[uri] = true
		b.mu.Unlock()
		if subscribes(cs) {
			b.reg.SetSubscriber(uri, b.subscribe)
		}
	}
	gone := b.dropUnseen(b.uris, seen)
	for _, u := range gone {
		b.reg.UnregisterResource(u)
		b.reg.SetSubscriber(u, nil)
	}
	return errors.Join(errs...)
}

func (b *Backend) syncTemplates(ctx context.Context, cs *mcp.ClientSession) error {
	seen := map[string]bool{}
	var errs []error
	for t, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			return err
		}
		seen[t.URITemplate] = true
		b.mu.Lock()
		had := b.tmpls[t.URITemplate]
		b.mu.Unlock()
		if had {
			continue
		}
		name := t.Name
		if name == "" {
			name = t.URITemplate
		}
		err := b.reg.RegisterTemplate(ResourceTemplate{URITemplate: t.URITemplate, Name: name, Description: t.Description, MIMEType: t.MIMEType, Agent: b.agent},
			func(ctx context.Context, uri string) (ResourceContent, error) {
				cs, err := b.current()
				if err != nil {
					return ResourceContent{}, err
				}
				res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err != nil {
					return ResourceContent{}, err
				}
				return fromResourceResult(uri, res), nil
			})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.mu.Lock()
		b.tmpls[t.URITemplate] = true
		b.mu.Unlock()
		if completes(cs) {
			ut := t.URITemplate
			b.reg.SetCompleter("ref/resource", ut, b.completer(&mcp.CompleteReference{Type: "ref/resource", URI: ut}))
		}
	}
	gone := b.dropUnseen(b.tmpls, seen)
	for _, u := range gone {
		b.reg.UnregisterTemplate(u)
		b.reg.SetCompleter("ref/resource", u, nil)
	}
	return errors.Join(errs...)
}

func (b *Backend) syncPrompts(ctx context.Context, cs *mcp.ClientSession) error {
	seen := map[string]bool{}
	var errs []error
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			return err
		}
		canon, err := Canonical(b.agent, p.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seen[canon] = true
		b.mu.Lock()
		had := b.prompts[canon]
		b.mu.Unlock()
		if had {
			continue
		}
		var args []PromptArg
		for _, a := range p.Arguments {
			if a != nil {
				args = append(args, PromptArg{Name: a.Name, Description: a.Description, Required: a.Required})
			}
		}
		name := p.Name
		err = b.reg.RegisterPromptResultFunc(Prompt{Agent: b.agent, Name: p.Name, Description: p.Description, Arguments: args}, func(ctx context.Context, args map[string]string) (*mcp.GetPromptResult, error) {
			cs, err := b.current()
			if err != nil {
				return nil, err
			}
			return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.mu.Lock()
		b.prompts[canon] = true
		b.mu.Unlock()
		if completes(cs) {
			b.reg.SetCompleter("ref/prompt", canon, b.completer(&mcp.CompleteReference{Type: "ref/prompt", Name: name}))
		}
	}
	gone := b.dropUnseen(b.prompts, seen)
	for _, c := range gone {
		b.reg.UnregisterPrompt(c)
		b.reg.SetCompleter("ref/prompt", c, nil)
	}
	return errors.Join(errs...)
}

// dropUnseen removes from held (one of the backend's item sets, under
// b.mu) what the server no longer lists (not in seen) and returns it, for
// the caller to unregister.
func (b *Backend) dropUnseen(held, seen map[string]bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var gone []string
	for k := range held {
		if !seen[k] {
			gone = append(gone, k)
			delete(held, k)
		}
	}
	return gone
}

// toolCallParams is the JSON of a tools/call's params: the tool's name
// (nameJSON, already JSON), its arguments (a JSON object the registry
// checked, {} when none) on one line, and the progress token (a string
// this node gave) when there is one. It is the JSON json.Marshal makes of
// the go-sdk's CallToolParams, without its reflection on every call.
func toolCallParams(nameJSON []byte, args json.RawMessage, tok any) (json.RawMessage, error) {
	b := make([]byte, 0, len(nameJSON)+len(args)+64)
	b = append(b, `{"name":`...)
	b = append(b, nameJSON...)
	b = append(b, `,"arguments":`...)
	switch {
	case len(bytes.TrimSpace(args)) == 0:
		b = append(b, "{}"...)
	case bytes.ContainsAny(args, "\r\n"):
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, args); err != nil {
			return nil, fmt.Errorf("mcpbridge: encode tools/call: %w", err)
		}
		b = buf.Bytes()
	default:
		b = append(b, args...)
	}
	if s, ok := tok.(string); ok {
		b = append(b, `,"_meta":{"progressToken":`...)
		b = appendJSONString(b, s)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}
