package crdt

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/nova-node/nova-node/crdt/delta"
)

// history signs n updates of one replica, each a Set of one of keys keys
// (a number), and returns their bytes in order.
func history(b *testing.B, k crypto.PrivKey, n, keys int) [][]byte {
	b.Helper()
	l := fuzzLog(b, k)
	out := make([][]byte, 0, n)
	for i := range n {
		x, err := l.d.Set(fmt.Sprintf("/k%d", i%keys), json.RawMessage(fmt.Sprint(i)))
		if err != nil {
			b.Fatal(err)
		}
		u, err := l.local(k, "w@"+l.self, x, 1)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, u.Raw)
	}
	return out
}

// BenchmarkUpdateSize: the bytes of one signed update (a Set of a number
// in a document another replica also writes), against its bare delta.
func BenchmarkUpdateSize(b *testing.B) {
	ka, kb := fuzzKey(b), fuzzKey(b)
	la, lb := fuzzLog(b, ka), fuzzLog(b, kb)
	x, _ := lb.d.Set("/k", json.RawMessage(`1`))
	ub, _ := lb.local(kb, "w@"+lb.self, x, 1)
	v, _ := DecodeUpdate(ub.Raw)
	if _, err := la.add(v, "p"); err != nil {
		b.Fatal(err)
	}
	var signed, bare int
	for b.Loop() {
		x, err := la.d.Set("/k", json.RawMessage(`2`)) // overwrites b's value: one dep
		if err != nil {
			b.Fatal(err)
		}
		u, err := SignUpdate(ka, UpdateFields{Doc: "notes", Agent: "w@" + la.self, Prev: Hash{}, Deps: []Dep{{Replica: lb.self, Seq: 1, Hash: ub.Hash}},
			Clock: delta.VersionVector{la.self: 1, lb.self: 1}, Time: 1}, x)
		if err != nil {
			b.Fatal(err)
		}
		enc, _ := delta.EncodeDelta(x)
		signed, bare = len(u.Raw), len(enc)
	}
	b.ReportMetric(float64(signed), "B/update")
	b.ReportMetric(float64(bare), "B/delta")
}

// BenchmarkApplyRemoteUpdate: a replica verifies (DecodeUpdate: signature
// and rules) and applies a peer's update, in a 1,000-key document.
// Reported per update.
func BenchmarkApplyRemoteUpdate(b *testing.B) {
	ups := history(b, fuzzKey(b), 5000, 1000)
	for b.Loop() {
		l := fuzzLog(b, fuzzKey(b))
		for _, raw := range ups {
			u, err := DecodeUpdate(raw)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.add(u, "p"); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ups)), "ns/update")
}

// BenchmarkVerifyUpdate: DecodeUpdate alone (signature and rules).
func BenchmarkVerifyUpdate(b *testing.B) {
	ups := history(b, fuzzKey(b), 1000, 100)
	i := 0
	for b.Loop() {
		if _, err := DecodeUpdate(ups[i%len(ups)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCatchup10k: a late joiner's catch-up of a 10,000-entry
// document written as 10,000 updates: the server selects them (since), the
// joiner verifies and applies each. Reported: ms and MB per catch-up.
func BenchmarkCatchup10k(b *testing.B) {
	k := fuzzKey(b)
	server := fuzzLog(b, fuzzKey(b))
	for _, raw := range history(b, k, 10_000, 10_000) {
		u, _ := DecodeUpdate(raw)
		if _, err := server.add(u, "p"); err != nil {
			b.Fatal(err)
		}
	}
	var bytes int
	for b.Loop() {
		joiner := fuzzLog(b, fuzzKey(b))
		bytes = 0
		for _, u := range server.since(joiner.summary()) {
			bytes += len(u.Raw)
			v, err := DecodeUpdate(u.Raw)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := joiner.add(v, "p"); err != nil {
				b.Fatal(err)
			}
		}
		if joiner.d.Len() != 10_000 {
			b.Fatalf("joiner holds %d entries", joiner.d.Len())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/catchup")
	b.ReportMetric(float64(bytes)/1e6, "MB/catchup")
}
