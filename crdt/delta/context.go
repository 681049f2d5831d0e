package delta

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Dot names one event: the Seq-th update made by Replica. Sequence numbers
// start at 1; a Dot with an empty Replica or a zero Seq names no event.
type Dot struct {
	Replica string
	Seq     uint64
}

// String returns "replica:seq".
func (d Dot) String() string { return d.Replica + ":" + strconv.FormatUint(d.Seq, 10) }

func (d Dot) valid() bool { return d.Replica != "" && d.Seq != 0 }

// span is the inclusive range of sequence numbers lo..hi, lo >= 1.
type span struct{ lo, hi uint64 }

// Context is a causal context: the set of dots a replica has seen, whether
// their entries are still alive or were since overwritten or removed.
//
// It is kept compact at all times. Per replica it holds the version vector
// entry n (every dot 1..n has been seen) and the dot cloud (the dots seen
// above n+1, which arrive when deltas are joined out of order) as sorted,
// disjoint, non-adjacent ranges. Every operation restores that form, so a
// dot cloud shrinks back into the version vector as soon as the gap below
// it fills, and a replica that has seen a million contiguous updates costs
// one number.
//
// The zero value is an empty context, ready to use. A Context is not safe
// for concurrent use.
type Context struct {
	m map[string][]span // per replica: sorted, disjoint, non-adjacent, never empty
}

// Add adds d to c. Dots with an empty replica or a zero Seq are ignored.
func (c *Context) Add(d Dot) {
	if d.valid() {
		c.addRange(d.Replica, d.Seq, d.Seq)
	}
}

func (c *Context) addRange(r string, lo, hi uint64) {
	if c.m == nil {
		c.m = make(map[string][]span)
	}
	c.m[r] = mergeSpans(c.m[r], []span{{lo, hi}})
}

// Contains reports whether d is in c.
func (c *Context) Contains(d Dot) bool {
	if c == nil {
		return false
	}
	return spansContain(c.m[d.Replica], d.Seq)
}

func spansContain(ss []span, seq uint64) bool {
	i := sort.Search(len(ss), func(i int) bool { return ss[i].hi >= seq })
	return i < len(ss) && ss[i].lo <= seq
}

// Max returns the highest sequence number of replica in c, 0 if none.
func (c *Context) Max(replica string) uint64 {
	if c == nil {
		return 0
	}
	ss := c.m[replica]
	if len(ss) == 0 {
		return 0
	}
	return ss[len(ss)-1].hi
}

// Next returns the dot that replica's next event takes: one above the
// highest sequence number of replica in c. It does not change c. When the
// sequence space of replica is exhausted, Next returns a dot with Seq 0.
func (c *Context) Next(replica string) Dot {
	m := c.Max(replica)
	if m == math.MaxUint64 {
		return Dot{Replica: replica}
	}
	return Dot{Replica: replica, Seq: m + 1}
}

// Join adds every dot of o to c.
func (c *Context) Join(o *Context) {
	if o == nil || c == o {
		return
	}
	for r, ss := range o.m {
		if c.m == nil {
			c.m = make(map[string][]span, len(o.m))
		}
		c.m[r] = mergeSpans(c.m[r], ss)
	}
}

// Clock returns the version vector part of c: for each replica, the n such
// that c holds every dot 1..n, when n > 0. Dots of the cloud are left out,
// so c.Clock().Context() is included in c. This is the vector clock that
// the seed's CRDTSyncMessage carries.
func (c *Context) Clock() VersionVector {
	v := make(VersionVector)
	if c == nil {
		return v
	}
	for r, ss := range c.m {
		if ss[0].lo == 1 {
			v[r] = ss[0].hi
		}
	}
	return v
}

// Covers reports whether c holds every dot that clock summarises: the dots
// r:1..clock[r] for each replica r.
func (c *Context) Covers(clock VersionVector) bool {
	for r, n := range clock {
		if n == 0 {
			continue
		}
		ss := c.spans(r)
		if len(ss) == 0 || ss[0].lo != 1 || ss[0].hi < n {
			return false
		}
	}
	return true
}

func (c *Context) spans(r string) []span {
	if c == nil {
		return nil
	}
	return c.m[r]
}

// Clone returns a deep copy of c.
func (c *Context) Clone() *Context {
	n := &Context{}
	if c == nil || len(c.m) == 0 {
		return n
	}
	n.m = make(map[string][]span, len(c.m))
	for r, ss := range c.m {
		n.m[r] = slices.Clone(ss)
	}
	return n
}

// Equal reports whether c and o hold the same dots.
func (c *Context) Equal(o *Context) bool {
	return c.Compare(o) == Equal
}

// Compare orders c and o by inclusion: Equal when they hold the same dots,
// Before when c is a strict subset of o, After when it is a strict
// superset, Concurrent otherwise.
func (c *Context) Compare(o *Context) Ordering {
	sub, sup := true, true // c ⊆ o, c ⊇ o
	var cm, om map[string][]span
	if c != nil {
		cm = c.m
	}
	if o != nil {
		om = o.m
	}
	for r, ss := range cm {
		if !spansSubset(ss, om[r]) {
			sub = false
			break
		}
	}
	for r, ss := range om {
		if !spansSubset(ss, cm[r]) {
			sup = false
			break
		}
	}
	return ordering(sub, sup)
}

func ordering(sub, sup bool) Ordering {
	switch {
	case sub && sup:
		return Equal
	case sub:
		return Before
	case sup:
		return After
	default:
		return Concurrent
	}
}

