package agentcard_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/agentcard"
)

// TestMergeRemoteAt: the TTL of a card merged with a heartbeat runs from
// the heartbeat, bounded by the clock; stale cards are not stored; an
// equal revision moves the seen time forward only.
func TestMergeRemoteAt(t *testing.T) {
	nodes := testNodes(t)
	self, a := nodes[0].id, nodes[1].id
	clock := newClock()
	ttl := 10 * time.Minute
	r := agentcard.NewRegistry(self, agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(ttl))
	c := remoteCard("earth", a, 3)

	// A heartbeat 4 minutes old leaves 6 minutes of life.
	hb := clock.Now().Add(-4 * time.Minute)
	if changed, err := r.MergeRemoteAt(c, hb); !changed || err != nil {
		t.Fatalf("MergeRemoteAt = %v, %v", changed, err)
	}
	got, ok := r.Get(c.Address())
	if !ok || got.LastSeenAt != hb.UnixMilli() || got.Origin != agentcard.OriginRemote {
		t.Fatalf("stored %+v, %v", got, ok)
	}
	// An older heartbeat of the same revision changes nothing.
	if changed, _ := r.MergeRemoteAt(c, hb.Add(-time.Minute)); changed {
		t.Fatal("an older heartbeat reported a change")
	}
	if got, _ := r.Get(c.Address()); got.LastSeenAt != hb.UnixMilli() {
		t.Fatal("an older heartbeat moved LastSeenAt back")
	}
	clock.Advance(6*time.Minute - time.Millisecond)
	if _, ok := r.Get(c.Address()); !ok {
		t.Fatal("expired before its TTL")
	}
	clock.Advance(time.Millisecond)
	if _, ok := r.Get(c.Address()); ok {
		t.Fatal("visible one TTL after its heartbeat")
	}
	// A heartbeat older than the TTL is stale: not stored.
	if changed, err := r.MergeRemoteAt(c, clock.Now().Add(-ttl)); changed || err != nil {
		t.Fatalf("stale MergeRemoteAt = %v, %v", changed, err)
	}
	if _, ok := r.Get(c.Address()); ok {
		t.Fatal("a stale card was stored")
	}
	// A heartbeat in the future counts as now.
	if changed, _ := r.MergeRemoteAt(c, clock.Now().Add(time.Hour)); !changed {
		t.Fatal("future heartbeat refused")
	}
	if got, _ := r.Get(c.Address()); got.LastSeenAt != clock.Now().UnixMilli() {
		t.Fatalf("future heartbeat stored as %d, want now", got.LastSeenAt)
	}
	// A higher revision with an older heartbeat keeps the later time.
	now := clock.Now()
	clock.Advance(time.Minute)
	c4 := remoteCard("earth", a, 4)
	if changed, _ := r.MergeRemoteAt(c4, now.Add(-time.Minute)); !changed {
		t.Fatal("higher revision refused")
	}
	if got, _ := r.Get(c.Address()); got.Revision != 4 || got.LastSeenAt != now.UnixMilli() {
		t.Fatalf("got revision %d seen %d, want 4 seen %d", got.Revision, got.LastSeenAt, now.UnixMilli())
	}
	// The same checks as MergeRemote.
	bad := remoteCard("earth", a, 5)
	bad.Host = self.String()
	if _, err := r.MergeRemoteAt(bad, now); !errors.Is(err, agentcard.ErrInvalidCard) {
		t.Fatalf("own card merged as remote: %v", err)
	}
}

// TestMergeRemoteAtShared: the shared merge keeps the caller's slices (so
// discovery's cache and the registry hold one card, not two), the plain
// merge a copy of them; both hold the card as merged, with the same TTL
// and checks.
func TestMergeRemoteAtShared(t *testing.T) {
	nodes := testNodes(t)
	self, a, b := nodes[0].id, nodes[1].id, nodes[2].id
	clock := newClock()
	ttl := 10 * time.Minute
	r := agentcard.NewRegistry(self, agentcard.WithClock(clock.Now), agentcard.WithRemoteTTL(ttl))
	shared := remoteCard("earth", a, 1, "echo")
	copied := remoteCard("earth", b, 1, "echo")
	hb := clock.Now().Add(-4 * time.Minute)
	if changed, err := r.MergeRemoteAtShared(shared, hb); !changed || err != nil {
		t.Fatalf("MergeRemoteAtShared = %v, %v", changed, err)
	}
	if changed, err := r.MergeRemoteAt(copied, hb); !changed || err != nil {
		t.Fatalf("MergeRemoteAt = %v, %v", changed, err)
	}
	gs, ok := r.GetShared(shared.Address())
	if !ok || gs.LastSeenAt != hb.UnixMilli() || gs.Origin != agentcard.OriginRemote || gs.Capabilities[0].ID != "echo" {
		t.Fatalf("shared merge stored %+v, %v", gs, ok)
	}
	if &gs.Capabilities[0] != &shared.Capabilities[0] || &gs.Protocols[0] != &shared.Protocols[0] {
		t.Error("MergeRemoteAtShared copied the card's slices")
	}
	gc, _ := r.GetShared(copied.Address())
	if &gc.Capabilities[0] == &copied.Capabilities[0] || &gc.Protocols[0] == &copied.Protocols[0] {
		t.Error("MergeRemoteAt kept the caller's slices")
	}
	// Get still hands out a copy of the shared card.
	if g, _ := r.Get(shared.Address()); &g.Capabilities[0] == &shared.Capabilities[0] {
		t.Error("Get returned the shared slices")
	}
	// The same TTL as MergeRemoteAt: from the heartbeat.
	clock.Advance(6 * time.Minute)
	if _, ok := r.Get(shared.Address()); ok {
		t.Fatal("shared card visible one TTL after its heartbeat")
	}
	// The same checks.
	bad := remoteCard("earth", a, 2)
	bad.Host = self.String()
	if _, err := r.MergeRemoteAtShared(bad, clock.Now()); !errors.Is(err, agentcard.ErrInvalidCard) {
		t.Fatalf("own card merged as remote: %v", err)
	}
}

