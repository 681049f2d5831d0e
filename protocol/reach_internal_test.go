package protocol

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
)

// Among agents on nodes this one is not connected to, one on a node it has
// not tried goes before one on a node it could not reach, whatever their
// address order; among nodes it could not reach, the one that failed
// longest ago goes first (so failed nodes take turns); and a stream that
// opens, or a live one, forgets the failure.
func TestCapabilityRoutingRanksUntriedBeforeFailed(t *testing.T) {
	tg := rvNewTarget(t)
	hosts := make([]peer.ID, 2)
	for i := range hosts {
		_, pub, _ := crypto.GenerateEd25519Key(rand.Reader)
		hosts[i], _ = peer.IDFromPublicKey(pub)
	}
	// Both nodes are strangers, never connected.
	for i, name := range []string{"a-x", "b-x"} {
		c := agentcard.Card{ID: name, Name: name, Version: "1.0.0", Tier: 3, Protocols: []string{"a2a/1.0"},
			Capabilities: []agentcard.Capability{{ID: "x", Name: "x"}}, Host: hosts[i].String()}
		if _, err := tg.reg.MergeRemote(c); err != nil {
			t.Fatal(err)
		}
	}
	from, ok := tg.reg.Get("a0")
	if !ok {
		t.Fatal("no local agent a0")
	}
	pick := func() string {
		t.Helper()
		env := &envelope.Envelope{Recipient: "x", Metadata: &envelope.Metadata{RoutingHint: envelope.RoutingHintCapability}, Type: envelope.TypeNotification}
		c, err := tg.r.byCapability(env, from)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	// Both untried and equally vouched for: the salted tie-break picks
	// one, the same every time, whatever their names.
	if got, again := pick(), pick(); got != again || got != "a-x" && got != "b-x" {
		t.Fatalf("both untried: picked %s then %s, want one of a-x, b-x twice", got, again)
	}
	tg.r.unreached.put(hosts[0], time.Now())
	if got := pick(); got != "b-x" {
		t.Fatalf("a-x's node failed, b-x's untried: picked %s, want b-x", got)
	}
	tg.r.unreached.put(hosts[1], time.Now().Add(time.Second))
	if got := pick(); got != "a-x" {
		t.Fatalf("both failed, a-x's node longest ago: picked %s, want a-x", got)
	}
	tg.r.unreached.put(hosts[0], time.Now().Add(2*time.Second))
	if got := pick(); got != "b-x" {
		t.Fatalf("both failed, b-x's node longest ago: picked %s, want b-x", got)
	}
	tg.r.reached(hosts[0])
	if got := pick(); got != "a-x" {
		t.Fatalf("a-x's node reached again: picked %s, want a-x", got)
	}
}