// spansSubset reports whether every range of a lies inside one of b.
func spansSubset(a, b []span) bool {
	j := 0
	for _, s := range a {
		for j < len(b) && b[j].hi < s.lo {
			j++
		}
		if j == len(b) || b[j].lo > s.lo || b[j].hi < s.hi {
			return false
		}
	}
	return true
}

// Replicas returns the replicas that have at least one dot in c, sorted.
func (c *Context) Replicas() []string {
	if c == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(c.m))
}

// Len returns the number of dots in c, saturated at math.MaxUint64.
func (c *Context) Len() uint64 {
	if c == nil {
		return 0
	}
	var n uint64
	for _, ss := range c.m {
		for _, s := range ss {
			k := s.hi - s.lo + 1
			if k == 0 || n+k < n { // the whole uint64 range, or an overflow
				return math.MaxUint64
			}
			n += k
		}
	}
	return n
}

// IsEmpty reports whether c holds no dot.
func (c *Context) IsEmpty() bool { return c == nil || len(c.m) == 0 }

// String returns a compact form for logs and tests, replicas sorted:
// "{a:1-5,7 b:1-2}".
func (c *Context) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, r := range c.Replicas() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r)
		b.WriteByte(':')
		for j, s := range c.m[r] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatUint(s.lo, 10))
			if s.hi != s.lo {
				b.WriteByte('-')
				b.WriteString(strconv.FormatUint(s.hi, 10))
			}
		}
	}
	b.WriteByte('}')
	return b.String()
}

// each calls f for every dot of c, in no particular order, until f
// returns false. Callers bound the work by checking Len first.
func (c *Context) each(f func(Dot) bool) {
	for r, ss := range c.m {
		for _, s := range ss {
			for q := s.lo; ; q++ {
				if !f(Dot{r, q}) {
					return
				}
				if q == s.hi {
					break
				}
			}
		}
	}
}

// punch removes the given sequence numbers (per replica, any order, any
// duplicates) from c.
func (c *Context) punch(holes map[string][]uint64) {
	for r, pts := range holes {
		slices.Sort(pts)
		ss := c.m[r]
		out := make([]span, 0, len(ss)+len(pts))
		i := 0
		for _, s := range ss {
			lo := s.lo
			for i < len(pts) && pts[i] < lo {
				i++
			}
			for i < len(pts) && pts[i] <= s.hi {
				p := pts[i]
				if p > lo {
					out = append(out, span{lo, p - 1})
				}
				if p == s.hi {
					lo = 0 // nothing left of s
					i++
					break
				}
				lo = p + 1
				i++
			}
			if lo != 0 {
				out = append(out, span{lo, s.hi})
			}
		}
		if len(out) == 0 {
			delete(c.m, r)
		} else {
			c.m[r] = out
		}
	}
}

// mergeSpans returns the normalized union of two normalized span lists. It
// may reuse a's storage.
func mergeSpans(a, b []span) []span {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return slices.Clone(b)
	}
	// Fast path: b is one span just above a's last one (the common Add).
	if len(b) == 1 {
		last := &a[len(a)-1]
		switch {
		case b[0].lo > last.hi && b[0].lo-last.hi == 1:
			last.hi = b[0].hi
			return a
		case b[0].lo > last.hi:
			return append(a, b[0])
		}
	}
	out := make([]span, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var s span
		if j == len(b) || (i < len(a) && a[i].lo <= b[j].lo) {
			s = a[i]
			i++
		} else {
			s = b[j]
			j++
		}
		if n := len(out); n > 0 && (s.lo <= out[n-1].hi || s.lo-out[n-1].hi == 1) {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// Ordering is the result of comparing two version vectors or contexts.
type Ordering int

// The orderings, as in syncthing's lib/protocol Vector.Compare.
const (
	Equal      Ordering = iota // same events
	Before                     // strictly fewer events: the other side is ahead
	After                      // strictly more events: this side is ahead
	Concurrent                 // each side has events the other lacks
)

// String returns "equal", "before", "after" or "concurrent".
func (o Ordering) String() string {
	switch o {
	case Equal:
		return "equal"
	case Before:
		return "before"
	case After:
		return "after"
	case Concurrent:
		return "concurrent"
	}
	return "Ordering(" + strconv.Itoa(int(o)) + ")"
}

// VersionVector maps a replica to the number of its events seen, every
// event 1..n of it. A missing replica and a zero count mean the same.
type VersionVector map[string]uint64

// Compare orders v and o: Equal when every count matches, Before when v is
// pointwise lower or equal (and not equal), After when it is pointwise
// higher or equal, Concurrent otherwise.
func (v VersionVector) Compare(o VersionVector) Ordering {
	le, ge := true, true
	for r, n := range v {
		m := o[r]
		le = le && n <= m
		ge = ge && n >= m
	}
	for r, m := range o {
		if _, seen := v[r]; !seen && m > 0 {
			ge = false
		}
	}
	return ordering(le, ge)
}

// Clone returns a copy of v, never nil.
func (v VersionVector) Clone() VersionVector {
	n := make(VersionVector, len(v))
	maps.Copy(n, v)
	return n
}

// Merge returns the pointwise maximum of v and o, leaving both unchanged.
func (v VersionVector) Merge(o VersionVector) VersionVector {
	n := v.Clone()
	for r, m := range o {
		n[r] = max(n[r], m)
	}
	return n
}

// Context returns the causal context that v summarises: the dots r:1..v[r].
// Contexts built this way are a safe under-approximation of a peer's real
// context for [Doc.DeltaSince].
func (v VersionVector) Context() *Context {
	c := &Context{}
	for r, n := range v {
		if r != "" && n > 0 {
			c.addRange(r, 1, n)
		}
	}
	return c
}
