package protocol

import "sync"

// bounded is a mutex-guarded map that forgets its oldest keys past max
// entries (FIFO), so nothing a peer sends can grow it without limit. Keys
// are comparable values (struct keys avoid building a string per lookup on
// the message path).
type bounded[K comparable, V any] struct {
	mu   sync.Mutex
	max  int
	m    map[K]V
	ring []K
	next int
}

// newBounded allocates lazily: an idle node must not pay for the bound.
func newBounded[K comparable, V any](max int) *bounded[K, V] {
	return &bounded[K, V]{max: max, m: make(map[K]V)}
}

func (b *bounded[K, V]) get(k K) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[k]
	return v, ok
}

func (b *bounded[K, V]) put(k K, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[k]; ok {
		b.m[k] = v
		return
	}
	if len(b.ring) < b.max {
		b.ring = append(b.ring, k)
	} else {
		delete(b.m, b.ring[b.next])
		b.ring[b.next] = k
		b.next = (b.next + 1) % b.max
	}
	b.m[k] = v
}

// putNew adds k unless it is present, and reports whether it added it: one
// lock for the usual check-then-record of deduplication.
func (b *bounded[K, V]) putNew(k K, v V) bool {
	b.mu.Lock()
	_, ok := b.m[k]
	b.mu.Unlock()
	if ok {
		return false
	}
	b.put(k, v)
	return true
}

func (b *bounded[K, V]) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
