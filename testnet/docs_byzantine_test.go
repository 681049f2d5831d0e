package testnet_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/testnet"
)

// The attacker of these tests is a plain go-libp2p host: it joins a
// document's GossipSub topic and serves /nova/crdt/2.0.0 by hand, with
// signed updates built from docs/wire-protocol.md, independently of the
// crdt package.

// byzRecord is a libp2p record of the document update payload type.
type byzRecord struct{ data []byte }

func (*byzRecord) Domain() string                   { return "nova-crdt-update" }
func (*byzRecord) Codec() []byte                    { return []byte("/nova/crdt/update/2") }
func (r *byzRecord) MarshalRecord() ([]byte, error) { return r.data, nil }
func (r *byzRecord) UnmarshalRecord(b []byte) error { r.data = b; return nil }

type byzDep struct {
	_       struct{} `cbor:",toarray"`
	Replica string
	Seq     uint64
	Hash    []byte
}

type byzUpdate struct {
	Doc     string            `cbor:"doc"`
	Author  string            `cbor:"author"`
	First   uint64            `cbor:"first"`
	Last    uint64            `cbor:"last"`
	Deps    []byzDep          `cbor:"deps,omitempty"`
	Source  string            `cbor:"sourceAgentId"`
	Clock   map[string]uint64 `cbor:"vectorClock"`
	Payload []byte            `cbor:"payload"`
	Time    int64             `cbor:"timestamp"`
}

