package delta_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/crdt/delta"
)

// broadcast turns x, just joined at doc, into the wire bytes of its sync
// message, and checks the message on the way.
func broadcast(t *rapid.T, doc *delta.Doc, x *delta.Delta, ts int64) []byte {
	m, err := delta.NewSyncMessage("agent-"+doc.Replica(), doc.Clock(), x, ts)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.VectorClock) == 0 {
		t.Fatal("sync message with an empty vector clock")
	}
	b, err := delta.EncodeSyncMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// receive decodes a sync message and its delta.
func receive(t *rapid.T, b []byte) (*delta.SyncMessage, *delta.Delta) {
	m, err := delta.DecodeSyncMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Delta()
	if err != nil {
		t.Fatal(err)
	}
	return m, x
}

// TestProperty27_UpdateCarriesVectorClock: for any update broadcast by an
// agent, every connected replica receives it and applies it, and every
// update message carries a non-empty vector clock (requirements 9.1, 9.2,
// 9.4).
func TestProperty27_UpdateCarriesVectorClock(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 5).Draw(t, "replicas")
		docs := make([]*delta.Doc, n)
		for i := range docs {
			docs[i] = newDoc(t, fmt.Sprintf("node-%d", i))
		}
		for s := range rapid.IntRange(1, 30).Draw(t, "updates") {
			i := rapid.IntRange(0, n-1).Draw(t, "sender")
			o := genOp.Draw(t, "op")
			x, err := docs[i].Apply(o.mutate(docs[i]))
			if err != nil {
				continue // invalid at this path (the root)
			}
			wire := broadcast(t, docs[i], x, int64(1000+s))
			for j := range docs {
				if j == i {
					continue
				}
				m, got := receive(t, wire)
				if !docs[j].Ready(m.VectorClock, got) {
					t.Fatalf("in-order update %v not ready at %d", o, j)
				}
				if docs[j].Seen(got) {
					t.Fatalf("new update %v reported as seen at %d", o, j)
				}
				docs[j].Join(got)
				if !docs[j].Seen(got) || !docs[j].Context().Covers(m.VectorClock) {
					t.Fatalf("replica %d did not include update %v", j, o)
				}
				want, _ := docs[i].Get(o.Path)
				have, _ := docs[j].Get(o.Path)
				if string(want) != string(have) {
					t.Fatalf("replica %d reads %s at %s, sender %s", j, have, o.Path, want)
				}
				if !docs[j].Equal(docs[i]) {
					t.Fatalf("replica %d differs from the sender after %v", j, o)
				}
			}
		}
	})
}

