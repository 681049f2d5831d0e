package envelope

import (
	"bytes"
	"cmp"
	"hash/maphash"
	"slices"
	"sync"
)

// Threads is a bounded index of envelopes by correlation thread. It keeps
// the most recent envelopes added, at most the count and the bytes of
// encoding given to NewThreads: adding one more evicts the oldest until it
// fits (in the circular log, where the room left at the log's end before it
// wraps counts only for what fits there: it may evict up to one encoding's
// worth more than the byte bound alone would). It is safe for concurrent
// use (one mutex guards all state) and starts no goroutine.
//
// Threads keeps copies, not the envelopes it is given: each envelope's
// canonical CBOR encoding, in one circular log of bytes. Thread decodes
// what it returns, so callers own the result, and nothing a caller does to
// an envelope after adding it changes the index. Keeping the envelopes
// themselves had two costs: a full index of 10,000 was most of a node's
// heap under traffic (every envelope a few separate allocations the
// garbage collector walked, each round trip then slower by a microsecond
// of cache misses), and it bounded only their number, so 10,000 envelopes
// of a megabyte each would have been held.
//
// A router adds every envelope of a conversation as it passes, and asks
// for a thread only when someone looks at one. So Add is what must be
// cheap: it copies the encoding the router made or received anyway
// ([Threads.AddEncoded]) and writes one entry. Thread and Len scan the
// entries (which carry hashes of their IDs, so the scan compares integers
// and decodes an envelope only on a match): tens of microseconds for a
// full index, on a query path.
//
// A retransmission (an ID already held) is never returned twice: Thread
// and Len count the first envelope added with an ID. One added right after
// itself is dropped at once; an older duplicate takes a place until it is
// evicted.
type Threads struct {
	mu       sync.Mutex
	max      int // entries
	maxBytes int // of the log
	seed     maphash.Seed

	ents  []threadEntry // circular, oldest at first; grows to max
	first int
	n     int

	log     []byte // circular: encodings from the oldest entry's off to head; grows to maxBytes
	head    int    // where the next encoding goes
	scratch []byte // Add's encoding
}

type threadEntry struct {
	id        uint64 // hash of the envelope's ID
	thread    uint64 // hash of its CorrelationID, when threaded
	threaded  bool
	off, size int32 // its encoding in the log
}

// DefaultThreadBytes is the byte bound of a router's thread index: about
// 4,500 envelopes with 256-byte payloads, and always room for the largest
// envelope ([MaxEncodedSize]). Under a round-trip load, 4 MiB was 0.3 µs
// slower per round trip than 2 MiB, and 1 MiB no faster (more of the heap
// is more cache misses).
const DefaultThreadBytes = 2 << 20

// minThreadLog is the log's first size: an index that holds a few
// envelopes does not pay for its bound.
const minThreadLog = 64 << 10

// NewThreads returns an empty Threads holding at most limit envelopes and
// maxBytes of their encodings (a limit below 1 is taken as 1; maxBytes is
// raised to [MaxEncodedSize] so that any envelope fits). An envelope whose
// encoding is larger than maxBytes is not indexed.
func NewThreads(limit, maxBytes int) *Threads {
	return newThreads(limit, min(max(maxBytes, MaxEncodedSize), 1<<30))
}

// newThreads is NewThreads without the byte bound's floor (tests).
func newThreads(limit, maxBytes int) *Threads {
	return &Threads{max: max(limit, 1), maxBytes: maxBytes, seed: maphash.MakeSeed()}
}

func (t *Threads) hash(s string) uint64 { return maphash.String(t.seed, s) }

