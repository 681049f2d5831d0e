package connhealth

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/protocol"
)

// The address book remembers where the peers this node was connected to
// can be dialled, in the caller's Store. libp2p's peerstore lives in
// memory, so without it a restarted node could not reach a peer that is
// neither configured nor findable yet: the envelopes its outbox kept for
// that peer would fail with DELIVERY_FAILED after the redials, though the
// peer is up at the address it had a minute ago.
const (
	bookMaxPeers = 1024                // peers remembered; the least recently seen go first
	bookMaxAddrs = 16                  // addresses per peer
	bookMaxAge   = 30 * 24 * time.Hour // entries older than this are not loaded
	bookFlush    = 5 * time.Second     // how often seen peers are written
)

// Store keeps the address book: one entry per peer, keyed by the peer ID's
// bytes, whose value only the book reads. The node keeps it in a bucket of
// its bbolt file.
type Store interface {
	// ForEachAddrs calls fn with every entry, in any order, until fn
	// returns an error, which it returns. An empty store has no entries.
	// The slices are valid during the call only.
	ForEachAddrs(fn func(key, val []byte) error) error
	// UpdateAddrs calls fn with the entries in one write transaction:
	// what fn puts and deletes is stored together when fn returns nil, and
	// not at all when it returns an error (which UpdateAddrs returns).
	UpdateAddrs(fn func(BookTx) error) error
}

// BookTx is the address book's entries within one write transaction of a
// Store (a *bbolt.Bucket is one).
type BookTx interface {
	Put(key, val []byte) error
	Delete(key []byte) error
	// ForEach is as Store.ForEachAddrs, and sees the transaction's own
	// writes.
	ForEach(fn func(key, val []byte) error) error
}

// bookEntry is one peer's value in the Store (key: the peer ID's bytes),
// in JSON.
type bookEntry struct {
	Addrs []string `json:"a"`
	Seen  int64    `json:"t"` // unix seconds
}

// addrBook records where each nova peer identified can be dialled (from
// the identify event itself, see bookAddrs), and writes it in batches
// (bookFlush); peers still connected are dated again every bookTouch, so
// that a long-lived connection does not age its peer out of the book.
type addrBook struct {
	h   host.Host
	db  Store
	log *zap.SugaredLogger

	mu    sync.Mutex
	dirty map[peer.ID][]ma.Multiaddr // to write at the next flush
	known map[peer.ID][]ma.Multiaddr // what this run identified, for bookTouch
}

const bookTouch = time.Hour

func newAddrBook(h host.Host, db Store, log *zap.SugaredLogger) *addrBook {
	return &addrBook{h: h, db: db, log: log, dirty: map[peer.ID][]ma.Multiaddr{}, known: map[peer.ID][]ma.Multiaddr{}}
}

// loadAddrBook puts the remembered addresses into h's peerstore and
// returns how many peers it knew. Unreadable entries are skipped. The TTL
// is libp2p's for recently connected peers, which identify replaces with
// what the peer says once it connects: a stale address is not kept alive
// (and saved again) alongside its live one.
func loadAddrBook(h host.Host, db Store, now time.Time) (int, error) {
	n := 0
	err := db.ForEachAddrs(func(k, v []byte) error {
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
			h.Peerstore().AddAddrs(p, addrs, peerstore.RecentlyConnectedAddrTTL)
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("connhealth: load peer addresses: %w", err)
	}
	return n, nil
}

// bookAddrs is where the identified peer can be dialled, best first, at
// most bookMaxAddrs: the address this node dialled it at (if it did), then
// the addresses of its signed peer record, or else those it claims to
// listen on. Not the peerstore's, which also holds addresses loaded from
// the book or learned from third parties.
func bookAddrs(evt event.EvtPeerIdentificationCompleted) []ma.Multiaddr {
	var out []ma.Multiaddr
	add := func(a ma.Multiaddr) {
		if a == nil || len(out) >= bookMaxAddrs {
			return
		}
		for _, o := range out {
			if o.Equal(a) {
				return
			}
		}
		out = append(out, a)
	}
	if evt.Conn != nil && evt.Conn.Stat().Direction == network.DirOutbound {
		add(evt.Conn.RemoteMultiaddr())
	}
	if evt.SignedPeerRecord != nil {
		if rec, err := evt.SignedPeerRecord.Record(); err == nil {
			if pr, ok := rec.(*peer.PeerRecord); ok && pr.PeerID == evt.Peer {
				for _, a := range pr.Addrs {
					add(a)
				}
				return out
			}
		}
	}
	for _, a := range evt.ListenAddrs {
		add(a)
	}
	return out
}

// record notes an identified peer that speaks the A2A protocol: only nova
// nodes take places in the book.
func (b *addrBook) record(evt event.EvtPeerIdentificationCompleted) {
	if evt.Peer == b.h.ID() || !slices.Contains(evt.Protocols, protocol.IDA2A) {
		return
	}
	addrs := bookAddrs(evt)
	if len(addrs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.dirty[evt.Peer]; ok || len(b.dirty) < bookMaxPeers {
		b.dirty[evt.Peer] = addrs
	}
	if _, ok := b.known[evt.Peer]; ok || len(b.known) < bookMaxPeers {
		b.known[evt.Peer] = addrs
	}
}

// touch dates again the peers identified in this run that are still
// connected.
func (b *addrBook) touch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p, addrs := range b.known {
		if b.h.Network().Connectedness(p) == network.Connected {
			b.dirty[p] = addrs
		}
	}
}

// run records identified peers until the subscription ends or done is
// closed. It does no I/O: the identify emitter waits for a full
// subscription, so a slow disk must not hold it (flushLoop writes).
func (b *addrBook) run(sub event.Subscription, done <-chan struct{}) {
	defer sub.Close()
	for {
		select {
		case e, ok := <-sub.Out():
			if !ok {
				return
			}
			b.record(e.(event.EvtPeerIdentificationCompleted))
		case <-done:
			return
		}
	}
}

// flushLoop writes the book every bookFlush, dates connected peers every
// bookTouch, and writes what is left when done is closed.
func (b *addrBook) flushLoop(done <-chan struct{}) {
	t := time.NewTicker(bookFlush)
	defer t.Stop()
	touch := time.NewTicker(bookTouch)
	defer touch.Stop()
	for {
		select {
		case <-t.C:
			b.flush()
		case <-touch.C:
			b.touch()
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
	dirty := b.dirty
	b.dirty = make(map[peer.ID][]ma.Multiaddr)
	b.mu.Unlock()
	if len(dirty) == 0 {
		return
	}
	now := time.Now().Unix()
	type put struct{ k, v []byte }
	puts := make([]put, 0, len(dirty))
	for p, addrs := range dirty {
		e := bookEntry{Seen: now}
		for _, a := range addrs {
			e.Addrs = append(e.Addrs, a.String())
		}
		v, _ := json.Marshal(e)
		puts = append(puts, put{[]byte(p), v})
	}
	err := b.db.UpdateAddrs(func(bk BookTx) error {
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
func evictOldest(bk BookTx, n int) error {
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
