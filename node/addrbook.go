package node

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// The address book remembers where the peers this node was connected to
// can be dialled, in the store. libp2p's peerstore lives in memory, so
// without it a restarted node could not reach a peer that is neither
// configured nor findable yet: the envelopes its outbox kept for that peer
// would fail with DELIVERY_FAILED after the redials, though the peer is up
// at the address it had a minute ago.
const (
	bookMaxPeers = 1024                // peers remembered; the least recently seen go first
	bookMaxAddrs = 16                  // addresses per peer
	bookMaxAge   = 30 * 24 * time.Hour // entries older than this are not loaded
	bookAddrTTL  = time.Hour           // how long loaded addresses stay in the peerstore
	bookFlush    = 5 * time.Second     // how often seen peers are written
)

var bucketAddrs = []byte("peeraddrs")

// bookEntry is one peer's value in bucket peeraddrs (key: the peer ID's
// bytes).
type bookEntry struct {
	Addrs []string `json:"a"`
	Seen  int64    `json:"t"` // unix seconds
}

// addrBook records the peerstore addresses of each peer identified, in
// batches (bookFlush), and loads them back at start.
type addrBook struct {
	h   host.Host
	db  *store
	log *zap.SugaredLogger

	mu   sync.Mutex
	seen map[peer.ID]struct{} // identified since the last flush
}

// loadAddrBook puts the remembered addresses into h's peerstore and
// returns how many peers it knew. Unreadable entries are skipped.
func loadAddrBook(h host.Host, db *store, now time.Time) (int, error) {
	n := 0
	err := db.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAddrs)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			p, err := peer.IDFromBytes(k)
			if err != nil || p == h.ID() {
				return nil
			}
			var e bookEntry
			if json.Unmarshal(v, &e) != nil || now.Sub(time.Unix(e.Seen, 0)) > bookMaxAge {
				return nil
			}
			addrs := make([]ma.Multiaddr, 0, min(len(e.Addrs), bookMaxAddrs))
			for _, s := range e.Addrs[:min(len(e.Addrs), bookMaxAddrs)] {
				if a, err := ma.NewMultiaddr(s); err == nil {
					addrs = append(addrs, a)
				}
			}
			if len(addrs) > 0 {
				h.Peerstore().AddAddrs(p, addrs, bookAddrTTL)
				n++
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("node: load peer addresses: %w", err)
	}
	return n, nil
}

// run records identified peers until done is closed, then writes what is
// left. The subscription is the caller's, closed by run.
func (b *addrBook) run(sub event.Subscription, done <-chan struct{}) {
	defer sub.Close()
	t := time.NewTicker(bookFlush)
	defer t.Stop()
	b.mu.Lock()
	for _, p := range b.h.Network().Peers() {
		b.seen[p] = struct{}{}
	}
	b.mu.Unlock()
	for {
		select {
		case e, ok := <-sub.Out():
			if !ok {
				b.flush()
				return
			}
			p := e.(event.EvtPeerIdentificationCompleted).Peer
			b.mu.Lock()
			if len(b.seen) < bookMaxPeers {
				b.seen[p] = struct{}{}
			}
			b.mu.Unlock()
		case <-t.C:
			b.flush()
		case <-done:
			b.flush()
			return
		}
	}
}

// flush writes the addresses of the peers seen since the last flush, and
// forgets the least recently seen peers past bookMaxPeers.
func (b *addrBook) flush() {
	b.mu.Lock()
	seen := b.seen
	b.seen = make(map[peer.ID]struct{})
	b.mu.Unlock()
	if len(seen) == 0 {
		return
	}
	now := time.Now().Unix()
	type put struct{ k, v []byte }
	puts := make([]put, 0, len(seen))
	for p := range seen {
		addrs := b.h.Peerstore().Addrs(p)
		if len(addrs) == 0 || p == b.h.ID() {
			continue
		}
		e := bookEntry{Seen: now}
		for _, a := range addrs[:min(len(addrs), bookMaxAddrs)] {
			e.Addrs = append(e.Addrs, a.String())
		}
		v, _ := json.Marshal(e)
		puts = append(puts, put{[]byte(p), v})
	}
	if len(puts) == 0 {
		return
	}
	err := b.db.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketAddrs)
		if err != nil {
			return err
		}
		for _, p := range puts {
			if err := bk.Put(p.k, p.v); err != nil {
				return err
			}
		}
		n := 0
		_ = bk.ForEach(func(_, _ []byte) error { n++; return nil })
		if n > bookMaxPeers {
			return evictOldest(bk, n-bookMaxPeers)
		}
		return nil
	})
	if err != nil {
		b.log.Warnw("could not save peer addresses", "peers", len(puts), "err", err)
	}
}

// evictOldest deletes the n least recently seen entries of bk.
func evictOldest(bk *bolt.Bucket, n int) error {
	type aged struct {
		k    []byte
		seen int64
	}
	var all []aged
	err := bk.ForEach(func(k, v []byte) error {
		var e bookEntry
		_ = json.Unmarshal(v, &e) // unreadable: seen 0, evicted first
		all = append(all, aged{append([]byte(nil), k...), e.Seen})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.seen, b.seen) })
	for _, a := range all[:min(n, len(all))] {
		if err := bk.Delete(a.k); err != nil {
			return err
		}
	}
	return nil
}
