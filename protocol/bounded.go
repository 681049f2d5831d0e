package protocol

// bounded is a mutex-guarded map that remembers at least its max most
// recent keys and at most 2*max, so nothing a peer sends can grow it without
// limit. Keys are comparable values (struct keys avoid building a string per
// lookup on the message path).
//
// It keeps two generations instead of evicting key by key: new keys go to
// cur, and when cur holds max keys it becomes old and a new cur starts (the
// previous old is dropped whole). Under traffic the dedupe and question
// maps are always full, and a FIFO that deleted one key per insert kept the
// map full of tombstones: longer probes on every lookup and a rehash, with
// its allocation, every few thousand messages. Here nothing is deleted, and
// a generation's storage is allocated once, at the size it will have, and
// then reused.
type bounded[K comparable, V any] struct {
	mu  orderedMutex[lockBounded]
	max int
	cur map[K]V
	old map[K]V
}

// newBounded allocates lazily: an idle node must not pay for the bound.
func newBounded[K comparable, V any](max int) *bounded[K, V] {
	return &bounded[K, V]{max: max, cur: make(map[K]V)}
}

func (b *bounded[K, V]) get(k K) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.getLocked(k)
}

func (b *bounded[K, V]) getLocked(k K) (V, bool) {
	if v, ok := b.cur[k]; ok {
		return v, true
	}
	v, ok := b.old[k]
	return v, ok
}

func (b *bounded[K, V]) put(k K, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.putLocked(k, v)
}

// putLocked adds k to the current generation. A key also held in old is
// not deleted there (a probe of a second large map per message, for
// nothing): lookups find the current one first, and old goes whole at the
// next rotation.
func (b *bounded[K, V]) putLocked(k K, v V) {
	if _, ok := b.cur[k]; !ok && len(b.cur) >= b.max {
		b.rotate()
	}
	b.cur[k] = v
}

// rotate makes cur old and starts a new cur in the storage of the
// generation it drops, cleared: a dedupe set under traffic rotates every
// few tenths of a second, and a fresh map of max keys each time was a
// megabyte or two of garbage.
func (b *bounded[K, V]) rotate() {
	spare := b.old
	b.old = b.cur
	if spare != nil {
		clear(spare)
		b.cur = spare
	} else {
		b.cur = make(map[K]V, b.max)
	}
}

// putNew adds k unless it is present, and reports whether it added it: one
// lock for the usual check-then-record of deduplication.
func (b *bounded[K, V]) putNew(k K, v V) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.getLocked(k); ok {
		return false
	}
	b.putLocked(k, v)
	return true
}

// remove forgets k. Rare (it leaves a tombstone in a large map): for an
// entry recorded just before the work it stood for was refused.
func (b *bounded[K, V]) remove(k K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.cur, k)
	delete(b.old, k)
}

// len is the number of keys held, counting twice a key held in both
// generations (for tests and bounds).
func (b *bounded[K, V]) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.cur) + len(b.old)
}
