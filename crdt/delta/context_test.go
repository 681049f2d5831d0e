package delta_test

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/crdt/delta"
)

func TestVersionVectorCompare(t *testing.T) {
	type vv = delta.VersionVector
	tests := []struct {
		a, b vv
		want delta.Ordering
	}{
		{vv{}, vv{}, delta.Equal},
		{nil, vv{"a": 0}, delta.Equal},
		{vv{"a": 1}, vv{"a": 1}, delta.Equal},
		{vv{"a": 1}, vv{}, delta.After},
		{vv{}, vv{"a": 1}, delta.Before},
		{vv{"a": 1, "b": 2}, vv{"a": 1, "b": 3}, delta.Before},
		{vv{"a": 2, "b": 3}, vv{"a": 1, "b": 3}, delta.After},
		{vv{"a": 2}, vv{"a": 1, "b": 1}, delta.Concurrent},
		{vv{"a": 1, "b": 0}, vv{"b": 1}, delta.Concurrent},
		{vv{"a": math.MaxUint64}, vv{"a": math.MaxUint64 - 1}, delta.After},
	}
	for _, tc := range tests {
		if got := tc.a.Compare(tc.b); got != tc.want {
			t.Errorf("%v.Compare(%v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		// The same answer from the contexts the vectors summarise.
		if got := tc.a.Context().Compare(tc.b.Context()); got != tc.want {
			t.Errorf("contexts of %v, %v: %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	m := vv{"a": 1, "b": 5}.Merge(vv{"b": 2, "c": 3})
	if m.Compare(vv{"a": 1, "b": 5, "c": 3}) != delta.Equal {
		t.Errorf("Merge = %v", m)
	}
	for o, s := range map[delta.Ordering]string{delta.Equal: "equal", delta.Before: "before",
		delta.After: "after", delta.Concurrent: "concurrent", 9: "Ordering(9)"} {
		if o.String() != s {
			t.Errorf("%d.String() = %s", o, o.String())
		}
	}
}

func TestContextCompaction(t *testing.T) {
	var c delta.Context
	for _, s := range []uint64{1, 3, 5, 7} {
		c.Add(delta.Dot{Replica: "a", Seq: s})
	}
	c.Add(delta.Dot{Replica: "", Seq: 2}) // not dots: ignored
	c.Add(delta.Dot{Replica: "a", Seq: 0})
	check := func(str string, clock uint64) {
		t.Helper()
		if c.String() != str || c.Clock()["a"] != clock {
			t.Errorf("context %s clock %v, want %s and a:%d", c.String(), c.Clock(), str, clock)
		}
	}
	check("{a:1,3,5,7}", 1) // the dot cloud: 3, 5, 7
	c.Add(delta.Dot{Replica: "a", Seq: 2})
	check("{a:1-3,5,7}", 3)
	c.Add(delta.Dot{Replica: "a", Seq: 6})
	check("{a:1-3,5-7}", 3)
	c.Add(delta.Dot{Replica: "a", Seq: 4})
	check("{a:1-7}", 7) // compact: one number
	if n := c.Next("a"); n != (delta.Dot{Replica: "a", Seq: 8}) {
		t.Errorf("Next = %v", n)
	}
	if n := c.Next("b"); n.Seq != 1 {
		t.Errorf("Next of a new replica = %v", n)
	}
	if !c.Contains(delta.Dot{Replica: "a", Seq: 7}) || c.Contains(delta.Dot{Replica: "a", Seq: 8}) || c.Len() != 7 {
		t.Error("Contains or Len")
	}
	var o delta.Context
	o.Add(delta.Dot{Replica: "b", Seq: 2})
	o.Add(delta.Dot{Replica: "a", Seq: 9})
	if c.Compare(&o) != delta.Concurrent {
		t.Error("Compare")
	}
	c.Join(&o)
	if c.String() != "{a:1-7,9 b:2}" || c.Clock()["b"] != 0 || len(c.Clock()) != 1 {
		t.Errorf("after Join: %s %v", c.String(), c.Clock())
	}
	if c.Compare(&o) != delta.After || o.Compare(&c) != delta.Before || !c.Clone().Equal(&c) {
		t.Error("Compare after Join")
	}
	if !c.Covers(delta.VersionVector{"a": 7}) || c.Covers(delta.VersionVector{"a": 8}) || c.Covers(delta.VersionVector{"b": 1}) {
		t.Error("Covers")
	}
	var last delta.Context
	last.Add(delta.Dot{Replica: "a", Seq: math.MaxUint64})
	if last.Next("a").Seq != 0 || last.Len() != 1 {
		t.Error("exhausted sequence space")
	}
	if !(&delta.Context{}).IsEmpty() || c.IsEmpty() {
		t.Error("IsEmpty")
	}
}

// TestContextMatchesDotSet checks Context against a plain set of dots.
func TestContextMatchesDotSet(t *testing.T) {
	genDot := rapid.Custom(func(t *rapid.T) delta.Dot {
		return delta.Dot{
			Replica: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "r"),
			Seq:     rapid.Uint64Range(1, 12).Draw(t, "seq"),
		}
	})
	rapid.Check(t, func(t *rapid.T) {
		var c, o delta.Context
		cm, om := map[delta.Dot]bool{}, map[delta.Dot]bool{}
		for _, d := range rapid.SliceOf(genDot).Draw(t, "c") {
			c.Add(d)
			cm[d] = true
		}
		for _, d := range rapid.SliceOf(genDot).Draw(t, "o") {
			o.Add(d)
			om[d] = true
		}
		sub, sup := true, true
		for d := range cm {
			sub = sub && om[d]
		}
		for d := range om {
			sup = sup && cm[d]
		}
		want := map[[2]bool]delta.Ordering{{true, true}: delta.Equal, {true, false}: delta.Before,
			{false, true}: delta.After, {false, false}: delta.Concurrent}[[2]bool{sub, sup}]
		if got := c.Compare(&o); got != want {
			t.Fatalf("Compare = %v, want %v", got, want)
		}
		c.Join(&o)
		for d := range om {
			cm[d] = true
		}
		if c.Len() != uint64(len(cm)) {
			t.Fatalf("Len %d, want %d", c.Len(), len(cm))
		}
		for _, r := range []string{"a", "b", "c"} {
			var n uint64
			for cm[delta.Dot{Replica: r, Seq: n + 1}] {
				n++
			}
			if c.Clock()[r] != n {
				t.Fatalf("Clock[%s] = %d, want %d", r, c.Clock()[r], n)
			}
			for s := uint64(1); s <= 13; s++ {
				d := delta.Dot{Replica: r, Seq: s}
				if c.Contains(d) != cm[d] {
					t.Fatalf("Contains(%v) = %v", d, c.Contains(d))
				}
			}
		}
	})
}

func TestBuffer(t *testing.T) {
	var b delta.Buffer
	if x, ok := b.Since(0); x != nil || !ok {
		t.Fatal("empty buffer")
	}
	d := newDoc(t, "a")
	var xs []*delta.Delta
	for i := range 5 {
		x := apply(t, d)(d.Incr("/n", int64(i+1)))
		xs = append(xs, x)
		if n := b.Add(x); n != uint64(i+1) {
			t.Fatalf("Add = %d", n)
		}
	}
	// A peer at 2 gets 3..5 as one group, which brings it up to d.
	peer := newDoc(t, "p")
	peer.Join(xs[0])
	peer.Join(xs[1])
	g, ok := b.Since(2)
	if !ok || g == nil {
		t.Fatal("Since(2)")
	}
	if g.Dots().String() != "{a:3-5}" {
		t.Errorf("group dots %s", g.Dots())
	}
	peer.Join(g)
	if !peer.Equal(d) {
		t.Error("peer not current after the group")
	}
	b.Prune(3)
	if b.Len() != 2 || b.Seq() != 5 {
		t.Errorf("after Prune(3): Len %d Seq %d", b.Len(), b.Seq())
	}
	if _, ok := b.Since(2); ok {
		t.Error("Since(2) after Prune(3) must send the caller to DeltaSince")
	}
	if g, ok := b.Since(3); !ok || g.Dots().String() != "{a:4-5}" {
		t.Error("Since(3) after Prune(3)")
	}
	if x, ok := b.Since(5); x != nil || !ok {
		t.Error("Since(Seq())")
	}
	b.Prune(100)
	if b.Len() != 0 {
		t.Error("Prune past the end")
	}
	if n := b.Add(xs[0]); n != 6 {
		t.Errorf("Add after pruning everything = %d", n)
	}
	if g, ok := b.Since(5); !ok || !g.Equal(xs[0]) {
		t.Error("Since after refill")
	}
}
