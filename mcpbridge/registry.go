package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a tool published by an agent (requirement 5.1).
type Tool struct {
	// Agent is the source agent; Name the tool's name within it.
	Agent string `json:"agent"`
	Name  string `json:"name"`
	// Description is free text.
	Description string `json:"description,omitempty"`
	// InputSchema is a JSON Schema object with "type": "object". When
	// empty, the registry stores {"type":"object"} (the SDK requires one).
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// OutputSchema is optional; when present it is a JSON Schema object
	// with "type": "object" (as the MCP spec requires).
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// ToolInfo is a listed tool: the registration plus its names.
type ToolInfo struct {
	Tool
	// Canonical is "agent.tool"; Wire the name shown to MCP clients.
	Canonical string `json:"canonical"`
	Wire      string `json:"wire"`
}

// Result is the outcome of a tool call. Content is the handler's result,
// opaque JSON (for MCP, the content blocks and structured content). When
// IsError is set, Error names the code and the source agent.
type Result struct {
	Content json.RawMessage `json:"content,omitempty"`
	IsError bool            `json:"isError,omitempty"`
	Error   *ToolError      `json:"error,omitempty"`

	// call is the backend's answer that Content encodes, kept decoded so
	// that serving it again does not decode it again.
	call *mcp.CallToolResult
	// sent: Content is a backend's successful tool result (a JSON object
	// with a "content" array) as the backend sent it, not decoded.
	sent bool
}

// ToolHandler serves a call; args is always a JSON object. A returned error
// (or a panic) turns into an isError [Result]; a handler may also return a
// Result with IsError set itself (a backend's own isError).
type ToolHandler func(ctx context.Context, args json.RawMessage) (Result, error)

// Resource is a resource published by an agent (requirement 6.1).
type Resource struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MIMEType string `json:"mimeType,omitempty"`
	Agent    string `json:"agent"`
}

// ResourceLoader produces a resource's content.
type ResourceLoader func(ctx context.Context) ([]byte, error)

// ResourceContent is what [Registry.ReadResource] returns.
type ResourceContent struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Data     []byte `json:"data"`
}

// PromptArg declares an argument of a prompt template. Its name matches
// ^[A-Za-z_][A-Za-z0-9_]*$.
type PromptArg struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// Prompt is a prompt template published by an agent (requirement 6.4).
// Template uses {{name}} placeholders (spaces inside the braces allowed:
// {{ name }}); see [Registry.GetPrompt] for the substitution rules.
type Prompt struct {
	Agent       string      `json:"agent"`
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Arguments   []PromptArg `json:"arguments,omitempty"`
	Template    string      `json:"template"`
}

// PromptInfo is a listed prompt.
type PromptInfo struct {
	Prompt
	Canonical string `json:"canonical"`
	Wire      string `json:"wire"`
}

type toolEntry struct {
	info    ToolInfo
	handler ToolHandler
}

type resourceEntry struct {
	res    Resource
	loader ResourceLoader
}

type promptEntry struct {
	info PromptInfo
	get  PromptFunc       // nil: render the template
	full PromptResultFunc // nil: one user message of get's (or the template's) text
}

// PromptResultFunc produces a prompt's messages from its arguments: a
// backend's prompt, kept whole (roles, images, embedded resources).
type PromptResultFunc func(ctx context.Context, args map[string]string) (*mcp.GetPromptResult, error)

// PromptFunc produces a prompt's text from its arguments (a backend's
// prompt, which the backend renders).
type PromptFunc func(ctx context.Context, args map[string]string) (string, error)

