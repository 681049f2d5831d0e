package delta

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

func TestDecOptions(t *testing.T) {
	o := wirecodec.DecOptions(decLimits)
	if o.MaxNestedLevels != 8 || o.MaxArrayElements != 1<<19 || o.MaxMapPairs != MaxClockEntries ||
		o.DupMapKey != cbor.DupMapKeyEnforcedAPF || o.IndefLength != cbor.IndefLengthForbidden ||
		o.TagsMd != cbor.TagsForbidden || o.UTF8 != cbor.UTF8RejectInvalid {
		t.Fatalf("decoding options %+v", o)
	}
	if encMode.EncOptions().Sort != cbor.SortCoreDeterministic {
		t.Error("encoding is not core deterministic")
	}
	var v any
	if err := decMode.Unmarshal(append(bytes.Repeat([]byte{0x81}, 9), 0), &v); err == nil {
		t.Error("9 levels accepted")
	}
	if err := decMode.Unmarshal(append(bytes.Repeat([]byte{0x81}, 8), 0), &v); err != nil {
		t.Errorf("8 levels rejected: %v", err)
	}
}

// TestSimpleScalarAgrees: the decoder-free path for scalars gives the
// canonical text the decoder gives, and accepts nothing the decoder
// rejects.
func TestSimpleScalarAgrees(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, b []byte) {
		s, ok := simpleScalar(b)
		if !ok {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		v, err := parseToken(dec, 0)
		if err != nil {
			t.Fatalf("simpleScalar accepted %q, the decoder says %v", b, err)
		}
		if _, err := dec.Token(); err == nil {
			t.Fatalf("simpleScalar accepted %q with trailing data", b)
		}
		if v.text != s {
			t.Fatalf("simpleScalar(%q) = %q, decoder %q", b, s, v.text)
		}
	}
	for _, s := range []string{"0", "-0", "01", "1.", ".1", "1e", "1e+", "-", "1.5E-3", `""`, `"a"`, `"\"`,
		`"é"`, "true", "nul", " 1", "1 ", "+1", "0x10", "Infinity", `"` + "\x7f" + `"`} {
		check(t, []byte(s))
	}
	rapid.Check(t, func(t *rapid.T) {
		b := []byte(rapid.StringMatching(`[-+0-9.eE"a\\ tru]{0,8}`).Draw(t, "input"))
		if !json.Valid(b) {
			if _, ok := simpleScalar(b); ok {
				t.Fatalf("simpleScalar accepted invalid JSON %q", b)
			}
			return
		}
		check(t, b)
	})
}

// TestPunch checks Context.punch against a plain set of dots.
func TestPunch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var c Context
		set := map[uint64]bool{}
		for _, s := range rapid.SliceOf(rapid.Uint64Range(1, 30)).Draw(t, "dots") {
			c.Add(Dot{"a", s})
			set[s] = true
		}
		holes := rapid.SliceOf(rapid.Uint64Range(1, 31)).Draw(t, "holes")
		for _, h := range holes {
			delete(set, h)
		}
		c.punch(map[string][]uint64{"a": slices.Clone(holes)})
		for s := uint64(1); s <= 31; s++ {
			if c.Contains(Dot{"a", s}) != set[s] {
				t.Fatalf("after punch: Contains(a:%d) = %v in %v", s, !set[s], &c)
			}
		}
		if c.Len() != uint64(len(set)) {
			t.Fatalf("Len %d, want %d", c.Len(), len(set))
		}
		for i, sp := range c.m["a"] { // still compact
			if sp.lo > sp.hi || (i > 0 && sp.lo <= c.m["a"][i-1].hi+1) {
				t.Fatalf("not normalized: %v", &c)
			}
		}
	})
	var c Context
	c.addRange("a", 1, ^uint64(0))
	c.punch(map[string][]uint64{"a": {^uint64(0), 1}})
	if c.String() != "{a:2-18446744073709551614}" {
		t.Errorf("punch at the edges: %v", &c)
	}
}

// TestHostileJoin: the same dot at two places, or with two values, joins
// deterministically (the paper's join, with a maximum for values).
func TestHostileJoin(t *testing.T) {
	d := Dot{"a", 1}
	mk := func(path string, v string) *state {
		s := newState()
		s.ctx.Add(d)
		s.lamport = 1
		segs, _ := SplitPath(path)
		s.putReg(s.ensure(segs), d, reg{lamport: 1, val: v})
		return s
	}
	x, y := mk("/p", "1"), mk("/q", "1")
	x.join(y)
	if len(x.index) != 0 || len(x.root.kids) != 0 {
		t.Errorf("a dot at two places survived: %v", x.leafPaths())
	}
	a, b := mk("/p", "1"), mk("/p", "2")
	ab, ba := a.clone(), b.clone()
	ab.join(b)
	ba.join(a)
	if !ab.equal(ba) || ab.root.kids["p"].regs[0].val != "2" {
		t.Error("two values at one dot: join not commutative")
	}
}
