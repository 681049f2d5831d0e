package testnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/protocol/a2ahttp/a2ahttptest"
	"github.com/nova-node/nova-node/testnet"
)

// TestInteropA2AJSOnTestnet runs the @a2a-js/sdk clients (1.3.0 in v1.0
// mode over JSON-RPC and over REST, in legacyCompat v0.3 mode, and 0.3.14,
// with static tokens and JWTs of a local issuer) against node A's gateway
// in front of agents hosted by node B of a loopback testnet: every message
// crosses the mesh. The scenarios are protocol/a2ahttp/interop's.
func TestInteropA2AJSOnTestnet(t *testing.T) {
	dir, _ := filepath.Abs("../protocol/a2ahttp/interop")
	nodeBin, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(dir, "node_modules")); serr != nil || err != nil {
		if os.Getenv("NOVA_INTEROP") == "1" {
			t.Fatal("NOVA_INTEROP=1 but node or protocol/a2ahttp/interop/node_modules is missing")
		}
		t.Skip("npm packages not installed: npm ci --prefix protocol/a2ahttp/interop")
	}
	const token = "interop-token"
	is, err := a2ahttptest.NewIssuer("https://auth.test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(is.Close)
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		c.A2A.Listen = "127.0.0.1:0"
		c.A2A.TokenHashes = []string{a2ahttp.HashToken(token)}
		c.A2A.TaskTimeout = time.Minute
		c.A2A.PushAllowHosts = []string{"127.0.0.1"}
		c.A2A.JWT = &a2ahttp.JWTConfig{
			Issuer: is.Name, Audience: "nova-gateway", JWKSURL: is.URL,
			Scopes: []a2ahttp.ScopeRule{{Scope: "a2a:echo", Agents: []string{"echo"}, Methods: []string{"SendMessage"}}},
		}
	}))
	mint := func(c a2ahttptest.Claims) string {
		c.Audience = []string{"nova-gateway"}
		tok, err := is.Token(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	jwtEnv := []string{
		"A2A_JWT_ECHO=" + mint(a2ahttptest.Claims{Scope: "a2a:echo"}),
		"A2A_JWT_EXPIRED=" + mint(a2ahttptest.Claims{Scope: "a2a:echo", Expiry: time.Now().Add(-time.Hour)}),
	}
	cards, handlers := a2ahttptest.DemoMesh(200 * time.Millisecond).Entries()
	for i, c := range cards {
		h := handlers[i]
		c.Tier = 3
		if _, err := net.Nodes[1].RegisterAgent(c, func(ctx context.Context, env *envelope.Envelope) (any, error) {
			var req a2ahttp.Request
			if err := json.Unmarshal(env.Payload, &req); err != nil {
				return nil, err
			}
			return h(ctx, &req)
		}); err != nil {
			t.Fatal(err)
		}
	}
	net.Connect(0, 1)
	net.WaitForCards()
	url := net.Nodes[0].A2AURL()
	for _, mode := range []string{"v1", "legacy", "v03", "rest"} {
		t.Run(mode, func(t *testing.T) {
			scenarios := []string{"card", "send-task", "send-message", "stream-order", "nonblocking-poll", "cancel-running",
				"cancel-completed", "unknown-task", "multi-turn", "file-data-parts", "unauthorized"}
			if mode == "v1" || mode == "rest" {
				// The 1.3.0 client's v1.0 surface: extended card, listTasks,
				// push configs, resubscribe, JWT scopes.
				scenarios = append(scenarios, "extended-card", "list-tasks", "push-config", "subscribe", "jwt")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodeBin, "client.mjs", mode)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), append(jwtEnv, "GATEWAY_URL="+url, "A2A_TOKEN="+token)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, runErr := cmd.Output()
			got := map[string]bool{}
			for line := range strings.Lines(string(out)) {
				var r struct {
					Scenario, Detail string
					OK, Done         bool
				}
				if json.Unmarshal([]byte(line), &r) != nil || r.Done {
					continue
				}
				got[r.Scenario] = r.OK
				if !r.OK {
					t.Errorf("%s: %s", r.Scenario, r.Detail)
				}
			}
			for _, s := range scenarios {
				if _, ok := got[s]; !ok {
					t.Errorf("scenario %s did not run", s)
				}
			}
			if runErr != nil && !t.Failed() {
				t.Errorf("client.mjs %s: %v\n%s\n%s", mode, runErr, out, stderr.String())
			}
		})
	}
}
