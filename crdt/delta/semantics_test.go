package delta_test

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/crdt/delta"
)

// apply returns a function that joins a mutator's delta into d:
// apply(t, d)(d.Set(p, v)).
func apply(t tb, d *delta.Doc) func(*delta.Delta, error) *delta.Delta {
	return func(x *delta.Delta, err error) *delta.Delta {
		t.Helper()
		x, err = d.Apply(x, err)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
}

// exchange joins each side's deltas into the other.
func exchange(a, b *delta.Doc, fromA, fromB []*delta.Delta) {
	for _, x := range fromA {
		b.Join(x)
	}
	for _, x := range fromB {
		a.Join(x)
	}
}

func get(t *testing.T, d *delta.Doc, p string) string {
	t.Helper()
	v, ok := d.Get(p)
	if !ok {
		return "<none>"
	}
	return string(v)
}

func values(d *delta.Doc, p string) string {
	var s []string
	for _, v := range d.Values(p) {
		s = append(s, string(v))
	}
	return strings.Join(s, " | ")
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// twoReplicas returns replicas "a" and "b" that share the document built by
// setup at a, then diverge.
func twoReplicas(t *testing.T, setup func(a *delta.Doc)) (*delta.Doc, *delta.Doc) {
	a, b := newDoc(t, "a"), newDoc(t, "b")
	if setup != nil {
		setup(a)
	}
	b.JoinDoc(a)
	return a, b
}

func TestMVRegisterLWWAndMultiValue(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(t *testing.T, a *delta.Doc)
		va, vb     string
		get        string
		valuesWant string
	}{
		{
			name: "same lamport: replica b wins the tie",
			va:   `1`, vb: `2`,
			get: `2`, valuesWant: `2 | 1`,
		},
		{
			name: "the tie holds after more history",
			setup: func(t *testing.T, a *delta.Doc) {
				apply(t, a)(a.Set("/other", raw(`0`)))
			},
			// Both replicas have seen the setup: both write at lamport 2.
			va: `"a"`, vb: `"b"`,
			get: `"b"`, valuesWant: `"b" | "a"`,
		},
		{
			name: "objects and arrays are values too",
			va:   `[1,2]`, vb: `{}`,
			get: `{}`, valuesWant: `{} | [1,2]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := twoReplicas(t, func(a *delta.Doc) {
				if tc.setup != nil {
					tc.setup(t, a)
				}
			})
			xa := apply(t, a)(a.Set("/k", raw(tc.va)))
			xb := apply(t, b)(b.Set("/k", raw(tc.vb)))
			exchange(a, b, []*delta.Delta{xa}, []*delta.Delta{xb})
			for _, d := range []*delta.Doc{a, b} {
				if g := get(t, d, "/k"); g != tc.get {
					t.Errorf("%s: Get = %s, want %s", d.Replica(), g, tc.get)
				}
				if v := values(d, "/k"); v != tc.valuesWant {
					t.Errorf("%s: Values = %s, want %s", d.Replica(), v, tc.valuesWant)
				}
			}
			// A write that has seen both replaces both.
			x := apply(t, a)(a.Set("/k", raw(`"last"`)))
			b.Join(x)
			if v := values(b, "/k"); v != `"last"` {
				t.Errorf("after an overwrite Values = %s", v)
			}
		})
	}

	t.Run("a replica that has seen more wins", func(t *testing.T) {
		a, b := twoReplicas(t, nil)
		for range 3 { // lamport 1..3 at a
			apply(t, a)(a.Set("/busy", raw(`0`)))
		}
		xa := apply(t, a)(a.Set("/k", raw(`"from a"`))) // lamport 4
		xb := apply(t, b)(b.Set("/k", raw(`"from b"`))) // lamport 1
		b.Join(xa)
		a.Join(xb)
		if g := get(t, b, "/k"); g != `"from a"` {
			t.Errorf("Get = %s, want a's later write", g)
		}
		if v := values(b, "/k"); v != `"from a" | "from b"` {
			t.Errorf("Values = %s: the concurrent value must stay available", v)
		}
	})

	t.Run("standalone", func(t *testing.T) {
		var ra, rb delta.MVRegister
		xa, err := ra.Write("a", raw(`{"z":1,"a":2}`))
		if err != nil {
			t.Fatal(err)
		}
		xb, err := rb.Write("b", raw(`"b"`))
		if err != nil {
			t.Fatal(err)
		}
		ra.Join(xa)
		ra.Join(xb)
		v, _ := ra.Get()
		if string(v) != `"b"` || len(ra.Values()) != 2 || string(ra.Values()[1]) != `{"a":2,"z":1}` {
			t.Errorf("Get %s Values %s", v, ra.Values())
		}
	})
}

func TestORSetAddWins(t *testing.T) {
	t.Run("doc", func(t *testing.T) {
		a, b := twoReplicas(t, func(a *delta.Doc) {
			apply(t, a)(a.SetAdd("/s", raw(`"x"`)))
			apply(t, a)(a.SetAdd("/s", raw(`"y"`)))
		})
		// a removes x and y; b concurrently re-adds x.
		ra := apply(t, a)(a.SetRemove("/s", raw(`"x"`)))
		ry := apply(t, a)(a.SetRemove("/s", raw(`"y"`)))
		ax := apply(t, b)(b.SetAdd("/s", raw(`"x"`)))
		exchange(a, b, []*delta.Delta{ra, ry}, []*delta.Delta{ax})
		for _, d := range []*delta.Doc{a, b} {
			if g := get(t, d, "/s"); g != `["x"]` {
				t.Errorf("%s: set = %s, want [\"x\"]: the concurrent add wins, the observed y goes", d.Replica(), g)
			}
		}
		// A remove that has seen the add removes it.
		r := apply(t, b)(b.SetRemove("/s", raw(`"x"`)))
		a.Join(r)
		if g := get(t, a, "/s"); g != `<none>` {
			t.Errorf("after an observed remove: %s", g)
		}
	})
	t.Run("standalone", func(t *testing.T) {
		var s1, s2 delta.ORSet
		x, _ := s1.Add("a", raw(`{"k": [1, 2]}`))
		s1.Join(x)
		s2.Join(x)
		rm, _ := s1.Remove("a", raw(`{"k":[1,2]}`))
		add, _ := s2.Add("b", raw(`{"k":[1,2]}`))
		s1.Join(rm)
		s1.Join(add)
		s2.Join(add)
		s2.Join(rm)
		if !s1.Equal(&s2) || !s1.Contains(raw(`{ "k":[1,2] }`)) || len(s1.Elements()) != 1 {
			t.Errorf("add did not win: %s", s1.Elements())
		}
		rm2, _ := s1.Remove("a", raw(`{"k":[1,2]}`))
		s1.Join(rm2)
		if s1.Contains(raw(`{"k":[1,2]}`)) {
			t.Error("observed remove kept the element")
		}
	})
}

// TestDeleteSubtreeConcurrentWithWrite documents the outcome of Delete of a
// subtree concurrent with writes inside it: the delete removes what it has
// seen; a concurrent write inside survives, with its ancestors, as the only
// content of the subtree (observed-remove: add wins).
func TestDeleteSubtreeConcurrentWithWrite(t *testing.T) {
	setup := func(a *delta.Doc) {
		apply(t, a)(a.Set("/a", raw(`{"keep":1,"x":{"old":2}}`)))
		apply(t, a)(a.Incr("/a/n", 5))
		apply(t, a)(a.SetAdd("/a/s", raw(`1`)))
	}
	tests := []struct {
		name  string
		write func(b *delta.Doc) (*delta.Delta, error)
		want  string
	}{
		{"set inside", func(b *delta.Doc) (*delta.Delta, error) { return b.Set("/a/x/new", raw(`3`)) },
			`{"a":{"x":{"new":3}}}`},
		{"set add inside", func(b *delta.Doc) (*delta.Delta, error) { return b.SetAdd("/a/s", raw(`2`)) },
			`{"a":{"s":[2]}}`},
		// The causal counter keeps one running total per replica: b's
		// concurrent increment carries b's total, which b had not counted
		// before (the 5 was a's), so only b's 1 survives.
		{"incr inside by another replica", func(b *delta.Doc) (*delta.Delta, error) { return b.Incr("/a/n", 1) },
			`{"a":{"n":1}}`},
		{"delete inside", func(b *delta.Doc) (*delta.Delta, error) { return b.Delete("/a/keep") },
			`{}`},
		{"set of the deleted path itself", func(b *delta.Doc) (*delta.Delta, error) { return b.Set("/a", raw(`7`)) },
			`{"a":7}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := twoReplicas(t, setup)
			del := apply(t, a)(a.Delete("/a"))
			w := apply(t, b)(tc.write(b))
			exchange(a, b, []*delta.Delta{del}, []*delta.Delta{w})
			for _, d := range []*delta.Doc{a, b} {
				if g := string(d.JSON()); g != tc.want {
					t.Errorf("%s: %s, want %s", d.Replica(), g, tc.want)
				}
			}
		})
	}

	t.Run("incr by the replica whose total was deleted", func(t *testing.T) {
		// a counted 5, b deleted /a having seen it, a concurrently counts
		// 1 more: a's new dot carries a's running total, 6. A delete
		// concurrent with an increment keeps the incrementing replica's
		// whole total (the causal counter of the paper).
		a, b := twoReplicas(t, setup)
		del := apply(t, b)(b.Delete("/a"))
		inc := apply(t, a)(a.Incr("/a/n", 1))
		exchange(a, b, []*delta.Delta{inc}, []*delta.Delta{del})
		if g := string(b.JSON()); g != `{"a":{"n":6}}` || !a.Equal(b) {
			t.Errorf("%s", g)
		}
	})
}

