package envelope

import (
	"cmp"
	"hash/maphash"
	"slices"
	"sync"
)

// Threads is a bounded index of envelopes by correlation thread. It holds
// at most the limit given to NewThreads; adding one more evicts the oldest
// added. It is safe for concurrent use (one mutex guards all state) and
// starts no goroutine.
//
// Threads keeps the pointers it is given and returns them from Thread: do
// not modify an envelope after adding it.
//
// A router adds every envelope of a conversation as it passes, and asks
// for a thread only when someone looks at one. So Add is what must be
// cheap: it writes one entry into a ring and touches nothing else. With
// maps by ID and by thread, a full 10,000-entry index cost several cache
// misses per Add (the lookups, the inserts, the evictions), a few
// microseconds of every round trip. Thread and Len instead scan the ring
// (entries carry hashes of their IDs, so the scan compares integers and
// reads an envelope only on a match): tens of microseconds for a full
// index, on a query path.
//
// A retransmission (an ID already held) is never returned twice: Thread
// and Len count the first envelope added with an ID. One added right after
// itself is dropped at once; an older duplicate takes a place in the ring
// until it is evicted.
type Threads struct {
	mu   sync.Mutex
	max  int
	seed maphash.Seed
	ring []threadEntry // insertion order from next (once full) or 0
	next int           // once the ring is full: the oldest entry, overwritten next
}

type threadEntry struct {
	env      *Envelope
	id       uint64 // hash of env.ID
	thread   uint64 // hash of env.CorrelationID, when threaded
	threaded bool
}

// NewThreads returns an empty Threads holding at most limit envelopes; a limit
// below 1 is taken as 1.
func NewThreads(limit int) *Threads {
	return &Threads{max: max(limit, 1), seed: maphash.MakeSeed()}
}

func (t *Threads) hash(s string) uint64 { return maphash.String(t.seed, s) }

// Add records e. A nil envelope, one without an ID, and one whose ID is
// already held (a retransmission) are ignored. Past the bound, the oldest
// envelope is evicted.
func (t *Threads) Add(e *Envelope) {
	if e == nil || e.ID == "" {
		return
	}
	ent := threadEntry{env: e, id: t.hash(e.ID)}
	if e.CorrelationID != "" {
		ent.thread, ent.threaded = t.hash(e.CorrelationID), true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.ring); n > 0 {
		last := &t.ring[(t.next+n-1)%n]
		if last.id == ent.id && last.env.ID == e.ID {
			return // the same envelope again, as a local delivery records it twice
		}
	}
	if len(t.ring) < t.max {
		t.ring = append(t.ring, ent)
		return
	}
	t.ring[t.next] = ent
	t.next = (t.next + 1) % t.max
}

// each calls f on every entry in insertion order. t.mu is held.
func (t *Threads) each(f func(ent *threadEntry)) {
	n := len(t.ring)
	for k := range n {
		f(&t.ring[(t.next+k)%n])
	}
}

// Thread returns the envelopes held whose CorrelationID is id, plus the
// envelope whose ID is id (the thread's root) if held, ordered by Timestamp
// and, for equal timestamps, by insertion. It returns nil if there are none.
func (t *Threads) Thread(id string) []*Envelope {
	if id == "" {
		return nil
	}
	h := t.hash(id)
	var out []*Envelope
	var held map[string]struct{} // IDs in out, once out is long
	t.mu.Lock()
	t.each(func(ent *threadEntry) {
		e := ent.env
		in := ent.threaded && ent.thread == h && e.CorrelationID == id ||
			ent.id == h && e.ID == id && e.CorrelationID != id
		if !in {
			return
		}
		// A retransmission counts once: a short thread is scanned, a long
		// one indexed.
		if held != nil {
			if _, dup := held[e.ID]; dup {
				return
			}
			held[e.ID] = struct{}{}
		} else {
			for _, o := range out {
				if o.ID == e.ID {
					return
				}
			}
			if len(out) == 16 {
				held = make(map[string]struct{}, 64)
				for _, o := range out {
					held[o.ID] = struct{}{}
				}
				held[e.ID] = struct{}{}
			}
		}
		out = append(out, e)
	})
	t.mu.Unlock()
	// Collected in insertion order: a stable sort keeps it for equal times.
	slices.SortStableFunc(out, func(a, b *Envelope) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	return out
}

// Len returns the number of envelopes held.
func (t *Threads) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make(map[string]struct{}, len(t.ring))
	for i := range t.ring {
		ids[t.ring[i].env.ID] = struct{}{}
	}
	return len(ids)
}
