package protocol

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/tiers"
)

// ccResolver stands in for discovery's exact lookup: it finds the cards of
// the host src (sealed with src's key, opened and merged into reg as
// discovery does with a DHT record), except those of missing agents.
type ccResolver struct {
	src     host.Host
	srcReg  *agentcard.Registry
	reg     *agentcard.Registry
	missing map[string]bool
	calls   atomic.Int64
}

func (r *ccResolver) FindByName(context.Context, string) ([]agentcard.Card, error) {
	return nil, agentcard.ErrAgentNotFound
}

func (r *ccResolver) FindByCapability(context.Context, string) ([]agentcard.Card, error) {
	return nil, agentcard.ErrCapabilityNotFound
}

func (r *ccResolver) Lookup(_ context.Context, addr string) (agentcard.Card, error) {
	r.calls.Add(1)
	id, _, _ := agentcard.SplitAddress(addr)
	c, ok := r.srcReg.Get(id)
	if !ok || r.missing[id] {
		return agentcard.Card{}, &agentcard.NotFoundError{Query: addr, Where: "test resolver"}
	}
	sealed, err := agentcard.Seal(c, r.src.Peerstore().PrivKey(r.src.ID()))
	if err != nil {
		return agentcard.Card{}, err
	}
	opened, _, err := agentcard.Open(sealed)
	if err != nil {
		return agentcard.Card{}, err
	}
	if _, err := r.reg.MergeRemote(opened); err != nil {
		return agentcard.Card{}, err
	}
	return opened, nil
}

// ccMesh records the peers a GossipSub host took into its mesh.
type ccMesh struct {
	*bvTracer
	peers sync.Map
}

func (m *ccMesh) Graft(p peer.ID, _ string) { m.peers.Store(p, true) }

func (m *ccMesh) has(p peer.ID) bool {
	_, ok := m.peers.Load(p)
	return ok
}

// A broadcast relayed to a node that never met its publisher (b — relay —
// a, with a and b not connected, so a never got b's hello and its cards)
// is delivered there: the sender's card is fetched on demand and the
// broadcast delivered at the tier it signs (an L0 directive reaches a's L0
// agent); a sender whose card cannot be found is delivered as the
// publisher's signature proves it, at least privilege (L3). Each sender's
// card is fetched once, however many of its broadcasts wait for it.
func TestBroadcastFromASenderWhoseCardIsNotHeld(t *testing.T) {
	ha, hb, hc := loopbackHost(t), loopbackHost(t), loopbackHost(t)
	sink := &bvSink{}
	regA, regB := agentcard.NewRegistry(ha.ID()), agentcard.NewRegistry(hb.ID())
	for _, c := range []struct {
		reg *agentcard.Registry
		id  string
		t   tiers.Tier
	}{{regA, "a0", tiers.L0}, {regB, "b0", tiers.L0}, {regB, "b1", tiers.L0}} {
		if _, err := c.reg.Register(agentcard.Card{ID: c.id, Name: c.id, Version: "1.0.0", Tier: c.t, Capabilities: []agentcard.Capability{}}); err != nil {
			t.Fatal(err)
		}
	}
	res := &ccResolver{src: hb, srcReg: regB, reg: regA, missing: map[string]bool{"b1": true}}
	psA, err := pubsub.NewGossipSub(t.Context(), ha, PubSubOptions(bvSwarm, 1<<20)...)
	if err != nil {
		t.Fatal(err)
	}
	psB, err := pubsub.NewGossipSub(t.Context(), hb, PubSubOptions(bvSwarm, 1<<20)...)
	if err != nil {
		t.Fatal(err)
	}
	// The relay: plain GossipSub on the topic, no router.
	mesh := &ccMesh{bvTracer: &bvTracer{}}
	psC, err := pubsub.NewGossipSub(t.Context(), hc, append(PubSubOptions(bvSwarm, 1<<20), pubsub.WithRawTracer(mesh))...)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := psC.Join(BroadcastTopic(bvSwarm))
	if err != nil {
		t.Fatal(err)
	}
	relaySub, err := relay.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relaySub.Cancel)

	ra, err := New(ha, regA, WithPubSub(psA, bvSwarm), WithEventSink(sink), WithResolver(res, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := New(hb, regB, WithPubSub(psB, bvSwarm))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]string{} // envelope id -> sender, as a0's handler saw it
	ra.Handle("a0", func(_ context.Context, env *envelope.Envelope) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		got[env.ID] = env.Sender
		return nil, nil
	})
	for _, r := range []*Router{ra, rb} {
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	connectHosts(t, hc, ha)
	connectHosts(t, hc, hb)
	if !rvWait(t, 10*time.Second, func() bool {
		return len(ra.TopicPeers()) > 0 && len(rb.TopicPeers()) > 0 && mesh.has(ha.ID())
	}) {
		t.Fatal("the three hosts never all joined the topic, or the relay never took a into its mesh")
	}
	if ha.Network().Connectedness(hb.ID()) == 1 {
		t.Fatal("a and b are connected: a would have b's cards")
	}

	b0, b1 := "b0@"+hb.ID().String(), "b1@"+hb.ID().String()
	send := func(from string) *envelope.Envelope {
		t.Helper()
		env, err := envelope.NewFactory().New(from, envelope.Broadcast, envelope.TypeNotification, "directive")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rb.Send(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		return env
	}
	// Three broadcasts of each sender, sent before any card is fetched.
	var sent []*envelope.Envelope
	for range 3 {
		sent = append(sent, send(b0), send(b1))
	}
	if err := waitfor.Within(10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, env := range sent {
			if _, ok := got[env.ID]; !ok {
				return fmt.Errorf("a0 never got broadcast %s from %s", env.ID, env.Sender)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, env := range sent {
		var wantTier int
		switch env.Sender {
		case b0:
			wantTier = int(tiers.L0) // its card, fetched on demand
		case b1:
			wantTier = int(tiers.L3) // no card: least privilege
		default:
			t.Fatalf("broadcast from %s", env.Sender)
		}
		var evs []Event
		sink.mu.Lock()
		for _, ev := range sink.evs {
			if ev.Type == EvtMessageReceived && ev.EnvelopeID == env.ID {
				evs = append(evs, ev)
			}
		}
		sink.mu.Unlock()
		if len(evs) != 1 || evs[0].Sender != env.Sender || evs[0].SourceTier != wantTier {
			t.Fatalf("broadcast from %s: received events %+v, want one from it at L%d", env.Sender, evs, wantTier)
		}
	}
	if _, ok := regA.GetShared(b0); !ok {
		t.Fatal("b0's fetched card is not in a's registry")
	}
	if n := res.calls.Load(); n != 2 {
		t.Fatalf("%d lookups for 2 senders, want one each", n)
	}
	if evs := sink.security(); len(evs) != 0 {
		t.Fatalf("security events %+v, want none", evs)
	}
}
