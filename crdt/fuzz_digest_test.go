package crdt

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/crdt/delta"
)

// A clock digest is any peer's message on <doc topic>/clock, decoded by
// readDigest (digestReader): the size check, decMode, and the drop of
// empty clocks. An accepted digest is
// within the limits, round-trips through encMode (as digestLoop sends it),
// and the reader's "is it ahead" rule and clock merge work on it.
func FuzzDigest(f *testing.F) {
	_, clocks := fuzzHistory(f)
	for _, c := range clocks[1:] {
		f.Add(mustCBOR(f, digest{Clock: c}))
	}
	full := mustCBOR(f, digest{Clock: clocks[len(clocks)-1]})
	for _, b := range [][]byte{
		full[:len(full)/2], full[:len(full)-1], append(full[:len(full):len(full)], 0x00),
		mustCBOR(f, digest{Clock: delta.VersionVector{"a": 1 << 63, "z": ^uint64(0)}}),
		mustCBOR(f, digest{Clock: delta.VersionVector{"": 3, "a": 0, "\x01": 1}}),
		mustCBOR(f, digest{Clock: delta.VersionVector{}}),
		mustCBOR(f, digest{}),
		mustCBOR(f, catchupReq{Doc: "notes", Holding: []summaryWire{{Replica: "a", Last: 1, Digest: make([]byte, 32)}}}), // a request on the wrong topic
	} {
		f.Add(b)
	}
	for _, b := range hostileCBOR(f) {
		f.Add(b)
	}
	_, mine := fuzzHistory(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dg, ok := readDigest(data)
		if !ok {
			return
		}
		if len(data) > digestMax || len(dg.Clock) == 0 || len(dg.Clock) > maxClockEntries {
			t.Fatalf("accepted a %d-byte digest of %d replicas", len(data), len(dg.Clock))
		}
		enc, err := encMode.Marshal(dg)
		if err != nil {
			t.Fatalf("re-encoding an accepted digest: %v", err)
		}
		again, ok := readDigest(enc)
		if !ok || !reflect.DeepEqual(again, dg) {
			t.Fatalf("round trip: %v -> %x -> %v", dg.Clock, enc, again.Clock)
		}
		if enc2 := mustCBOR(t, again); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding not stable")
		}
		// The reader's rule: a digest is ahead when it counts more events
		// of some replica than this node, that is when it is not Before or
		// Equal to this node's clock. What it remembers covers both.
		for _, m := range mine {
			ahead := false
			for r, n := range dg.Clock {
				if n > m[r] {
					ahead = true
					break
				}
			}
			o := dg.Clock.Compare(m)
			if ahead != (o == delta.After || o == delta.Concurrent) {
				t.Fatalf("ahead %v but the digest is %v this clock", ahead, o)
			}
			merged := dg.Clock.Merge(m)
			for _, c := range []delta.VersionVector{dg.Clock, m} {
				if o := merged.Compare(c); o != delta.Equal && o != delta.After {
					t.Fatalf("the merged clock is %v a clock it merged", o)
				}
			}
			_ = dg.Clock.Context()
		}
	})
}

// TestDigestDecodeLimits feeds the digest decoder inputs at and just over
// its caps: the message size and decMode's clock size.
func TestDigestDecodeLimits(t *testing.T) {
	if _, ok := readDigest(padTo(t, map[string]any{"c": map[string]uint64{"a": 1}}, digestMax)); !ok {
		t.Fatal("dropped a digest of exactly the cap")
	}
	if _, ok := readDigest(padTo(t, map[string]any{"c": map[string]uint64{"a": 1}}, digestMax+1)); ok {
		t.Fatal("accepted a digest over the cap")
	}
	if dg, ok := readDigest(mustCBOR(t, digest{Clock: bigClock(maxClockEntries)})); !ok || len(dg.Clock) != maxClockEntries {
		t.Fatalf("dropped a clock of %d replicas", maxClockEntries)
	}
	big := mustCBOR(t, digest{Clock: bigClock(maxClockEntries + 1)})
	var dg digest
	if e := (*cbor.MaxMapPairsError)(nil); !errors.As(decMode.Unmarshal(big, &dg), &e) {
		t.Fatalf("decMode took a clock of %d replicas", maxClockEntries+1)
	}
	if _, ok := readDigest(big); ok {
		t.Fatalf("accepted a clock of %d replicas", maxClockEntries+1)
	}
}
