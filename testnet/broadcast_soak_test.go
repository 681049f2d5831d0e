//go:build soak

package testnet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// TestBroadcast30Nodes: 30 nodes, each connected to a hub and to its two
// ring neighbours: every agent the sender may reach gets each of 20
// directives exactly once, and still exactly once after a further settle
// period (no late duplicate arrives by another gossip path). Every fifth
// node also hosts an agent in sandbox "lab", which the sandbox policy keeps
// from the hub's agent (in no sandbox): it gets none of them. (The tier
// rules exclude no one here: an L0 directive reaches every tier.)
func TestBroadcast30Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("30 nodes: skipped with -short")
	}
	box := &inbox{got: map[string]map[string]int{}}
	l0 := tiers.L0
	net := testnet.New(t, 30, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		c.MetricsListen = "off"
		if i == 0 {
			c.Agents = []node.AgentConfig{{Name: "sun", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "x"}}}}
		}
	}))
	var allowed, excluded []string
	for i, n := range net.Nodes {
		if i == 0 {
			continue
		}
		addr := fmt.Sprintf("a%d@%s", i, n.ID())
		if _, err := n.RegisterAgent(node.DefaultAgent(fmt.Sprintf("a%d", i)).Card(), box.handler(addr)); err != nil {
			t.Fatal(err)
		}
		allowed = append(allowed, addr)
		if i%5 == 2 {
			boxed := node.AgentConfig{Name: fmt.Sprintf("boxed%d", i), Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "x"}}}.Card()
			c, err := n.RegisterAgent(boxed, box.handler(fmt.Sprintf("boxed%d@%s", i, n.ID())))
			if err != nil {
				t.Fatal(err)
			}
			if c.SandboxID != "lab" || !n.Config().Sandbox.Enforced {
				t.Fatalf("%s: sandbox %q, policy enforced %v: nothing would exclude it", c.ID, c.SandboxID, n.Config().Sandbox.Enforced)
			}
			excluded = append(excluded, c.Address())
		}
	}
	net.Star(0)
	net.Ring()
	net.WaitForCards()
	// Let the GossipSub mesh form: wait until the hub sees peers on the topic.
	waitfor.Eventually(t, 10*time.Second, func() error {
		for i, n := range net.Nodes {
			if p := len(n.Host().Network().Peers()); p < 2 {
				return fmt.Errorf("node %d has %d peers", i, p)
			}
		}
		return nil
	})
	var ids []string
	for k := 0; k < 20; k++ {
		env, _ := net.Nodes[0].NewEnvelope("sun", envelope.Broadcast, envelope.TypeNotification, k)
		if _, err := net.Nodes[0].Send(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.ID)
	}
	// never is what must not happen at any time: a duplicate, or a
	// delivery to an excluded agent.
	never := func() {
		t.Helper()
		for _, addr := range allowed {
			for _, id := range ids {
				if c := box.count(addr, id); c > 1 {
					t.Fatalf("%s has broadcast %s %d times", addr, id[:6], c)
				}
			}
		}
		for _, addr := range excluded {
			if c := box.total(addr); c != 0 {
				t.Fatalf("%s, in another sandbox than the sender, got %d broadcasts", addr, c)
			}
		}
	}
	waitfor.Eventually(t, 20*time.Second, func() error {
		never()
		for _, addr := range allowed {
			for _, id := range ids {
				if c := box.count(addr, id); c != 1 {
					return fmt.Errorf("%s has broadcast %s %d times", addr, id[:6], c)
				}
			}
		}
		return nil
	})
	// Every allowed agent has each directive once. Watch for a further
	// 500 ms (an observation window, not synchronisation): a duplicate by a
	// slower gossip path, or a late delivery to an excluded agent, fails.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		never()
	}
	never()
}
