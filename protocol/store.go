package protocol

import "time"

// Store persists what must survive a restart: outbound envelopes not yet
// acknowledged (the outbox) and the watermark of each inbound channel (so a
// retransmission after a restart is recognised as a duplicate). node
// implements it on bbolt. Calls come from the Router's persister goroutine
// and from Start/Close, one at a time.
type Store interface {
	// SaveOutbox applies ops atomically (one transaction).
	SaveOutbox(ops []OutboxOp) error
	// LoadOutbox returns every channel with items still in the outbox.
	LoadOutbox() ([]OutboxChannel, error)
	// SaveWatermarks records inbound channel watermarks (key -> seq).
	SaveWatermarks(w map[string]uint64) error
	// LoadWatermarks returns every recorded watermark.
	LoadWatermarks() (map[string]uint64, error)
}

// WatermarkDeleter is implemented by a Store that can forget watermarks:
// the Router deletes those of channels it no longer remembers (see
// maxMarksPerPeer), so the store stays as bounded as its memory. It may be
// called from a stream's goroutine, concurrently with the other methods.
// A Store without it keeps forgotten watermarks until it drops them
// itself.
type WatermarkDeleter interface {
	DeleteWatermarks(keys []string) error
}

// OutboxChannel is a channel as persisted, with its unacknowledged items.
type OutboxChannel struct {
	ID, From, To string
	Items        []OutboxItem
}

// OutboxItem is one unacknowledged envelope (CBOR) with its sequence and
// the end of its time to live (zero: none).
type OutboxItem struct {
	Seq     uint64
	Env     []byte
	Expires time.Time
}

// OutboxOp changes one channel's outbox: Put adds items (and records the
// channel's From/To), Delete removes settled ones, Drop removes the channel.
type OutboxOp struct {
	Channel  string
	From, To string
	Put      []OutboxItem
	Delete   []uint64
	Drop     bool
}

// MemStore is an in-memory Store: what a router without persistence uses,
// and a reference for tests.
type MemStore struct {
	mu    orderedMutex[lockMemStore]
	chans map[string]*OutboxChannel
	marks map[string]uint64
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{chans: map[string]*OutboxChannel{}, marks: map[string]uint64{}}
}

// SaveOutbox implements Store.
func (m *MemStore) SaveOutbox(ops []OutboxOp) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range ops {
		if op.Drop {
			delete(m.chans, op.Channel)
			continue
		}
		c := m.chans[op.Channel]
		if c == nil {
			c = &OutboxChannel{ID: op.Channel}
			m.chans[op.Channel] = c
		}
		if op.From != "" {
			c.From, c.To = op.From, op.To
		}
		c.Items = append(c.Items, op.Put...)
		for _, d := range op.Delete {
			for i, it := range c.Items {
				if it.Seq == d {
					c.Items = append(c.Items[:i], c.Items[i+1:]...)
					break
				}
			}
		}
	}
	return nil
}

// LoadOutbox implements Store.
func (m *MemStore) LoadOutbox() ([]OutboxChannel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []OutboxChannel
	for _, c := range m.chans {
		if len(c.Items) > 0 {
			cp := *c
			cp.Items = append([]OutboxItem(nil), c.Items...)
			out = append(out, cp)
		}
	}
	return out, nil
}

// SaveWatermarks implements Store.
func (m *MemStore) SaveWatermarks(w map[string]uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range w {
		m.marks[k] = v
	}
	return nil
}

// DeleteWatermarks implements WatermarkDeleter.
func (m *MemStore) DeleteWatermarks(keys []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.marks, k)
	}
	return nil
}

// LoadWatermarks implements Store.
func (m *MemStore) LoadWatermarks() (map[string]uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]uint64, len(m.marks))
	for k, v := range m.marks {
		out[k] = v
	}
	return out, nil
}