// byzDelta is a delta (crdt/delta wire layout) minting dot 1 of author,
// writing "/goal" there, with a context that also claims the victim's
// dots 1..upTo.
func byzDelta(t *testing.T, author, victim string, upTo uint64) []byte {
	t.Helper()
	reps := []string{author, victim}
	slices.Sort(reps)
	a, v := uint64(slices.Index(reps, author)), uint64(slices.Index(reps, victim))
	ctx := []uint64{a, 1, 1, v, 1, upTo}
	if v < a {
		ctx = []uint64{v, 1, upTo, a, 1, 1}
	}
	b, err := cbor.Marshal([]any{1, 2, reps, ctx, []uint64{a, 1, 1}, 1,
		[]any{[]any{"/goal", []any{[]any{a, 1, 1, `"pwned"`}}, []any{}, []any{}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func byzSeal(t *testing.T, key crypto.PrivKey, u byzUpdate) []byte {
	t.Helper()
	body, err := cbor.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	env, err := record.Seal(&byzRecord{data: body}, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type docAttacker struct {
	h     host.Host
	key   crypto.PrivKey
	topic *pubsub.Topic
}

func newDocAttacker(t *testing.T, swarm, doc string, answer func(s network.Stream)) *docAttacker {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if answer != nil {
		h.SetStreamHandler(crdt.ID, answer)
	}
	ps, err := pubsub.NewGossipSub(t.Context(), h, pubsub.WithMessageSignaturePolicy(pubsub.StrictSign), pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(crdt.Topic(swarm, doc))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Cancel)
	return &docAttacker{h: h, key: key, topic: topic}
}

func (a *docAttacker) id() string { return a.h.ID().String() }

func (a *docAttacker) connect(t *testing.T, nd *node.Node) {
	t.Helper()
	if err := a.h.Connect(t.Context(), peer.AddrInfo{ID: nd.ID(), Addrs: nd.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
}

func docValue(t *testing.T, nd *node.Node, doc, path string) string {
	t.Helper()
	v, err := nd.ReadDoc(context.Background(), doc, path)
	if err != nil {
		t.Fatal(err)
	}
	return string(v.Value)
}

func writeDoc(t *testing.T, nd *node.Node, doc, path, value string) {
	t.Helper()
	if _, err := nd.ApplyDocOp(context.Background(), doc, localapi.DocOp{Op: "set", Path: path, Value: json.RawMessage(value)}); err != nil {
		t.Fatalf("an honest write: %v", err)
	}
}

// TestByzantineDocumentAttacksRefused: a peer on the document's topic
// publishes the three attacks of an unsigned delta-state CRDT, as well
// signed updates of its own: a context claiming node 0's dots 1..2^40 (to
// delete its writes and pre-empt its next ones), the same naming a hash
// of nothing, a context claiming node 0 up to 2^64-1 (to wedge its next
// write), and an update in node 0's name. Nothing changes on the honest
// nodes, each refusal is a security event or a counted rejection, the
// honest nodes go on writing, and node 0, restarted, has its document
// intact.
func TestByzantineDocumentAttacksRefused(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	n0, n1 := net.Nodes[0], net.Nodes[1]
	swarm := n0.Config().Swarm
	writeDoc(t, n0, "plan", "/goal", `"ship"`)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if v := docValue(t, n1, "plan", "/goal"); v != `"ship"` {
			return fmt.Errorf("node 1 sees %s", v)
		}
		return nil
	})
	a := newDocAttacker(t, swarm, "plan", nil)
	a.connect(t, n0)
	a.connect(t, n1)
	victim := n0.ID().String()
	waitfor.Eventually(t, 10*time.Second, func() error {
		if len(a.topic.ListPeers()) < 2 {
			return fmt.Errorf("attacker sees %d topic peers", len(a.topic.ListPeers()))
		}
		return nil
	})
	base := func(payload []byte) byzUpdate {
		return byzUpdate{Doc: "plan", Author: a.id(), First: 1, Last: 1, Source: "m@" + a.id(),
			Clock: map[string]uint64{a.id(): 1}, Payload: payload, Time: time.Now().UnixMilli()}
	}
	deleteAll := base(byzDelta(t, a.id(), victim, 1<<40))
	fakeDep := base(byzDelta(t, a.id(), victim, 1<<40))
	fakeDep.Deps = []byzDep{{Replica: victim, Seq: 1 << 40, Hash: make([]byte, 32)}}
	wedge := base(byzDelta(t, a.id(), victim, math.MaxUint64))
	wedge.Deps = []byzDep{{Replica: victim, Seq: math.MaxUint64, Hash: make([]byte, 32)}}
	forged := base(byzDelta(t, victim, a.id(), 1))
	forged.Author, forged.Source, forged.Clock = victim, "a0@"+victim, map[string]uint64{victim: 1}
	rejected := n0.Docs().Rejected()
	for _, u := range []byzUpdate{deleteAll, fakeDep, wedge, forged} {
		if err := a.topic.Publish(t.Context(), byzSeal(t, a.key, u)); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		inv, forg := securityEvents(n0, crdt.CodeInvalidUpdate), securityEvents(n0, crdt.CodeForgedUpdate)
		if inv < 2 || forg < 1 || n0.Docs().Rejected() < rejected+3 {
			return fmt.Errorf("node 0: %d invalid, %d forged security events, %d rejected", inv, forg, n0.Docs().Rejected()-rejected)
		}
		return nil
	})
	for i, nd := range net.Nodes {
		if v := docValue(t, nd, "plan", "/goal"); v != `"ship"` {
			t.Fatalf("node %d: /goal is %s after the attacks", i, v)
		}
	}
	// Node 0 writes on: nothing wedged, nothing pre-empted.
	writeDoc(t, n0, "plan", "/next", `1`)
	writeDoc(t, n0, "plan", "/goal", `"ship it"`)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if v := docValue(t, n1, "plan", "/goal"); v != `"ship it"` {
			return fmt.Errorf("node 1 sees %s", v)
		}
		return nil
	})
	// Restarted, node 0 has its document whole, and writes on.
	n0 = net.Restart(0, nil)
	net.Connect(0, 1)
	if v := docValue(t, n0, "plan", ""); v != `{"goal":"ship it","next":1}` {
		t.Fatalf("node 0 after a restart: %s", v)
	}
	writeDoc(t, n0, "plan", "/after", `true`)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if v := docValue(t, n1, "plan", "/after"); v != `true` {
			return fmt.Errorf("node 1 sees %s", v)
		}
		return nil
	})
}

// TestByzantineCatchupAnswersRefused: a peer that answers catch-ups sends
// an update in node 1's name (signed with its own key) and a bare
// unsigned delta (a catch-up answer of the unsigned protocol): node 0
// applies neither, raises a security event for the forgery, counts both,
// and its document stays as it was.
func TestByzantineCatchupAnswersRefused(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	n0, n1 := net.Nodes[0], net.Nodes[1]
	writeDoc(t, n1, "plan", "/goal", `"ship"`)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if v := docValue(t, n0, "plan", "/goal"); v != `"ship"` {
			return fmt.Errorf("node 0 sees %s", v)
		}
		return nil
	})
	victim := n1.ID().String()
	var a *docAttacker
	served := make(chan struct{}, 16)
	a = newDocAttacker(t, n0.Config().Swarm, "plan", func(s network.Stream) {
		defer s.Close()
		if _, err := frame.NewReader(bufio.NewReader(s), 1<<20).Next(); err != nil {
			s.Reset()
			return
		}
		planted := byzUpdate{Doc: "plan", Author: victim, First: 1, Last: 1, Source: "a1@" + victim,
			Clock: map[string]uint64{victim: 1}, Payload: byzDelta(t, victim, a.id(), 1), Time: 1}
		for _, f := range []map[string]any{
			{"u": byzSeal(t, a.key, planted)},
			{"u": byzDelta(t, a.id(), victim, 1<<40)},
			{"z": true},
		} {
			b, _ := cbor.Marshal(f)
			if err := frame.Write(s, b); err != nil {
				return
			}
		}
		served <- struct{}{}
	})
	rejected := n0.Docs().Rejected()
	a.connect(t, n0) // node 0 catches up with a new peer that speaks the protocol
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("node 0 never asked the attacker for a catch-up")
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if securityEvents(n0, crdt.CodeForgedUpdate) < 1 || n0.Docs().Rejected() <= rejected {
			return fmt.Errorf("no forged-update event (%d) or rejection counted", securityEvents(n0, crdt.CodeForgedUpdate))
		}
		return nil
	})
	if v := docValue(t, n0, "plan", ""); v != `{"goal":"ship"}` {
		t.Fatalf("node 0 after the answers: %s", v)
	}
	writeDoc(t, n0, "plan", "/goal", `"ship it"`)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if v := docValue(t, n1, "plan", "/goal"); v != `"ship it"` {
			return fmt.Errorf("node 1 sees %s", v)
		}
		return nil
	})
}
