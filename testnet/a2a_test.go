package testnet_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/protocol/a2ahttp/a2ahttptest"
	"github.com/nova-node/nova-node/testnet"
)

// TestA2AGatewayReachesRemoteAgent: an A2A client pointed at node A's
// gateway (with A's local token) fetches the card of an agent hosted by
// node B and gets its answer as a completed task; node C hosts an external
// A2A agent declared by URL (a gateway of its own, open as third-party
// agents are: A's loopback gateway is its owner's only), and a mesh
// message to it goes out over A2A.
func TestA2AGatewayReachesRemoteAgent(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		c.A2A.Listen = "127.0.0.1:0"
	}))
	card := node.AgentConfig{Name: "oracle", Capabilities: []node.CapabilityConfig{{ID: "answer"}}}.Card()
	if _, err := net.Nodes[1].RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
		var req a2ahttp.Request
		if err := json.Unmarshal(env.Payload, &req); err != nil {
			return nil, err
		}
		return a2ahttp.Answer{Text: "the answer to " + req.Text + " is 42"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	net.Connect(0, 1)
	net.WaitForCards()
	a := net.Nodes[0]
	base := a.A2AURL()
	if base == "" {
		t.Fatal("no A2A gateway on node A")
	}
	c := a2ahttp.NewClient(a2ahttp.WithBearerToken(localToken(t, a)))
	url := base + "/a2a/oracle/"
	_, err := c.Card(t.Context(), url)
	if err != nil {
		t.Fatalf("card: %v", err)
	}
	res := c.Send(t.Context(), url, a2ahttp.Message{Text: "life"})
	if !res.Success || res.ResponseText != "the answer to life is 42" {
		t.Fatalf("send through the gateway: %+v", res)
	}

	// Node C hosts oracle, served by an A2A server of its own, as an
	// external A2A agent.
	mesh := a2ahttptest.NewMesh()
	mesh.Add(card, func(ctx context.Context, req *a2ahttp.Request) (any, error) {
		return a2ahttp.Answer{Text: "the answer to " + req.Text + " is 42"}, nil
	})
	gcfg := a2ahttp.DefaultConfig()
	gcfg.DBPath = filepath.Join(t.TempDir(), "a2a.db")
	gw, err := a2ahttp.New(mesh, gcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() { srv.Close(); gw.Close() })
	url = srv.URL + "/a2a/oracle/"
	net2 := testnet.New(t, 1, testnet.WithoutLeakCheck(t), testnet.WithConfig(func(i int, cfg *node.Config) { // net checks leaks for both, last
		cfg.A2A.Listen = "off"
		cfg.Agents = append(cfg.Agents, node.AgentConfig{Name: "sage", A2AURL: url})
	}))
	cn := net2.Nodes[0]
	waitfor.Eventually(t, 15*time.Second, func() error {
		env, _ := cn.NewEnvelope("a0", "sage", envelope.TypeRequest, a2ahttp.Request{Text: "everything"})
		resp, _, err := cn.Request(t.Context(), env)
		if err != nil {
			return err
		}
		ans, err := a2ahttp.DecodeAnswer(resp.Payload)
		if err != nil || ans.Text != "the answer to everything is 42" {
			return &unexpected{string(resp.Payload)}
		}
		return nil
	})
}

type unexpected struct{ s string }

func (u *unexpected) Error() string { return "unexpected answer " + u.s }
