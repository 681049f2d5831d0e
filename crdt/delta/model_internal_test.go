package delta

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// model is a naive reference of the document semantics: a set of entries
// keyed by dot and a set of seen dots, with full-state mutators written
// straight from the package documentation and the join of the paper. The
// real implementation must agree with it on every reachable state, and
// each real delta must carry exactly the dots the model mints and removes.

type mEntry struct {
	path string
	k    kind
	elem string
	lam  uint64
	val  string
	cnt  int64
}

type model struct {
	ctx map[Dot]bool
	lam uint64
	ent map[Dot]mEntry
}

func newModel() *model { return &model{ctx: map[Dot]bool{}, ent: map[Dot]mEntry{}} }

func atOrBelow(p, q string) bool { return p == q || strings.HasPrefix(p, q+"/") }

func strictAncestor(a, p string) bool { return a != p && atOrBelow(p, a) }

func (m *model) next(r string) uint64 {
	var n uint64
	for d := range m.ctx {
		if d.Replica == r {
			n = max(n, d.Seq)
		}
	}
	return n + 1
}

// apply removes the entries rm selects and adds what mk creates with fresh
// dots; it returns the removed and minted dots.
func (m *model) apply(r string, rm func(mEntry, Dot) bool, mk []mEntry) (removed, minted []Dot) {
	for d, e := range m.ent {
		if rm(e, d) {
			removed = append(removed, d)
			delete(m.ent, d)
		}
	}
	seq := m.next(r)
	if len(mk) == 0 {
		mk = nil
		d := Dot{r, seq}
		m.ctx[d] = true
		minted = append(minted, d)
	}
	for i, e := range mk {
		d := Dot{r, seq + uint64(i)}
		m.ctx[d] = true
		m.ent[d] = e
		minted = append(minted, d)
	}
	return removed, minted
}

func ancestorConflict(e mEntry, p string) bool {
	return strictAncestor(e.path, p) && !(e.k == kindReg && e.val == emptyObject)
}

func (m *model) set(r, p string, leaves []leaf) ([]Dot, []Dot) {
	m.lam++
	var mk []mEntry
	for _, l := range leaves {
		mk = append(mk, mEntry{path: JoinPath(l.segs...), k: kindReg, lam: m.lam, val: l.val})
	}
	return m.apply(r, func(e mEntry, _ Dot) bool { return atOrBelow(e.path, p) || ancestorConflict(e, p) }, mk)
}

func (m *model) del(r, p string) ([]Dot, []Dot) {
	return m.apply(r, func(e mEntry, _ Dot) bool { return atOrBelow(e.path, p) }, nil)
}

func (m *model) add(r, p, el string) ([]Dot, []Dot) {
	return m.apply(r, func(e mEntry, _ Dot) bool {
		if e.path == p {
			return e.k != kindElem || e.elem == el
		}
		return atOrBelow(e.path, p) || ancestorConflict(e, p)
	}, []mEntry{{path: p, k: kindElem, elem: el}})
}

func (m *model) remove(r, p, el string) ([]Dot, []Dot) {
	return m.apply(r, func(e mEntry, _ Dot) bool { return e.path == p && e.k == kindElem && e.elem == el }, nil)
}

func (m *model) incr(r, p string, by int64) ([]Dot, []Dot) {
	total := by
	for d, e := range m.ent {
		if e.path == p && e.k == kindCnt && d.Replica == r {
			total += e.cnt
		}
	}
	return m.apply(r, func(e mEntry, d Dot) bool {
		if e.path == p {
			return e.k != kindCnt || d.Replica == r
		}
		return atOrBelow(e.path, p) || ancestorConflict(e, p)
	}, []mEntry{{path: p, k: kindCnt, cnt: total}})
}

// join is the join of the paper.
func (m *model) join(o *model) {
	out := map[Dot]mEntry{}
	for d, e := range m.ent {
		if oe, ok := o.ent[d]; ok && oe == e || !o.ctx[d] {
			out[d] = e
		}
	}
	for d, e := range o.ent {
		if _, ok := m.ent[d]; ok || !m.ctx[d] {
			out[d] = e
		}
	}
	m.ent = out
	maps.Copy(m.ctx, o.ctx)
	m.lam = max(m.lam, o.lam)
}

// export turns a real state into the model's terms.
func export(s *state) *model {
	m := newModel()
	m.lam = s.lamport
	s.ctx.each(func(d Dot) bool { m.ctx[d] = true; return true })
	for d, l := range s.index {
		e := mEntry{path: l.n.path(), k: l.k, elem: l.elem}
		switch l.k {
		case kindReg:
			if l.n.regs[l.i].d != d {
				panic("index position out of date")
			}
			e.lam, e.val = l.n.regs[l.i].lamport, l.n.regs[l.i].val
		case kindCnt:
			if l.n.cnts[l.i].d != d {
				panic("index position out of date")
			}
			e.cnt = l.n.cnts[l.i].total
		}
		m.ent[d] = e
	}
	return m
}

func (m *model) equal(o *model) bool {
	return m.lam == o.lam && maps.Equal(m.ctx, o.ctx) && maps.Equal(m.ent, o.ent)
}

func (m *model) String() string {
	var ds []string
	for d, e := range m.ent {
		ds = append(ds, fmt.Sprintf("%v=%+v", d, e))
	}
	slices.Sort(ds)
	return fmt.Sprintf("lam=%d ctx=%d %v", m.lam, len(m.ctx), ds)
}

var (
	modelPaths  = []string{"/a", "/b", "/a/x", "/a/y", "/a/x/q", "/c", "/t~0~1", ""}
	modelValues = []string{`1`, `"s"`, `{}`, `[1,{"b":2,"a":1}]`, `{"x":1,"y":{"q":2}}`, `{"q":{}}`, `null`}
	modelElems  = []string{`1`, `"e"`, `{"o":1}`, `[]`}
)

