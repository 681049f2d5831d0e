package delta_test

import (
	"encoding/json"
	"fmt"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/crdt/delta"
)

// Generators shared by the property tests: small universes of paths,
// values and elements, so that random operations collide often.

var (
	genPaths  = []string{"/a", "/b", "/a/x", "/a/y", "/a/x/q", "/c", "/t~0~1", ""}
	genValues = []string{`1`, `"s"`, `{}`, `true`, `[1,{"b":2,"a":1}]`, `{"x":1,"y":{"q":2}}`, `{"q":{}}`, `null`, `2.50`}
	genElems  = []string{`1`, `"e"`, `{"o":1}`, `[]`}
)

// op is one document mutation.
type op struct {
	Kind string // set, delete, add, remove, incr
	Path string
	Val  string
	By   int64
}

func (o op) String() string { return fmt.Sprintf("%s(%s %s %d)", o.Kind, o.Path, o.Val, o.By) }

var genOp = rapid.Custom(func(t *rapid.T) op {
	o := op{
		Kind: rapid.SampledFrom([]string{"set", "set", "delete", "add", "remove", "incr"}).Draw(t, "kind"),
		Path: rapid.SampledFrom(genPaths).Draw(t, "path"),
	}
	switch o.Kind {
	case "set":
		o.Val = rapid.SampledFrom(genValues).Draw(t, "value")
	case "add", "remove":
		o.Val = rapid.SampledFrom(genElems).Draw(t, "elem")
	case "incr":
		o.By = rapid.Int64Range(-10, 10).Draw(t, "by")
	}
	return o
})

// mutate returns o's delta at d; an error means o is invalid there (a set
// or counter at the root, a scalar at the root).
func (o op) mutate(d *delta.Doc) (*delta.Delta, error) {
	switch o.Kind {
	case "set":
		return d.Set(o.Path, json.RawMessage(o.Val))
	case "delete":
		return d.Delete(o.Path)
	case "add":
		return d.SetAdd(o.Path, json.RawMessage(o.Val))
	case "remove":
		return d.SetRemove(o.Path, json.RawMessage(o.Val))
	default:
		return d.Incr(o.Path, o.By)
	}
}

// tb is what both *testing.T and *rapid.T provide.
type tb interface {
	Helper()
	Fatal(args ...any)
}

