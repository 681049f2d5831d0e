package protocol

// Hostile peers that would make honest nodes do more than they were asked:
// a broadcast that every agent of the swarm would answer. Real hosts on
// loopback.

import (
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/tiers"
)

// A broadcast of a type that asks for an answer (request, task-proposal),
// published raw on the topic by a peer with a valid card and its own
// signature, is Rejected by the receiver's validator with a security event
// naming the peer, and reaches no handler (so draws no answer). An honest
// broadcast right after still arrives.
func TestBroadcastAskingForAnswerRefusedOnReceipt(t *testing.T) {
	n := bvStart(t)
	tg := &rvTarget{h: n.ha, r: n.ra}
	m := rvNewMallory(t, tg)
	_ = m.stream(tg, "m") // presents m's signed card (L3, no sandbox)
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

	var refused []*envelope.Envelope
	for _, typ := range []envelope.Type{envelope.TypeRequest, envelope.TypeTaskProposal} {
		env, err := envelope.NewFactory().New(m.addr("m"), envelope.Broadcast, typ, "answer me")
		if err != nil {
			t.Fatal(err)
		}
		env.Metadata = &envelope.Metadata{Tier: uint8(tiers.L3)}
		if err := topic.Publish(t.Context(), bvEncode(t, env)); err != nil {
			t.Fatal(err)
		}
		var ev Event
		if !rvWait(t, 5*time.Second, func() bool {
			for _, e := range n.sink.security() {
				if e.EnvelopeID == env.ID {
					ev = e
					return true
				}
			}
			return false
		}) {
			t.Fatalf("a %s broadcast raised no security event", typ)
		}
		if ev.Code != envelope.CodeInvalidEnvelope || ev.Peer != m.h.ID() || ev.Sender != m.addr("m") || ev.MessageType != typ {
			t.Fatalf("security event %+v, want %s naming peer %s, sender %s, type %s", ev, envelope.CodeInvalidEnvelope, m.h.ID(), m.addr("m"), typ)
		}
		refused = append(refused, env)
	}

	// Honest traffic: b0's notification, published after the refused
	// broadcasts, reaches a0; by then any of them would have too.
	honest, err := envelope.NewFactory().New("b0", envelope.Broadcast, envelope.TypeNotification, "news")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.rb.Send(t.Context(), honest); err != nil {
		t.Fatal(err)
	}
	if !rvWait(t, 5*time.Second, func() bool { return n.handled(honest.ID) > 0 }) {
		t.Fatal("a0 never got b0's notification")
	}
	for _, env := range refused {
		if got, rcv := n.handled(env.ID), n.sink.received(env.ID); got != 0 || rcv != 0 {
			t.Fatalf("the %s broadcast reached a0's handler %d times (%d received events), want never", env.Type, got, rcv)
		}
	}
}
