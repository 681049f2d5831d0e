package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// TestProperty13_DirectMessageRouting: for any envelope whose recipient
// exists in the registry, the router delivers it to exactly that agent —
// local or on the other node, by bare name or by full address. Each handler
// answers and counts under its own agent's address: the answer must come
// from the target's handler, and no other handler may have run.
func TestProperty13_DirectMessageRouting(t *testing.T) {
	const perNode = 4
	var mu sync.Mutex
	counts := map[string]int{}
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		c.Agents = nil
	}))
	var addrs []string
	for i, n := range net.Nodes {
		for k := 0; k < perNode; k++ {
			name := fmt.Sprintf("n%da%d", i, k)
			card := node.AgentConfig{Name: name, Capabilities: []node.CapabilityConfig{{ID: "x"}}}.Card()
			// The handler knows whose it is: it counts and answers with its
			// own agent's address, not with the envelope's recipient, so a
			// delivery to the wrong handler shows.
			card.Host = n.ID().String()
			self := card.Address()
			c, err := n.RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
				mu.Lock()
				counts[self]++
				mu.Unlock()
				return self, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.Address() != self {
				t.Fatalf("registered as %s, want %s", c.Address(), self)
			}
			addrs = append(addrs, self)
		}
	}
	net.Connect(0, 1)
	net.WaitForCards()

	rapid.Check(t, func(rt *rapid.T) {
		fromNode := rapid.IntRange(0, 1).Draw(rt, "fromNode")
		from := fmt.Sprintf("n%da%d", fromNode, rapid.IntRange(0, perNode-1).Draw(rt, "from"))
		target := rapid.SampledFrom(addrs).Draw(rt, "to")
		to := target
		if rapid.Bool().Draw(rt, "bareName") {
			to = target[:len("n0a0")] // names are unique: a bare name resolves
		}
		mu.Lock()
		before := make(map[string]int, len(counts))
		for k, v := range counts {
			before[k] = v
		}
		mu.Unlock()

		n := net.Nodes[fromNode]
		env, err := n.NewEnvelope(from, to, envelope.TypeRequest, nil)
		if err != nil {
			rt.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, res, err := n.Request(ctx, env)
		if err != nil {
			rt.Fatalf("%s -> %s: %v", from, to, err)
		}
		if res.TargetAgentID != target || resp.Sender != target || string(resp.Payload) != `"`+target+`"` {
			rt.Fatalf("%s -> %s delivered to %s (answer from %s: %s)", from, to, res.TargetAgentID, resp.Sender, resp.Payload)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range addrs {
			want := before[a]
			if a == target {
				want++
			}
			if counts[a] != want {
				rt.Fatalf("agent %s handled %d envelopes, want %d", a, counts[a], want)
			}
		}
	})
}