// Registry holds the tools, resources and prompts of the agents, each with
// its source agent. It is safe for concurrent use. Handlers and loaders run
// outside its lock.
type Registry struct {
	mu         sync.RWMutex
	tools      map[string]*toolEntry // by canonical name
	toolWire   *WireNames
	resources  map[string]*resourceEntry // by URI
	templates  map[string]*templateEntry // by URI template; nil until the first
	completers map[string]Completer      // by completerKey; nil until the first
	prompts    map[string]*promptEntry   // by canonical name
	promptWire *WireNames
	metrics    *Metrics
	hook       InvocationHook
	onChange   func()
	now        func() time.Time

	// Lock order: subMu, then updMu.
	subMu       sync.Mutex            // subscriptions; held while a server is (un)subscribed
	subscribers map[string]Subscriber // uri -> how to subscribe its server
	updMu       sync.Mutex            // subs (written under both) and onUpdated; never held across a call
	subs        map[string]int        // uri -> subscribers of this node (face and peer sessions)
	onUpdated   func(uri string)
}

// OnChange sets a function called (outside the lock) after every
// registration or removal.
func (r *Registry) OnChange(f func()) {
	r.mu.Lock()
	r.onChange = f
	r.mu.Unlock()
}

func (r *Registry) changed() {
	r.mu.RLock()
	f := r.onChange
	r.mu.RUnlock()
	if f != nil {
		f()
	}
}

// RegisterPromptFunc adds a prompt whose text get produces (its Template is
// ignored). Same rules and errors as [Registry.RegisterPrompt].
func (r *Registry) RegisterPromptFunc(p Prompt, get PromptFunc) error {
	return r.registerPromptFunc(p, get, nil)
}

func (r *Registry) registerPromptFunc(p Prompt, get PromptFunc, full PromptResultFunc) error {
	if get == nil {
		return &DefinitionError{What: "prompt", Name: p.Agent + "." + p.Name, Reason: "nil prompt function"}
	}
	if err := r.registerPrompt(p); err != nil {
		return err
	}
	canon, _ := Canonical(p.Agent, p.Name)
	r.mu.Lock()
	if e := r.prompts[canon]; e != nil {
		e.get, e.full = get, full
	}
	r.mu.Unlock()
	r.changed()
	return nil
}

// RegisterPromptResultFunc adds a prompt whose messages get produces;
// [Registry.GetPromptContext] joins their text. Same rules and errors as
// [Registry.RegisterPrompt].
func (r *Registry) RegisterPromptResultFunc(p Prompt, get PromptResultFunc) error {
	if get == nil {
		return &DefinitionError{What: "prompt", Name: p.Agent + "." + p.Name, Reason: "nil prompt function"}
	}
	return r.registerPromptFunc(p, func(ctx context.Context, args map[string]string) (string, error) {
		res, err := r.getFull(ctx, get, args)
		if err != nil {
			return "", err
		}
		return promptText(res), nil
	}, get)
}

func (r *Registry) getFull(ctx context.Context, get PromptResultFunc, args map[string]string) (*mcp.GetPromptResult, error) {
	res, err := get(ctx, args)
	if err == nil && res == nil {
		res = &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{}}
	}
	return res, err
}

// GetPromptResult is the messages of a prompt of any kind: a
// [PromptResultFunc]'s as it gives them, else one user message holding the
// text of [Registry.GetPromptContext].
func (r *Registry) GetPromptResult(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	e, err := r.promptFor(name, args)
	if err != nil {
		return nil, err
	}
	if e.full != nil {
		return r.getFull(ctx, e.full, args)
	}
	text, err := r.GetPromptContext(ctx, name, args)
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{Description: e.info.Description, Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
}

// lookupPrompt is the prompt named name, canonical or wire.
func (r *Registry) lookupPrompt(name string) (*promptEntry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.prompts[name]
	if !ok {
		if canon, found := r.promptWire.Canonical(name); found {
			e, ok = r.prompts[canon]
		}
	}
	return e, ok
}

// checkArgs reports the first required argument of e that args lacks.
func (e *promptEntry) checkArgs(args map[string]string) error {
	for _, a := range e.info.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			return &MissingArgumentError{Prompt: e.info.Canonical, Argument: a.Name}
		}
	}
	return nil
}