// TestProperty28_ConcurrentUpdateConfluence: replicas update concurrently
// and exchange their deltas over a network that drops, duplicates and
// reorders them; receivers apply whatever arrives, ready or not. After one
// round of catch-up (full state, DeltaSince with the peer's context or only
// its clock, or the delta buffers) every replica holds the same state:
// same JSON, same clock (requirement 9.3).
func TestProperty28_ConcurrentUpdateConfluence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 5).Draw(t, "replicas")
		docs := make([]*delta.Doc, n)
		bufs := make([]delta.Buffer, n)
		// got[j][i]: numbers of i's buffered deltas that reached j.
		got := make([][]map[uint64]bool, n)
		for i := range docs {
			docs[i] = newDoc(t, fmt.Sprintf("node-%d", i))
			got[i] = make([]map[uint64]bool, n)
			for k := range got[i] {
				got[i][k] = map[uint64]bool{}
			}
		}
		type packet struct {
			to, from int
			seq      uint64
			wire     []byte
		}
		var net []packet
		// Receivers either join what arrives at once, or hold deltas that
		// are not ready until their dependencies arrive (the discipline
		// that keeps clocks exact).
		hold := rapid.Bool().Draw(t, "hold deltas that are not ready")
		type heldDelta struct {
			clock delta.VersionVector
			x     *delta.Delta
		}
		held := make([][]heldDelta, n)
		retry := func(j int) {
			for progress := true; progress; {
				progress = false
				for k, h := range held[j] {
					if docs[j].Ready(h.clock, h.x) {
						docs[j].Join(h.x)
						held[j] = append(held[j][:k], held[j][k+1:]...)
						progress = true
						break
					}
				}
			}
		}
		deliver := func(k int) {
			p := net[k]
			net = append(net[:k], net[k+1:]...)
			m, x := receive(t, p.wire)
			got[p.to][p.from][p.seq] = true
			if hold && !docs[p.to].Ready(m.VectorClock, x) {
				held[p.to] = append(held[p.to], heldDelta{m.VectorClock, x})
				return
			}
			docs[p.to].Join(x)
			retry(p.to)
		}
		for s := range rapid.IntRange(1, 60).Draw(t, "steps") {
			if len(net) > 0 && rapid.IntRange(0, 2).Draw(t, "deliver?") == 0 {
				deliver(rapid.IntRange(0, len(net)-1).Draw(t, "packet"))
				continue
			}
			i := rapid.IntRange(0, n-1).Draw(t, "writer")
			x, err := docs[i].Apply(genOp.Draw(t, "op").mutate(docs[i]))
			if err != nil {
				continue
			}
			seq := bufs[i].Add(x)
			wire := broadcast(t, docs[i], x, int64(1000+s))
			for j := range docs {
				if j == i {
					continue
				}
				switch rapid.IntRange(0, 3).Draw(t, "fate") {
				case 0: // dropped
				case 1: // duplicated
					net = append(net, packet{j, i, seq, wire}, packet{j, i, seq, wire})
				default: // in flight, delivered in any order
					net = append(net, packet{j, i, seq, wire})
				}
			}
		}
		for len(net) > 0 { // the rest arrives in random order, or is lost
			k := rapid.IntRange(0, len(net)-1).Draw(t, "late packet")
			if rapid.Bool().Draw(t, "lost?") {
				net = append(net[:k], net[k+1:]...)
				continue
			}
			deliver(k)
		}

		if hold {
			// Clocks are exact: equal contexts mean equal states.
			for i := range docs {
				for j := range docs {
					if docs[i].Context().Equal(docs[j].Context()) && !docs[i].Equal(docs[j]) {
						t.Fatalf("replicas %d and %d have equal contexts, different states", i, j)
					}
				}
			}
		}

		// One catch-up round: every replica i answers every j, from the
		// states before the round; j joins the answers, then what it held.
		mode := rapid.SampledFrom([]string{"state", "since-context", "since-clock", "buffer"}).Draw(t, "catch-up")
		answers := make([][]*delta.Delta, n)
		for i := range docs {
			if mode == "buffer" {
				// Prune what every peer has acknowledged (the highest
				// number below which it has everything).
				low := bufs[i].Seq()
				for j := range docs {
					if j != i {
						low = min(low, acked(got[j][i]))
					}
				}
				bufs[i].Prune(low)
			}
			for j := range docs {
				if i == j {
					continue
				}
				var x *delta.Delta
				switch mode {
				case "state":
					x = docs[i].State()
				case "since-context":
					x = docs[i].DeltaSince(docs[j].Context())
				case "since-clock":
					x = docs[i].DeltaSince(docs[j].Clock().Context())
				case "buffer":
					var ok bool
					if x, ok = bufs[i].Since(acked(got[j][i])); !ok {
						t.Fatal("buffer pruned a delta a peer lacks")
					}
					if x == nil {
						continue
					}
				}
				b, err := delta.EncodeDelta(x)
				if err != nil {
					t.Fatal(err)
				}
				if x, err = delta.DecodeDelta(b); err != nil {
					t.Fatal(err)
				}
				answers[j] = append(answers[j], x)
			}
		}
		for j, xs := range answers {
			for _, x := range xs {
				docs[j].Join(x)
			}
			for _, h := range held[j] {
				docs[j].Join(h.x)
			}
		}
		for j := 1; j < n; j++ {
			if !docs[j].Equal(docs[0]) || string(docs[j].JSON()) != string(docs[0].JSON()) ||
				docs[j].Clock().Compare(docs[0].Clock()) != delta.Equal {
				t.Fatalf("replica %d diverged after catch-up (%s):\n%s %v\n%s %v", j, mode,
					docs[0].JSON(), docs[0].Context(), docs[j].JSON(), docs[j].Context())
			}
		}
	})
}

// acked returns the highest n such that 1..n are all in got.
func acked(got map[uint64]bool) uint64 {
	var n uint64
	for got[n+1] {
		n++
	}
	return n
}
