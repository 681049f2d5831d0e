package a2ahttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWTConfig makes the gateway accept OAuth 2.0 access tokens in JWT form
// (RFC 9068) from one issuer, besides the static tokens: the signature is
// checked against the issuer's published keys (JWKS), then iss, aud, exp
// and nbf, and the token's scopes decide which agents and methods it
// opens (Scopes). The JSON names are the node's config.yaml keys.
type JWTConfig struct {
	// Issuer is the "iss" every token must carry, exactly
	// ("https://auth.example"). Required.
	Issuer string `yaml:"issuer" json:"issuer"`
	// Audience must be one of the token's "aud" values: the name the
	// issuer gives this gateway ("nova-gateway"). Required.
	Audience string `yaml:"audience" json:"audience"`
	// JWKSURL is where the issuer publishes its signing keys
	// ("https://auth.example/.well-known/jwks.json"): https, or http to a
	// loopback address. Required.
	JWKSURL string `yaml:"jwksUrl" json:"jwksUrl"`
	// TokenURL is the issuer's token endpoint. When set, the cards declare
	// an OAuth 2.0 client-credentials flow there, with the scopes of
	// Scopes; otherwise a bearer scheme of format JWT.
	TokenURL string `yaml:"tokenUrl,omitempty" json:"tokenUrl,omitempty"`
	// Scopes map a token's scopes (its "scope" claim, space-separated, or
	// "scp" array) to what they open. A valid token none of whose scopes
	// is listed opens nothing (403).
	Scopes []ScopeRule `yaml:"scopes" json:"scopes"`
	// Leeway is the clock skew tolerated on exp and nbf (default 1 min).
	Leeway time.Duration `yaml:"leeway,omitempty" json:"leeway,omitempty"`
	// JWKSRefresh is how long fetched keys are used before they are
	// fetched again (default 10 min). A token signed with a key id not in
	// the cache makes one early fetch, at most once per JWKSMinRefetch
	// (default 30 s).
	JWKSRefresh    time.Duration `yaml:"jwksRefresh,omitempty" json:"jwksRefresh,omitempty"`
	JWKSMinRefetch time.Duration `yaml:"jwksMinRefetch,omitempty" json:"jwksMinRefetch,omitempty"`
	// JWKSTimeout bounds one fetch of the keys (default 10 s);
	// JWKSMaxBytes caps the document (default 1 MiB).
	JWKSTimeout  time.Duration `yaml:"jwksTimeout,omitempty" json:"jwksTimeout,omitempty"`
	JWKSMaxBytes int64         `yaml:"jwksMaxBytes,omitempty" json:"jwksMaxBytes,omitempty"`
}

// ScopeRule is what one OAuth scope opens: the methods listed, on the
// agents listed.
type ScopeRule struct {
	// Scope is the scope's name as the issuer writes it ("a2a:research").
	Scope string `yaml:"scope" json:"scope"`
	// Agents are mesh agent names or canonical addresses (name@peer);
	// "*" is every agent, and the node endpoint /a2a/ (which reaches any
	// agent) needs "*".
	Agents []string `yaml:"agents" json:"agents"`
	// Methods are A2A v1.0 method names (SendMessage,
	// SendStreamingMessage, GetTask, ListTasks, CancelTask,
	// SubscribeToTask, CreateTaskPushNotificationConfig,
	// GetTaskPushNotificationConfig, ListTaskPushNotificationConfigs,
	// DeleteTaskPushNotificationConfig, GetExtendedAgentCard); "*" is
	// all. v0.3 methods and REST routes count as their v1.0 names.
	Methods []string `yaml:"methods" json:"methods"`
}

// v1Methods are the A2A v1.0 method names: the operations a scope opens.
var v1Methods = []string{
	"SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
	"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
	"ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard",
}

func (c *JWTConfig) withDefaults() {
	if c.Leeway == 0 {
		c.Leeway = time.Minute
	}
	if c.JWKSRefresh == 0 {
		c.JWKSRefresh = 10 * time.Minute
	}
	if c.JWKSMinRefetch == 0 {
		c.JWKSMinRefetch = 30 * time.Second
	}
	if c.JWKSTimeout == 0 {
		c.JWKSTimeout = 10 * time.Second
	}
	if c.JWKSMaxBytes == 0 {
		c.JWKSMaxBytes = 1 << 20
	}
}

