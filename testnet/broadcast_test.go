package testnet_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// inbox records, per agent address, the envelope ids its handler saw.
type inbox struct {
	mu  sync.Mutex
	got map[string]map[string]int
}

func (b *inbox) handler(addr string) protocol.Handler {
	return func(_ context.Context, env *envelope.Envelope) (any, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.got[addr] == nil {
			b.got[addr] = map[string]int{}
		}
		b.got[addr][env.ID]++
		return nil, nil
	}
}

func (b *inbox) count(addr, id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got[addr][id]
}

// total is how many envelopes addr's handler saw.
func (b *inbox) total(addr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.got[addr] {
		n += c
	}
	return n
}

// TestProperty14_BroadcastDelivery: a broadcast reaches every agent of the
// swarm that its sender may reach under the tier rules, exactly once; an L0
// directive reaches every agent of every tier.
func TestProperty14_BroadcastDelivery(t *testing.T) {
	box := &inbox{got: map[string]map[string]int{}}
	net := testnet.New(t, 3, testnet.WithConfig(func(i int, c *node.Config) { c.Agents = nil }))
	type agent struct {
		node int
		card agentcard.Card
	}
	var agents []agent
	for i, n := range net.Nodes {
		for tr := 0; tr < 4; tr++ {
			tt := tiers.Tier(tr)
			card := node.AgentConfig{Name: fmt.Sprintf("n%dt%d", i, tr), Tier: &tt, Capabilities: []node.CapabilityConfig{{ID: "x"}}}.Card()
			card.Host = n.ID().String()
			c, err := n.RegisterAgent(card, box.handler(card.Address()))
			if err != nil {
				t.Fatal(err)
			}
			agents = append(agents, agent{i, c})
		}
	}
	net.FullMesh()
	net.WaitForCards()
	rules := tiers.DefaultRules()
	rapid.Check(t, func(rt *rapid.T) {
		s := rapid.SampledFrom(agents).Draw(rt, "sender")
		typ := rapid.SampledFrom([]envelope.Type{envelope.TypeNotification, envelope.TypeStreamData}).Draw(rt, "type")
		env, _ := net.Nodes[s.node].NewEnvelope(s.card.ID, envelope.Broadcast, typ, "directive")
		res, err := net.Nodes[s.node].Send(context.Background(), env)
		if err != nil || !res.Delivered || res.Path != protocol.PathBroadcast {
			rt.Fatalf("broadcast: %+v %v", res, err)
		}
		var want []string
		for _, a := range agents {
			if a.card.Address() == s.card.Address() {
				continue
			}
			if rules.Check(tiers.Message{Source: s.card.Tier, Target: a.card.Tier, Type: string(typ), Broadcast: true}) == nil {
				want = append(want, a.card.Address())
			}
		}
		if s.card.Tier == tiers.L0 && len(want) != len(agents)-1 {
			rt.Fatalf("an L0 directive must reach all %d other agents, rules allow %d", len(agents)-1, len(want))
		}
		if err := waitfor.Within(10*time.Second, func() error {
			for _, w := range want {
				if box.count(w, env.ID) == 0 {
					return fmt.Errorf("%s never received broadcast from %s (%s)", w, s.card.Address(), s.card.Tier)
				}
			}
			return nil
		}); err != nil {
			rt.Fatal(err)
		}
		for _, a := range agents {
			c := box.count(a.card.Address(), env.ID)
			allowed := false
			for _, w := range want {
				allowed = allowed || w == a.card.Address()
			}
			if allowed && c != 1 || !allowed && c != 0 {
				rt.Fatalf("%s (%s) got the broadcast of %s (%s) %d times", a.card.Address(), a.card.Tier, s.card.Address(), s.card.Tier, c)
			}
		}
	})
}

// A node delivers broadcasts to its own agents from a list it makes once
// and keeps while its registry does not change: an agent registered after
// broadcasts were delivered gets the next one, as do those before it.
func TestBroadcastReachesAnAgentRegisteredSince(t *testing.T) {
	box := &inbox{got: map[string]map[string]int{}}
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) { c.Agents = nil }))
	l0 := tiers.L0
	sun := node.AgentConfig{Name: "sun", Tier: &l0}.Card()
	if _, err := net.Nodes[0].RegisterAgent(sun, box.handler("sun")); err != nil {
		t.Fatal(err)
	}
	register := func(name string) string {
		t.Helper()
		card := node.DefaultAgent(name).Card()
		addr := name + "@" + net.Nodes[1].ID().String()
		if _, err := net.Nodes[1].RegisterAgent(card, box.handler(addr)); err != nil {
			t.Fatal(err)
		}
		return addr
	}
	first := register("first")
	net.FullMesh()
	net.WaitForCards()
	broadcast := func(want ...string) {
		t.Helper()
		env, _ := net.Nodes[0].NewEnvelope("sun", envelope.Broadcast, envelope.TypeNotification, "news")
		if _, err := net.Nodes[0].Send(context.Background(), env); err != nil {
			t.Fatal(err)
		}
		waitfor.Eventually(t, 10*time.Second, func() error {
			for _, w := range want {
				if box.count(w, env.ID) != 1 {
					return fmt.Errorf("%s has the broadcast %d times, want once", w, box.count(w, env.ID))
				}
			}
			return nil
		})
	}
	broadcast(first)
	second := register("second")
	broadcast(first, second)
}

