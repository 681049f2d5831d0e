package protocol

import (
	"crypto/rand"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
)

// Rosters of one peer applied out of the order the peer took them in (two
// announcements racing, or a new stream's greeting) must not let the
// older withdraw an agent the newer lists; a peer that restarted (a new
// boot) starts its sequence again.
func TestOlderRosterNeverWithdrawsANewerAgent(t *testing.T) {
	tg := rvNewTarget(t)
	_, pub, _ := crypto.GenerateEd25519Key(rand.Reader)
	p, _ := peer.IDFromPublicKey(pub)
	merge := func(id string) {
		t.Helper()
		c := agentcard.Card{ID: id, Name: id, Version: "1.0.0", Tier: 3, Protocols: []string{"a2a/1.0"}, Capabilities: []agentcard.Capability{}, Host: p.String()}
		if _, err := tg.reg.MergeRemote(c); err != nil {
			t.Fatal(err)
		}
	}
	has := func(id string) bool {
		_, ok := tg.reg.Get(id + "@" + p.String())
		return ok
	}
	merge("alice")
	merge("xavier") // registered on p after its roster 1 was taken
	tg.r.retainCards(p, []string{"alice", "xavier"}, rosterMark{boot: 7, seq: 2})
	tg.r.retainCards(p, []string{"alice"}, rosterMark{boot: 7, seq: 1}) // written late
	if !has("xavier") {
		t.Fatal("an older roster withdrew an agent a newer one lists")
	}
	tg.r.retainCards(p, []string{"alice"}, rosterMark{boot: 7, seq: 2}) // a replay
	if !has("xavier") {
		t.Fatal("a replayed roster was applied")
	}
	tg.r.retainCards(p, []string{"alice"}, rosterMark{boot: 7, seq: 3})
	if has("xavier") || !has("alice") {
		t.Fatalf("a newer roster: xavier %v, alice %v", has("xavier"), has("alice"))
	}
	merge("xavier")
	tg.r.retainCards(p, []string{"alice"}, rosterMark{boot: 9, seq: 1}) // p restarted
	if has("xavier") {
		t.Fatal("the first roster of a restarted peer was ignored")
	}
}