// validate reports the problems of c, each naming its field under prefix.
func (c *JWTConfig) validate(bad func(field, format string, args ...any)) {
	if c.Issuer == "" {
		bad("JWT.Issuer", "is required (the tokens' iss)")
	}
	if c.Audience == "" {
		bad("JWT.Audience", "is required (the name the issuer gives this gateway, in the tokens' aud)")
	}
	if err := checkJWKSURL(c.JWKSURL); err != nil {
		bad("JWT.JWKSURL", "%v", err)
	}
	if c.TokenURL != "" {
		if u, err := url.Parse(c.TokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("JWT.TokenURL", "must be an http(s) URL (got %q)", c.TokenURL)
		}
	}
	if len(c.Scopes) == 0 {
		bad("JWT.Scopes", "is empty: no token could do anything; map at least one scope to agents and methods")
	}
	for i, s := range c.Scopes {
		f := fmt.Sprintf("JWT.Scopes[%d]", i)
		if s.Scope == "" || strings.ContainsAny(s.Scope, " \t\"\\") {
			bad(f+".Scope", "must be one scope name without spaces or quotes (got %q)", s.Scope)
		}
		if len(s.Agents) == 0 {
			bad(f+".Agents", "is empty: list agent names or \"*\"")
		}
		if len(s.Methods) == 0 {
			bad(f+".Methods", "is empty: list A2A v1.0 method names or \"*\"")
		}
		for _, m := range s.Methods {
			if m != "*" && !slices.Contains(v1Methods, m) {
				bad(f+".Methods", "%q is not an A2A v1.0 method; one of %s or \"*\"", m, strings.Join(v1Methods, ", "))
			}
		}
	}
	for _, d := range []struct {
		name string
		v    int64
	}{{"JWT.Leeway", int64(c.Leeway)}, {"JWT.JWKSRefresh", int64(c.JWKSRefresh)}, {"JWT.JWKSMinRefetch", int64(c.JWKSMinRefetch)},
		{"JWT.JWKSTimeout", int64(c.JWKSTimeout)}, {"JWT.JWKSMaxBytes", c.JWKSMaxBytes}} {
		if d.v < 0 {
			bad(d.name, "must not be negative")
		}
	}
}

// checkJWKSURL accepts https URLs, and http ones to a loopback address (an
// issuer on the same machine, or a test).
func checkJWKSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("must be the URL of the issuer's JWKS (got %q)", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("must be https (http only to a loopback address): %q", s)
}

// jwtAlgs are the signature algorithms accepted: asymmetric only, so that
// the published keys cannot sign.
var jwtAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// errJWT is the class of token refusals (401 invalid_token); the wrapped
// text says which check failed.
var errJWT = errors.New("invalid token")

// jwtVerifier validates access tokens against one issuer. Keys are
// fetched on first use and cached; mu guards them and serializes fetches,
// so concurrent requests with an unknown key id cause one fetch.
type jwtVerifier struct {
	cfg    JWTConfig
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	keys    *jose.JSONWebKeySet
	fetched time.Time // of keys
	tried   time.Time // last fetch attempt
}

func newJWTVerifier(cfg JWTConfig, now func() time.Time) *jwtVerifier {
	cfg.withDefaults()
	return &jwtVerifier{
		cfg: cfg,
		now: now,
		client: &http.Client{
			Timeout: cfg.JWKSTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("the JWKS URL redirects; configure the final URL")
			},
		},
	}
}

// jwtClaims are the claims the gateway reads.
type jwtClaims struct {
	jwt.Claims
	Scope string   `json:"scope"`
	Scp   []string `json:"scp"`
}

// looksLikeJWT reports whether tok has the compact JWS form (three
// base64url parts).
func looksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2 && len(tok) < 16<<10
}

