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
// A router adds every envelope of a conversation as it passes, so Add is on
// the message path and the index is always full under traffic. Its maps are
// keyed by 64-bit hashes of the IDs (under a seed secret to the process)
// rather than by the ID strings: a lookup or an eviction then compares
// integers held in the map itself instead of following a pointer to each
// key's bytes, which in a full 10,000-entry index missed the cache on
// nearly every probe. A thread's entries are chained through the entries
// themselves, so a new thread allocates no slice. Lookups compare the real
// IDs of what the hashes find, so a collision can never return a wrong
// envelope; at worst (about 2^-64 per pair) an envelope is left out of the
// ID index and is then only reachable through its thread.
type Threads struct {
	mu       sync.Mutex
	max      int
	seed     maphash.Seed
	seq      uint64                  // insertion counter
	order    []*threadEntry          // held entries, oldest first, from head
	head     int                     // index of the oldest entry in order
	byID     map[uint64]*threadEntry // entry by hash of envelope ID
	byThread map[uint64]threadEnds   // entries by hash of CorrelationID, oldest first
	scratch  []*threadEntry          // Thread's candidates, reused under mu
}

type threadEntry struct {
	env      *Envelope
	seq      uint64
	next     *threadEntry // the next (newer) entry in the same byThread chain
	idHash   uint64       // hash of env.ID
	thread   uint64       // hash of env.CorrelationID, if any
	indexed  bool         // this entry is the one byID holds for its ID hash
	threaded bool         // env has a CorrelationID: the entry is in a chain
}

// threadEnds is the oldest and newest entry of one byThread chain. Entries
// of two threads whose IDs hash alike share a chain; Thread filters them.
type threadEnds struct{ first, last *threadEntry }

// NewThreads returns an empty Threads holding at most limit envelopes; a limit
// below 1 is taken as 1.
func NewThreads(limit int) *Threads {
	return &Threads{
		max:      max(limit, 1),
		seed:     maphash.MakeSeed(),
		byID:     make(map[uint64]*threadEntry),
		byThread: make(map[uint64]threadEnds),
	}
}

func (t *Threads) hash(s string) uint64 { return maphash.String(t.seed, s) }

// Add records e. A nil envelope, one without an ID, and one whose ID is
// already held (a retransmission) are ignored. Past the bound, the oldest
// envelope is evicted.
func (t *Threads) Add(e *Envelope) {
	if e == nil || e.ID == "" {
		return
	}
	idh := t.hash(e.ID)
	var th uint64
	if e.CorrelationID != "" {
		th = t.hash(e.CorrelationID)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ent := &threadEntry{env: e, idHash: idh, thread: th, indexed: true, threaded: e.CorrelationID != ""}
	if old, ok := t.byID[idh]; ok {
		if old.env.ID == e.ID {
			return // a retransmission
		}
		ent.indexed = false // a hash collision: keep the first in the ID index
	}
	t.seq++
	ent.seq = t.seq
	t.order = append(t.order, ent)
	if ent.indexed {
		t.byID[idh] = ent
	}
	if ent.threaded {
		ends := t.byThread[th]
		if ends.last == nil {
			ends.first = ent
		} else {
			ends.last.next = ent
		}
		ends.last = ent
		t.byThread[th] = ends
	}
	for len(t.order)-t.head > t.max {
		t.evictOldest()
	}
}

// evictOldest drops the oldest entry. t.mu is held.
func (t *Threads) evictOldest() {
	ent := t.order[t.head]
	t.order[t.head] = nil
	t.head++
	if t.head >= len(t.order)/2 && t.head >= 64 { // reclaim the dead prefix
		n := copy(t.order, t.order[t.head:])
		clear(t.order[n:])
		t.order = t.order[:n]
		t.head = 0
	}
	// The hashes were kept in the entry: an envelope this old is no longer
	// in any cache, and neither are its ID's bytes.
	if ent.indexed {
		delete(t.byID, ent.idHash)
	}
	if ent.threaded {
		// The oldest entry of all is the oldest of its chain.
		ends := t.byThread[ent.thread]
		if ends.first = ent.next; ends.first == nil {
			delete(t.byThread, ent.thread)
		} else {
			t.byThread[ent.thread] = ends
		}
		ent.next = nil
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
	t.mu.Lock()
	ents := t.scratch[:0]
	for ent := t.byThread[h].first; ent != nil; ent = ent.next {
		if ent.env.CorrelationID == id {
			ents = append(ents, ent)
		}
	}
	if root, ok := t.byID[h]; ok && root.env.ID == id && root.env.CorrelationID != id {
		ents = append(ents, root)
	}
	if len(ents) == 0 {
		t.mu.Unlock()
		return nil
	}
	slices.SortFunc(ents, func(a, b *threadEntry) int {
		return cmp.Or(cmp.Compare(a.env.Timestamp, b.env.Timestamp), cmp.Compare(a.seq, b.seq))
	})
	out := make([]*Envelope, len(ents))
	for i, ent := range ents {
		out[i] = ent.env
	}
	clear(ents)
	if cap(ents) <= 1024 {
		t.scratch = ents[:0]
	}
	t.mu.Unlock()
	return out
}

// Len returns the number of envelopes held.
func (t *Threads) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.order) - t.head
}
