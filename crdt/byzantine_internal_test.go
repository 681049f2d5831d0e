package crdt

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// signWire seals any payload with key: how a Byzantine replica makes
// well-formed signed updates that say what it likes.
func signWire(t fataler, key crypto.PrivKey, w updateWire) []byte {
	t.Helper()
	body, err := wirecodec.EncMode().Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	env, err := record.Seal(&updateRecord{data: body}, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawDelta encodes a delta in the wire layout of crdt/delta by hand (see
// its package doc): replicas, a context and minted dots as (replica index,
// lo, hi) triples, a Lamport time and one register value per entry at
// path, all at dots of replica 0.
func rawDelta(t fataler, replicas []string, ctx, dots []uint64, lamport uint64, regs map[string]uint64) []byte {
	t.Helper()
	sorted := slices.Clone(replicas)
	slices.Sort(sorted)
	idx := func(i uint64) uint64 { return uint64(slices.Index(sorted, replicas[i])) }
	remap := func(triples []uint64) []uint64 {
		var out [][3]uint64
		for i := 0; i+2 < len(triples); i += 3 {
			out = append(out, [3]uint64{idx(triples[i]), triples[i+1], triples[i+2]})
		}
		slices.SortFunc(out, func(a, b [3]uint64) int {
			if a[0] != b[0] {
				return int(a[0]) - int(b[0])
			}
			return int(a[1]) - int(b[1])
		})
		flat := []uint64{}
		for _, tr := range out {
			flat = append(flat, tr[:]...)
		}
		return flat
	}
	var entries []any
	paths := make([]string, 0, len(regs))
	for p := range regs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		entries = append(entries, []any{p, []any{[]any{idx(0), regs[p], lamport, `"byz"`}}, []any{}, []any{}})
	}
	if entries == nil {
		entries = []any{}
	}
	b, err := cbor.Marshal([]any{1, 2, sorted, remap(ctx), remap(dots), lamport, entries})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// byzWorld is the state of one run of the property: honest logs, the
// Byzantine replica's two histories (it equivocates), and every message
// ever sent.
type byzWorld struct {
	t      *testing.T
	keys   []crypto.PrivKey
	logs   []*docLog
	bkey   crypto.PrivKey
	bid    string
	blogs  [2]*docLog
	pool   []sent
	honest [][]byte // honest updates, in the order made
}

type sent struct {
	raw []byte
	byz bool
}

// TestPropertyByzantineReplicaCannotCorruptDocuments: N honest replicas
// and one Byzantine replica that sends arbitrary well-formed signed
// updates (forged authors, inflated contexts naming dots that do not
// exist or deps that do not hold them, its own two histories with the
// same seqs, values at the limits), over a network that drops, duplicates
// and reorders. After a final exchange of catch-ups, the honest replicas
// hold the same log and state; under /h (where only honest replicas write
// validly) the state is exactly what the honest updates alone make; and
// every honest write, during and after, succeeds.
func TestPropertyByzantineReplicaCannotCorruptDocuments(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 4).Draw(rt, "honest")
		w := &byzWorld{t: t}
		for range n {
			k := fuzzKey(t)
			w.keys = append(w.keys, k)
			w.logs = append(w.logs, fuzzLog(t, k))
		}
		w.bkey = fuzzKey(t)
		w.blogs = [2]*docLog{fuzzLog(t, w.bkey), fuzzLog(t, w.bkey)}
		w.bid = w.blogs[0].self
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for s := range steps {
			switch rapid.IntRange(0, 9).Draw(rt, fmt.Sprint("action", s)) {
			case 0, 1, 2:
				w.honestWrite(rt, rapid.IntRange(0, n-1).Draw(rt, "writer"))
			case 3, 4, 5:
				if len(w.pool) > 0 {
					w.deliver(rt, rapid.IntRange(0, n-1).Draw(rt, "to"), rapid.IntRange(0, len(w.pool)-1).Draw(rt, "msg"))
				}
			default:
				w.attack(rt)
			}
		}
		// Everything left: each honest replica gets the whole pool in a
		// random order (some twice), then catch-ups until nothing moves.
		for i := range n {
			order := rapid.Permutation(seq(len(w.pool))).Draw(rt, "order")
			for _, k := range order {
				w.deliver(rt, i, k)
			}
		}
		w.catchUpAll(rt)
		w.check(rt)
		// Every honest op afterwards succeeds, and converges.
		for i := range n {
			w.honestWrite(rt, i)
		}
		w.catchUpAll(rt)
		w.check(rt)
	})
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func (w *byzWorld) honestWrite(rt *rapid.T, i int) {
	l := w.logs[i]
	path := "/h/" + rapid.SampledFrom([]string{"a", "b", "c", "a/x"}).Draw(rt, "path")
	var x *delta.Delta
	var err error
	switch rapid.IntRange(0, 4).Draw(rt, "op") {
	case 0:
		x, err = l.d.Set(path, json.RawMessage(fmt.Sprint(rapid.IntRange(0, 99).Draw(rt, "v"))))
	case 1:
		x, err = l.d.Delete(path)
	case 2:
		x, err = l.d.SetAdd("/h/set", json.RawMessage(fmt.Sprint(rapid.IntRange(0, 3).Draw(rt, "e"))))
	case 3:
		x, err = l.d.SetRemove("/h/set", json.RawMessage(fmt.Sprint(rapid.IntRange(0, 3).Draw(rt, "e"))))
	default:
		x, err = l.d.Incr("/h/n"+fmt.Sprint(i), int64(rapid.IntRange(-5, 5).Draw(rt, "by")))
	}
	if err != nil {
		rt.Fatalf("honest replica %d: %v", i, err)
	}
	u, err := l.local(w.keys[i], "w@"+l.self, x, 1)
	if err != nil {
		rt.Fatalf("honest replica %d: %v", i, err)
	}
	w.pool = append(w.pool, sent{raw: u.Raw})
	w.honest = append(w.honest, u.Raw)
}

func (w *byzWorld) deliver(rt *rapid.T, i, k int) {
	m := w.pool[k]
	u, err := DecodeUpdate(m.raw)
	if err == nil {
		from := "h"
		if m.byz {
			from = "byz"
		}
		_, err = w.logs[i].add(u, from)
	}
	if err != nil && !m.byz {
		rt.Fatalf("an honest update refused: %v", err)
	}
}

// catchUpAll runs catch-ups between every pair until no log grows.
func (w *byzWorld) catchUpAll(rt *rapid.T) {
	for round := 0; ; round++ {
		if round > 2*len(w.logs)+4 {
			rt.Fatal("catch-ups do not settle")
		}
		moved := false
		for i, a := range w.logs {
			for j, b := range w.logs {
				if i == j {
					continue
				}
				for _, u := range b.since(a.summary()) {
					v, err := DecodeUpdate(u.Raw)
					if err != nil {
						rt.Fatalf("a stored update does not verify: %v", err)
					}
					res, err := a.add(v, fmt.Sprint("h", j))
					if err != nil {
						rt.Fatalf("an update served by an honest replica refused: %v", err)
					}
					moved = moved || len(res.applied) > 0
				}
			}
		}
		if !moved {
			return
		}
	}
}

func (w *byzWorld) check(rt *rapid.T) {
	first := w.logs[0]
	for i, l := range w.logs[1:] {
		if string(l.d.JSON()) != string(first.d.JSON()) {
			rt.Fatalf("replicas 0 and %d differ:\n%s\n%s", i+1, first.d.JSON(), l.d.JSON())
		}
		// The logs, not who has noticed an equivocation (that depends on
		// what arrived, pending or not, in which order).
		unflag := func(ss []replicaSummary) []replicaSummary {
			for i := range ss {
				ss[i].Forked = false
			}
			return ss
		}
		if !slices.Equal(unflag(l.summary()), unflag(first.summary())) {
			rt.Fatalf("replicas 0 and %d hold different logs:\n%+v\n%+v", i+1, first.summary(), l.summary())
		}
	}
	ref := fuzzLog(w.t, fuzzKey(w.t))
	for _, b := range w.honest {
		u, _ := DecodeUpdate(b)
		if _, err := ref.add(u, "h"); err != nil {
			rt.Fatal(err)
		}
	}
	if ref.pendingCount() != 0 {
		rt.Fatalf("honest updates depend on what honest replicas did not make")
	}
	want, _ := ref.d.Get("/h")
	for i, l := range w.logs {
		got, _ := l.d.Get("/h")
		if string(got) != string(want) {
			rt.Fatalf("replica %d: /h is %s, the honest writes alone make %s", i, got, want)
		}
		if l.pendingCount() > maxPending {
			rt.Fatalf("replica %d holds %d pending updates", i, l.pendingCount())
		}
	}
}

// attack makes one Byzantine message.
func (w *byzWorld) attack(rt *rapid.T) {
	victim := w.logs[rapid.IntRange(0, len(w.logs)-1).Draw(rt, "victim")].self
	b := w.bid
	send := func(raw []byte) { w.pool = append(w.pool, sent{raw: raw, byz: true}) }
	base := func(first, last uint64, payload []byte) updateWire {
		return updateWire{Doc: "notes", Author: b, First: first, Last: last, Source: "m@" + b,
			Clock: delta.VersionVector{b: last}, Payload: payload, Time: 1}
	}
	var randomHash Hash
	copy(randomHash[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(rt, "hash"))
	switch rapid.IntRange(0, 8).Draw(rt, "attack") {
	case 0: // the Byzantine replica writes (validly) in one of its two histories
		l := w.blogs[rapid.IntRange(0, 1).Draw(rt, "history")]
		x, err := l.d.Set("/b/"+rapid.SampledFrom([]string{"p", "q"}).Draw(rt, "bpath"), json.RawMessage(`"b"`))
		if err != nil {
			rt.Fatal(err)
		}
		u, err := l.local(w.bkey, "m@"+b, x, 1)
		if err != nil {
			rt.Fatal(err)
		}
		send(u.Raw)
	case 1: // forged author: its key, a victim's name
		wire := base(1, 1, rawDelta(rt, []string{victim}, []uint64{0, 1, 1}, []uint64{0, 1, 1}, 1, map[string]uint64{"/h/a": 1}))
		wire.Author, wire.Source, wire.Clock = victim, "m@"+victim, delta.VersionVector{victim: 1}
		send(signWire(rt, w.bkey, wire))
	case 2: // a context claiming a victim's dots 1..2^40, no dep
		send(signWire(rt, w.bkey, base(1, 1, rawDelta(rt, []string{b, victim}, []uint64{0, 1, 1, 1, 1, 1 << 40}, []uint64{0, 1, 1}, 1, nil))))
	case 3: // the same, with a dep whose hash names nothing
		wire := base(1, 1, rawDelta(rt, []string{b, victim}, []uint64{0, 1, 1, 1, 1, 1 << 40}, []uint64{0, 1, 1}, 1, nil))
		wire.Deps = []depWire{{Replica: victim, Seq: 1 << 40, Hash: randomHash[:]}}
		send(signWire(rt, w.bkey, wire))
	case 4: // a dep naming a real honest update, at a seq it does not hold
		if len(w.honest) == 0 {
			return
		}
		hu, _ := DecodeUpdate(w.honest[rapid.IntRange(0, len(w.honest)-1).Draw(rt, "real")])
		h := sha256.Sum256(hu.Raw)
		wire := base(1, 1, rawDelta(rt, []string{b, hu.Author}, []uint64{0, 1, 1, 1, 1, hu.Last + 1<<30}, []uint64{0, 1, 1}, 1, nil))
		wire.Deps = []depWire{{Replica: hu.Author, Seq: hu.Last + 1<<30, Hash: h[:]}}
		send(signWire(rt, w.bkey, wire))
	case 5: // wedge: a context claiming a victim up to 2^64-1
		wire := base(1, 1, rawDelta(rt, []string{b, victim}, []uint64{0, 1, 1, 1, 1, math.MaxUint64}, []uint64{0, 1, 1}, 1, nil))
		wire.Deps = []depWire{{Replica: victim, Seq: math.MaxUint64, Hash: randomHash[:]}}
		send(signWire(rt, w.bkey, wire))
	case 6: // its own dots at the limits, a Lamport time at the limit
		last := rapid.SampledFrom([]uint64{MaxSeq, MaxSeq + 1, math.MaxUint64}).Draw(rt, "last")
		send(signWire(rt, w.bkey, base(1, last, rawDelta(rt, []string{b}, []uint64{0, 1, last}, []uint64{0, 1, last}, math.MaxUint64, map[string]uint64{"/b/max": 1}))))
	case 7: // an honest update with a byte flipped
		if len(w.honest) == 0 {
			return
		}
		raw := slices.Clone(w.honest[rapid.IntRange(0, len(w.honest)-1).Draw(rt, "real")])
		raw[rapid.IntRange(0, len(raw)-1).Draw(rt, "at")] ^= byte(rapid.IntRange(1, 255).Draw(rt, "flip"))
		send(raw)
	default: // entries at dots it does not mint (a victim's)
		send(signWire(rt, w.bkey, base(1, 1, rawDelta(rt, []string{b, victim}, []uint64{0, 1, 1, 1, 1, 1}, []uint64{0, 1, 1}, 1, nil))))
	}
}

// TestAttacksRefused: what each attack of the property gets, one by one.
func TestAttacksRefused(t *testing.T) {
	hk, bk := fuzzKey(t), fuzzKey(t)
	h, byz := fuzzLog(t, hk), fuzzLog(t, bk)
	b, victim := byz.self, h.self
	x, _ := h.d.Set("/h/a", json.RawMessage(`1`))
	hu, err := h.local(hk, "w@"+victim, x, 1)
	if err != nil {
		t.Fatal(err)
	}
	base := func(first, last uint64, payload []byte) updateWire {
		return updateWire{Doc: "notes", Author: b, First: first, Last: last, Source: "m@" + b,
			Clock: delta.VersionVector{b: last}, Payload: payload, Time: 1}
	}
	withDep := func(w updateWire, r string, seq uint64, hash []byte) updateWire {
		w.Deps = []depWire{{Replica: r, Seq: seq, Hash: hash}}
		return w
	}
	forged := base(1, 1, rawDelta(t, []string{victim}, []uint64{0, 1, 1}, []uint64{0, 1, 1}, 1, map[string]uint64{"/h/a": 1}))
	forged.Author, forged.Source, forged.Clock = victim, "m@"+victim, delta.VersionVector{victim: 1}
	inflated := rawDelta(t, []string{b, victim}, []uint64{0, 1, 1, 1, 1, 1 << 40}, []uint64{0, 1, 1}, 1, nil)
	wedge := rawDelta(t, []string{b, victim}, []uint64{0, 1, 1, 1, 1, math.MaxUint64}, []uint64{0, 1, 1}, 1, nil)
	for _, c := range []struct {
		name    string
		w       updateWire
		code    string // refused by DecodeUpdate or add with this code
		pending bool   // else: held, never applied
	}{
		{"forged author", forged, CodeForgedUpdate, false},
		{"context without dep", base(1, 1, inflated), CodeInvalidUpdate, false},
		{"dep naming nothing", withDep(base(1, 1, inflated), victim, 1<<40, make([]byte, 32)), "", true},
		{"dep at a seq its update does not hold", withDep(base(1, 1, inflated), victim, 1<<40, hu.Hash[:]), CodeInvalidUpdate, false},
		{"wedge", withDep(base(1, 1, wedge), victim, math.MaxUint64, hu.Hash[:]), CodeInvalidUpdate, false},
		{"own seq past MaxSeq", base(1, MaxSeq+1, rawDelta(t, []string{b}, []uint64{0, 1, MaxSeq + 1}, []uint64{0, 1, MaxSeq + 1}, 1, nil)), CodeInvalidUpdate, false},
		{"entries at a victim's dot", base(1, 1, rawDelta(t, []string{b, victim}, []uint64{0, 1, 1, 1, 1, 1}, []uint64{0, 1, 1}, 1, nil)), CodeInvalidUpdate, false},
		{"another document", func() updateWire {
			w := base(1, 1, rawDelta(t, []string{b}, []uint64{0, 1, 1}, []uint64{0, 1, 1}, 1, nil))
			w.Doc = "other"
			return w
		}(), CodeInvalidUpdate, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := string(h.d.JSON())
			u, err := DecodeUpdate(signWire(t, bk, c.w))
			var res addResult
			if err == nil {
				res, err = h.add(u, "byz")
			}
			switch {
			case c.pending:
				if err != nil || !res.pending || len(res.applied) != 0 {
					t.Fatalf("got %v, %+v; want held", err, res)
				}
			case ErrorCode(err) != c.code:
				t.Fatalf("got %v, want %s", err, c.code)
			}
			if string(h.d.JSON()) != before {
				t.Fatalf("the document changed: %s", h.d.JSON())
			}
			x, err := h.d.Set("/h/after", json.RawMessage(`2`))
			if err == nil {
				_, err = h.local(hk, "w@"+victim, x, 1)
			}
			if err != nil {
				t.Fatalf("an honest write after the attack: %v", err)
			}
		})
	}
	// Equivocation: two histories of one key, both kept and reported once.
	other := fuzzLog(t, bk)
	var reported []string
	for _, l := range []*docLog{byz, other} {
		x, _ := l.d.Set("/b", json.RawMessage(fmt.Sprint(l == byz)))
		u, err := l.local(bk, "m@"+b, x, 1)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := DecodeUpdate(u.Raw)
		res, err := h.add(v, "byz")
		if err != nil || len(res.applied) != 1 {
			t.Fatalf("an equivocating update: %v %+v", err, res)
		}
		reported = append(reported, res.equivocate...)
	}
	if !slices.Equal(reported, []string{b}) {
		t.Fatalf("equivocation reported as %v", reported)
	}
}

// TestDistrustBounded: a peer whose catch-up answer was refused is not
// asked again; the table holds at most maxDistrusted peers.
func TestDistrustBounded(t *testing.T) {
	m := &Manager{}
	m.distrust("bad")
	if !m.distrusted("bad") || m.distrusted("good") {
		t.Fatal("distrust not recorded")
	}
	for i := range 2 * maxDistrusted {
		m.distrust(peer.ID(fmt.Sprint("p", i)))
	}
	if len(m.distrusts) > maxDistrusted {
		t.Fatalf("%d peers distrusted, at most %d", len(m.distrusts), maxDistrusted)
	}
	m.distrusts["old"] = time.Now().Add(-time.Second)
	if m.distrusted("old") {
		t.Fatal("an expired distrust still holds")
	}
}