// verify checks tok and returns its subject and scopes.
func (v *jwtVerifier) verify(ctx context.Context, tok string) (sub string, scopes []string, err error) {
	t, err := jwt.ParseSigned(tok, jwtAlgs)
	if err != nil {
		return "", nil, fmt.Errorf("%w: not a signed JWT with an accepted algorithm (%v)", errJWT, err)
	}
	if len(t.Headers) != 1 {
		return "", nil, fmt.Errorf("%w: want one signature", errJWT)
	}
	kid := t.Headers[0].KeyID
	keys, err := v.keySet(ctx, kid)
	if err != nil {
		return "", nil, err
	}
	var c jwtClaims
	if err := t.Claims(*keys, &c); err != nil {
		return "", nil, fmt.Errorf("%w: signature does not verify with the issuer's keys", errJWT)
	}
	if c.Expiry == nil {
		return "", nil, fmt.Errorf("%w: no exp claim", errJWT)
	}
	err = c.Claims.ValidateWithLeeway(jwt.Expected{
		Issuer:      v.cfg.Issuer,
		AnyAudience: jwt.Audience{v.cfg.Audience},
		Time:        v.now(),
	}, v.cfg.Leeway)
	switch {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return "", nil, fmt.Errorf("%w: issuer %q is not %q", errJWT, c.Issuer, v.cfg.Issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return "", nil, fmt.Errorf("%w: audience %v does not include %q", errJWT, []string(c.Audience), v.cfg.Audience)
	case errors.Is(err, jwt.ErrExpired):
		return "", nil, fmt.Errorf("%w: expired at %s", errJWT, c.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return "", nil, fmt.Errorf("%w: not valid before %s", errJWT, c.NotBefore.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return "", nil, fmt.Errorf("%w: issued in the future", errJWT)
	case err != nil:
		return "", nil, fmt.Errorf("%w: %v", errJWT, err)
	}
	scopes = strings.Fields(c.Scope)
	scopes = append(scopes, c.Scp...)
	return c.Subject, scopes, nil
}

// keySet returns the cached keys, fetching them when they are missing or
// stale, or (at most once per JWKSMinRefetch) when none has key id kid.
func (v *jwtVerifier) keySet(ctx context.Context, kid string) (*jose.JSONWebKeySet, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	stale := v.keys == nil || now.Sub(v.fetched) >= v.cfg.JWKSRefresh
	unknown := v.keys != nil && kid != "" && len(v.keys.Key(kid)) == 0
	// Without keys, a failed fetch is retried after a second; with keys,
	// refetches are spaced by JWKSMinRefetch, so that tokens with made-up
	// key ids cannot make the gateway hammer the issuer.
	wait := v.cfg.JWKSMinRefetch
	if v.keys == nil {
		wait = time.Second
	}
	if (stale || unknown) && (v.tried.IsZero() || now.Sub(v.tried) >= wait) {
		v.tried = now
		keys, err := v.fetch(ctx)
		switch {
		case err == nil:
			v.keys, v.fetched = keys, now
		case v.keys == nil:
			return nil, err
		default:
			log.Warnw("JWKS refresh failed; keeping the keys fetched before", "url", v.cfg.JWKSURL, "err", err)
		}
	}
	if v.keys == nil {
		return nil, fmt.Errorf("%w: the issuer's keys are not available yet (%s)", errJWKS, v.cfg.JWKSURL)
	}
	if kid != "" && len(v.keys.Key(kid)) == 0 {
		return nil, fmt.Errorf("%w: key id %q is not among the issuer's keys", errJWT, kid)
	}
	return v.keys, nil
}

// errJWKS is the class of failures to get the issuer's keys: the token
// cannot be checked (503).
var errJWKS = errors.New("issuer keys unavailable")

func (v *jwtVerifier) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(ctx, v.cfg.JWKSTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errJWKS, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: fetch %s: %v", errJWKS, v.cfg.JWKSURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: fetch %s: HTTP %d", errJWKS, v.cfg.JWKSURL, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, v.cfg.JWKSMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", errJWKS, v.cfg.JWKSURL, err)
	}
	if int64(len(body)) > v.cfg.JWKSMaxBytes {
		return nil, fmt.Errorf("%w: %s is over %d bytes", errJWKS, v.cfg.JWKSURL, v.cfg.JWKSMaxBytes)
	}
	return parseJWKS(body)
}

// parseJWKS reads a JWKS document, keeping the public signing keys.
func parseJWKS(body []byte) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%w: not a JWKS document: %v", errJWKS, err)
	}
	out := &jose.JSONWebKeySet{}
	for _, k := range set.Keys {
		if !k.Valid() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		out.Keys = append(out.Keys, k.Public())
	}
	if len(out.Keys) == 0 {
		return nil, fmt.Errorf("%w: the JWKS has no public signing key", errJWKS)
	}
	return out, nil
}

// permits reports whether scopes open method on the agent whose name and
// canonical address are given ("" and "" for the node endpoint).
func (c *JWTConfig) permits(scopes []string, method, name, addr string) bool {
	for _, r := range c.Scopes {
		if !slices.Contains(scopes, r.Scope) {
			continue
		}
		if !slices.Contains(r.Methods, "*") && !slices.Contains(r.Methods, method) {
			continue
		}
		for _, a := range r.Agents {
			if a == "*" || (a != "" && (a == name || a == addr)) {
				return true
			}
		}
	}
	return false
}

// scopesFor lists the configured scopes that open method on some agent,
// for the insufficient_scope challenge.
func (c *JWTConfig) scopesFor(method, name, addr string) []string {
	var out []string
	for _, r := range c.Scopes {
		if c.permits([]string{r.Scope}, method, name, addr) && !slices.Contains(out, r.Scope) {
			out = append(out, r.Scope)
		}
	}
	return out
}
