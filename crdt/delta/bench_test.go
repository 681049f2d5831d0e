package delta_test

import (
	"fmt"
	"testing"

	"github.com/nova-node/nova-node/crdt/delta"
)

// docOf returns a document of n keys /k0.. /k{n-1} written by replica a,
// each holding a small object flattened to two leaves.
func docOf(b *testing.B, n int) *delta.Doc {
	d := newDoc(b, "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo")
	for i := range n {
		apply(b, d)(d.Set(fmt.Sprintf("/k%d", i), raw(fmt.Sprintf(`{"n":%d,"s":"value %d"}`, i, i))))
	}
	return d
}

// BenchmarkSetJoin: one update (Set of a number in a 10,000-key document)
// and its Join.
func BenchmarkSetJoin(b *testing.B) {
	d := docOf(b, 10_000)
	i := 0
	for b.Loop() {
		x, err := d.Set(fmt.Sprintf("/k%d/n", i%10_000), raw(`42`))
		if err != nil {
			b.Fatal(err)
		}
		d.Join(x)
		i++
	}
}

// BenchmarkJoinRemoteDelta: a replica joins a peer's small delta.
func BenchmarkJoinRemoteDelta(b *testing.B) {
	d := docOf(b, 10_000)
	peer := newDoc(b, "peer")
	peer.JoinDoc(d)
	xs := make([]*delta.Delta, 1000)
	for i := range xs {
		xs[i] = apply(b, peer)(peer.Set(fmt.Sprintf("/k%d/n", i), raw(`7`)))
	}
	i := 0
	for b.Loop() {
		d.Join(xs[i%len(xs)])
		i++
	}
}

func BenchmarkEncodeDoc10k(b *testing.B) {
	d := docOf(b, 10_000)
	var n int
	for b.Loop() {
		enc, err := delta.EncodeDoc(d)
		if err != nil {
			b.Fatal(err)
		}
		n = len(enc)
	}
	b.ReportMetric(float64(n), "bytes")
}

func BenchmarkDecodeDoc10k(b *testing.B) {
	enc, err := delta.EncodeDoc(docOf(b, 10_000))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := delta.DecodeDoc(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(enc)), "bytes")
}

// BenchmarkLateJoiner10k: the pure part of a late joiner's catch-up on a
// 10,000-key document: DeltaSince for an empty context, encode, decode,
// join.
func BenchmarkLateJoiner10k(b *testing.B) {
	d := docOf(b, 10_000)
	var n int
	for b.Loop() {
		fresh := newDoc(b, "late")
		enc, err := delta.EncodeDelta(d.DeltaSince(fresh.Context()))
		if err != nil {
			b.Fatal(err)
		}
		x, err := delta.DecodeDelta(enc)
		if err != nil {
			b.Fatal(err)
		}
		fresh.Join(x)
		n = len(enc)
	}
	b.ReportMetric(float64(n), "bytes")
}

// BenchmarkOverwriteSize: 100,000 overwrites of the same 100 keys; reports
// the encoded state size, which stays bounded by the 100 live entries.
func BenchmarkOverwriteSize(b *testing.B) {
	var n int
	for b.Loop() {
		d := newDoc(b, "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo")
		for i := range 100_000 {
			apply(b, d)(d.Set(fmt.Sprintf("/k%d", i%100), raw(fmt.Sprint(i))))
		}
		enc, err := delta.EncodeDoc(d)
		if err != nil {
			b.Fatal(err)
		}
		n = len(enc)
	}
	b.ReportMetric(float64(n), "state-bytes")
}

// BenchmarkSmallUpdateWire: bytes on the wire for one small update (a
// number at a short path), as the encoded sync message.
func BenchmarkSmallUpdateWire(b *testing.B) {
	d := docOf(b, 100)
	var n int
	for b.Loop() {
		x := apply(b, d)(d.Set("/k7/n", raw(`42`)))
		m, err := delta.NewSyncMessage("mars@12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo", d.Clock(), x, 1767225600000)
		if err != nil {
			b.Fatal(err)
		}
		enc, err := delta.EncodeSyncMessage(m)
		if err != nil {
			b.Fatal(err)
		}
		n = len(enc)
	}
	b.ReportMetric(float64(n), "wire-bytes")
}