// promptFor is the prompt named name (canonical or wire) after checking
// that args holds its required arguments.
func (r *Registry) promptFor(name string, args map[string]string) (*promptEntry, error) {
	e, ok := r.lookupPrompt(name)
	if !ok {
		return nil, &PromptNotFoundError{Name: name}
	}
	if err := e.checkArgs(args); err != nil {
		return nil, err
	}
	return e, nil
}

// GetPromptContext is [Registry.GetPrompt] for prompts of either kind: a
// template is rendered, a [PromptFunc] is called under ctx.
func (r *Registry) GetPromptContext(ctx context.Context, name string, args map[string]string) (string, error) {
	e, ok := r.lookupPrompt(name)
	if !ok {
		return "", &PromptNotFoundError{Name: name}
	}
	if e.get == nil {
		return Render(e.info.Prompt, args)
	}
	if err := e.checkArgs(args); err != nil {
		return "", err
	}
	return e.get(ctx, args)
}

// UnregisterResource removes a resource by URI.
func (r *Registry) UnregisterResource(uri string) bool {
	r.mu.Lock()
	_, ok := r.resources[uri]
	delete(r.resources, uri)
	r.mu.Unlock()
	if ok {
		r.changed()
	}
	return ok
}

// UnregisterPrompt removes a prompt by canonical name.
func (r *Registry) UnregisterPrompt(canonical string) bool {
	r.mu.Lock()
	_, ok := r.prompts[canonical]
	delete(r.prompts, canonical)
	r.promptWire.Remove(canonical)
	r.mu.Unlock()
	if ok {
		r.changed()
	}
	return ok
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		tools:      map[string]*toolEntry{},
		toolWire:   NewWireNames(),
		resources:  map[string]*resourceEntry{},
		prompts:    map[string]*promptEntry{},
		promptWire: NewWireNames(),
		metrics:    &Metrics{},
		now:        time.Now,
	}
}

// Metrics returns the registry's invocation metrics, updated on every call.
func (r *Registry) Metrics() *Metrics { return r.metrics }

// SetInvocationHook installs (or, with nil, removes) the hook that receives
// a record of every tool call. See [InvocationHook]: it must not block.
func (r *Registry) SetInvocationHook(h InvocationHook) {
	r.mu.Lock()
	r.hook = h
	r.mu.Unlock()
}

var defaultInputSchema = json.RawMessage(`{"type":"object"}`)

// checkSchema accepts a JSON object whose "type" is "object", whose
// "properties", if present, is an object of objects or booleans, and whose
// "required", if present, is an array of strings. Deeper JSON Schema rules
// are left to the SDK, which reports (not panics on) them at call time.
func checkSchema(tool, field string, raw json.RawMessage) error {
	fail := func(reason string) error { return &SchemaError{Tool: tool, Field: field, Reason: reason} }
	if !json.Valid(raw) {
		return fail("not valid JSON")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fail("not a JSON object")
	}
	var typ string
	if t, ok := obj["type"]; !ok || json.Unmarshal(t, &typ) != nil || typ != "object" {
		return fail(`"type" must be "object"`)
	}
	if p, ok := obj["properties"]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(p, &props); err != nil || props == nil {
			return fail(`"properties" must be an object`)
		}
		for k, v := range props {
			v = bytes.TrimSpace(v)
			if len(v) == 0 || (v[0] != '{' && !bytes.Equal(v, []byte("true")) && !bytes.Equal(v, []byte("false"))) {
				return fail(fmt.Sprintf("property %q must be a schema object or boolean", k))
			}
		}
	}
	if q, ok := obj["required"]; ok {
		var req []string
		if err := json.Unmarshal(q, &req); err != nil {
			return fail(`"required" must be an array of strings`)
		}
	}
	return nil
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// RegisterTool validates t and adds it under its canonical name
// "agent.name". Errors: *[NameError] (INVALID_NAME), *[SchemaError]
// (INVALID_SCHEMA), *[DefinitionError] (nil handler) and
// *[DuplicateToolError] (DUPLICATE_TOOL) when the canonical name is taken;
// nothing is registered on error.
func (r *Registry) registerTool(t Tool, handler ToolHandler) error {
	canon, err := Canonical(t.Agent, t.Name)
	if err != nil {
		return err
	}
	if handler == nil {
		return &DefinitionError{What: "tool", Name: canon, Reason: "nil handler"}
	}
	if len(bytes.TrimSpace(t.InputSchema)) == 0 {
		t.InputSchema = defaultInputSchema
	} else if err := checkSchema(canon, "inputSchema", t.InputSchema); err != nil {
		return err
	}
	if len(bytes.TrimSpace(t.OutputSchema)) == 0 {
		t.OutputSchema = nil
	} else if err := checkSchema(canon, "outputSchema", t.OutputSchema); err != nil {
		return err
	}
	t.InputSchema, t.OutputSchema = cloneRaw(t.InputSchema), cloneRaw(t.OutputSchema)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[canon]; dup {
		return &DuplicateToolError{Name: canon}
	}
	wire, err := r.toolWire.Assign(t.Agent, t.Name)
	if err != nil {
		return err
	}
	r.tools[canon] = &toolEntry{info: ToolInfo{Tool: t, Canonical: canon, Wire: wire}, handler: handler}
	return nil
}