func TestCounterConcurrentIncrements(t *testing.T) {
	docs := []*delta.Doc{newDoc(t, "a"), newDoc(t, "b"), newDoc(t, "c")}
	var xs []*delta.Delta
	for i, d := range docs {
		for k := range 3 {
			by := int64(i+1) * 10
			if k == 2 {
				by = -int64(i + 1) // decrement
			}
			xs = append(xs, apply(t, d)(d.Incr("/n", by)))
		}
	}
	for _, d := range docs {
		for _, x := range slices.Backward(xs) { // any order, each twice
			d.Join(x)
			d.Join(x)
		}
	}
	// a: 10+10-1, b: 20+20-2, c: 30+30-3
	for _, d := range docs {
		if g := get(t, d, "/n"); g != "114" {
			t.Errorf("%s: %s, want 114", d.Replica(), g)
		}
		if d.Len() != 3 {
			t.Errorf("%s holds %d counter entries, want one per replica", d.Replica(), d.Len())
		}
	}

	t.Run("standalone", func(t *testing.T) {
		var c1, c2 delta.PNCounter
		x1, _ := c1.Incr("a", 7)
		x2, _ := c2.Incr("b", -3)
		c1.Join(x1)
		c1.Join(x2)
		c2.Join(x2)
		c2.Join(x1)
		if c1.Value() != 4 || !c1.Equal(&c2) {
			t.Errorf("value %d", c1.Value())
		}
	})

	t.Run("overflow", func(t *testing.T) {
		d := newDoc(t, "a")
		apply(t, d)(d.Incr("/n", math.MaxInt64))
		if _, err := d.Incr("/n", 1); !errors.Is(err, delta.ErrOverflow) {
			t.Errorf("err = %v, want ErrOverflow", err)
		}
		// Totals of different replicas may exceed int64: the sum is exact.
		e := newDoc(t, "b")
		apply(t, e)(e.Incr("/n", math.MaxInt64))
		d.JoinDoc(e)
		if g := get(t, d, "/n"); g != "18446744073709551614" {
			t.Errorf("sum %s", g)
		}
		var c delta.PNCounter
		for _, r := range []string{"a", "b"} {
			x, _ := c.Incr(r, math.MaxInt64)
			c.Join(x)
		}
		if c.Value() != math.MaxInt64 {
			t.Errorf("Value %d, want clamped", c.Value())
		}
	})
}

