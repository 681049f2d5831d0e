package a2ahttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nova-node/nova-node/internal/localhttp"
)

// Who may do what. Both bindings (JSON-RPC and REST) and both wire
// versions authenticate with authenticate, before reading a body, and
// authorize with permit once the method and the agent are known.

// caller is who sent a request.
type caller struct {
	all           bool     // a static token, or no auth configured: every method on every agent
	authenticated bool     // a valid credential was presented
	subject       string   // a JWT's sub
	scopes        []string // a JWT's scopes
}

type callerKey struct{}

func withCaller(ctx context.Context, c *caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerFrom(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// authError is a refused credential: 401, or 503 when the issuer's keys
// cannot be fetched.
type authError struct {
	presented bool
	err       error // errJWT or errJWKS, wrapped with the reason; nil for a static token
}

func (e *authError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	if e.presented {
		return "the bearer token is not valid here"
	}
	return "a bearer token is required"
}

// authOn reports whether any credential is configured.
func (g *Gateway) authOn() bool { return g.tokens.Len() > 0 || g.jwt != nil }

// authenticate checks r's bearer token (once per request: the result is
// kept in the context). A static token opens everything; a JWT opens what
// its scopes map to. With no credential configured every request passes.
func (g *Gateway) authenticate(r *http.Request) (*caller, error) {
	if c := callerFrom(r.Context()); c != nil {
		return c, nil
	}
	if !g.authOn() {
		return &caller{all: true}, nil
	}
	ok, presented := g.tokens.Check(r)
	if ok {
		return &caller{all: true, authenticated: true}, nil
	}
	if g.jwt != nil {
		scheme, tok, found := strings.Cut(r.Header.Get("Authorization"), " ")
		tok = strings.TrimSpace(tok)
		if found && strings.EqualFold(scheme, "Bearer") && looksLikeJWT(tok) {
			sub, scopes, err := g.jwt.verify(r.Context(), tok)
			if err != nil {
				return nil, &authError{presented: true, err: err}
			}
			return &caller{authenticated: true, subject: sub, scopes: scopes}, nil
		}
	}
	return nil, &authError{presented: presented}
}

// writeAuthError answers a refused credential: 401 with an RFC 6750
// challenge (and the reason, for a JWT), or 503 when the issuer's keys are
// unavailable.
func (g *Gateway) writeAuthError(w http.ResponseWriter, err error) {
	var ae *authError
	if !errors.As(err, &ae) {
		ae = &authError{presented: true, err: err}
	}
	if errors.Is(ae.err, errJWKS) {
		log.Warnw("cannot check a JWT", "err", ae.err)
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, "cannot check the token now: "+ae.err.Error())
		return
	}
	if ae.err == nil {
		localhttp.Unauthorized(w, ae.presented, g.cfg.AuthHint)
		return
	}
	// localhttp's answer, with the reason the token was refused.
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="nova-node", error="invalid_token", error_description=%q`, ae.err.Error()))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	body := map[string]string{"error": ae.err.Error(), "code": localhttp.CodeUnauthorized}
	if g.cfg.AuthHint != "" {
		body["hint"] = g.cfg.AuthHint
	}
	_ = json.NewEncoder(w).Encode(body)
}

// requireAuth is the gate of a local gateway (AuthAll): every request
// needs a credential, CORS preflights of the cards excepted.
func (g *Gateway) requireAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && isCardPath(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		c, err := g.authenticate(r)
		if err != nil {
			g.writeAuthError(w, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(withCaller(r.Context(), c)))
	})
}

// permissionError is a valid credential that does not open a method on an
// agent (403 insufficient_scope).
type permissionError struct {
	method, agent string
	scopes        []string // the configured scopes that would
}

func (e *permissionError) Error() string {
	target := "agent " + e.agent
	if e.agent == "" {
		target = "the node endpoint (it needs a scope for every agent, \"*\")"
	}
	if len(e.scopes) == 0 {
		return fmt.Sprintf("the token's scopes do not allow %s on %s, and no configured scope does", e.method, target)
	}
	return fmt.Sprintf("the token's scopes do not allow %s on %s; a token with scope %s does", e.method, target, strings.Join(e.scopes, " or "))
}

// permit checks that c may call method (an A2A v1.0 method name) on the
// agent named name (id and canonical address addr; all "" at the node
// endpoint).
func (g *Gateway) permit(c *caller, method, id, addr string) error {
	if c == nil || c.all {
		return nil
	}
	if g.jwt != nil && g.jwt.cfg.permits(c.scopes, method, id, addr) {
		return nil
	}
	var scopes []string
	if g.jwt != nil {
		scopes = g.jwt.cfg.scopesFor(method, id, addr)
	}
	return &permissionError{method: method, agent: firstNonEmpty(addr, id), scopes: scopes}
}

// writeForbidden answers a permissionError: 403 with an RFC 6750
// insufficient_scope challenge and, in body, the binding's error form.
func writeForbidden(w http.ResponseWriter, pe *permissionError, body []byte) {
	v := `Bearer realm="nova-node", error="insufficient_scope"`
	if len(pe.scopes) > 0 {
		v += fmt.Sprintf(`, scope=%q`, strings.Join(pe.scopes, " "))
	}
	w.Header().Set("WWW-Authenticate", v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(append(body, '\n'))
}

// forbiddenRPC is the 403 body on the JSON-RPC binding: the shape of the
// 401's ({"error", "code", "hint"}).
func forbiddenRPC(w http.ResponseWriter, pe *permissionError) {
	body, _ := json.Marshal(map[string]string{
		"error": pe.Error(), "code": "FORBIDDEN",
		"hint": "ask the token's issuer for a token with the scope named, or use an agent the token's scopes open",
	})
	writeForbidden(w, pe, body)
}

// permitRPC checks the scopes of a JSON-RPC request for method (a v1.0
// name) on the route's agent; on refusal it answers 403 and reports false.
func (g *Gateway) permitRPC(w http.ResponseWriter, r *http.Request, method string) bool {
	rt := routeFrom(r.Context())
	if rt == nil {
		return true
	}
	err := g.permit(callerFrom(r.Context()), method, rt.agentID, rt.agent)
	var pe *permissionError
	if errors.As(err, &pe) {
		forbiddenRPC(w, pe)
		return false
	}
	return true
}
