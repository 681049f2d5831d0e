package agentcard_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
)

func remoteCount(r *agentcard.Registry, host string) int {
	n := 0
	for _, c := range r.Remote() {
		if c.Host == host {
			n++
		}
	}
	return n
}

// TestRemoteCardsPerHostBounded: one host's cards stop at
// MaxRemoteCardsPerHost (the reviewer sent 30,000 cards from one peer;
// 3,000, over ten times the bound, show the same); the
// refusal is a typed error with its code; updates and refreshes of held
// cards, other hosts, and room made by removal or expiry still work.
func TestRemoteCardsPerHostBounded(t *testing.T) {
	nodes := testNodes(t)
	clk := newClock()
	r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(clk.Now))
	host, other := nodes[1].id, nodes[2].id
	const sent = 3000
	refused := 0
	for i := range sent {
		_, err := r.MergeRemote(remoteCard(fmt.Sprintf("a%05d", i), host, 1))
		if i < agentcard.MaxRemoteCardsPerHost {
			if err != nil {
				t.Fatalf("card %d of %d: %v", i, agentcard.MaxRemoteCardsPerHost, err)
			}
			continue
		}
		refused++
		wrapped := fmt.Errorf("card from %s refused: %w", host, err)
		var tm *agentcard.TooManyCardsError
		if !errors.Is(wrapped, agentcard.ErrTooManyCards) || !errors.As(wrapped, &tm) || errors.Is(err, agentcard.ErrInvalidCard) {
			t.Fatalf("card %d: %v, want a *TooManyCardsError", i, err)
		}
		if tm.Host != host.String() || tm.ID != fmt.Sprintf("a%05d", i) || tm.Limit != agentcard.MaxRemoteCardsPerHost ||
			tm.Code() != agentcard.CodeTooManyCards {
			t.Fatalf("error fields %+v, code %s", tm, tm.Code())
		}
	}
	if n := remoteCount(r, host.String()); n != agentcard.MaxRemoteCardsPerHost || refused != sent-agentcard.MaxRemoteCardsPerHost {
		t.Fatalf("%d cards held and %d refused from one host after %d", n, refused, sent)
	}
	if _, ok := r.Get(fmt.Sprintf("a%05d@%s", agentcard.MaxRemoteCardsPerHost, host)); ok {
		t.Fatal("a refused card is visible")
	}

	// Held cards: a new revision replaces, the same one refreshes, through
	// MergeRemote and MergeRemoteAt.
	if changed := mustMerge(t, r, remoteCard("a00000", host, 2)); !changed {
		t.Fatal("a new revision of a held card did not replace it")
	}
	if changed := mustMerge(t, r, remoteCard("a00000", host, 2)); changed {
		t.Fatal("a refresh changed the card")
	}
	if _, err := r.MergeRemoteAt(remoteCard("a00001", host, 3), clk.Now()); err != nil {
		t.Fatalf("MergeRemoteAt of a held card: %v", err)
	}
	if _, err := r.MergeRemoteAt(remoteCard("b", host, 1), clk.Now()); !errors.Is(err, agentcard.ErrTooManyCards) {
		t.Fatalf("MergeRemoteAt of a new card past the bound: %v", err)
	}
	// Another host is not affected.
	mustMerge(t, r, remoteCard("a00000", other, 1))

	// Room is made by removal...
	if !r.RemoveRemote(fmt.Sprintf("a00002@%s", host)) {
		t.Fatal("RemoveRemote")
	}
	mustMerge(t, r, remoteCard("c", host, 1))
	if _, err := r.MergeRemote(remoteCard("d", host, 1)); !errors.Is(err, agentcard.ErrTooManyCards) {
		t.Fatalf("past the bound again: %v", err)
	}
	// ...and by expiry, even before Expire frees the expired cards.
	clk.Advance(agentcard.DefaultRemoteTTL + time.Second)
	mustMerge(t, r, remoteCard("d", host, 1))
	if n := remoteCount(r, host.String()); n != 1 {
		t.Fatalf("%d visible cards after expiry and one merge, want 1", n)
	}
	if n := r.RemovePeer(host); n != 1 {
		t.Fatalf("RemovePeer removed %d visible cards, want 1", n)
	}
}

