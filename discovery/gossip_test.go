package discovery_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/internal/waitfor"
)

// bus is an in-memory roster topic: a message one node publishes is taken
// by every other node on the bus, synchronously, as a GossipSub validator
// would take it. It records what each node answered.
type bus struct {
	mu      sync.Mutex
	nodes   []*testNode // the nodes that take what is published
	deaf    bool        // gossipNode's next nodes publish but take nothing
	answers []error
}

// publisher is the WithGossip option of the node whose ID the caller
// writes to *self under b.mu once the node exists.
func (b *bus) publisher(self *peer.ID) discovery.Option {
	return discovery.WithGossip(func(_ context.Context, msg []byte) error {
		b.mu.Lock()
		nodes := append([]*testNode(nil), b.nodes...)
		from := *self
		b.mu.Unlock()
		for _, n := range nodes {
			if n.h.ID() == from {
				continue
			}
			err := n.svc.TakeGossip(from, msg)
			b.mu.Lock()
			b.answers = append(b.answers, err)
			b.mu.Unlock()
		}
		return nil
	})
}

// gossipTiming republishes every 4 s, so that a node's roster messages
// past the burst go out within 1.25 s (a quarter of that, with pacing's
// margin).
var gossipTiming = timing{ttl: 10 * time.Minute, republish: 4 * time.Second, refresh: 3 * time.Minute, cache: 30 * time.Second}

// gossipNode starts a node on b that hosts cards, with the roster loop off
// (rosterEvery 0) or on, and no lookups.
func gossipNode(t *testing.T, b *bus, boot []peer.AddrInfo, rosterEvery time.Duration, events func(discovery.SecurityEvent), cards ...agentcard.Card) *testNode {
	t.Helper()
	self := new(peer.ID)
	opts := []discovery.Option{b.publisher(self), discovery.WithRosterInterval(rosterEvery)}
	if events != nil {
		opts = append(opts, discovery.WithSecurityEvents(events))
	}
	n := newNode(t, boot, gossipTiming, cards, opts...)
	b.mu.Lock()
	*self = n.h.ID()
	if !b.deaf {
		b.nodes = append(b.nodes, n)
	}
	b.mu.Unlock()
	return n
}