func newDoc(t tb, replica string) *delta.Doc {
	t.Helper()
	d, err := delta.New(replica)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// history runs random operations at n replicas with random full-state
// joins between them, and returns the replicas and every delta produced.
// The replicas share causal history, which makes joins between them more
// interesting than joins of unrelated states.
func history(t *rapid.T, n int) ([]*delta.Doc, []*delta.Delta) {
	docs := make([]*delta.Doc, n)
	for i := range docs {
		docs[i] = newDoc(t, fmt.Sprintf("r%d", i))
	}
	var deltas []*delta.Delta
	for range rapid.IntRange(0, 25).Draw(t, "steps") {
		i := rapid.IntRange(0, n-1).Draw(t, "replica")
		if rapid.IntRange(0, 4).Draw(t, "join?") == 0 {
			docs[i].JoinDoc(docs[rapid.IntRange(0, n-1).Draw(t, "from")])
			continue
		}
		x, err := docs[i].Apply(genOp.Draw(t, "op").mutate(docs[i]))
		if err == nil {
			deltas = append(deltas, x)
		}
	}
	return docs, deltas
}

// lattice is what the join laws are checked on.
type lattice[T any] struct {
	name  string
	gen   func(t *rapid.T) []T // related states
	clone func(T) T
	join  func(a, b T)
	equal func(a, b T) bool
}

func docLattice() lattice[*delta.Doc] {
	return lattice[*delta.Doc]{
		name:  "Doc",
		gen:   func(t *rapid.T) []*delta.Doc { d, _ := history(t, 3); return d },
		clone: (*delta.Doc).Clone,
		join:  (*delta.Doc).JoinDoc,
		equal: (*delta.Doc).Equal,
	}
}

func deltaLattice() lattice[*delta.Delta] {
	return lattice[*delta.Delta]{
		name: "Delta",
		gen: func(t *rapid.T) []*delta.Delta {
			_, xs := history(t, 3)
			// Single deltas, groups of deltas, and a full state.
			out := append([]*delta.Delta{}, xs...)
			if len(xs) > 1 {
				g := xs[0].Clone()
				g.Join(xs[len(xs)-1])
				out = append(out, g)
			}
			return append(out, &delta.Delta{})
		},
		clone: (*delta.Delta).Clone,
		join:  (*delta.Delta).Join,
		equal: (*delta.Delta).Equal,
	}
}

func registerLattice() lattice[*delta.MVRegister] {
	return lattice[*delta.MVRegister]{
		name: "MVRegister",
		gen: func(t *rapid.T) []*delta.MVRegister {
			rs := make([]*delta.MVRegister, 3)
			for i := range rs {
				rs[i] = &delta.MVRegister{}
			}
			for range rapid.IntRange(0, 20).Draw(t, "steps") {
				i := rapid.IntRange(0, 2).Draw(t, "replica")
				if rapid.Bool().Draw(t, "join?") {
					rs[i].Join(rs[rapid.IntRange(0, 2).Draw(t, "from")])
					continue
				}
				x, err := rs[i].Write(fmt.Sprint("r", i), json.RawMessage(rapid.SampledFrom(genValues).Draw(t, "v")))
				if err != nil {
					t.Fatal(err)
				}
				rs[i].Join(x)
			}
			return rs
		},
		clone: (*delta.MVRegister).Clone,
		join:  (*delta.MVRegister).Join,
		equal: (*delta.MVRegister).Equal,
	}
}

func setLattice() lattice[*delta.ORSet] {
	return lattice[*delta.ORSet]{
		name: "ORSet",
		gen: func(t *rapid.T) []*delta.ORSet {
			ss := make([]*delta.ORSet, 3)
			for i := range ss {
				ss[i] = &delta.ORSet{}
			}
			for range rapid.IntRange(0, 20).Draw(t, "steps") {
				i := rapid.IntRange(0, 2).Draw(t, "replica")
				e := json.RawMessage(rapid.SampledFrom(genElems).Draw(t, "e"))
				var x *delta.ORSet
				var err error
				switch rapid.IntRange(0, 2).Draw(t, "op") {
				case 0:
					ss[i].Join(ss[rapid.IntRange(0, 2).Draw(t, "from")])
					continue
				case 1:
					x, err = ss[i].Add(fmt.Sprint("r", i), e)
				case 2:
					x, err = ss[i].Remove(fmt.Sprint("r", i), e)
				}
				if err != nil {
					t.Fatal(err)
				}
				ss[i].Join(x)
			}
			return ss
		},
		clone: (*delta.ORSet).Clone,
		join:  (*delta.ORSet).Join,
		equal: (*delta.ORSet).Equal,
	}
}

func counterLattice() lattice[*delta.PNCounter] {
	return lattice[*delta.PNCounter]{
		name: "PNCounter",
		gen: func(t *rapid.T) []*delta.PNCounter {
			cs := make([]*delta.PNCounter, 3)
			for i := range cs {
				cs[i] = &delta.PNCounter{}
			}
			for range rapid.IntRange(0, 20).Draw(t, "steps") {
				i := rapid.IntRange(0, 2).Draw(t, "replica")
				if rapid.Bool().Draw(t, "join?") {
					cs[i].Join(cs[rapid.IntRange(0, 2).Draw(t, "from")])
					continue
				}
				x, err := cs[i].Incr(fmt.Sprint("r", i), rapid.Int64Range(-5, 5).Draw(t, "by"))
				if err != nil {
					t.Fatal(err)
				}
				cs[i].Join(x)
			}
			return cs
		},
		clone: (*delta.PNCounter).Clone,
		join:  (*delta.PNCounter).Join,
		equal: (*delta.PNCounter).Equal,
	}
}

// pick draws one of the related states.
func pick[T any](t *rapid.T, xs []T, label string) T {
	return xs[rapid.IntRange(0, len(xs)-1).Draw(t, label)]
}
