package negotiation

import (
	"bytes"
	"slices"
	"sync"
)

// Bucket is the KV bucket that holds the proposal records, one JSON value per
// record under the key "<direction>/<proposalId>".
const Bucket = "negotiation.proposals"

// KV is the small store the Negotiator persists its records in (and the swarm
// coordinator its swarms). node implements it on bbolt; [MemKV] is an
// in-memory one. Put and Delete must be durable when they return. ForEach
// calls fn for every key of a bucket in key order and stops at fn's first
// error, which it returns; a missing bucket has no keys. Values passed to
// fn may be reused after fn returns: copy what you keep.
type KV interface {
	Put(bucket, key string, val []byte) error
	Delete(bucket, key string) error
	ForEach(bucket string, fn func(key string, val []byte) error) error
}

// MemKV is a [KV] in memory, for tests and for nodes without a data dir. The
// zero value is ready. It is safe for concurrent use, and fn passed to
// ForEach may call Put and Delete (it iterates over a snapshot).
type MemKV struct {
	mu sync.Mutex
	m  map[string]map[string][]byte
}

// NewMemKV returns an empty MemKV.
func NewMemKV() *MemKV { return &MemKV{} }

// Put stores a copy of val.
func (s *MemKV) Put(bucket, key string, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[string][]byte{}
	}
	b := s.m[bucket]
	if b == nil {
		b = map[string][]byte{}
		s.m[bucket] = b
	}
	b[key] = bytes.Clone(val)
	return nil
}

// Delete removes key; a missing key is not an error.
func (s *MemKV) Delete(bucket, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m[bucket], key)
	return nil
}

// ForEach calls fn for each key of bucket in key order.
func (s *MemKV) ForEach(bucket string, fn func(key string, val []byte) error) error {
	s.mu.Lock()
	b := s.m[bucket]
	keys := make([]string, 0, len(b))
	vals := make(map[string][]byte, len(b))
	for k, v := range b {
		keys = append(keys, k)
		vals[k] = v
	}
	s.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn(k, bytes.Clone(vals[k])); err != nil {
			return err
		}
	}
	return nil
}

// Len returns the number of keys in bucket.
func (s *MemKV) Len(bucket string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m[bucket])
}
