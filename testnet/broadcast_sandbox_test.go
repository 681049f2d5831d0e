package testnet_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/testnet"
)

// broadcastRecipients lists, sorted, the local agents nd delivered
// broadcast id to (its message-received events, emitted as each delivery is
// handed to the agent's handler).
func broadcastRecipients(nd *node.Node, id string) []string {
	var out []string
	for _, ev := range nd.Observer().Recent(0) {
		if ev.Type == protocol.EvtMessageReceived && ev.Path == protocol.PathBroadcast && ev.EnvelopeID == id {
			out = append(out, ev.Recipient)
		}
	}
	slices.Sort(out)
	return out
}

// TestBroadcastSandboxRules: with sandboxes enforced, a broadcast from an
// agent in sandbox "alpha" reaches, on its own node and on the other, only
// the agents in "alpha" and the agent on the cross-sandbox allow list, not
// those in sandbox "beta" nor those in no sandbox.
func TestBroadcastSandboxRules(t *testing.T) {
	box := &inbox{got: map[string]map[string]int{}}
	agents := [][]node.AgentConfig{
		{{Name: "sender", Sandbox: "alpha"}, {Name: "near", Sandbox: "alpha"}, {Name: "local-beta", Sandbox: "beta"}},
		{{Name: "peer-alpha", Sandbox: "alpha"}, {Name: "peer-beta", Sandbox: "beta"}, {Name: "listed", Sandbox: "beta"}, {Name: "open"}},
	}
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		c.Agents = nil
		c.MetricsListen = "off"
		c.Sandbox = sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"listed"}}
	}))
	addr := map[string]string{}
	for i, nd := range net.Nodes {
		for _, a := range agents[i] {
			a.Capabilities = []node.CapabilityConfig{{ID: "x"}}
			card := a.Card()
			card.Host = nd.ID().String()
			c, err := nd.RegisterAgent(card, box.handler(card.Address()))
			if err != nil {
				t.Fatal(err)
			}
			if c.SandboxID != a.Sandbox {
				t.Fatalf("%s registered in sandbox %q, want %q", c.ID, c.SandboxID, a.Sandbox)
			}
			addr[a.Name] = c.Address()
		}
	}
	net.Connect(0, 1)
	net.WaitForCards()

	send := func() string {
		t.Helper()
		env, err := net.Nodes[0].NewEnvelope("sender", envelope.Broadcast, envelope.TypeNotification, "to alpha")
		if err != nil {
			t.Fatal(err)
		}
		if res, err := net.Nodes[0].Send(t.Context(), env); err != nil || !res.Delivered || res.Path != protocol.PathBroadcast {
			t.Fatalf("broadcast: %+v %v", res, err)
		}
		return env.ID
	}
	waitFor := func(id string, names ...string) {
		t.Helper()
		waitfor.Eventually(t, 5*time.Second, func() error {
			for _, n := range names {
				if box.count(addr[n], id) == 0 {
					return fmt.Errorf("%s has not got broadcast %s", n, id)
				}
			}
			return nil
		})
	}
	allowed := []string{"near", "peer-alpha", "listed"}
	first := send()
	waitFor(first, allowed...)
	// Each node's broadcast loop hands out one broadcast at a time, and
	// the second was sent after the first arrived: once the second is
	// delivered, every delivery of the first has been made.
	waitFor(send(), allowed...)

	for i, want := range [][]string{{addr["near"]}, {addr["listed"], addr["peer-alpha"]}} {
		slices.Sort(want)
		if got := broadcastRecipients(net.Nodes[i], first); !slices.Equal(got, want) {
			t.Errorf("node %d delivered the broadcast to %v, want %v", i, got, want)
		}
	}
	for name := range addr {
		want := 0
		if slices.Contains(allowed, name) {
			want = 1
		}
		if got := box.count(addr[name], first); got != want {
			t.Errorf("%s got the broadcast from sandbox alpha %d times, want %d", name, got, want)
		}
	}
}