// step applies one random mutator to the real replica and the model and
// checks the delta mutator law: the real delta joined into the state gives
// the model's m(X), the delta's context is exactly the minted and removed
// dots, and computing the delta changed nothing.
func step(t *rapid.T, doc *Doc, m *model) {
	p := rapid.SampledFrom(modelPaths).Draw(t, "path")
	before := doc.Clone()
	var x *Delta
	var err error
	var removed, minted []Dot
	switch op := rapid.IntRange(0, 4).Draw(t, "op"); op {
	case 0:
		v := rapid.SampledFrom(modelValues).Draw(t, "value")
		x, err = doc.Set(p, json.RawMessage(v))
		if p == "" && v[0] != '{' {
			if err == nil {
				t.Fatalf("Set(%q, %s) accepted", p, v)
			}
			return
		}
		jv, _ := parseJSON([]byte(v))
		segs, _ := SplitPath(p)
		var leaves []leaf
		if len(segs) > 0 || len(jv.keys) > 0 {
			leaves, _ = flatten(segs, jv, nil)
		}
		removed, minted = m.set(doc.replica, p, leaves)
	case 1:
		x, err = doc.Delete(p)
		removed, minted = m.del(doc.replica, p)
	case 2, 3:
		el := rapid.SampledFrom(modelElems).Draw(t, "elem")
		if op == 2 {
			x, err = doc.SetAdd(p, json.RawMessage(el))
		} else {
			x, err = doc.SetRemove(p, json.RawMessage(el))
		}
		if p == "" {
			if err == nil {
				t.Fatal("set operation at the root accepted")
			}
			return
		}
		if op == 2 {
			removed, minted = m.add(doc.replica, p, el)
		} else {
			removed, minted = m.remove(doc.replica, p, el)
		}
	case 4:
		by := rapid.Int64Range(-5, 5).Draw(t, "by")
		x, err = doc.Incr(p, by)
		if p == "" {
			if err == nil {
				t.Fatal("Incr at the root accepted")
			}
			return
		}
		removed, minted = m.incr(doc.replica, p, by)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !doc.Equal(before) {
		t.Fatal("a mutator changed the document")
	}
	want := &Context{}
	for _, d := range append(removed, minted...) {
		want.Add(d)
	}
	if !x.st.ctx.Equal(want) {
		t.Fatalf("delta context %v, want minted+removed %v", &x.st.ctx, want)
	}
	mc := &Context{}
	for _, d := range minted {
		mc.Add(d)
	}
	if !x.minted.Equal(mc) {
		t.Fatalf("delta dots %v, want %v", &x.minted, mc)
	}
	doc.Join(x)
	if got := export(doc.st); !got.equal(m) {
		t.Fatalf("X ⊔ mδ(X) != m(X)\n got %v\nwant %v", got, m)
	}
}

// TestDeltaMutatorLaw checks X ⊔ mδ(X) = m(X) for every mutator, on states
// reached by random updates at three replicas with random joins between
// them, against the reference model.
func TestDeltaMutatorLaw(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs := make([]*Doc, 3)
		models := make([]*model, 3)
		for i := range docs {
			docs[i], _ = New(string(rune('a' + i)))
			models[i] = newModel()
		}
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			i := rapid.IntRange(0, 2).Draw(t, "replica")
			if rapid.IntRange(0, 3).Draw(t, "join?") == 0 {
				j := rapid.IntRange(0, 2).Draw(t, "from")
				docs[i].JoinDoc(docs[j])
				models[i].join(models[j])
				if got := export(docs[i].st); !got.equal(models[i]) {
					t.Fatalf("join disagrees with the model\n got %v\nwant %v", got, models[i])
				}
				continue
			}
			step(t, docs[i], models[i])
		}
	})
}

// TestStandaloneMutatorLaw checks the law for the three standalone types
// against the same model (each keeps its entries at one path).
func TestStandaloneMutatorLaw(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var reg MVRegister
		var set ORSet
		var cnt PNCounter
		mr, ms, mc := newModel(), newModel(), newModel()
		p := JoinPath(slot...)
		for range rapid.IntRange(1, 30).Draw(t, "steps") {
			r := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "replica")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				v := rapid.SampledFrom(modelValues).Draw(t, "value")
				x, err := reg.Write(r, json.RawMessage(v))
				if err != nil {
					t.Fatal(err)
				}
				c, _ := canonicalJSON([]byte(v))
				mr.set(r, p, []leaf{{segs: slot, val: c}})
				reg.Join(x)
			case 1:
				e := rapid.SampledFrom(modelElems).Draw(t, "elem")
				x, err := set.Add(r, json.RawMessage(e))
				if err != nil {
					t.Fatal(err)
				}
				ms.add(r, p, e)
				set.Join(x)
			case 2:
				e := rapid.SampledFrom(modelElems).Draw(t, "elem")
				x, err := set.Remove(r, json.RawMessage(e))
				if err != nil {
					t.Fatal(err)
				}
				ms.remove(r, p, e)
				set.Join(x)
			case 3:
				by := rapid.Int64Range(-9, 9).Draw(t, "by")
				x, err := cnt.Incr(r, by)
				if err != nil {
					t.Fatal(err)
				}
				mc.incr(r, p, by)
				cnt.Join(x)
			}
			if !export(reg.state()).equal(mr) || !export(set.state()).equal(ms) || !export(cnt.state()).equal(mc) {
				t.Fatal("a standalone type disagrees with the model")
			}
		}
	})
}
