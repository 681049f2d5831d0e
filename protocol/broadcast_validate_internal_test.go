package protocol

// The broadcast topic validator, called directly with crafted GossipSub
// messages: each test fails when the check it names is removed from
// validateBroadcast.

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/tiers"
)

const bvSwarm = "bv"

// bvSink records the router's events.
type bvSink struct {
	mu  sync.Mutex
	evs []Event
}

func (s *bvSink) Emit(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
}

// security returns the security events emitted so far.
func (s *bvSink) security() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, ev := range s.evs {
		if ev.Type == EvtSecurityRaised {
			out = append(out, ev)
		}
	}
	return out
}

// received is how many message-received events envelope id raised.
func (s *bvSink) received(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := 0
	for _, ev := range s.evs {
		if ev.Type == EvtMessageReceived && ev.EnvelopeID == id {
			c++
		}
	}
	return c
}

// bvTracer counts the messages GossipSub delivered to subscribers and those
// it ignored on a validator's word.
type bvTracer struct{ delivered, ignored atomic.Int64 }

func (tr *bvTracer) RejectMessage(_ *pubsub.Message, reason string) {
	if reason == pubsub.RejectValidationIgnored {
		tr.ignored.Add(1)
	}
}
func (*bvTracer) Join(string)                                 {}
func (*bvTracer) Leave(string)                                {}
func (*bvTracer) Graft(peer.ID, string)                       {}
func (*bvTracer) Prune(peer.ID, string)                       {}
func (*bvTracer) ValidateMessage(*pubsub.Message)             {}
func (tr *bvTracer) DeliverMessage(*pubsub.Message)           { tr.delivered.Add(1) }
func (*bvTracer) DuplicateMessage(*pubsub.Message)            {}
func (*bvTracer) ThrottlePeer(peer.ID)                        {}
func (*bvTracer) RecvRPC(*pubsub.RPC)                         {}
func (*bvTracer) SendRPC(*pubsub.RPC, peer.ID)                {}
func (*bvTracer) DropRPC(*pubsub.RPC, peer.ID)                {}
func (*bvTracer) UndeliverableMessage(*pubsub.Message)        {}
func (*bvTracer) OnNewOutboundStream(peer.ID, libp2pproto.ID) {}
func (*bvTracer) OnClosedOutboundStream(peer.ID)              {}

// bvNet is two routers on the broadcast topic: a (the receiver under test,
// agent "a0", L3, no sandbox) and b (agent "b0", L0, sandbox "lab"), once a
// knows b's card.
type bvNet struct {
	ha, hb host.Host
	ra, rb *Router
	sink   *bvSink
	trace  *bvTracer
	got    sync.Map // envelope id -> *atomic.Int64, a0's handler calls
	b0     string   // b0's address
}

