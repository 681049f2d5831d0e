package mcpbridge

import (
	"context"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Completer completes an argument of a prompt or resource template for
// completion/complete. params.Ref names the item as its server knows it.
type Completer func(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error)

// completerKey is the registry's key of an item's completer: the
// reference type and the canonical prompt name or the URI template.
func completerKey(refType, name string) string { return refType + " " + name }

// SetCompleter sets (nil: removes) the completer of the prompt with
// canonical name, for refType "ref/prompt", or of the resource template
// name, for "ref/resource".
func (r *Registry) SetCompleter(refType, name string, c Completer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c == nil {
		delete(r.completers, completerKey(refType, name))
		return
	}
	if r.completers == nil {
		r.completers = map[string]Completer{}
	}
	r.completers[completerKey(refType, name)] = c
}

// Complete completes an argument of a local prompt (canonical name) or
// resource template: through its server's completer, or with no values
// when its server offers none. An unknown item is PROMPT_NOT_FOUND or
// RESOURCE_NOT_FOUND.
func (r *Registry) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	ref := params.Ref
	r.mu.RLock()
	var known bool
	key := ""
	switch ref.Type {
	case "ref/prompt":
		_, known = r.prompts[ref.Name]
		key = completerKey(ref.Type, ref.Name)
	case "ref/resource":
		_, known = r.templates[ref.URI]
		key = completerKey(ref.Type, ref.URI)
	}
	c := r.completers[key]
	r.mu.RUnlock()
	switch {
	case !known && ref.Type == "ref/prompt":
		return nil, &PromptNotFoundError{Name: ref.Name}
	case !known:
		return nil, &ResourceNotFoundError{URI: ref.URI}
	case c == nil:
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
	return c(ctx, params)
}

// refAgent is the agent of a completion reference on this node's registry
// ("" when unknown).
func (r *Registry) refAgent(ref *mcp.CompleteReference) string {
	switch ref.Type {
	case "ref/prompt":
		a, _, _ := SplitCanonical(ref.Name)
		return a
	case "ref/resource":
		r.mu.RLock()
		defer r.mu.RUnlock()
		if e := r.templates[ref.URI]; e != nil {
			return e.t.Agent
		}
	}
	return ""
}

// completeFace answers completion/complete on the aggregated face: the
// reference (a prompt by wire or canonical name, a resource template) is
// resolved on the face, then completed on the node hosting it as the
// face's agent.
func (b *Bridge) completeFace(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	if p == nil || p.Ref == nil {
		return nil, RPCError(&DefinitionError{What: "completion", Name: "", Reason: "no ref"})
	}
	b.ensureFresh(ctx)
	var e Entry
	switch p.Ref.Type {
	case "ref/prompt":
		wire, err := b.facePrompt(ctx, p.Ref.Name)
		if err != nil {
			return nil, RPCError(err)
		}
		b.mu.Lock()
		e = b.face.prompts[wire]
		b.mu.Unlock()
	case "ref/resource":
		b.mu.Lock()
		x, ok := b.face.templates[p.Ref.URI]
		b.mu.Unlock()
		if !ok {
			return nil, resourceNotFound(p.Ref.URI)
		}
		e = x
	default:
		return nil, RPCError(&DefinitionError{What: "completion", Name: p.Ref.Type, Reason: `ref type must be "ref/prompt" or "ref/resource"`})
	}
	q := *p
	ref := *p.Ref
	q.Ref = &ref
	if ref.Type == "ref/prompt" {
		ref.Name = e.remote
	} else {
		ref.URI = e.remote
	}
	as := b.cfg.As()
	if e.Local {
		agent := strings.SplitN(e.Agent, "@", 2)[0]
		if err := b.authorize(b.self, as, agent); err != nil {
			return nil, RPCError(err)
		}
		res, err := b.reg.Complete(ctx, &q)
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
	q.Meta = mcp.Meta{MetaCaller: as}
	return pc.cs.Complete(ctx, &q)
}

// completePeer answers completion/complete from peer p, for the caller in
// its _meta.
func (b *Bridge) completePeer(p peer.ID) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		if req.Params == nil || req.Params.Ref == nil {
			return nil, RPCError(&DefinitionError{What: "completion", Reason: "no ref"})
		}
		agent := b.reg.refAgent(req.Params.Ref)
		if agent == "" {
			if req.Params.Ref.Type == "ref/prompt" {
				return nil, RPCError(&PromptNotFoundError{Name: req.Params.Ref.Name})
			}
			return nil, resourceNotFound(req.Params.Ref.URI)
		}
		if err := b.authorize(p, metaCaller(req), agent); err != nil {
			return nil, RPCError(err)
		}
		q := *req.Params
		q.Meta = nil
		res, err := b.reg.Complete(ctx, &q)
		if err != nil {
			return nil, RPCError(err)
		}
		return res, nil
	}
}
