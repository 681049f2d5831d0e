package mcpbridge

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// ResourceTemplate is a parameterised resource (RFC 6570 URI template) that
// an agent's MCP server offers: any URI it matches is read through the
// server.
type ResourceTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	Agent       string `json:"agent"`
}

// TemplateLoader reads one URI that a template matched.
type TemplateLoader func(ctx context.Context, uri string) (ResourceContent, error)

type templateEntry struct {
	t    ResourceTemplate
	load TemplateLoader
}

// RegisterTemplate adds a resource template keyed by its URI template.
// Errors: *[NameError] for a bad agent, *[DefinitionError] for an empty
// template or name, or a nil loader, *[DuplicateResourceError] for a
// template in use.
func (r *Registry) RegisterTemplate(t ResourceTemplate, load TemplateLoader) error {
	if err := checkAgent(t.Agent); err != nil {
		return err
	}
	switch {
	case t.URITemplate == "" || !strings.Contains(t.URITemplate, ":"):
		return &DefinitionError{What: "resource template", Name: t.URITemplate, Reason: "no scheme"}
	case t.Name == "":
		return &DefinitionError{What: "resource template", Name: t.URITemplate, Reason: "empty name"}
	case load == nil:
		return &DefinitionError{What: "resource template", Name: t.URITemplate, Reason: "nil loader"}
	}
	r.mu.Lock()
	if _, dup := r.templates[t.URITemplate]; dup {
		r.mu.Unlock()
		return &DuplicateResourceError{URI: t.URITemplate}
	}
	if r.templates == nil {
		r.templates = map[string]*templateEntry{}
	}
	r.templates[t.URITemplate] = &templateEntry{t: t, load: load}
	r.mu.Unlock()
	r.changed()
	return nil
}

// UnregisterTemplate removes a resource template.
func (r *Registry) UnregisterTemplate(uriTemplate string) bool {
	r.mu.Lock()
	_, ok := r.templates[uriTemplate]
	delete(r.templates, uriTemplate)
	r.mu.Unlock()
	if ok {
		r.changed()
	}
	return ok
}

// ListTemplates returns every resource template, sorted.
func (r *Registry) ListTemplates() []ResourceTemplate {
	r.mu.RLock()
	out := make([]ResourceTemplate, 0, len(r.templates))
	for _, e := range r.templates {
		out = append(out, e.t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].URITemplate < out[j].URITemplate })
	return out
}

// ReadTemplate reads uri, which the template uriTemplate matched. Errors:
// *[ResourceNotFoundError] for an unknown template, *[ResourceReadError]
// when the loader fails or panics.
func (r *Registry) ReadTemplate(ctx context.Context, uriTemplate, uri string) (rc ResourceContent, err error) {
	r.mu.RLock()
	e, ok := r.templates[uriTemplate]
	r.mu.RUnlock()
	if !ok {
		return ResourceContent{}, &ResourceNotFoundError{URI: uri}
	}
	defer func() {
		if p := recover(); p != nil {
			rc, err = ResourceContent{}, &ResourceReadError{URI: uri, Agent: e.t.Agent, Err: fmt.Errorf("loader panicked: %v", p)}
		}
	}()
	rc, err = e.load(ctx, uri)
	if err != nil {
		return ResourceContent{}, &ResourceReadError{URI: uri, Agent: e.t.Agent, Err: err}
	}
	if rc.MIMEType == "" {
		rc.MIMEType = e.t.MIMEType
	}
	rc.URI = uri
	return rc, nil
}