func bvStart(t *testing.T) *bvNet {
	t.Helper()
	n := &bvNet{sink: &bvSink{}, trace: &bvTracer{}}
	n.ha, n.hb = loopbackHost(t), loopbackHost(t)
	psA, err := pubsub.NewGossipSub(t.Context(), n.ha, append(PubSubOptions(bvSwarm, 1<<20), pubsub.WithRawTracer(n.trace))...)
	if err != nil {
		t.Fatal(err)
	}
	psB, err := pubsub.NewGossipSub(t.Context(), n.hb, PubSubOptions(bvSwarm, 1<<20)...)
	if err != nil {
		t.Fatal(err)
	}
	regA, regB := agentcard.NewRegistry(n.ha.ID()), agentcard.NewRegistry(n.hb.ID())
	if _, err := regA.Register(agentcard.Card{ID: "a0", Name: "a0", Version: "1.0.0", Tier: tiers.L3, Capabilities: []agentcard.Capability{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := regB.Register(agentcard.Card{ID: "b0", Name: "b0", Version: "1.0.0", Tier: tiers.L0, SandboxID: "lab", Capabilities: []agentcard.Capability{}}); err != nil {
		t.Fatal(err)
	}
	if n.ra, err = New(n.ha, regA, WithPubSub(psA, bvSwarm), WithEventSink(n.sink)); err != nil {
		t.Fatal(err)
	}
	if n.rb, err = New(n.hb, regB, WithPubSub(psB, bvSwarm)); err != nil {
		t.Fatal(err)
	}
	n.ra.Handle("a0", func(_ context.Context, env *envelope.Envelope) (any, error) {
		c, _ := n.got.LoadOrStore(env.ID, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		return nil, nil
	})
	for _, r := range []*Router{n.ra, n.rb} {
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	connectHosts(t, n.hb, n.ha)
	n.b0 = "b0@" + n.hb.ID().String()
	if !rvWait(t, 5*time.Second, func() bool {
		_, ok := regA.GetShared(n.b0)
		return ok && len(n.rb.TopicPeers()) > 0
	}) {
		t.Fatal("a never learned b0's card, or b never saw a on the topic")
	}
	return n
}

// handled is how many times a0's handler got envelope id.
func (n *bvNet) handled(id string) int64 {
	c, ok := n.got.Load(id)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

// bvEnvelope is a broadcast from sender whose metadata is md (nil: none).
func bvEnvelope(t *testing.T, sender, recipient string, md *envelope.Metadata) *envelope.Envelope {
	t.Helper()
	env, err := envelope.NewFactory().New(sender, recipient, envelope.TypeNotification, "hello")
	if err != nil {
		t.Fatal(err)
	}
	env.Metadata = md
	return env
}

func bvEncode(t *testing.T, env *envelope.Envelope) []byte {
	t.Helper()
	b, err := envelope.EncodeCBOR(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bvMessage is a GossipSub message on the topic published (and forwarded)
// by from.
func bvMessage(from peer.ID, data []byte) *pubsub.Message {
	topic := BroadcastTopic(bvSwarm)
	return &pubsub.Message{Message: &pb.Message{From: []byte(from), Data: data, Topic: &topic}, ReceivedFrom: from}
}

// validate runs a's validator on data published by b, and returns the
// result and the security events it emitted.
func (n *bvNet) validate(t *testing.T, data []byte) (pubsub.ValidationResult, *pubsub.Message, []Event) {
	t.Helper()
	before := len(n.sink.security())
	msg := bvMessage(n.hb.ID(), data)
	res := n.ra.validateBroadcast(t.Context(), n.hb.ID(), msg)
	return res, msg, n.sink.security()[before:]
}

// wantSecurity checks that evs is exactly one security event with code,
// about b, whose detail contains detail.
func (n *bvNet) wantSecurity(t *testing.T, evs []Event, code, detail string) {
	t.Helper()
	if len(evs) != 1 {
		t.Fatalf("%d security events, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Type != EvtSecurityRaised || ev.Code != code || ev.Peer != n.hb.ID() || ev.Success || !strings.Contains(ev.Detail, detail) {
		t.Fatalf("security event %+v, want type %s, code %s, peer %s, detail containing %q", ev, EvtSecurityRaised, code, n.hb.ID(), detail)
	}
}

// bvRewire decodes a valid encoding as a generic CBOR map, applies edit and
// re-encodes it: an envelope that decodes as CBOR but fails validation.
func bvRewire(t *testing.T, valid []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := cbor.Unmarshal(valid, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := cbor.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Undecodable bytes, and an envelope that decodes but fails validation, are
// Rejected with a security event naming the publisher.
func TestBroadcastValidateRejectsMalformed(t *testing.T) {
	n := bvStart(t)
	valid := bvEncode(t, bvEnvelope(t, n.b0, envelope.Broadcast, &envelope.Metadata{Tier: uint8(tiers.L0), SandboxID: "lab"}))
	for _, tc := range []struct {
		name string
		data []byte
		code string
	}{
		{"not CBOR", []byte("this is not an envelope"), envelope.CodeInvalidEnvelope},
		{"empty", nil, envelope.CodeInvalidEnvelope},
		{"CBOR but not an envelope", bvRewire(t, valid, func(m map[string]any) { clear(m); m["hello"] = "world" }), ""},
		{"unknown type", bvRewire(t, valid, func(m map[string]any) { m["type"] = "no-such-type" }), envelope.CodeInvalidEnvelope},
		{"no id", bvRewire(t, valid, func(m map[string]any) { m["id"] = "" }), envelope.CodeInvalidEnvelope},
		{"schema version 2", bvRewire(t, valid, func(m map[string]any) { m["schemaVersion"] = 2 }), envelope.CodeSchemaVersionMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := envelope.DecodeCBOR(tc.data); err == nil {
				t.Fatal("the crafted bytes decode as a valid envelope")
			} else if tc.code != "" && CodeOf(err) != tc.code {
				t.Fatalf("decoding fails with %s (%v), want %s", CodeOf(err), err, tc.code)
			}
			res, msg, evs := n.validate(t, tc.data)
			if res != pubsub.ValidationReject {
				t.Fatalf("validator returned %v, want ValidationReject", res)
			}
			if msg.ValidatorData != nil {
				t.Fatalf("a rejected message carries validator data %+v", msg.ValidatorData)
			}
			code := tc.code
			if code == "" && len(evs) > 0 {
				code = evs[0].Code // the decoder's, whichever it is
			}
			n.wantSecurity(t, evs, code, "malformed broadcast")
		})
	}
}

// A well-formed envelope from a known sender, with metadata matching its
// card, but addressed to one agent rather than "*", is Rejected.
func TestBroadcastValidateRejectsNonBroadcastRecipient(t *testing.T) {
	n := bvStart(t)
	md := &envelope.Metadata{Tier: uint8(tiers.L0), SandboxID: "lab"}
	ok := bvEncode(t, bvEnvelope(t, n.b0, envelope.Broadcast, md))
	if res, _, evs := n.validate(t, ok); res != pubsub.ValidationAccept || len(evs) != 0 {
		t.Fatalf("control broadcast: %v, events %+v; want accepted", res, evs)
	}
	for _, rcpt := range []string{"a0@" + n.ha.ID().String(), "a0", "**"} {
		res, _, evs := n.validate(t, bvEncode(t, bvEnvelope(t, n.b0, rcpt, md)))
		if res != pubsub.ValidationReject {
			t.Fatalf("recipient %q: validator returned %v, want ValidationReject", rcpt, res)
		}
		n.wantSecurity(t, evs, envelope.CodeInvalidEnvelope, "recipient")
	}
}

// The sender must be an agent of the publishing peer whose card the
// receiver holds, and the envelope's tier and sandbox must be the card's:
// otherwise Reject, UNAUTHORIZED_SENDER. An agent of the publisher whose
// card is not known here is accepted (for forwarding) but marked unknown.
func TestBroadcastValidateRejectsForgedSender(t *testing.T) {
	n := bvStart(t)
	for _, tc := range []struct {
		name   string
		sender string
		md     *envelope.Metadata
		want   pubsub.ValidationResult
		detail string // of the security event; "" for none
	}{
		{"matches the card", n.b0, &envelope.Metadata{Tier: uint8(tiers.L0), SandboxID: "lab"}, pubsub.ValidationAccept, ""},
		{"tier above the card's", n.b0, &envelope.Metadata{Tier: uint8(tiers.L3), SandboxID: "lab"}, pubsub.ValidationReject, "contradicts the signed card"},
		{"tier L1, card L0", n.b0, &envelope.Metadata{Tier: uint8(tiers.L1), SandboxID: "lab"}, pubsub.ValidationReject, "contradicts the signed card"},
		{"no sandbox, card in lab", n.b0, &envelope.Metadata{Tier: uint8(tiers.L0)}, pubsub.ValidationReject, "contradicts the signed card"},
		{"another sandbox", n.b0, &envelope.Metadata{Tier: uint8(tiers.L0), SandboxID: "other"}, pubsub.ValidationReject, "contradicts the signed card"},
		{"an agent of another peer", "a0@" + n.ha.ID().String(), &envelope.Metadata{Tier: uint8(tiers.L3)}, pubsub.ValidationReject, "forged broadcast"},
		{"a bare name", "b0", &envelope.Metadata{Tier: uint8(tiers.L0), SandboxID: "lab"}, pubsub.ValidationReject, "forged broadcast"},
		{"no card known here", "b9@" + n.hb.ID().String(), &envelope.Metadata{Tier: uint8(tiers.L0)}, pubsub.ValidationAccept, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := bvEnvelope(t, tc.sender, envelope.Broadcast, tc.md)
			res, msg, evs := n.validate(t, bvEncode(t, env))
			if res != tc.want {
				t.Fatalf("validator returned %v, want %v", res, tc.want)
			}
			if tc.detail == "" {
				if len(evs) != 0 {
					t.Fatalf("security events %+v, want none", evs)
				}
				in, ok := msg.ValidatorData.(*broadcastIn)
				if !ok || in.env.ID != env.ID || in.known != (tc.sender == n.b0) {
					t.Fatalf("validator data %+v, want the envelope, known=%v", msg.ValidatorData, tc.sender == n.b0)
				}
				if in.known && in.from.Address() != n.b0 {
					t.Fatalf("attributed to %s, want %s", in.from.Address(), n.b0)
				}
				return
			}
			n.wantSecurity(t, evs, CodeUnauthorizedSender, tc.detail)
			if evs[0].EnvelopeID != env.ID || evs[0].Sender != tc.sender {
				t.Fatalf("security event %+v does not name envelope %s from %s", evs[0], env.ID, tc.sender)
			}
		})
	}
}

// A broadcast delivered once is Ignored when it comes again (the same
// envelope id from the same sender, in a new GossipSub message, as a peer
// replaying it would send): the forwarder is not penalised, no security
// event is raised and the agent does not get it twice.
func TestBroadcastValidateIgnoresDuplicate(t *testing.T) {
	n := bvStart(t)
	m, topic := bvMalloryOnTopic(t, n)
	env := bvEnvelope(t, m.addr("m"), envelope.Broadcast, &envelope.Metadata{Tier: uint8(tiers.L3)})
	data := bvEncode(t, env)
	if err := topic.Publish(t.Context(), data); err != nil {
		t.Fatal(err)
	}
	if !rvWait(t, 5*time.Second, func() bool { return n.handled(env.ID) > 0 }) {
		t.Fatal("a0 never got the broadcast")
	}

	// Direct: the validator says Ignore, not Reject, and raises no event.
	before := len(n.sink.security())
	msg := bvMessage(m.h.ID(), data)
	if res := n.ra.validateBroadcast(t.Context(), m.h.ID(), msg); res != pubsub.ValidationIgnore {
		t.Fatalf("validator returned %v for a duplicate, want ValidationIgnore", res)
	}
	if evs := n.sink.security()[before:]; len(evs) != 0 || msg.ValidatorData != nil {
		t.Fatalf("a duplicate raised %+v, carries %+v", evs, msg.ValidatorData)
	}

	// Through GossipSub: m publishes the same envelope twice more.
	ignored := n.trace.ignored.Load()
	for range 2 {
		if err := topic.Publish(t.Context(), data); err != nil {
			t.Fatal(err)
		}
	}
	if !rvWait(t, 5*time.Second, func() bool { return n.trace.ignored.Load()-ignored >= 2 }) {
		t.Fatalf("a's GossipSub ignored %d of the 2 re-published copies", n.trace.ignored.Load()-ignored)
	}
	if got := n.handled(env.ID); got != 1 {
		t.Fatalf("a0 got the broadcast %d times, want 1", got)
	}

	// A burst of copies that all pass the validator, because none is
	// recorded yet: the broadcast loop is held on an earlier broadcast
	// (every handler slot taken). Released, the loop delivers only one.
	publish := func(e *envelope.Envelope) {
		t.Helper()
		if err := topic.Publish(t.Context(), bvEncode(t, e)); err != nil {
			t.Fatal(err)
		}
	}
	for range cap(n.ra.sem) {
		n.ra.sem <- struct{}{}
	}
	var freeOnce sync.Once
	free := func() {
		freeOnce.Do(func() {
			for range cap(n.ra.sem) {
				<-n.ra.sem
			}
		})
	}
	t.Cleanup(free)
	delivered := n.trace.delivered.Load()
	publish(bvEnvelope(t, m.addr("m"), envelope.Broadcast, &envelope.Metadata{Tier: uint8(tiers.L3)})) // holds the loop
	if !rvWait(t, 5*time.Second, func() bool { return n.trace.delivered.Load() > delivered }) {
		t.Fatal("the broadcast holding the loop was never delivered to the subscription")
	}
	const copies = 20
	burst := bvEnvelope(t, m.addr("m"), envelope.Broadcast, &envelope.Metadata{Tier: uint8(tiers.L3)})
	delivered = n.trace.delivered.Load()
	for range copies {
		publish(burst)
	}
	if !rvWait(t, 5*time.Second, func() bool { return n.trace.delivered.Load()-delivered >= copies }) {
		t.Fatalf("%d of %d copies passed the validator while the loop was held, want all", n.trace.delivered.Load()-delivered, copies)
	}
	free()
	last := bvEnvelope(t, m.addr("m"), envelope.Broadcast, &envelope.Metadata{Tier: uint8(tiers.L3)})
	publish(last) // after the copies in the subscription: when a0 has it, the loop is past them
	if !rvWait(t, 5*time.Second, func() bool { return n.handled(last.ID) > 0 }) {
		t.Fatal("a0 never got the broadcast after the burst")
	}
	if got := n.sink.received(burst.ID); got != 1 {
		t.Fatalf("%d copies of one broadcast were delivered to a0, want 1", got)
	}
	if got := n.handled(burst.ID); got != 1 {
		t.Fatalf("a0's handler got the burst %d times, want 1", got)
	}
	for _, ev := range n.sink.security() {
		if ev.EnvelopeID == env.ID || ev.EnvelopeID == burst.ID {
			t.Fatalf("a duplicate raised a security event: %+v", ev)
		}
	}
}

// bvMalloryOnTopic is an attacker host m that has shown a its signed card
// for agent "m" (L3, no sandbox) and joined the broadcast topic with a
// plain GossipSub (no nova validator of its own, so nothing stops what it
// publishes), once a knows the card and m sees a on the topic.
func bvMalloryOnTopic(t *testing.T, n *bvNet) (*rvMallory, *pubsub.Topic) {
	t.Helper()
	tg := &rvTarget{h: n.ha, r: n.ra}
	m := rvNewMallory(t, tg)
	_ = m.stream(tg, "m")
	ps, err := pubsub.NewGossipSub(t.Context(), m.h, PubSubOptions(bvSwarm, 1<<20)...)
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(BroadcastTopic(bvSwarm))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	if !rvWait(t, 5*time.Second, func() bool {
		_, ok := n.ra.reg.GetShared(m.addr("m"))
		return ok && len(topic.ListPeers()) > 0
	}) {
		t.Fatal("a never learned m's card, or m never saw a on the topic")
	}
	return m, topic
}
