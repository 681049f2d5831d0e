package delta_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/crdt/delta"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite the seed corpora in testdata/fuzz")

// TestWriteFuzzCorpus writes the seed corpora of the fuzz targets: valid
// encodings and hostile variants. Run it with
// go test -run TestWriteFuzzCorpus -write-corpus ./crdt/delta/
// Files of other names in those directories (crashers the fuzzer found)
// are left alone.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -write-corpus to regenerate testdata/fuzz")
	}
	deltas, docs, msgs := validEncodings(t)
	hostileState := hostileStates(t)
	for target, inputs := range map[string]map[string][]byte{
		"FuzzDecodeDelta":       merge(deltas, hostileState, prefixed("doc-", docs)),
		"FuzzDecodeDoc":         merge(docs, hostileState, prefixed("delta-", deltas)),
		"FuzzDecodeSyncMessage": merge(msgs, hostileMessages(t, deltas["group"])),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range inputs {
			data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func merge(ms ...map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func prefixed(p string, m map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[p+k] = v
	}
	return out
}

// validEncodings builds a small shared history and encodes its deltas,
// documents and sync messages.
func validEncodings(t *testing.T) (deltas, docs, msgs map[string][]byte) {
	deltas, docs, msgs = map[string][]byte{}, map[string][]byte{}, map[string][]byte{}
	a, b := newDoc(t, "a"), newDoc(t, "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo")
	steps := []struct {
		name string
		d    *delta.Doc
		f    func(d *delta.Doc) (*delta.Delta, error)
	}{
		{"set-object", a, func(d *delta.Doc) (*delta.Delta, error) {
			return d.Set("/cfg", raw(`{"name":"x","n":[1,2],"e":{},"deep":{"q":null}}`))
		}},
		{"set-scalar", b, func(d *delta.Doc) (*delta.Delta, error) { return d.Set("/cfg/name", raw(`"y"`)) }},
		{"set-escaped-path", a, func(d *delta.Doc) (*delta.Delta, error) { return d.Set("/a~1b/c~0d", raw(`1.5e3`)) }},
		{"add", a, func(d *delta.Doc) (*delta.Delta, error) { return d.SetAdd("/tags", raw(`{"t":"go"}`)) }},
		{"add2", b, func(d *delta.Doc) (*delta.Delta, error) { return d.SetAdd("/tags", raw(`"x"`)) }},
		{"remove", b, func(d *delta.Doc) (*delta.Delta, error) { return d.SetRemove("/tags", raw(`"x"`)) }},
		{"incr", a, func(d *delta.Doc) (*delta.Delta, error) { return d.Incr("/n", 5) }},
		{"decr", b, func(d *delta.Doc) (*delta.Delta, error) { return d.Incr("/n", -2) }},
		{"delete", a, func(d *delta.Doc) (*delta.Delta, error) { return d.Delete("/cfg/deep") }},
		{"delete-root", b, func(d *delta.Doc) (*delta.Delta, error) { return d.Delete("") }},
	}
	var xs []*delta.Delta
	for i, s := range steps {
		x := apply(t, s.d)(s.f(s.d))
		xs = append(xs, x)
		enc, err := delta.EncodeDelta(x)
		if err != nil {
			t.Fatal(err)
		}
		deltas[s.name] = enc
		m, err := delta.NewSyncMessage("agent@"+s.d.Replica(), s.d.Clock(), x, int64(1767225600000+i))
		if err != nil {
			t.Fatal(err)
		}
		if msgs[s.name], err = delta.EncodeSyncMessage(m); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // a and b see each other's updates only now and then
			a.JoinDoc(b)
			b.JoinDoc(a)
		}
	}
	g := xs[0].Clone()
	for _, x := range xs[1:] {
		g.Join(x)
	}
	deltas["group"], _ = delta.EncodeDelta(g)
	deltas["since"], _ = delta.EncodeDelta(a.DeltaSince(b.Context()))
	deltas["state"], _ = delta.EncodeDelta(a.State())
	deltas["empty"], _ = delta.EncodeDelta(&delta.Delta{})
	docs["a"], _ = delta.EncodeDoc(a)
	docs["b"], _ = delta.EncodeDoc(b)
	docs["empty"], _ = delta.EncodeDoc(newDoc(t, "e"))
	return deltas, docs, msgs
}

// hostileStates: inputs each decoder must reject or survive.
func hostileStates(t *testing.T) map[string][]byte {
	valid := mustMarshal(t, validWire())
	mod := func(f func(w *wState)) []byte {
		w := validWire()
		f(&w)
		return mustMarshal(t, w)
	}
	return map[string][]byte{
		"empty":              {},
		"null":               {0xf6},
		"truncated":          valid[:len(valid)/2],
		"indefinite-array":   append([]byte{0x9f}, append(valid[1:], 0xff)...),
		"tagged":             append([]byte{0xd8, 0x18}, valid...),
		"deep-nesting":       append(bytes.Repeat([]byte{0x81}, 40), 0),
		"huge-array-header":  {0x87, 0x01, 0x02, 0x9b, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff},
		"huge-string-header": {0x87, 0x01, 0x02, 0x81, 0x7b, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff},
		"dup-dot":            mod(func(w *wState) { w.Entries[1].Cnts[0].Replica, w.Entries[1].Cnts[0].Seq = 1, 3 }),
		"dot-outside":        mod(func(w *wState) { w.Entries[0].Regs[0].Seq = 99 }),
		"context-adjacent":   mod(func(w *wState) { w.Context = []uint64{0, 1, 1, 0, 2, 2, 1, 1, 3} }),
		"context-max":        mod(func(w *wState) { w.Context = []uint64{0, 1, 1<<64 - 1, 1, 1, 3} }),
		"lamport-max":        mod(func(w *wState) { w.Lamport = 1<<64 - 1 }),
		"object-value":       mod(func(w *wState) { w.Entries[0].Regs[0].Value = `{"a":1}` }),
		"non-canonical":      mod(func(w *wState) { w.Entries[0].Regs[0].Value = `[1, 2]` }),
		"root-entry":         mod(func(w *wState) { w.Entries[0].Path = "" }),
		"bad-path":           mod(func(w *wState) { w.Entries[0].Path = "/x~" }),
		"deep-path":          mod(func(w *wState) { w.Entries[2].Path = strings.Repeat("/s", 40) }),
		"empty-replica":      mod(func(w *wState) { w.Replicas[0] = "" }),
		"version-2":          mod(func(w *wState) { w.Version = 2 }),
		"doc-with-dots":      mod(func(w *wState) { w.Format = 1 }),
		"counter-extremes": mod(func(w *wState) {
			w.Entries[1].Cnts[0].Total = -1 << 63
		}),
		"valid-wire": valid,
	}
}

func hostileMessages(t *testing.T, payload []byte) map[string][]byte {
	good := func() wMsg {
		return wMsg{"sourceAgentId": "mars", "vectorClock": map[string]uint64{"a": 9, "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo": 9},
			"payload": payload, "timestamp": int64(1767225600000)}
	}
	mod := func(f func(m wMsg)) []byte {
		m := good()
		f(m)
		return mustMarshal(t, m)
	}
	return map[string][]byte{
		"empty-clock":      mod(func(m wMsg) { m["vectorClock"] = map[string]uint64{} }),
		"zero-count":       mod(func(m wMsg) { m["vectorClock"] = map[string]uint64{"a": 0} }),
		"no-payload":       mod(func(m wMsg) { delete(m, "payload") }),
		"garbage-payload":  mod(func(m wMsg) { m["payload"] = []byte{0x9f, 0x9f, 0x9f} }),
		"clock-too-low":    mod(func(m wMsg) { m["vectorClock"] = map[string]uint64{"a": 1} }),
		"unknown-field":    mod(func(m wMsg) { m["extra"] = map[string]any{"x": []int{1}} }),
		"byte-string-key":  mod(func(m wMsg) { m["vectorClock"] = map[any]uint64{cbor.ByteString("a"): 1} }),
		"text-payload":     mod(func(m wMsg) { m["payload"] = "text" }),
		"negative-time":    mod(func(m wMsg) { m["timestamp"] = -5 }),
		"indefinite-map":   append([]byte{0xbf}, append(mod(func(wMsg) {})[1:], 0xff)...),
		"array-not-map":    mustMarshal(t, []any{"mars", map[string]int{"a": 1}, []byte{1}, 1}),
		"valid-by-hand":    mustMarshal(t, good()),
		"huge-map-header":  {0xbb, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff},
		"nested-in-clock":  mod(func(m wMsg) { m["vectorClock"] = map[string]any{"a": []int{1}} }),
		"tagged-timestamp": mod(func(m wMsg) { m["timestamp"] = cbor.Tag{Number: 1, Content: 5} }),
	}
}
