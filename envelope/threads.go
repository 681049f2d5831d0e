package envelope

import (
	"cmp"
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
type Threads struct {
	mu       sync.Mutex
	max      int
	seq      uint64                    // insertion counter
	order    []*threadEntry            // held entries, oldest first, from head
	head     int                       // index of the oldest entry in order
	byID     map[string]*threadEntry   // entry by envelope ID
	byThread map[string][]*threadEntry // entries by CorrelationID, oldest first
}

type threadEntry struct {
	env *Envelope
	seq uint64
}

// NewThreads returns an empty Threads holding at most limit envelopes; a limit
// below 1 is taken as 1.
func NewThreads(limit int) *Threads {
	return &Threads{
		max:      max(limit, 1),
		byID:     make(map[string]*threadEntry),
		byThread: make(map[string][]*threadEntry),
	}
}

// Add records e. A nil envelope, one without an ID, and one whose ID is
// already held (a retransmission) are ignored. Past the bound, the oldest
// envelope is evicted.
func (t *Threads) Add(e *Envelope) {
	if e == nil || e.ID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.byID[e.ID]; dup {
		return
	}
	t.seq++
	ent := &threadEntry{env: e, seq: t.seq}
	t.order = append(t.order, ent)
	t.byID[e.ID] = ent
	if c := e.CorrelationID; c != "" {
		t.byThread[c] = append(t.byThread[c], ent)
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
	delete(t.byID, ent.env.ID)
	if c := ent.env.CorrelationID; c != "" {
		// The oldest entry of all is the oldest of its thread.
		list := t.byThread[c]
		list[0] = nil
		if list = list[1:]; len(list) == 0 {
			delete(t.byThread, c)
		} else {
			t.byThread[c] = list
		}
	}
}

// Thread returns the envelopes held whose CorrelationID is id, plus the
// envelope whose ID is id (the thread's root) if held, ordered by Timestamp
// and, for equal timestamps, by insertion. It returns nil if there are none.
func (t *Threads) Thread(id string) []*Envelope {
	if id == "" {
		return nil
	}
	t.mu.Lock()
	list := t.byThread[id]
	ents := make([]*threadEntry, 0, len(list)+1)
	ents = append(ents, list...)
	if root, ok := t.byID[id]; ok && root.env.CorrelationID != id {
		ents = append(ents, root)
	}
	t.mu.Unlock()
	if len(ents) == 0 {
		return nil
	}
	slices.SortFunc(ents, func(a, b *threadEntry) int {
		return cmp.Or(cmp.Compare(a.env.Timestamp, b.env.Timestamp), cmp.Compare(a.seq, b.seq))
	})
	out := make([]*Envelope, len(ents))
	for i, ent := range ents {
		out[i] = ent.env
	}
	return out
}

// Len returns the number of envelopes held.
func (t *Threads) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.order) - t.head
}
