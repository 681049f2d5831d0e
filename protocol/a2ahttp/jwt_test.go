package a2ahttp_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/protocol/a2ahttp/a2ahttptest"
)

const (
	issuerName = "https://auth.test"
	audience   = "nova-gateway"
)

// issuer wraps a2ahttptest.Issuer for a test.
type issuer struct{ *a2ahttptest.Issuer }

func newIssuer(t *testing.T) issuer {
	t.Helper()
	is, err := a2ahttptest.NewIssuer(issuerName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(is.Close)
	return issuer{is}
}

// claims are a token's claims (a2ahttptest.Claims); the audience defaults
// to the gateway's.
type claims = a2ahttptest.Claims

func (is issuer) token(t *testing.T, c claims) string {
	t.Helper()
	if c.Audience == nil {
		c.Audience = []string{audience}
	}
	tok, err := is.Token(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func jwtEnv(t *testing.T, is issuer, mod func(*a2ahttp.JWTConfig)) *env {
	return newEnv(t, func(c *a2ahttp.Config) {
		c.RequireAuth = true
		c.TokenHashes = []string{a2ahttp.HashToken("static")}
		c.JWT = &a2ahttp.JWTConfig{
			Issuer: issuerName, Audience: audience, JWKSURL: is.URL,
			Scopes: []a2ahttp.ScopeRule{
				{Scope: "a2a:echo", Agents: []string{"echo"}, Methods: []string{"SendMessage", "GetTask", "GetExtendedAgentCard"}},
				{Scope: "a2a:all", Agents: []string{"*"}, Methods: []string{"*"}},
			},
		}
		if mod != nil {
			mod(c.JWT)
		}
	})
}

// rawPost sends a JSON-RPC body and returns the response and its body.
func rawPost(t *testing.T, url, token, version, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A JWT of the configured issuer opens what its scopes map to; every other
// token is refused with the reason, and a static token opens everything.
func TestJWTAuth(t *testing.T) {
	checkLeaks(t)
	is := newIssuer(t)
	e := jwtEnv(t, is, nil)
	echo, direct := e.srv.URL+"/a2a/echo/", e.srv.URL+"/a2a/direct/"
	send := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`

	tok := is.token(t, claims{Scope: "openid a2a:echo"})
	var res stream10
	call{url: echo, version: "1.0", token: tok}.ok(t, "SendMessage", send10(user10(text10("hi")), false), &res)
	if res.Task == nil || res.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("send with a JWT = %+v", res)
	}
	call{url: echo, version: "1.0", token: tok}.ok(t, "GetTask", map[string]any{"id": res.Task.ID}, nil)
	// The v0.3 method is the same operation.
	call{url: echo, token: tok}.ok(t, "tasks/get", map[string]any{"id": res.Task.ID}, nil)

	for _, tc := range []struct {
		name, url, token, method, wantScope string
	}{
		{"other agent", direct, tok, "SendMessage", "a2a:all"},
		{"method not in the scope", echo, tok, "CancelTask", "a2a:all"},
		{"node endpoint", e.srv.URL + "/a2a/", tok, "SendMessage", "a2a:all"},
		{"no scope", echo, is.token(t, claims{Scope: "openid"}), "SendMessage", "a2a:echo a2a:all"},
	} {
		body := strings.Replace(send, "SendMessage", tc.method, 1)
		resp, b := rawPost(t, tc.url, tc.token, "1.0", body)
		want := `Bearer realm="nova-node", error="insufficient_scope", scope="` + tc.wantScope + `"`
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("WWW-Authenticate") != want || !strings.Contains(b, `"code":"FORBIDDEN"`) {
			t.Errorf("%s: %d %q %s", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
		}
	}
	// The REST binding refuses the same way, with google.rpc.Status.
	rc := rest(e, "direct")
	rc.token = tok
	st := rc.fails(t, http.MethodPost, "/message:send", send10(user10(text10("x")), false), http.StatusForbidden, "INSUFFICIENT_SCOPE")
	if st.Error.Status != "PERMISSION_DENIED" {
		t.Errorf("REST 403 status %q", st.Error.Status)
	}

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		name, token, reason string
	}{
		{"wrong issuer", is.token(t, claims{Issuer: "https://evil.test", Scope: "a2a:all"}), "issuer"},
		{"wrong audience", is.token(t, claims{Audience: []string{"other"}, Scope: "a2a:all"}), "audience"},
		{"expired", is.token(t, claims{Expiry: time.Now().Add(-time.Hour), Scope: "a2a:all"}), "expired"},
		{"not yet valid", is.token(t, claims{NotBefore: time.Now().Add(time.Hour), Scope: "a2a:all"}), "not valid before"},
		{"foreign key", is.token(t, claims{Key: other, Scope: "a2a:all"}), "signature"},
		{"unknown key id", is.token(t, claims{Key: other, KeyID: "k9", Scope: "a2a:all"}), "key id"},
		{"not a JWT", "a.b.c", "not a signed JWT"},
		{"symmetric alg", hsToken(t), "not a signed JWT"},
	} {
		resp, b := rawPost(t, echo, tc.token, "1.0", send)
		h := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(h, `error="invalid_token"`) ||
			!strings.Contains(h, tc.reason) || !strings.Contains(b, `"code":"UNAUTHORIZED"`) {
			t.Errorf("%s: %d %q %s", tc.name, resp.StatusCode, h, b)
		}
	}
	// Static tokens keep opening everything.
	call{url: direct, version: "1.0", token: "static"}.ok(t, "SendMessage", send10(user10(text10("hi")), false), nil)
	// Keys are fetched once and cached: the unknown key id makes no
	// refetch within JWKSMinRefetch of the last one.
	if n := is.Fetches(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1", n)
	}
}

// hsToken is an HS256 token: the gateway accepts only asymmetric
// signatures.
func hsToken(t *testing.T) string {
	sig, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	tok, err := jwt.Signed(sig).Claims(jwt.Claims{Issuer: issuerName, Audience: jwt.Audience{audience},
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Without the issuer's keys no JWT can be checked: 503, not 401; a JWKS
// over the size cap counts as unavailable.
func TestJWTKeysUnavailable(t *testing.T) {
	is := newIssuer(t)
	is.SetDown(true)
	e := jwtEnv(t, is, nil)
	tok := is.token(t, claims{Scope: "a2a:all"})
	resp, b := rawPost(t, e.srv.URL+"/a2a/echo/", tok, "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(b, "HTTP 500") {
		t.Fatalf("issuer down: %d %s", resp.StatusCode, b)
	}

	big := []byte(`{"keys":[` + strings.Repeat(" ", 2048) + `]}`)
	is2 := newIssuer(t)
	is2.Serve(big)
	e2 := jwtEnv(t, is2, func(c *a2ahttp.JWTConfig) { c.JWKSMaxBytes = 1024 })
	resp, b = rawPost(t, e2.srv.URL+"/a2a/echo/", is2.token(t, claims{Scope: "a2a:all"}), "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(b, "over 1024 bytes") {
		t.Fatalf("oversized JWKS: %d %s", resp.StatusCode, b)
	}
}

func TestJWTConfigValidate(t *testing.T) {
	cfg := a2ahttp.DefaultConfig()
	cfg.DBPath = "x.db"
	cfg.RequireAuth = true
	cfg.JWT = &a2ahttp.JWTConfig{JWKSURL: "http://auth.example/jwks", Scopes: []a2ahttp.ScopeRule{{Scope: "a b", Methods: []string{"Send"}}}}
	err := cfg.Validate()
	for _, want := range []string{"JWT.Issuer", "JWT.Audience", "JWT.JWKSURL", "JWT.Scopes[0].Scope", "JWT.Scopes[0].Agents", `"Send" is not an A2A v1.0 method`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to name %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "TokenHashes") {
		t.Errorf("a JWT config satisfies RequireAuth: %v", err)
	}
}

// The cards declare the schemes: an OAuth 2.0 client-credentials flow with
// the scopes that open the agent when a token URL is set.
func TestJWTInCards(t *testing.T) {
	is := newIssuer(t)
	e := jwtEnv(t, is, func(c *a2ahttp.JWTConfig) { c.TokenURL = "https://auth.test/token" })
	card := getJSON(t, e.srv.URL+"/a2a/echo/.well-known/agent-card.json", "1.0")
	b, _ := json.Marshal(card)
	for _, want := range []string{`"oauth2SecurityScheme"`, `"tokenUrl":"https://auth.test/token"`, `"oauth2":{"list":["a2a:echo","a2a:all"]}`, `"extendedAgentCard":true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("v1.0 card lacks %s: %s", want, b)
		}
	}
	card = getJSON(t, e.srv.URL+"/a2a/echo/.well-known/agent-card.json", "")
	b, _ = json.Marshal(card)
	for _, want := range []string{`"type":"oauth2"`, `"clientCredentials"`, `"oauth2":["a2a:echo","a2a:all"]`, `"supportsAuthenticatedExtendedCard":true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("v0.3 card lacks %s: %s", want, b)
		}
	}
}

// The authenticated extended card: in both JSON-RPC versions and over
// REST, only to a caller with a credential; it adds the mesh address and
// the limits, and the node's lists only the agents the caller may send to.
func TestExtendedCard(t *testing.T) {
	is := newIssuer(t)
	e := jwtEnv(t, is, nil)
	echo := e.srv.URL + "/a2a/echo/"
	for _, tok := range []string{"static", is.token(t, claims{Scope: "a2a:echo"})} {
		var v1card struct {
			Name, Description string
			Capabilities      struct{ ExtendedAgentCard bool }
		}
		call{url: echo, version: "1.0", token: tok}.ok(t, "GetExtendedAgentCard", nil, &v1card)
		if v1card.Name != "echo" || !strings.Contains(v1card.Description, "Mesh address echo") || !strings.Contains(v1card.Description, "Limits:") {
			t.Errorf("v1.0 extended card %+v", v1card)
		}
		var v03card struct{ Name, Description string }
		call{url: echo, token: tok}.ok(t, "agent/getAuthenticatedExtendedCard", nil, &v03card)
		if v03card.Name != "echo" || !strings.Contains(v03card.Description, "Mesh address") {
			t.Errorf("v0.3 extended card %+v", v03card)
		}
		rc := rest(e, "echo")
		rc.token = tok
		var restCard struct{ Name, Description string }
		rc.ok(t, http.MethodGet, "/extendedAgentCard", nil, &restCard)
		if restCard.Description != v1card.Description {
			t.Errorf("REST extended card %+v", restCard)
		}
	}
	// Without a credential: 401, before anything else.
	resp, _ := rawPost(t, echo, "", "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("extended card without a token: %d", resp.StatusCode)
	}
	// A scope without GetExtendedAgentCard: 403.
	resp, _ = rawPost(t, echo, is.token(t, claims{Scope: "a2a:none"}), "1.0", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("extended card without the scope: %d", resp.StatusCode)
	}
	// The node's extended card, for a caller whose scopes open every
	// method but only echo: one skill.
	e2 := jwtEnv(t, is, func(c *a2ahttp.JWTConfig) {
		c.Scopes = append(c.Scopes, a2ahttp.ScopeRule{Scope: "a2a:node", Agents: []string{"*"}, Methods: []string{"GetExtendedAgentCard"}})
	})
	var node struct{ Skills []struct{ ID string } }
	call{url: e2.srv.URL + "/a2a/", version: "1.0", token: is.token(t, claims{Scope: "a2a:echo a2a:node"})}.ok(t, "GetExtendedAgentCard", nil, &node)
	if len(node.Skills) != 1 || node.Skills[0].ID != "echo" {
		t.Errorf("node extended card skills %+v", node.Skills)
	}
}

// Without any credential configured there is no extended card: the spec's
// UnsupportedOperation, and the card says so.
func TestExtendedCardWithoutAuth(t *testing.T) {
	e := newEnv(t, nil)
	call{url: e.srv.URL + "/a2a/echo/", version: "1.0"}.fails(t, "GetExtendedAgentCard", nil, -32004)
	card := getJSON(t, e.srv.URL+"/a2a/echo/.well-known/agent-card.json", "1.0")
	if caps, _ := card["capabilities"].(map[string]any); caps["extendedAgentCard"] != false {
		t.Errorf("capabilities %v", caps)
	}
}

// A rotated key is fetched once a token names it, but not more often than
// JWKSMinRefetch; keys are fetched again after JWKSRefresh.
func TestJWTKeyRotation(t *testing.T) {
	is := newIssuer(t)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	e := newEnv(t, func(c *a2ahttp.Config) {
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
		c.JWT = &a2ahttp.JWTConfig{
			Issuer: issuerName, Audience: audience, JWKSURL: is.URL,
			Scopes: []a2ahttp.ScopeRule{{Scope: "a2a:all", Agents: []string{"*"}, Methods: []string{"*"}}},
		}
	})
	get := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`
	status := func(tok string) (int, string) {
		resp, b := rawPost(t, e.srv.URL+"/a2a/echo/", tok, "1.0", get)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate") + b
	}
	if code, b := status(is.token(t, claims{Scope: "a2a:all"})); code != http.StatusOK {
		t.Fatalf("first key: %d %s", code, b)
	}
	if err := is.Rotate(); err != nil {
		t.Fatal(err)
	}
	rotated := is.token(t, claims{Scope: "a2a:all"})
	if code, b := status(rotated); code != http.StatusUnauthorized || !strings.Contains(b, "key id") {
		t.Fatalf("new key within JWKSMinRefetch: %d %s", code, b)
	}
	if n := is.Fetches(); n != 1 {
		t.Fatalf("fetches %d, want 1", n)
	}
	now.Add(int64(31 * time.Second))
	if code, b := status(rotated); code != http.StatusOK {
		t.Fatalf("new key after JWKSMinRefetch: %d %s", code, b)
	}
	if n := is.Fetches(); n != 2 {
		t.Fatalf("fetches %d, want 2", n)
	}
	now.Add(int64(11 * time.Minute))
	status(rotated)
	if n := is.Fetches(); n != 3 {
		t.Fatalf("fetches after JWKSRefresh %d, want 3", n)
	}
}