// TestGossipCarriesTheRoster: every node of a swarm lists every agent
// after one publish each, without a lookup or a DHT read of another's
// cards; a card update and a removed agent reach every registry with the
// host's next publish; the refresh loop reads no host the roster gossip
// vouched for.
func TestGossipCarriesTheRoster(t *testing.T) {
	checkLeaks(t)
	b := &bus{}
	var nodes []*testNode
	for i := range 4 {
		var boot []peer.AddrInfo
		if i > 0 {
			boot = []peer.AddrInfo{nodes[0].info()}
		}
		nodes = append(nodes, gossipNode(t, b, boot, 0, nil, agentCard(agentName(i), "echo"), agentCard(agentName(i)+"-b", "echo")))
	}
	waitRoutingTables(t, nodes, 1)
	publishAll(t, nodes)
	for i, n := range nodes {
		for j, m := range nodes {
			if i == j {
				continue
			}
			for _, id := range []string{agentName(j), agentName(j) + "-b"} {
				if _, ok := n.reg.Get(id + "@" + m.h.ID().String()); !ok {
					t.Fatalf("node %d lacks %s@node %d after one publish each", i, id, j)
				}
			}
		}
		if st := n.svc.Stats(); st.GossipTaken < 3 || st.GossipCards < 6 {
			t.Errorf("node %d: %d roster messages and %d cards taken, want 3 and 6", i, st.GossipTaken, st.GossipCards)
		}
	}

	// An update and a removal on node 1 reach every other node with its
	// next publish.
	c := agentCard(agentName(1), "echo", "new-skill")
	if _, err := nodes[1].reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if !nodes[1].reg.Unregister(agentName(1) + "-b") {
		t.Fatal("unregister failed")
	}
	if err := nodes[1].svc.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	// (Node 1 may have sent its burst of messages already: then this one
	// goes out once its rate allows.)
	waitfor.Eventually(t, 10*time.Second, func() error {
		for i, n := range nodes {
			if i == 1 {
				continue
			}
			got, ok := n.reg.Get(agentName(1) + "@" + nodes[1].h.ID().String())
			if !ok || !got.HasCapability("new-skill") {
				return fmt.Errorf("node %d: the update of %s did not arrive: %+v", i, agentName(1), got.Capabilities)
			}
			if _, ok := n.reg.Get(agentName(1) + "-b@" + nodes[1].h.ID().String()); ok {
				return fmt.Errorf("node %d still lists the agent node 1 removed", i)
			}
		}
		return nil
	})

	// The refresh reads nothing: every host vouched for its cards.
	before := nodes[2].svc.Stats()
	if err := nodes[2].svc.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := nodes[2].svc.Stats()
	if q, r := after.DHTQueries-before.DHTQueries, after.DHTRequests-before.DHTRequests; q != 0 || r != 0 {
		t.Errorf("refresh after the roster gossip made %d DHT queries and %d requests, want none", q, r)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, err := range b.answers {
		if err != nil && !errors.Is(err, discovery.ErrGossipIgnored) {
			t.Errorf("an honest roster message was refused: %v", err)
		}
	}
}

// TestGossipNewcomerTakesTheRoster: a node that joins a swarm whose
// members published before it came lists every agent at once, from its
// bootstrap peer's snapshot (RosterProtocol), not from DHT reads.
func TestGossipNewcomerTakesTheRoster(t *testing.T) {
	checkLeaks(t)
	b := &bus{}
	var nodes []*testNode
	for i := range 3 {
		var boot []peer.AddrInfo
		if i > 0 {
			boot = []peer.AddrInfo{nodes[0].info()}
		}
		nodes = append(nodes, gossipNode(t, b, boot, 0, nil, agentCard(agentName(i), "echo")))
	}
	waitRoutingTables(t, nodes, 1)
	publishAll(t, nodes)
	// The newcomer takes no gossip: only its snapshot can bring the roster
	// (the members' next heartbeats are minutes away).
	b.mu.Lock()
	b.deaf = true
	b.mu.Unlock()
	late := gossipNode(t, b, []peer.AddrInfo{nodes[1].info()}, time.Hour, nil)
	waitfor.Eventually(t, 20*time.Second, func() error {
		for i, n := range nodes {
			if _, ok := late.reg.Get(agentName(i) + "@" + n.h.ID().String()); !ok {
				return errors.New("the newcomer lacks " + agentName(i))
			}
		}
		if late.svc.Stats().RosterAsked < 3 {
			return errors.New("the snapshot is still being taken")
		}
		return nil
	})
	if st := late.svc.Stats(); st.RosterAsked != 3 || st.RosterCards != 0 {
		t.Errorf("newcomer took %d roster messages from a snapshot and %d cards from the DHT roster, want 3 and 0", st.RosterAsked, st.RosterCards)
	}
}

// TestGossipLies: a roster message whose index another key signed, whose
// card is another host's, or that is garbage is refused as a lie (an
// INVALID_CARD *GossipError and a security event naming the author) and
// changes nothing; a replay of an older message and a flood past the
// author's rate are ignored.
func TestGossipLies(t *testing.T) {
	checkLeaks(t)
	b := &bus{}
	var mu sync.Mutex
	var events []discovery.SecurityEvent
	record := func(e discovery.SecurityEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }
	victim := gossipNode(t, b, nil, 0, record)
	honest := gossipNode(t, b, []peer.AddrInfo{victim.info()}, 0, nil, agentCard("alice", "echo"))
	liar := newNode(t, []peer.AddrInfo{victim.info()}, slow, []agentcard.Card{agentCard("mallory", "echo")}, discovery.WithRosterInterval(0))
	waitRoutingTables(t, []*testNode{victim, honest, liar}, 1)

	// Capture the honest node's roster message.
	b.mu.Lock()
	b.nodes = []*testNode{honest, victim}
	b.mu.Unlock()
	if err := honest.svc.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	captured := discovery.OwnGossip(honest.svc)
	if captured == nil {
		t.Fatal("no roster message published")
	}
	if _, ok := victim.reg.Get("alice@" + honest.h.ID().String()); !ok {
		t.Fatal("victim lacks alice")
	}

	lies := map[string][]byte{
		"garbage":         []byte{0xff, 0xff, 0xff},
		"another's index": captured, // sent by the liar: its index is the honest node's
		"too many cards":  append(binary.AppendUvarint(nil, 3), captured[1:]...),
	}
	for name, msg := range lies {
		err := victim.svc.TakeGossip(liar.h.ID(), msg)
		var ge *discovery.GossipError
		if !errors.As(err, &ge) || ge.Peer != liar.h.ID() || !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Errorf("%s: got %v, want a *GossipError naming the liar that matches ErrInvalidCard", name, err)
		}
	}
	mu.Lock()
	if len(events) != len(lies) {
		t.Errorf("%d security events for %d lies", len(events), len(lies))
	}
	for _, e := range events {
		if e.Peer != liar.h.ID() || e.Code != agentcard.CodeInvalidCard {
			t.Errorf("security event %+v, want the liar and INVALID_CARD", e)
		}
	}
	mu.Unlock()
	for _, c := range victim.reg.Remote() {
		if c.Host != honest.h.ID().String() {
			t.Errorf("the victim holds %s, which no honest roster message carried", c.Address())
		}
	}

	// A replay of the honest node's message is ignored, as is one older
	// than the held one.
	if err := victim.svc.TakeGossip(honest.h.ID(), captured); !errors.Is(err, discovery.ErrGossipIgnored) {
		t.Errorf("replay: got %v, want ErrGossipIgnored", err)
	}
	if err := honest.svc.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := victim.svc.TakeGossip(honest.h.ID(), captured); !errors.Is(err, discovery.ErrGossipIgnored) {
		t.Errorf("older message: got %v, want ErrGossipIgnored", err)
	}
	// A flood past the author's rate is ignored before its signatures
	// are checked.
	ignored := 0
	for range 10 {
		if err := victim.svc.TakeGossip(liar.h.ID(), captured); errors.Is(err, discovery.ErrGossipIgnored) {
			ignored++
		}
	}
	if ignored == 0 {
		t.Error("a flood of roster messages from one author was never rate-limited")
	}
	if bytes.Equal(captured, discovery.OwnGossip(honest.svc)) {
		t.Error("a publish did not renew the roster message")
	}
}