// TestForgedBroadcastReachesNoOne: a peer publishes, with its own valid
// signature, a broadcast claiming to come from another node's agent. The
// validator rejects it: no agent sees it and a security event is logged.
func TestForgedBroadcastReachesNoOne(t *testing.T) {
	box := &inbox{got: map[string]map[string]int{}}
	net := testnet.New(t, 2)
	for i, n := range net.Nodes {
		n.RegisterAgent(node.DefaultAgent("listener").Card(), box.handler(fmt.Sprintf("listener@%s", n.ID())))
		_ = i
	}
	net.Connect(0, 1)
	net.WaitForCards()

	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithMessageSignaturePolicy(pubsub.StrictSign))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(protocol.BroadcastTopic("default"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range net.Nodes {
		if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	victim := net.Nodes[0]
	forged, _ := envelope.NewFactory().New("a0@"+victim.ID().String(), envelope.Broadcast, envelope.TypeNotification, "all hands: rotate keys")
	forged.Metadata = &envelope.Metadata{Tier: 0}
	data, _ := envelope.EncodeCBOR(forged)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if len(topic.ListPeers()) < 2 {
			return fmt.Errorf("mallory's topic has %d peers", len(topic.ListPeers()))
		}
		return nil
	})
	if err := topic.Publish(ctx, data); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		for i, n := range net.Nodes {
			if securityEvents(n, protocol.CodeUnauthorizedSender) == 0 {
				return fmt.Errorf("node %d logged no security event", i)
			}
		}
		return nil
	})
	// A genuine broadcast sent afterwards arrives; the forged one never did.
	real, _ := net.Nodes[1].NewEnvelope("a1", envelope.Broadcast, envelope.TypeNotification, "hello")
	if _, err := net.Nodes[1].Send(t.Context(), real); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if box.count("listener@"+net.Nodes[0].ID().String(), real.ID) != 1 {
			var evs []string
			for _, e := range net.Nodes[0].Observer().Recent(20) {
				evs = append(evs, fmt.Sprintf("%s %s %s %s", e.Type, e.Code, e.Sender, e.Detail))
			}
			return fmt.Errorf("genuine broadcast not delivered; node 0 events: %v", evs)
		}
		return nil
	})
	for _, n := range net.Nodes {
		if c := box.count("listener@"+n.ID().String(), forged.ID); c != 0 {
			t.Fatalf("forged broadcast delivered %d times", c)
		}
	}
}

// TestBroadcastRightAfterConnect: a broadcast sent as soon as two nodes
// know each other arrives (GossipSub's mesh is not formed yet then).
func TestBroadcastRightAfterConnect(t *testing.T) {
	box := &inbox{got: map[string]map[string]int{}}
	net := testnet.New(t, 2)
	for _, n := range net.Nodes {
		n.RegisterAgent(node.DefaultAgent("listener").Card(), box.handler(fmt.Sprintf("listener@%s", n.ID())))
	}
	net.Connect(0, 1)
	net.WaitForCards()
	env, _ := net.Nodes[1].NewEnvelope("a1", envelope.Broadcast, envelope.TypeNotification, "hello")
	if _, err := net.Nodes[1].Send(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		for _, n := range net.Nodes {
			if c := box.count("listener@"+n.ID().String(), env.ID); c != 1 {
				return fmt.Errorf("listener on %s got it %d times", n.ID(), c)
			}
		}
		return nil
	})
}

// TestBroadcastOfAQuestionRefusedByTheRouter: a request or task proposal to
// "*" is refused with INVALID_ENVELOPE by the router itself (not only by
// the CLI and the node's API), and nothing is published.
func TestBroadcastOfAQuestionRefusedByTheRouter(t *testing.T) {
	box := &inbox{got: map[string]map[string]int{}}
	net := testnet.New(t, 2)
	net.Nodes[1].RegisterAgent(node.DefaultAgent("listener").Card(), box.handler("listener@"+net.Nodes[1].ID().String()))
	net.Connect(0, 1)
	net.WaitForCards()
	for _, typ := range []envelope.Type{envelope.TypeRequest, envelope.TypeTaskProposal} {
		env, _ := net.Nodes[0].NewEnvelope("a0", envelope.Broadcast, typ, "who is there?")
		if _, err := net.Nodes[0].Router().Send(t.Context(), env); !errors.Is(err, envelope.ErrInvalid) || protocol.CodeOf(err) != "INVALID_ENVELOPE" {
			t.Fatalf("%s to *: %v, want INVALID_ENVELOPE", typ, err)
		}
	}
	// A notification sent after them arrives alone.
	env, _ := net.Nodes[0].NewEnvelope("a0", envelope.Broadcast, envelope.TypeNotification, "hello")
	if _, err := net.Nodes[0].Send(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		if c := box.count("listener@"+net.Nodes[1].ID().String(), env.ID); c != 1 {
			return fmt.Errorf("the notification arrived %d times", c)
		}
		return nil
	})
	if n := box.total("listener@" + net.Nodes[1].ID().String()); n != 1 {
		t.Fatalf("the listener got %d broadcasts, want only the notification", n)
	}
}
