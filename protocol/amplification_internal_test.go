package protocol

// Hostile peers that would make honest nodes do more than they were asked:
// a broadcast that every agent of the swarm would answer, and a hello whose
// valid cards ride in with a forged one. Real hosts on loopback.

import (
	"bufio"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/tiers"
)

// A broadcast of a type that asks for an answer (request, task-proposal),
// published raw on the topic by a peer with a valid card and its own
// signature, is Rejected by the receiver's validator with a security event
// naming the peer, and reaches no handler (so draws no answer). An honest
// broadcast right after still arrives.
func TestBroadcastAskingForAnswerRefusedOnReceipt(t *testing.T) {
	n := bvStart(t)
	m, topic := bvMalloryOnTopic(t, n)

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

// A hello is kept whole or not at all: two valid cards followed by a forged
// one (signed by another peer, or with a broken signature) leave none of
// them in the receiver's registry, the stream reset and a security event
// raised; the same valid cards alone are all merged.
func TestHostileHelloAllOrNothing(t *testing.T) {
	other, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherID, err := peer.IDFromPrivateKey(other)
	if err != nil {
		t.Fatal(err)
	}
	seal := func(t *testing.T, id string, host peer.ID, key crypto.PrivKey) []byte {
		t.Helper()
		b, err := agentcard.Seal(agentcard.Card{ID: id, Name: id, Version: "1.0.0", Tier: tiers.L3,
			Capabilities: []agentcard.Capability{}, Host: host.String()}, key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		forged func(m *rvMallory) []byte
	}{
		{"signed by another peer", func(*rvMallory) []byte { return seal(t, "v3", otherID, other) }},
		{"broken signature", func(m *rvMallory) []byte {
			b := seal(t, "v3", m.h.ID(), m.key)
			b[len(b)-1] ^= 0xff // the signature ends the envelope
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &bvSink{}
			tg := rvNewTarget(t, WithEventSink(sink))
			m := rvNewMallory(t, tg)
			valid := [][]byte{seal(t, "v1", m.h.ID(), m.key), seal(t, "v2", m.h.ID(), m.key)}
			hello := func(cards [][]byte) *rvStream {
				t.Helper()
				st, err := m.h.NewStream(t.Context(), tg.h.ID(), IDA2A)
				if err != nil {
					t.Fatal(err)
				}
				s := &rvStream{st: st, bw: bufio.NewWriterSize(st, 64<<10)}
				s.write(&wireMsg{Kind: kindHello, Cards: cards})
				s.flush()
				return s
			}
			held := func(ids ...string) []string {
				var out []string
				for _, id := range ids {
					if _, ok := tg.reg.GetShared(m.addr(id)); ok {
						out = append(out, id)
					}
				}
				return out
			}

			s := hello(slices.Concat(valid, [][]byte{tc.forged(m)}))
			_ = s.st.SetReadDeadline(time.Now().Add(5 * time.Second))
			fr := frame.NewReader(s.st, 0)
			for {
				if _, err := fr.Next(); err != nil {
					var ne net.Error
					if errors.Is(err, io.EOF) || errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("the stream of a forged hello ended with %v, want a reset", err)
					}
					break
				}
			}
			if !rvWait(t, 5*time.Second, func() bool {
				for _, ev := range sink.security() {
					if ev.Peer == m.h.ID() {
						return true
					}
				}
				return false
			}) {
				t.Fatal("a forged hello raised no security event")
			}
			if got := held("v1", "v2", "v3"); len(got) != 0 {
				t.Fatalf("cards %v of a hello with a forged card entered the registry, want none", got)
			}

			hello(valid)
			if !rvWait(t, 5*time.Second, func() bool { return len(held("v1", "v2")) == 2 }) {
				t.Fatalf("a hello of valid cards merged %v, want v1 and v2", held("v1", "v2"))
			}
		})
	}
}