// TestGossipBurstEndsInItsLastState: a host that changes its cards faster
// than receivers take its roster messages holds the excess back and sends
// its latest state once the rate allows, so every receiver ends with every
// agent, by gossip alone.
func TestGossipBurstEndsInItsLastState(t *testing.T) {
	checkLeaks(t)
	b := &bus{}
	tm := timing{ttl: 20 * time.Second, republish: 2 * time.Second, refresh: 2 * time.Second, cache: time.Second}
	newGossipNode := func(boot []peer.AddrInfo) *testNode {
		self := new(peer.ID)
		n := newNode(t, boot, tm, nil, b.publisher(self), discovery.WithRosterInterval(0))
		b.mu.Lock()
		*self = n.h.ID()
		b.nodes = append(b.nodes, n)
		b.mu.Unlock()
		return n
	}
	recv := newGossipNode(nil)
	host := newGossipNode([]peer.AddrInfo{recv.info()})
	waitRoutingTables(t, []*testNode{recv, host}, 1)
	const burst = 8
	for i := range burst {
		if _, err := host.reg.Register(agentCard(agentName(i), "echo")); err != nil {
			t.Fatal(err)
		}
		if err := host.svc.Publish(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Eventually(t, 20*time.Second, func() error {
		for i := range burst {
			if _, ok := recv.reg.Get(agentName(i) + "@" + host.h.ID().String()); !ok {
				return errors.New("the receiver lacks " + agentName(i))
			}
		}
		return nil
	})
	if st := recv.svc.Stats(); st.GossipIgnored != 0 {
		t.Errorf("%d roster messages ignored: the host sent past the rate", st.GossipIgnored)
	}
}

// TestGossipCatchUpEndsWhenHeld: a node that gossip already brought every
// roster message still counts a peer's snapshot of them as caught up, so
// the roster loop stops asking on every pass.
func TestGossipCatchUpEndsWhenHeld(t *testing.T) {
	checkLeaks(t)
	b := &bus{}
	first := gossipNode(t, b, nil, time.Hour, nil, agentCard(agentName(0), "echo"))
	second := gossipNode(t, b, []peer.AddrInfo{first.info()}, time.Hour, nil, agentCard(agentName(1), "echo"))
	nodes := []*testNode{first, second}
	waitRoutingTables(t, nodes, 1)
	publishAll(t, nodes)
	waitfor.Eventually(t, 20*time.Second, func() error {
		if _, ok := second.reg.Get(agentName(0) + "@" + first.h.ID().String()); !ok {
			return errors.New("gossip has not brought the first node's card yet")
		}
		return nil
	})
	if !discovery.SyncRoster(second.svc) {
		t.Fatal("a snapshot of roster messages already held did not end the catch-up")
	}
}

// TestGossipResendTravels: a node that holds a member's roster message
// ignores a repeat of it (so GossipSub would not forward the repeat past
// it), but takes the message the roster loop sends again, sealed under a
// new heartbeat, so that a member that missed the first hears the second
// through nodes that had the first.
func TestGossipResendTravels(t *testing.T) {
	checkLeaks(t)
	b := &bus{}
	recv := gossipNode(t, b, nil, 0, nil)
	host := gossipNode(t, b, []peer.AddrInfo{recv.info()}, 0, nil, agentCard("resent", "echo"))
	waitRoutingTables(t, []*testNode{recv, host}, 1)
	if err := host.svc.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := discovery.OwnGossip(host.svc)
	if err := recv.svc.TakeGossip(host.h.ID(), first); !errors.Is(err, discovery.ErrGossipIgnored) {
		t.Fatalf("a repeat of the message held: %v, want ignored", err)
	}
	b.mu.Lock()
	before := len(b.answers)
	b.mu.Unlock()
	discovery.Regossip(host.svc)
	second := discovery.OwnGossip(host.svc)
	if bytes.Equal(first, second) {
		t.Fatal("the message sent again is the same message")
	}
	b.mu.Lock()
	answers := b.answers[before:]
	b.mu.Unlock()
	if len(answers) != 1 || answers[0] != nil {
		t.Fatalf("the receiver answered %v to the message sent again, want it taken", answers)
	}
}

// A node that started alone (its network not up yet) spent its newcomer's
// roster passes on nobody. From its first connection it runs them again:
// its own message goes out again twice under new heartbeats, for the
// members whose mesh had not formed at the first, as at a start among
// peers.
func TestGossipNewcomerPassesAgainWhenNoLongerAlone(t *testing.T) {
	checkLeaks(t)
	b := &bus{}
	slowRepublish := gossipTiming
	slowRepublish.republish = 3 * time.Minute // no heartbeat within the test
	member := newNode(t, nil, slowRepublish, nil, b.publisher(new(peer.ID)))
	self := new(peer.ID)
	alone := newNode(t, nil, slowRepublish, []agentcard.Card{agentCard("late", "echo")}, b.publisher(self), discovery.WithRosterInterval(time.Minute))
	b.mu.Lock() // its publisher may already read it
	*self = alone.h.ID()
	b.mu.Unlock()
	resent := func(want uint64, within time.Duration) {
		t.Helper()
		waitfor.Eventually(t, within, func() error {
			if n := alone.svc.Stats().GossipResent; n < want {
				return fmt.Errorf("roster message sent again %d times, want %d", n, want)
			}
			return nil
		})
	}
	resent(2, 20*time.Second) // the start's passes, at about 3 and 7 s
	if err := alone.h.Connect(context.Background(), member.info()); err != nil {
		t.Fatal(err)
	}
	resent(4, 15*time.Second) // the same passes from the connection
	if st := member.svc.Stats(); st.RosterServed == 0 {
		t.Error("the node did not ask its new peer for the roster it missed")
	}
}

// newcomerCountingTopicPeers starts a member and a newcomer bootstrapping
// from it, hosting agent, both on one gossip bus, with no heartbeat within
// a test (republish every 3 minutes: the rate refills every 10 s). The
// newcomer's roster topic has as many peers as *topicPeers says.
func newcomerCountingTopicPeers(t *testing.T, agent string, topicPeers *atomic.Int64) (member, newcomer *testNode) {
	t.Helper()
	b := &bus{}
	slowRepublish := gossipTiming
	slowRepublish.republish = 3 * time.Minute
	member = newNode(t, nil, slowRepublish, nil, b.publisher(new(peer.ID)))
	self := new(peer.ID)
	newcomer = newNode(t, []peer.AddrInfo{member.info()}, slowRepublish, []agentcard.Card{agentCard(agent, "echo")},
		b.publisher(self), discovery.WithRosterInterval(time.Minute),
		discovery.WithGossipPeers(func() int { return int(topicPeers.Load()) }))
	b.mu.Lock()
	*self = newcomer.h.ID()
	b.nodes = append(b.nodes, member)
	b.mu.Unlock()
	return member, newcomer
}

// A newcomer whose first roster message went out to enough peers of the
// topic (WithGossipPeers) does not send it again on its roster passes:
// flood publishing handed it to each of them, and each forwarded it on its
// mesh. One that went out to fewer is sent again, as before.
func TestGossipResendSparedWhenTheFirstReachedPeers(t *testing.T) {
	checkLeaks(t)
	var topicPeers atomic.Int64
	topicPeers.Store(5)
	member, newcomer := newcomerCountingTopicPeers(t, "spared", &topicPeers)
	waitfor.Eventually(t, 20*time.Second, func() error {
		if n := newcomer.svc.Stats().GossipSpared; n < 2 {
			return fmt.Errorf("%d roster passes spared, want the start's 2", n)
		}
		return nil
	})
	st := newcomer.svc.Stats()
	if st.GossipSent == 0 || st.GossipResent != 0 {
		t.Fatalf("sent %d, sent again %d: want the first sent and none again", st.GossipSent, st.GossipResent)
	}
	if _, ok := member.reg.Get("spared@" + newcomer.h.ID().String()); !ok {
		t.Fatal("the member did not take the newcomer's one roster message")
	}

	topicPeers.Store(1) // the next goes out to one peer only
	if err := newcomer.svc.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	discovery.Regossip(newcomer.svc)
	if st := newcomer.svc.Stats(); st.GossipResent != 1 {
		t.Fatalf("sent again %d times after a message that went out to one peer, want 1", st.GossipResent)
	}
}

// A roster message that no longer lists an agent withdraws it from the
// registry, and the node is told which (WithWithdrawals), so that it can
// say so as it does when the host's own greeting withdraws it.
func TestGossipWithdrawalIsTold(t *testing.T) {
	checkLeaks(t)
	b := &bus{}
	var mu sync.Mutex
	var told []string
	self := new(peer.ID)
	recv := newNode(t, nil, gossipTiming, nil, b.publisher(self), discovery.WithRosterInterval(0),
		discovery.WithWithdrawals(func(host peer.ID, gone []string) {
			mu.Lock()
			told = append(told, gone...)
			mu.Unlock()
		}))
	b.mu.Lock()
	*self = recv.h.ID()
	b.nodes = append(b.nodes, recv)
	b.mu.Unlock()
	host := gossipNode(t, b, []peer.AddrInfo{recv.info()}, 0, nil, agentCard("kept", "echo"), agentCard("gone", "echo"))
	waitRoutingTables(t, []*testNode{recv, host}, 1)
	if err := host.svc.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	gone := "gone@" + host.h.ID().String()
	if _, ok := recv.reg.Get(gone); !ok {
		t.Fatal("the receiver does not list the agent after the host's publish")
	}
	if !host.reg.Unregister("gone") {
		t.Fatal("unregister failed")
	}
	if err := host.svc.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(told, gone) {
			return fmt.Errorf("told of %v, want %s", told, gone)
		}
		return nil
	})
	if _, ok := recv.reg.Get(gone); ok {
		t.Error("told of the withdrawal, but the registry still lists the agent")
	}
}