// TestValueSubtreeCollision documents what a path reads as when concurrent
// updates leave different kinds there: an object (members below the path)
// wins over a set, which wins over a counter, which wins over register
// values; Values lists the losers after the winner. Nothing is dropped
// from the state: the next update at the path replaces what it has seen.
func TestValueSubtreeCollision(t *testing.T) {
	a, b := twoReplicas(t, nil)
	xa := apply(t, a)(a.Set("/a", raw(`1`)))
	xb := apply(t, b)(b.Set("/a/b", raw(`2`)))
	exchange(a, b, []*delta.Delta{xa}, []*delta.Delta{xb})
	for _, d := range []*delta.Doc{a, b} {
		if g := string(d.JSON()); g != `{"a":{"b":2}}` {
			t.Errorf("JSON %s", g)
		}
		if v := values(d, "/a"); v != `{"b":2} | 1` {
			t.Errorf("Values %s", v)
		}
		if g := get(t, d, "/a/b"); g != "2" {
			t.Errorf("/a/b = %s", g)
		}
	}
	// A write that has seen both settles it.
	x := apply(t, a)(a.Set("/a", raw(`3`)))
	b.Join(x)
	if g := string(b.JSON()); g != `{"a":3}` || len(b.Values("/a")) != 1 {
		t.Errorf("after overwrite %s", g)
	}
	// A write below a value that has been seen replaces the value.
	y := apply(t, b)(b.Set("/a/c", raw(`4`)))
	a.Join(y)
	if g := string(a.JSON()); g != `{"a":{"c":4}}` || len(a.Values("/a")) != 1 {
		t.Errorf("write below a seen value: %s %s", g, values(a, "/a"))
	}

	t.Run("kinds", func(t *testing.T) {
		docs := []*delta.Doc{newDoc(t, "p"), newDoc(t, "q"), newDoc(t, "r")}
		xs := []*delta.Delta{
			apply(t, docs[0])(docs[0].Set("/k", raw(`"v"`))),
			apply(t, docs[1])(docs[1].Incr("/k", 2)),
			apply(t, docs[2])(docs[2].SetAdd("/k", raw(`"e"`))),
		}
		for _, d := range docs {
			for _, x := range xs {
				d.Join(x)
			}
			if v := values(d, "/k"); v != `["e"] | 2 | "v"` {
				t.Errorf("Values %s", v)
			}
		}
	})
}