// TestDeserializeRemoteCardsPerHostBounded: a saved registry cannot bring
// back more cards of one host than MergeRemote would keep.
func TestDeserializeRemoteCardsPerHostBounded(t *testing.T) {
	nodes := testNodes(t)
	clk := newClock()
	var doc struct {
		Cards []agentcard.Card `json:"cards"`
	}
	for i := range agentcard.MaxRemoteCardsPerHost + 1 {
		c := remoteCard(fmt.Sprintf("a%03d", i), nodes[1].id, 1)
		c.Origin = agentcard.OriginRemote
		c.LastSeenAt = clk.Now().UnixMilli()
		doc.Cards = append(doc.Cards, c)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agentcard.Deserialize(b, nodes[0].id, agentcard.WithClock(clk.Now)); !errors.Is(err, agentcard.ErrTooManyCards) {
		t.Fatalf("Deserialize of %d cards of one host: %v", len(doc.Cards), err)
	}
	doc.Cards = doc.Cards[:agentcard.MaxRemoteCardsPerHost]
	b, _ = json.Marshal(doc)
	r, err := agentcard.Deserialize(b, nodes[0].id, agentcard.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Remote()); n != agentcard.MaxRemoteCardsPerHost {
		t.Fatalf("%d cards restored, want %d", n, agentcard.MaxRemoteCardsPerHost)
	}
}

// TestPropertyRemoteCardsPerHostBounded: against a model of the held
// cards, MergeRemote refuses exactly the new cards of a host that has
// MaxRemoteCardsPerHost, never an update of a held one, and a host never
// holds more.
func TestPropertyRemoteCardsPerHostBounded(t *testing.T) {
	nodes := testNodes(t)
	hosts := nodes[1:3]
	rapid.Check(t, func(rt *rapid.T) {
		r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(newClock().Now))
		held := make([]map[string]uint64, len(hosts)) // per host: id -> revision
		for i := range held {
			held[i] = map[string]uint64{}
		}
		// Each host starts at or near the bound; ids come from a pool a
		// little larger than it, so that refusals, updates at the bound and
		// new cards under it all happen.
		const bound = agentcard.MaxRemoteCardsPerHost
		for h := range hosts {
			for i := range rapid.IntRange(bound-3, bound).Draw(rt, "prefill") {
				id := fmt.Sprintf("a%03d", i)
				if _, err := r.MergeRemote(remoteCard(id, hosts[h].id, 1)); err != nil {
					rt.Fatalf("prefill %s: %v", id, err)
				}
				held[h][id] = 1
			}
		}
		ids := rapid.OneOf(rapid.IntRange(0, bound+20), rapid.IntRange(bound-5, bound+20))
		for range rapid.IntRange(1, 100).Draw(rt, "ops") {
			h := rapid.IntRange(0, len(hosts)-1).Draw(rt, "host")
			id := fmt.Sprintf("a%03d", ids.Draw(rt, "id"))
			rev := rapid.Uint64Range(1, 4).Draw(rt, "rev")
			_, err := r.MergeRemote(remoteCard(id, hosts[h].id, rev))
			old, ok := held[h][id]
			switch {
			case ok:
				if err != nil {
					rt.Fatalf("update of held card %s@%d refused: %v", id, h, err)
				}
				held[h][id] = max(old, rev)
			case len(held[h]) >= agentcard.MaxRemoteCardsPerHost:
				if !errors.Is(err, agentcard.ErrTooManyCards) {
					rt.Fatalf("new card %s past the bound of host %d: err %v", id, h, err)
				}
			default:
				if err != nil {
					rt.Fatalf("new card %s under the bound of host %d (%d held): %v", id, h, len(held[h]), err)
				}
				held[h][id] = rev
			}
			if c, ok := r.Get(id + "@" + hosts[h].id.String()); ok != (held[h][id] != 0) || (ok && c.Revision != held[h][id]) {
				rt.Fatalf("card %s@%d: held %v at revision %d, model says %d", id, h, ok, c.Revision, held[h][id])
			}
		}
		for h := range hosts {
			if n := remoteCount(r, hosts[h].id.String()); n != len(held[h]) || n > agentcard.MaxRemoteCardsPerHost {
				rt.Fatalf("host %d: %d cards held, model %d, bound %d", h, n, len(held[h]), agentcard.MaxRemoteCardsPerHost)
			}
		}
	})
}