// Add records e, encoded. A nil envelope, one without an ID, one that is
// not valid, and one whose ID was added just before (a retransmission) are
// ignored. Past a bound, the oldest envelopes are evicted.
func (t *Threads) Add(e *Envelope) {
	if e == nil || e.ID == "" {
		return
	}
	c, err := e.check()
	if err != nil {
		return
	}
	p := wirePayload(e.Payload, c.compact)
	if canonicalLen(e, p) > MaxEncodedSize {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scratch = appendCanonical(t.scratch[:0], e, p)
	t.addLocked(e, t.scratch)
	if cap(t.scratch) > minThreadLog {
		t.scratch = nil // one large envelope does not stay allocated
	}
}

// AddEncoded is Add for an envelope whose canonical CBOR encoding the
// caller has, as [AppendCBORValidated] wrote it or a decoder read it: raw
// is copied, not checked. The caller guarantees that raw encodes e.
func (t *Threads) AddEncoded(e *Envelope, raw []byte) {
	if e == nil || e.ID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(e, raw)
}

func (t *Threads) addLocked(e *Envelope, raw []byte) {
	size := len(raw)
	if size == 0 || size > t.maxBytes {
		return
	}
	ent := threadEntry{id: t.hash(e.ID), size: int32(size)}
	if e.CorrelationID != "" {
		ent.thread, ent.threaded = t.hash(e.CorrelationID), true
	}
	if t.n > 0 && t.ents[(t.first+t.n-1)%len(t.ents)].id == ent.id {
		return // the same envelope again, as a local delivery records it twice
	}
	if t.n == t.max {
		t.evictOldest()
	}
	for {
		if p, ok := t.place(size); ok {
			ent.off = int32(p)
			copy(t.log[p:p+size], raw)
			t.head = p + size
			t.push(ent)
			return
		}
		if len(t.log) < t.maxBytes {
			t.growLog(size)
			continue
		}
		t.evictOldest() // n > 0 here: an empty log of maxBytes fits any size allowed
	}
}

// place returns where an encoding of size bytes goes in the log without
// overwriting a held one: at head, or at the log's start when the space
// after head is too short (that space is left unused until the entries
// before it are evicted).
func (t *Threads) place(size int) (int, bool) {
	if t.n == 0 {
		t.head = 0
		return 0, size <= len(t.log)
	}
	o := int(t.ents[t.first].off) // the oldest encoding's start
	switch {
	case t.head > o: // held: [o, head); free: [head, len) and [0, o)
		if t.head+size <= len(t.log) {
			return t.head, true
		}
		return 0, size <= o
	case t.head < o: // held: [o, end of the old tail) and [0, head); free: [head, o)
		return t.head, t.head+size <= o
	default: // head == o: full
		return 0, false
	}
}

// growLog gives the log room for size more bytes (at most maxBytes),
// moving the held encodings to its start, oldest first.
func (t *Threads) growLog(size int) {
	held := 0
	t.each(func(ent *threadEntry) { held += int(ent.size) })
	n := max(2*len(t.log), minThreadLog)
	for n < held+size {
		n *= 2
	}
	log := make([]byte, min(n, t.maxBytes))
	off := 0
	t.each(func(ent *threadEntry) {
		copy(log[off:], t.log[ent.off:ent.off+ent.size])
		ent.off = int32(off)
		off += int(ent.size)
	})
	t.log, t.head = log, off
}

func (t *Threads) push(ent threadEntry) {
	if t.n == len(t.ents) {
		// Grow the ring (only while under max: evictOldest made room
		// otherwise), oldest first.
		ents := make([]threadEntry, 0, min(max(2*len(t.ents), 16), t.max))
		t.each(func(e *threadEntry) { ents = append(ents, *e) })
		t.ents, t.first = ents[:cap(ents)], 0
	}
	t.ents[(t.first+t.n)%len(t.ents)] = ent
	t.n++
}

func (t *Threads) evictOldest() {
	t.first = (t.first + 1) % len(t.ents)
	if t.n--; t.n == 0 {
		t.first, t.head = 0, 0
	}
}

// each calls f on every entry, oldest first. t.mu is held.
func (t *Threads) each(f func(ent *threadEntry)) {
	for k := range t.n {
		f(&t.ents[(t.first+k)%len(t.ents)])
	}
}

// Thread returns the envelopes held whose CorrelationID is id, plus the
// envelope whose ID is id (the thread's root) if held, ordered by Timestamp
// and, for equal timestamps, by insertion. They are decoded anew: the
// caller owns them. It returns nil if there are none.
func (t *Threads) Thread(id string) []*Envelope {
	if id == "" {
		return nil
	}
	h := t.hash(id)
	// The candidates' encodings are copied under the lock and decoded after
	// it: decoding a long thread must not hold up the router's Adds.
	var raws [][]byte
	t.mu.Lock()
	t.each(func(ent *threadEntry) {
		if ent.threaded && ent.thread == h || ent.id == h {
			raws = append(raws, bytes.Clone(t.log[ent.off:ent.off+ent.size]))
		}
	})
	t.mu.Unlock()
	var out []*Envelope
	held := map[string]struct{}{} // IDs in out: a retransmission counts once
	for _, raw := range raws {
		e, err := DecodeCBOR(raw)
		if err != nil {
			continue // not reached: what was added was a valid encoding
		}
		in := e.CorrelationID == id || e.ID == id
		if _, dup := held[e.ID]; !in || dup {
			continue
		}
		held[e.ID] = struct{}{}
		out = append(out, e)
	}
	// Collected in insertion order: a stable sort keeps it for equal times.
	slices.SortStableFunc(out, func(a, b *Envelope) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	return out
}

// Len returns the number of envelopes held (envelopes with the same ID
// count once).
func (t *Threads) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make(map[uint64]struct{}, t.n)
	t.each(func(ent *threadEntry) { ids[ent.id] = struct{}{} })
	return len(ids)
}

// Bytes returns the bytes of encoding held (for tests and bounds).
func (t *Threads) Bytes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	t.each(func(ent *threadEntry) { n += int(ent.size) })
	return n
}
