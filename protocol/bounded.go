package protocol

import "sync"

// bounded is a mutex-guarded map that forgets its oldest keys past max
// entries (FIFO), so nothing a peer sends can grow it without limit.
type bounded[V any] struct {
	mu   sync.Mutex
	max  int
	m    map[string]V
	ring []string
	next int
}

// newBounded allocates lazily: an idle node must not pay for the bound.
func newBounded[V any](max int) *bounded[V] {
	return &bounded[V]{max: max, m: make(map[string]V)}
}

func (b *bounded[V]) get(k string) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[k]
	return v, ok
}

func (b *bounded[V]) put(k string, v V) {
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

func (b *bounded[V]) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
