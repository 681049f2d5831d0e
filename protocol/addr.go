package protocol

import (
	"hash/maphash"
)

// seenKey names one delivered envelope for deduplication: its sender's
// canonical address and its ID, and whether it came as a broadcast.
type seenKey struct {
	from, id  string
	broadcast bool
}

// seenSet remembers the last max delivered envelopes by a 64-bit hash of
// their seenKey, under a seed secret to this process, oldest forgotten
// first. Hashes rather than the keys themselves: the set is large and
// always full under traffic, and string keys would be pointers the garbage
// collector rescans on every cycle. A collision (about max/2^64 per
// envelope, and not something a peer can aim for without the seed) would
// only take a new envelope for a duplicate: acknowledged, not delivered.
type seenSet struct {
	seed maphash.Seed
	set  *bounded[uint64, struct{}]
}

func newSeenSet(max int) seenSet {
	return seenSet{seed: maphash.MakeSeed(), set: newBounded[uint64, struct{}](max)}
}

func (s seenSet) hash(k seenKey) uint64 { return maphash.Comparable(s.seed, k) }

// has reports whether k was recorded.
func (s seenSet) has(k seenKey) bool {
	_, ok := s.set.get(s.hash(k))
	return ok
}

// add records k.
func (s seenSet) add(k seenKey) { s.set.put(s.hash(k), struct{}{}) }

// addNew records k and reports whether it was new.
func (s seenSet) addNew(k seenKey) bool { return s.set.putNew(s.hash(k), struct{}{}) }

// forget removes k, recorded by addNew for an envelope then refused.
func (s seenSet) forget(k seenKey) { s.set.remove(s.hash(k)) }

// askKey names one question: a request or proposal in a thread, from an
// asker to an answerer. Keyed by thread rather than envelope ID so that the
// requests of a long task (all in the proposal's thread, property 24) can
// each be answered, by every agent that was asked.
type askKey struct{ thread, asker, answerer string }

// askSet remembers at least the last max questions. Like seenSet it is
// keyed by a seeded 64-bit hash (integers compared in the map itself, not
// three strings behind pointers, in a map that is always full under
// traffic); unlike seenSet it confirms every hit with a second hash under
// an independent seed, because a hit lifts tier rules for a reply: a false
// hit needs both 64-bit hashes to collide, which no peer can aim for
// without the process's secret seeds. Keeping hashes rather than the key's
// strings also keeps the set from holding on to the envelopes they were
// cut from.
type askSet struct {
	seed, check maphash.Seed
	set         *bounded[uint64, uint64]
}

func newAskSet(max int) askSet {
	return askSet{seed: maphash.MakeSeed(), check: maphash.MakeSeed(), set: newBounded[uint64, uint64](max)}
}

// add records k.
func (s askSet) add(k askKey) {
	s.set.put(maphash.Comparable(s.seed, k), maphash.Comparable(s.check, k))
}

// has reports whether k was recorded.
func (s askSet) has(k askKey) bool {
	got, ok := s.set.get(maphash.Comparable(s.seed, k))
	return ok && got == maphash.Comparable(s.check, k)
}