// A roster message due while no peer is on the topic is held, not sent to
// no one: sending it would spend the rate receivers allow its author, and
// a swarm started at once then sent every node's message a second time,
// all together, once the rate refilled. The latest goes out once a peer is
// on the topic, and only once.
func TestGossipHeldWhileNoPeerIsOnTheTopic(t *testing.T) {
	checkLeaks(t)
	var topicPeers atomic.Int64 // none yet
	_, newcomer := newcomerCountingTopicPeers(t, "held", &topicPeers)
	for range 5 { // more than the rate's burst
		// The roster message is sent (or held) before the DHT puts, which
		// may fail while the routing table is still empty.
		_ = newcomer.svc.Publish(context.Background())
	}
	if st := newcomer.svc.Stats(); st.GossipSent != 0 || st.GossipHeld < 5 {
		t.Fatalf("with no peer on the topic: sent %d, held %d; want none sent, 5 held", st.GossipSent, st.GossipHeld)
	}

	topicPeers.Store(5)
	// Sent by the next roster pass or the fetch loop, whichever comes
	// first; the other finds it gone out (to five peers, or the latest
	// sent), as the second roster pass does.
	waitfor.Eventually(t, 30*time.Second, func() error {
		if st := newcomer.svc.Stats(); st.GossipSent == 0 || st.GossipSpared == 0 {
			return fmt.Errorf("sent %d, spared %d: want it sent, then a pass spared", st.GossipSent, st.GossipSpared)
		}
		return nil
	})
	sent := newcomer.svc.Stats().GossipSent
	if sent != 1 {
		t.Fatalf("sent %d roster messages once a peer was on the topic, want 1", sent)
	}
	// A card change is sent at once: the rate was not spent on nobody.
	if _, err := newcomer.reg.Register(agentCard("second", "echo")); err != nil {
		t.Fatal(err)
	}
	_ = newcomer.svc.Publish(context.Background())
	if st := newcomer.svc.Stats(); st.GossipSent != sent+1 {
		t.Fatalf("a card change sent %d roster messages, want 1", st.GossipSent-sent)
	}
}