// UnregisterTool removes a tool by canonical or wire name and reports
// whether it existed.
func (r *Registry) unregisterTool(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.lookupToolLocked(name)
	if e == nil {
		return false
	}
	delete(r.tools, e.info.Canonical)
	r.toolWire.Remove(e.info.Canonical)
	return true
}

// RemoveAgent removes every tool, resource and prompt of agent (for a
// backend that went away) and returns how many entries were removed.
func (r *Registry) removeAgent(agent string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, e := range r.tools {
		if e.info.Agent == agent {
			delete(r.tools, k)
			r.toolWire.Remove(k)
			n++
		}
	}
	for k, e := range r.resources {
		if e.res.Agent == agent {
			delete(r.resources, k)
			n++
		}
	}
	for k, e := range r.prompts {
		if e.info.Agent == agent {
			delete(r.prompts, k)
			r.promptWire.Remove(k)
			n++
		}
	}
	return n
}

func (r *Registry) lookupToolLocked(name string) *toolEntry {
	if e, ok := r.tools[name]; ok {
		return e
	}
	if canon, ok := r.toolWire.Canonical(name); ok {
		return r.tools[canon]
	}
	return nil
}

// Lookup returns the tool with the given canonical or wire name.
func (r *Registry) Lookup(name string) (ToolInfo, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e := r.lookupToolLocked(name)
	if e == nil {
		return ToolInfo{}, false
	}
	return cloneToolInfo(e.info), true
}

func cloneToolInfo(ti ToolInfo) ToolInfo {
	ti.InputSchema, ti.OutputSchema = cloneRaw(ti.InputSchema), cloneRaw(ti.OutputSchema)
	return ti
}

// ListTools returns every tool of every agent (requirement 5.2), sorted by
// canonical name.
func (r *Registry) ListTools() []ToolInfo {
	r.mu.RLock()
	out := make([]ToolInfo, 0, len(r.tools))
	for _, e := range r.tools {
		out = append(out, cloneToolInfo(e.info))
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Canonical < out[j].Canonical })
	return out
}