func TestSetFlattensObjects(t *testing.T) {
	d := newDoc(t, "a")
	apply(t, d)(d.Set("/o", raw(` { "c" : [1, {"y":1,"x":2}], "a": {"b": 1}, "e": {}, "t~/": null } `)))
	if g := string(d.JSON()); g != `{"o":{"a":{"b":1},"c":[1,{"x":2,"y":1}],"e":{},"t~/":null}}` {
		t.Errorf("JSON %s", g)
	}
	if p := strings.Join(d.Paths(), " "); p != "/o/a/b /o/c /o/e /o/t~0~1" {
		t.Errorf("Paths %s", p)
	}
	if g := get(t, d, "/o/a"); g != `{"b":1}` {
		t.Errorf("/o/a = %s", g)
	}
	if g := get(t, d, "/o/t~0~1"); g != `null` {
		t.Errorf("escaped path: %s", g)
	}
	// Set replaces the whole subtree.
	apply(t, d)(d.Set("/o", raw(`{"z":true}`)))
	if g := string(d.JSON()); g != `{"o":{"z":true}}` {
		t.Errorf("after replace %s", g)
	}
	// An interior object exists while it has members; {} keeps it.
	apply(t, d)(d.Set("/p", raw(`{}`)))
	apply(t, d)(d.Set("/p/q", raw(`1`)))
	apply(t, d)(d.Delete("/p/q"))
	apply(t, d)(d.Delete("/o/z"))
	if g := string(d.JSON()); g != `{"p":{}}` {
		t.Errorf("after deletes %s", g)
	}
	// The root can be replaced by an object, not by anything else.
	apply(t, d)(d.Set("", raw(`{"r":1}`)))
	if g := string(d.JSON()); g != `{"r":1}` {
		t.Errorf("root %s", g)
	}
	if _, err := d.Set("", raw(`1`)); !errors.Is(err, delta.ErrInvalidValue) {
		t.Errorf("Set root to 1: %v", err)
	}
	apply(t, d)(d.Set("", raw(`{}`)))
	if g := string(d.JSON()); g != `{}` || d.Len() != 0 {
		t.Errorf("emptied %s", g)
	}
}

