package node

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	bolt "go.etcd.io/bbolt"
)

func randomPeer(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func putEntry(t *testing.T, s *store, k []byte, v []byte) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketAddrs)
		if err != nil {
			return err
		}
		return b.Put(k, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAddrBookLoadSkipsBadAndStaleEntries: entries that do not decode, name
// no valid peer or address, or were last seen past bookMaxAge are not
// loaded; addresses past bookMaxAddrs are cut; good ones reach the
// peerstore.
func TestAddrBookLoadSkipsBadAndStaleEntries(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	now := time.Now()
	good, stale, noAddrs, many := randomPeer(t), randomPeer(t), randomPeer(t), randomPeer(t)
	entry := func(seen time.Time, addrs ...string) []byte {
		v, _ := json.Marshal(bookEntry{Addrs: addrs, Seen: seen.Unix()})
		return v
	}
	putEntry(t, s, []byte(good), entry(now.Add(-time.Hour), "/ip4/127.0.0.1/tcp/4001", "not an address"))
	putEntry(t, s, []byte(stale), entry(now.Add(-bookMaxAge-time.Hour), "/ip4/127.0.0.1/tcp/4002"))
	putEntry(t, s, []byte(noAddrs), entry(now, "garbage"))
	var lots []string
	for i := range 40 {
		lots = append(lots, fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 5000+i))
	}
	putEntry(t, s, []byte(many), entry(now, lots...))
	putEntry(t, s, []byte("not a peer id"), entry(now, "/ip4/127.0.0.1/tcp/4003"))
	putEntry(t, s, []byte(randomPeer(t)), []byte("{not json"))
	putEntry(t, s, []byte(h.ID()), entry(now, "/ip4/127.0.0.1/tcp/4004")) // itself

	n, err := loadAddrBook(h, s, now)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("loaded %d peers, want 2 (good, many)", n)
	}
	want, _ := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/4001")
	if got := h.Peerstore().Addrs(good); len(got) != 1 || !got[0].Equal(want) {
		t.Fatalf("good peer's addresses: %v", got)
	}
	if got := h.Peerstore().Addrs(stale); len(got) != 0 {
		t.Fatalf("stale entry loaded: %v", got)
	}
	if got := h.Peerstore().Addrs(many); len(got) != bookMaxAddrs {
		t.Fatalf("%d addresses loaded for one peer, want the cap %d", len(got), bookMaxAddrs)
	}
}

// TestAddrBookKeepsTheMostRecentPeers: past bookMaxPeers, a flush forgets
// the least recently seen peers.
func TestAddrBookKeepsTheMostRecentPeers(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	old := time.Now().Add(-time.Hour)
	var oldest []peer.ID
	for i := range bookMaxPeers {
		p := randomPeer(t)
		if i < 3 {
			oldest = append(oldest, p)
		}
		v, _ := json.Marshal(bookEntry{Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, Seen: old.Unix() + int64(i)})
		putEntry(t, s, []byte(p), v)
	}
	b := &addrBook{h: h, db: s, seen: map[peer.ID]struct{}{}}
	fresh := []peer.ID{randomPeer(t), randomPeer(t), randomPeer(t)}
	a, _ := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/4005")
	for _, p := range fresh {
		h.Peerstore().AddAddr(p, a, time.Hour)
		b.seen[p] = struct{}{}
	}
	b.flush()
	keys := map[string]bool{}
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAddrs).ForEach(func(k, _ []byte) error { keys[string(k)] = true; return nil })
	})
	if len(keys) != bookMaxPeers {
		t.Fatalf("%d peers kept, want %d", len(keys), bookMaxPeers)
	}
	for _, p := range fresh {
		if !keys[string(p)] {
			t.Fatalf("freshly seen peer %s not kept", p)
		}
	}
	for _, p := range oldest {
		if keys[string(p)] {
			t.Fatalf("least recently seen peer %s kept", p)
		}
	}
}
