package discovery_test

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
)

// accepted records what an accept hook was handed.
type accepted struct {
	mu  sync.Mutex
	got map[peer.ID][][]byte
}

func (a *accepted) accept(host peer.ID, recs [][]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.got == nil {
		a.got = map[peer.ID][][]byte{}
	}
	a.got[host] = slices.Clone(recs)
}

func (a *accepted) of(host peer.ID) [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[host]
}

// TestAuthorityRecordsTravelWithTheIndex: the records a node presents are
// in its signed index, and a lookup by name or capability hands them,
// with the host that presented them, to the looker's accept hook before
// the host's cards reach its registry; records beyond the index's bounds
// are left out when publishing.
func TestAuthorityRecordsTravelWithTheIndex(t *testing.T) {
	checkLeaks(t)
	recs := [][]byte{[]byte("admin-log-1"), []byte("grant-of-host")}
	big := bytes.Repeat([]byte{1}, discovery.MaxIndexAuthRecord+1)
	present := func() [][]byte { return append([][]byte{big}, recs...) }
	var seen accepted
	a := newNode(t, nil, slow, []agentcard.Card{agentCard("granted", "sum")}, discovery.WithAuthority(present, nil))
	b := newNode(t, []peer.AddrInfo{a.info()}, slow, nil, discovery.WithAuthority(nil, seen.accept))
	waitRoutingTables(t, []*testNode{a, b}, 1)
	publishAll(t, []*testNode{a})
	if _, err := b.svc.FindByName(t.Context(), "granted"); err != nil {
		t.Fatal(err)
	}
	if got := seen.of(a.h.ID()); !slices.EqualFunc(got, recs, bytes.Equal) {
		t.Fatalf("FindByName handed %q, want %q (the oversized record left out)", got, recs)
	}
	c := newNode(t, []peer.AddrInfo{a.info()}, slow, nil, discovery.WithAuthority(nil, seen.accept))
	waitRoutingTables(t, []*testNode{a, c}, 1)
	seen.mu.Lock()
	clear(seen.got)
	seen.mu.Unlock()
	if _, err := c.svc.FindByCapability(t.Context(), "sum"); err != nil {
		t.Fatal(err)
	}
	if got := seen.of(a.h.ID()); !slices.EqualFunc(got, recs, bytes.Equal) {
		t.Fatalf("FindByCapability handed %q, want %q", got, recs)
	}
}

// TestIndexAuthBounds: an index with too many or oversized authority
// records is refused when sealed and when opened.
func TestIndexAuthBounds(t *testing.T) {
	_, key := newHost(t)
	ok := discovery.Index{LastSeenAt: 1, Auth: [][]byte{[]byte("r")}}
	signed, err := discovery.SealIndex(ok, key)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := discovery.OpenIndex(signed)
	if err != nil || len(ix.Auth) != 1 || string(ix.Auth[0]) != "r" {
		t.Fatalf("OpenIndex = %+v, %v", ix, err)
	}
	for name, auth := range map[string][][]byte{
		"too many":  slices.Repeat([][]byte{[]byte("r")}, discovery.MaxIndexAuth+1),
		"too large": {bytes.Repeat([]byte{1}, discovery.MaxIndexAuthRecord+1)},
		"empty":     {{}},
	} {
		if _, err := discovery.SealIndex(discovery.Index{LastSeenAt: 1, Auth: auth}, key); !errors.Is(err, agentcard.ErrInvalidCard) {
			t.Errorf("%s: SealIndex = %v, want INVALID_CARD", name, err)
		}
	}
}