func TestPathValidation(t *testing.T) {
	tests := []struct {
		path string
		segs []string
		ok   bool
	}{
		{"", nil, true},
		{"/", []string{""}, true},
		{"/a/b", []string{"a", "b"}, true},
		{"/a~1b/c~0d", []string{"a/b", "c~d"}, true},
		{"/~01", []string{"~1"}, true},
		{"/日本/é", []string{"日本", "é"}, true},
		{"a/b", nil, false},
		{"/a~", nil, false},
		{"/a~2", nil, false},
		{"/a\nb", nil, false},
		{"/a\x7fb", nil, false},
		{"/\xff", nil, false},
		{"/" + strings.Repeat("x", delta.MaxPathLen), nil, false},
		{strings.Repeat("/x", delta.MaxPathDepth), slices.Repeat([]string{"x"}, delta.MaxPathDepth), true},
		{strings.Repeat("/x", delta.MaxPathDepth+1), nil, false},
	}
	for _, tc := range tests {
		segs, err := delta.SplitPath(tc.path)
		if tc.ok != (err == nil) {
			t.Errorf("SplitPath(%q) err = %v", tc.path, err)
			continue
		}
		if err != nil {
			var pe *delta.PathError
			if !errors.Is(err, delta.ErrInvalidPath) || !errors.As(err, &pe) || pe.Reason == "" {
				t.Errorf("SplitPath(%q) error %v is not a *PathError", tc.path, err)
			}
			if delta.ValidatePath(tc.path) == nil {
				t.Errorf("ValidatePath(%q) accepted", tc.path)
			}
			d := newDoc(t, "a")
			if _, err := d.Set(tc.path, raw(`1`)); !errors.Is(err, delta.ErrInvalidPath) {
				t.Errorf("Set(%q) err = %v", tc.path, err)
			}
			if _, ok := d.Get(tc.path); ok {
				t.Errorf("Get(%q) ok", tc.path)
			}
			continue
		}
		if !slices.Equal(segs, tc.segs) {
			t.Errorf("SplitPath(%q) = %q, want %q", tc.path, segs, tc.segs)
		}
		if j := delta.JoinPath(segs...); j != tc.path {
			t.Errorf("JoinPath(SplitPath(%q)) = %q", tc.path, j)
		}
	}
	// Object keys become segments: they are checked too.
	d := newDoc(t, "a")
	if _, err := d.Set("/a", raw(`{"b\u0001":1}`)); !errors.Is(err, delta.ErrInvalidPath) {
		t.Errorf("control character in a key: %v", err)
	}
	deep := strings.Repeat(`{"x":`, delta.MaxPathDepth) + "1" + strings.Repeat("}", delta.MaxPathDepth)
	if _, err := d.Set("/a", raw(deep)); !errors.Is(err, delta.ErrInvalidPath) {
		t.Errorf("object deeper than MaxPathDepth: %v", err)
	}
	for _, f := range []func() (*delta.Delta, error){
		func() (*delta.Delta, error) { return d.SetAdd("", raw(`1`)) },
		func() (*delta.Delta, error) { return d.SetRemove("", raw(`1`)) },
		func() (*delta.Delta, error) { return d.Incr("", 1) },
	} {
		if _, err := f(); !errors.Is(err, delta.ErrInvalidPath) {
			t.Errorf("set or counter at the root: %v", err)
		}
	}
}

