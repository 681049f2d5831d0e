package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/node"
)

// TestA2ACallSendsTheLocalTokenOnlyToItsNode: from the node's data dir,
// a2a call sends the local token to the node's gateway by itself; from
// another data dir (another user, say) the gateway answers 401 and the
// hint says how to get in; --token works as given.
func TestA2ACallSendsTheLocalTokenOnlyToItsNode(t *testing.T) {
	a, _, dirA, _ := aliceAndBob(t)
	gw := a.A2AURL()
	_, errOut, code := runCLI(t, "--data-dir", t.TempDir(), "a2a", "call", gw+"/a2a/bob/", "--message", "hi")
	if code != 1 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "hint: ") || !strings.Contains(errOut, "--token") {
		t.Fatalf("a2a call without the node's data dir: exit %d\n%s", code, errOut)
	}
	tok, err := node.ReadLocalToken(dirA)
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runCLI(t, "--data-dir", t.TempDir(), "a2a", "call", gw+"/a2a/bob/", "--message", "hi", "--token", tok); code != 0 || !strings.Contains(out, "hi") {
		t.Fatalf("a2a call --token: exit %d\n%s%s", code, out, errOut)
	}
	// Another port on the same host gets no token.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the local token went to %s", r.Host)
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	runCLI(t, "--data-dir", dirA, "a2a", "call", srv.URL+"/a2a/bob/", "--message", "hi")
}

// TestA2ACallFindsTheTokenOfARelativeDataDir: a node run with a relative
// --data-dir reports that relative path; a2a call, run elsewhere with the
// data dir's absolute path, still finds the token and gets in.
func TestA2ACallFindsTheTokenOfARelativeDataDir(t *testing.T) {
	parent := t.TempDir()
	t.Chdir(parent)
	n := startNode(t, 0, "dd", node.DefaultAgent("bob"))
	t.Chdir(t.TempDir())
	out, errOut, code := runCLI(t, "--data-dir", filepath.Join(parent, "dd"), "a2a", "call", n.A2AURL()+"/a2a/bob/", "--message", "hi")
	if code != 0 || !strings.Contains(out, "hi") {
		t.Fatalf("a2a call from another directory: exit %d\n%s%s", code, out, errOut)
	}
}

func TestSameListener(t *testing.T) {
	for _, tc := range []struct {
		host, addr string
		want       bool
	}{
		{"127.0.0.1:4713", "127.0.0.1:4713", true},
		{"localhost:4713", "127.0.0.1:4713", true},
		{"LOCALHOST:4713", "[::1]:4713", true},
		{"[::1]:4713", "[::1]:4713", true},
		{"127.0.0.2:4713", "127.0.0.1:4713", false}, // another user may listen there
		{"127.0.0.1:4714", "127.0.0.1:4713", false},
		{"127.0.0.1", "127.0.0.1:4713", false},
		{"127.0.0.2:4713", "0.0.0.0:4713", true},
		{"localhost:4713", "[::]:4713", true},
		{"node.example:4713", "0.0.0.0:4713", false},
		{"192.0.2.1:4713", "192.0.2.1:4713", true},
	} {
		if got := sameListener(tc.host, tc.addr); got != tc.want {
			t.Errorf("sameListener(%q, %q) = %v, want %v", tc.host, tc.addr, got, tc.want)
		}
	}
}

// TestA2AJWTConfigParses: config.yaml's a2a.jwt block reaches the
// gateway's JWTConfig (durations included), and a misspelt key is named
// with the key meant.
func TestA2AJWTConfigParses(t *testing.T) {
	cfg := node.DefaultConfig()
	err := node.ParseConfig([]byte(`
a2a:
  jwt:
    issuer: https://auth.example
    audience: nova-gateway
    jwksUrl: https://auth.example/.well-known/jwks.json
    tokenUrl: https://auth.example/token
    leeway: 30s
    scopes:
      - scope: a2a:research
        agents: [researcher]
        methods: [SendMessage, GetTask]
`), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.A2A.JWT
	if j == nil || j.Issuer != "https://auth.example" || j.Leeway.Seconds() != 30 || len(j.Scopes) != 1 ||
		j.Scopes[0].Agents[0] != "researcher" || j.Scopes[0].Methods[1] != "GetTask" {
		t.Fatalf("a2a.jwt = %+v", j)
	}
	err = node.ParseConfig([]byte("a2a:\n  jwt:\n    jwksURL: https://x\n"), &cfg)
	if err == nil || !strings.Contains(err.Error(), "jwksUrl") {
		t.Fatalf("misspelt key: %v", err)
	}
}