// TestMergeRemoteAtSharedWritesNothing: the shared merge never writes
// into the caller's arrays, even to clip a schema with spare capacity
// (discovery merges one cached card from several goroutines at once,
// which go on reading it); the registry's card has no spare capacity.
func TestMergeRemoteAtSharedWritesNothing(t *testing.T) {
	nodes := testNodes(t)
	clock := newClock()
	r := agentcard.NewRegistry(nodes[0].id, agentcard.WithClock(clock.Now))
	c := remoteCard("earth", nodes[1].id, 1, "echo")
	schema := make(json.RawMessage, 0, 64)
	c.Capabilities[0].InputSchema = append(schema, `{"type":"object"}`...)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := r.MergeRemoteAtShared(c, clock.Now().Add(-time.Duration(i)*time.Second)); err != nil {
				t.Error(err)
			}
			_ = c.Capabilities[0].InputSchema[:cap(c.Capabilities[0].InputSchema)]
		})
	}
	wg.Wait()
	if got := cap(c.Capabilities[0].InputSchema); got != 64 {
		t.Errorf("the caller's schema has capacity %d after the merge, want 64 (untouched)", got)
	}
	g, ok := r.GetShared(c.Address())
	if !ok || string(g.Capabilities[0].InputSchema) != `{"type":"object"}` {
		t.Fatalf("stored %+v, %v", g, ok)
	}
	if s := g.Capabilities[0].InputSchema; cap(s) != len(s) || cap(g.Capabilities) != len(g.Capabilities) {
		t.Error("the registry's card has spare capacity: an append by a GetShared caller would write into it")
	}
}

// TestSelectPrefersLatestHeartbeat: of two records of the same revision,
// the DHT validator keeps the later heartbeat, whatever the bytes.
func TestSelectPrefersLatestHeartbeat(t *testing.T) {
	a := testNodes(t)[1]
	var v agentcard.Validator
	c := sampleCard("venus")
	c.Revision = 2
	var sealed [][]byte
	for _, ms := range []int64{999, 1000, 10000} { // "999" > "1000" byte-wise
		c.LastSeenAt = ms
		b, err := agentcard.Seal(c, a.key)
		if err != nil {
			t.Fatal(err)
		}
		sealed = append(sealed, b)
	}
	key := agentcard.Key(a.id, "venus")
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}} {
		vals := [][]byte{sealed[order[0]], sealed[order[1]], sealed[order[2]]}
		i, err := v.Select(key, vals)
		if err != nil || order[i] != 2 {
			t.Fatalf("Select(%v) picked %v, %v; want the latest heartbeat", order, order[i], err)
		}
	}
	c.Revision = 3
	c.LastSeenAt = 1
	newer, _ := agentcard.Seal(c, a.key)
	if i, _ := v.Select(key, [][]byte{sealed[2], newer}); i != 1 {
		t.Fatal("a later heartbeat beat a higher revision")
	}
}

// TestLongPeerIDsRefusedCheaply: a peer ID longer than MaxPeerIDLen is
// refused before base58 decoding, whose cost is quadratic.
func TestLongPeerIDsRefusedCheaply(t *testing.T) {
	long := "Qm" + strings.Repeat("z", 60000)
	start := time.Now()
	c := sampleCard("venus")
	c.Host = long
	if err := c.Validate(); !errors.Is(err, agentcard.ErrInvalidCard) {
		t.Fatalf("Validate = %v", err)
	}
	if _, _, err := agentcard.ParseKey(agentcard.KeyPrefix + long + "/venus"); err == nil {
		t.Fatal("ParseKey accepted a huge peer ID")
	}
	if _, _, err := agentcard.SplitAddress("venus@" + long); err == nil {
		t.Fatal("SplitAddress accepted a huge peer ID")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refusing took %s", d)
	}
}