func TestValueValidation(t *testing.T) {
	tests := []struct {
		in, canonical string // canonical "" means rejected
	}{
		{` {"b" : 1, "a":[true ,null]} `, `{"a":[true,null],"b":1}`},
		{`"\u0041\/\n\u0000é"`, `"A/\n\u0000é"`},
		{`1.50e3`, `1.50e3`},
		{`-0`, `-0`},
		{``, ""},
		{`{"a":1,"a":2}`, ""},
		{`{"a":1,"\u0061":2}`, ""},
		{`[1,]`, ""},
		{`1 2`, ""},
		{`{"a":1}x`, ""},
		{"\"\xff\"", ""},
		{`NaN`, ""},
		{strings.Repeat("[", delta.MaxValueDepth+1) + strings.Repeat("]", delta.MaxValueDepth+1), ""},
		{strings.Repeat("[", delta.MaxValueDepth) + strings.Repeat("]", delta.MaxValueDepth), strings.Repeat("[", delta.MaxValueDepth) + strings.Repeat("]", delta.MaxValueDepth)},
		{`"` + strings.Repeat("x", delta.MaxValueSize) + `"`, ""},
	}
	for _, tc := range tests {
		d := newDoc(t, "a")
		_, err := d.Apply(d.Set("/v", raw(tc.in)))
		if tc.canonical == "" {
			if !errors.Is(err, delta.ErrInvalidValue) {
				t.Errorf("Set(%.40q) err = %v, want ErrInvalidValue", tc.in, err)
			}
			if _, err := d.SetAdd("/s", raw(tc.in)); !errors.Is(err, delta.ErrInvalidValue) {
				t.Errorf("SetAdd(%.40q) err = %v", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Set(%.40q): %v", tc.in, err)
			continue
		}
		if g := get(t, d, "/v"); g != tc.canonical && !strings.HasPrefix(tc.in, "{") {
			t.Errorf("Set(%.40q) stored %s, want %s", tc.in, g, tc.canonical)
		}
		if g := get(t, d, ""); strings.HasPrefix(tc.in, " {") && g != `{"v":`+tc.canonical+`}` {
			t.Errorf("object stored as %s", g)
		}
	}
}

func TestReplicaIDs(t *testing.T) {
	for _, id := range []string{"", "a\x00", "\xff", strings.Repeat("r", delta.MaxIDLen+1)} {
		if _, err := delta.New(id); !errors.Is(err, delta.ErrInvalidReplica) {
			t.Errorf("New(%q): %v", id, err)
		}
	}
	if _, err := delta.New(strings.Repeat("r", delta.MaxIDLen)); err != nil {
		t.Error(err)
	}
	// A decoded document can be read and joined, not mutated.
	d := newDoc(t, "a")
	apply(t, d)(d.Set("/x", raw(`1`)))
	b, err := delta.EncodeDoc(d)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := delta.DecodeDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Set("/y", raw(`2`)); !errors.Is(err, delta.ErrInvalidReplica) {
		t.Errorf("mutating a decoded document: %v", err)
	}
	// Restoring: New, then join the stored state; the replica continues
	// after its last dot.
	r := newDoc(t, "a")
	r.JoinDoc(dec)
	x := apply(t, r)(r.Set("/y", raw(`2`)))
	if got := x.Dots().String(); got != "{a:2}" {
		t.Errorf("restored replica minted %s, want {a:2}", got)
	}
	var mv delta.MVRegister
	if _, err := mv.Write("", raw(`1`)); !errors.Is(err, delta.ErrInvalidReplica) {
		t.Errorf("standalone with no replica: %v", err)
	}
}

// TestReadyDetectsGap: a delta that depends on an update the receiver
// missed is not ready; joining it anyway and catching up from its sender
// converges.
func TestReadyDetectsGap(t *testing.T) {
	a, b, c := newDoc(t, "a"), newDoc(t, "b"), newDoc(t, "c")
	x0 := apply(t, c)(c.Set("/k", raw(`0`))) // everyone has c's write
	a.Join(x0)
	b.Join(x0)
	x1 := apply(t, a)(a.Set("/k", raw(`1`))) // replaces c's 0
	b.Join(x1)
	x2 := apply(t, b)(b.Set("/k", raw(`2`))) // replaces a's 1
	// c receives only x2, with b's clock, which covers a:1.
	if c.Ready(b.Clock(), x2) {
		t.Fatal("x2 ready at c although c missed a:1")
	}
	if !a.Ready(b.Clock(), x2) {
		t.Fatal("x2 not ready at a, which has everything it depends on")
	}
	c.Join(x2)
	// x2 replaced only a:1, so c still shows its own 0 beside b's 2: the
	// effect of x1 (removing c:1) is missing until c catches up.
	if v := values(c, "/k"); v != `2 | 0` {
		t.Fatalf("c before catch-up: %s", v)
	}
	c.Join(b.DeltaSince(c.Context()))
	if !c.Equal(b) || values(c, "/k") != `2` {
		t.Fatalf("c after catch-up: %s", values(c, "/k"))
	}
	// Duplicates are recognised.
	if !c.Seen(x1) || !c.Seen(x2) || c.Seen(b.State()) {
		t.Error("Seen")
	}
}

// TestDeltaSinceIsSmall: a peer that lacks one update gets about one
// update's worth of bytes, whatever the size of the document.
func TestDeltaSinceIsSmall(t *testing.T) {
	a, b := newDoc(t, "a"), newDoc(t, "b")
	for i := range 2000 {
		apply(t, a)(a.Set(delta.JoinPath("k", string(rune('a'+i%26)), string(rune('0'+i%10))), raw(`1`)))
		apply(t, b)(b.Incr("/n", 1))
	}
	a.JoinDoc(b)
	b.JoinDoc(a)
	apply(t, a)(a.Set("/new", raw(`"v"`)))
	x := a.DeltaSince(b.Context())
	enc, err := delta.EncodeDelta(x)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := delta.EncodeDelta(a.State())
	t.Logf("DeltaSince: %d bytes; full state %d bytes", len(enc), len(full))
	if len(enc) > 2048 {
		t.Errorf("DeltaSince for one missing update is %d bytes", len(enc))
	}
	b.Join(x)
	if !b.Equal(a) {
		t.Error("not converged")
	}
}