// CallTool routes a call to the handler of the tool's source agent
// (requirement 5.3) and returns its result. name is canonical or wire;
// empty args mean {}. It returns an error only when no call was made:
// *[ToolNotFoundError] (TOOL_NOT_FOUND) or *[ArgumentsError]
// (INVALID_ARGUMENTS, args not a JSON object). A handler error or panic
// becomes a Result with IsError and a [ToolError] naming the source agent
// and the code (the error's Code() when it has one, else
// TOOL_EXECUTION_FAILED); a handler's own isError result gets a ToolError
// too. Calls are never retried. Every call made is recorded in the metrics
// and passed to the hook.
func (r *Registry) CallTool(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	r.mu.RLock()
	e := r.lookupToolLocked(name)
	hook := r.hook
	r.mu.RUnlock()
	if e == nil {
		return Result{}, &ToolNotFoundError{Name: name}
	}
	info := e.info
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
		args = json.RawMessage(`{}`) // no arguments
	} else {
		if !json.Valid(args) {
			return Result{}, &ArgumentsError{Tool: info.Canonical, Reason: "not valid JSON"}
		}
		if t[0] != '{' { // valid JSON: an object is what starts with '{'
			return Result{}, &ArgumentsError{Tool: info.Canonical, Reason: "not a JSON object"}
		}
		args = cloneRaw(args)
	}
	start := r.now()
	res, err := runHandler(ctx, e.handler, args)
	dur := r.now().Sub(start) // the same clock as the record's start
	if err != nil || res.IsError {
		code, msg := CodeToolFailed, "tool reported an error"
		if err != nil {
			msg = err.Error()
			var c interface{ Code() string }
			if errors.As(err, &c) && c.Code() != "" {
				code = c.Code()
			}
		} else if res.Error != nil {
			if res.Error.ErrCode != "" {
				code = res.Error.ErrCode
			}
			if res.Error.Message != "" {
				msg = res.Error.Message
			}
		}
		if err != nil {
			res = Result{}
		}
		res.IsError = true
		res.Error = &ToolError{ErrCode: code, Message: msg, Agent: info.Agent, Tool: info.Canonical}
	}
	rec := InvocationRecord{
		Tool:       info.Canonical,
		Agent:      info.Agent,
		Arguments:  args,
		Result:     res.Content, // shared, not copied: see InvocationRecord
		DurationMs: float64(dur) / float64(time.Millisecond),
		Success:    !res.IsError,
		Time:       start.UnixMilli(),
	}
	if res.IsError {
		rec.Error = res.Error.ErrCode + ": " + res.Error.Message
	}
	r.metrics.Record(rec)
	if hook != nil {
		hook(rec)
	}
	return res, nil
}

func runHandler(ctx context.Context, h ToolHandler, args json.RawMessage) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, args)
}

// RegisterResource adds a resource keyed by its URI. Errors: *[NameError]
// for a bad agent, *[DefinitionError] for an empty URI or name, a bad MIME
// type or a nil loader, *[DuplicateResourceError] for a URI in use.
func (r *Registry) registerResource(res Resource, loader ResourceLoader) error {
	if err := checkAgent(res.Agent); err != nil {
		return err
	}
	if err := checkResource(res); err != nil {
		return err
	}
	if loader == nil {
		return &DefinitionError{What: "resource", Name: res.URI, Reason: "nil loader"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.resources[res.URI]; dup {
		return &DuplicateResourceError{URI: res.URI}
	}
	r.resources[res.URI] = &resourceEntry{res: res, loader: loader}
	return nil
}

// ListResources returns every resource, sorted by URI.
func (r *Registry) ListResources() []Resource {
	r.mu.RLock()
	out := make([]Resource, 0, len(r.resources))
	for _, e := range r.resources {
		out = append(out, e.res)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].URI < out[j].URI })
	return out
}

// ReadResource runs the loader of the resource with this exact URI and
// returns its content with the registered MIME type (requirement 6.2).
// Errors: *[ResourceNotFoundError] naming the URI (RESOURCE_NOT_FOUND,
// requirement 6.3), *[ResourceReadError] when the loader fails or panics.
func (r *Registry) ReadResource(ctx context.Context, uri string) (ResourceContent, error) {
	r.mu.RLock()
	e, ok := r.resources[uri]
	r.mu.RUnlock()
	if !ok {
		return ResourceContent{}, &ResourceNotFoundError{URI: uri}
	}
	data, err := runLoader(ctx, e.loader)
	if err != nil {
		return ResourceContent{}, &ResourceReadError{URI: uri, Agent: e.res.Agent, Err: err}
	}
	return ResourceContent{URI: uri, MIMEType: e.res.MIMEType, Data: data}, nil
}

func runLoader(ctx context.Context, l ResourceLoader) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			data, err = nil, fmt.Errorf("loader panicked: %v", p)
		}
	}()
	return l(ctx)
}

// RegisterPrompt adds a prompt under its canonical name "agent.name".
// Argument names must match ^[A-Za-z_][A-Za-z0-9_]*$ and be distinct.
// Errors: *[NameError], *[DefinitionError], *[DuplicatePromptError].
func (r *Registry) registerPrompt(p Prompt) error {
	canon, err := Canonical(p.Agent, p.Name)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, a := range p.Arguments {
		if !argRe.MatchString(a.Name) {
			return &NameError{Kind: "argument", Name: a.Name, Reason: "must match ^[A-Za-z_][A-Za-z0-9_]*$"}
		}
		if seen[a.Name] {
			return &DefinitionError{What: "prompt", Name: canon, Reason: fmt.Sprintf("argument %q declared twice", a.Name)}
		}
		seen[a.Name] = true
	}
	p.Arguments = append([]PromptArg(nil), p.Arguments...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.prompts[canon]; dup {
		return &DuplicatePromptError{Name: canon}
	}
	wire, err := r.promptWire.Assign(p.Agent, p.Name)
	if err != nil {
		return err
	}
	r.prompts[canon] = &promptEntry{info: PromptInfo{Prompt: p, Canonical: canon, Wire: wire}}
	return nil
}

// ListPrompts returns every prompt, sorted by canonical name.
func (r *Registry) ListPrompts() []PromptInfo {
	r.mu.RLock()
	out := make([]PromptInfo, 0, len(r.prompts))
	for _, e := range r.prompts {
		pi := e.info
		pi.Arguments = append([]PromptArg(nil), pi.Arguments...)
		out = append(out, pi)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Canonical < out[j].Canonical })
	return out
}

// GetPrompt renders the prompt with the given canonical or wire name
// (requirement 6.5); see [Render] for the rules. Errors:
// *[PromptNotFoundError], *[MissingArgumentError].
func (r *Registry) GetPrompt(name string, args map[string]string) (string, error) {
	e, ok := r.lookupPrompt(name)
	if !ok {
		return "", &PromptNotFoundError{Name: name}
	}
	return Render(e.info.Prompt, args)
}

// RegisterTool: see registerTool; it also calls the OnChange function.
func (r *Registry) RegisterTool(t Tool, handler ToolHandler) error {
	err := r.registerTool(t, handler)
	if err == nil {
		r.changed()
	}
	return err
}

// UnregisterTool: see unregisterTool; it also calls the OnChange function.
func (r *Registry) UnregisterTool(name string) bool {
	ok := r.unregisterTool(name)
	if ok {
		r.changed()
	}
	return ok
}

// RemoveAgent: see removeAgent; it also calls the OnChange function.
func (r *Registry) RemoveAgent(agent string) int {
	n := r.removeAgent(agent)
	if n > 0 {
		r.changed()
	}
	return n
}

// RegisterResource: see registerResource; it also calls the OnChange function.
func (r *Registry) RegisterResource(res Resource, loader ResourceLoader) error {
	err := r.registerResource(res, loader)
	if err == nil {
		r.changed()
	}
	return err
}

// RegisterPrompt: see registerPrompt; it also calls the OnChange function.
func (r *Registry) RegisterPrompt(p Prompt) error {
	err := r.registerPrompt(p)
	if err == nil {
		r.changed()
	}
	return err
}

// record counts an invocation made elsewhere (a remote tool called through
// this node) in the metrics and passes it to the hook.
func (r *Registry) record(rec InvocationRecord) {
	r.mu.RLock()
	hook := r.hook
	r.mu.RUnlock()
	r.metrics.Record(rec)
	if hook != nil {
		hook(rec)
	}
}
