package delta_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/crdt/delta"
)

// The wire layout, mirrored here so hostile variants can be built field by
// field (see the package documentation).
type (
	wState struct {
		_        struct{} `cbor:",toarray"`
		Version  uint64
		Format   uint64
		Replicas []string
		Context  []uint64
		Dots     []uint64
		Lamport  uint64
		Entries  []wEntry
	}
	wEntry struct {
		_     struct{} `cbor:",toarray"`
		Path  string
		Regs  []wReg
		Elems []wElem
		Cnts  []wCnt
	}
	wReg struct {
		_                     struct{} `cbor:",toarray"`
		Replica, Seq, Lamport uint64
		Value                 string
	}
	wElem struct {
		_     struct{} `cbor:",toarray"`
		Value string
		Dots  []uint64
	}
	wCnt struct {
		_            struct{} `cbor:",toarray"`
		Replica, Seq uint64
		Total        int64
	}
)

var wireEnc = func() cbor.EncMode {
	o := cbor.CoreDetEncOptions()
	o.NilContainers = cbor.NilContainerAsEmpty // as the package encodes
	m, err := o.EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := wireEnc.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// validWire is a valid delta: replicas a and b, a set value, a set
// element and a counter; Set at b:3 minted.
func validWire() wState {
	return wState{
		Version: 1, Format: 2,
		Replicas: []string{"a", "b"},
		Context:  []uint64{0, 1, 2, 1, 1, 3},
		Dots:     []uint64{1, 3, 3},
		Lamport:  2,
		Entries: []wEntry{
			{Path: "/k", Regs: []wReg{{Replica: 1, Seq: 3, Lamport: 2, Value: `"v"`}}},
			{Path: "/n", Cnts: []wCnt{{Replica: 0, Seq: 2, Total: -4}}},
			{Path: "/s", Elems: []wElem{{Value: `1`, Dots: []uint64{0, 1}}}},
		},
	}
}

func checkDecodeError(t *testing.T, name string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", name)
		return
	}
	var de *delta.DeserializationError
	if !errors.Is(err, delta.ErrDeserialization) || !errors.As(err, &de) ||
		de.Code() != delta.CodeDeserializationFailed || de.Code() != "CRDT_DESERIALIZATION_FAILED" {
		t.Errorf("%s: %v is not a deserialization error", name, err)
	}
	if len(err.Error()) > 400 {
		t.Errorf("%s: error message of %d bytes", name, len(err.Error()))
	}
}

func TestDecodeValidWire(t *testing.T) {
	b := mustMarshal(t, validWire())
	x, err := delta.DecodeDelta(b)
	if err != nil {
		t.Fatal(err)
	}
	d := newDoc(t, "z")
	d.Join(x)
	if g := string(d.JSON()); g != `{"k":"v","n":-4,"s":[1]}` {
		t.Errorf("decoded %s", g)
	}
	again, _ := delta.EncodeDelta(x)
	if !bytes.Equal(again, b) {
		t.Errorf("re-encoding differs:\n%x\n%x", again, b)
	}
}

func TestDecodeHostile(t *testing.T) {
	mod := func(f func(w *wState)) []byte {
		w := validWire()
		f(&w)
		return mustMarshal(t, w)
	}
	valid := mustMarshal(t, validWire())
	tests := map[string][]byte{
		"empty":                {},
		"null":                 {0xf6},
		"garbage":              []byte("not cbor at all"),
		"truncated":            valid[:len(valid)-3],
		"trailing byte":        append(bytes.Clone(valid), 0),
		"map not array":        mustMarshal(t, map[string]int{"v": 1}),
		"too few fields":       mustMarshal(t, []any{1, 2}),
		"oversize":             append(bytes.Clone(valid), make([]byte, delta.MaxEncodedSize)...),
		"indefinite array":     append([]byte{0x9f}, append(valid[1:], 0xff)...),
		"tag":                  append([]byte{0xc1}, valid...),
		"deep nesting":         append(bytes.Repeat([]byte{0x81}, 20), 0),
		"huge array header":    {0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"version 2":            mod(func(w *wState) { w.Version = 2 }),
		"doc format":           mod(func(w *wState) { w.Format = 1 }),
		"empty replica":        mod(func(w *wState) { w.Replicas[0] = "" }),
		"control in replica":   mod(func(w *wState) { w.Replicas[0] = "a\n" }),
		"replicas unsorted":    mod(func(w *wState) { w.Replicas = []string{"b", "a"} }),
		"replica repeated":     mod(func(w *wState) { w.Replicas = []string{"a", "a"} }),
		"unused replica":       mod(func(w *wState) { w.Replicas = append(w.Replicas, "c") }),
		"context not triples":  mod(func(w *wState) { w.Context = w.Context[:5] }),
		"context seq 0":        mod(func(w *wState) { w.Context[1] = 0 }),
		"context lo > hi":      mod(func(w *wState) { w.Context[1], w.Context[2] = 3, 2 }),
		"context adjacent":     mod(func(w *wState) { w.Context = []uint64{0, 1, 1, 0, 2, 2, 1, 1, 3} }),
		"context unsorted":     mod(func(w *wState) { w.Context = []uint64{1, 1, 3, 0, 1, 2} }),
		"context bad replica":  mod(func(w *wState) { w.Context[3] = 7 }),
		"dots outside context": mod(func(w *wState) { w.Dots = []uint64{1, 3, 4} }),
		"entries unsorted":     mod(func(w *wState) { w.Entries[0], w.Entries[1] = w.Entries[1], w.Entries[0] }),
		"entry repeated":       mod(func(w *wState) { w.Entries[1].Path = "/k" }),
		"entry at root":        mod(func(w *wState) { w.Entries[0].Path = "" }),
		"invalid path":         mod(func(w *wState) { w.Entries[0].Path = "k" }),
		"bad escape in path":   mod(func(w *wState) { w.Entries[0].Path = "/k~2" }),
		"empty entry":          mod(func(w *wState) { w.Entries[0].Regs = nil }),
		"dot outside context": mod(func(w *wState) {
			w.Entries[0].Regs[0].Seq = 9
		}),
		"dot held twice": mod(func(w *wState) {
			w.Entries[1].Cnts[0].Replica, w.Entries[1].Cnts[0].Seq = 1, 3
		}),
		"dot index out of range": mod(func(w *wState) { w.Entries[0].Regs[0].Replica = 5 }),
		"seq 0":                  mod(func(w *wState) { w.Entries[0].Regs[0].Seq = 0 }),
		"lamport 0":              mod(func(w *wState) { w.Entries[0].Regs[0].Lamport = 0 }),
		"lamport above state":    mod(func(w *wState) { w.Entries[0].Regs[0].Lamport = 3 }),
		"value not json":         mod(func(w *wState) { w.Entries[0].Regs[0].Value = `{` }),
		"value not canonical":    mod(func(w *wState) { w.Entries[0].Regs[0].Value = `[1, 2]` }),
		"value empty":            mod(func(w *wState) { w.Entries[0].Regs[0].Value = `` }),
		"value an object":        mod(func(w *wState) { w.Entries[0].Regs[0].Value = `{"a":1}` }),
		"value too large": mod(func(w *wState) {
			w.Entries[0].Regs[0].Value = `"` + strings.Repeat("x", delta.MaxValueSize) + `"`
		}),
		"regs unsorted": mod(func(w *wState) {
			w.Context = []uint64{0, 1, 2, 1, 1, 4}
			w.Entries[0].Regs = []wReg{{Replica: 1, Seq: 4, Lamport: 1, Value: `1`}, {Replica: 1, Seq: 3, Lamport: 1, Value: `2`}}
		}),
		"element not canonical": mod(func(w *wState) { w.Entries[2].Elems[0].Value = ` 1` }),
		"element without dots":  mod(func(w *wState) { w.Entries[2].Elems[0].Dots = nil }),
		"element odd dots":      mod(func(w *wState) { w.Entries[2].Elems[0].Dots = []uint64{0} }),
		"element dots unsorted": mod(func(w *wState) { w.Entries[2].Elems[0].Dots = []uint64{1, 1, 0, 1} }),
		"elements repeated": mod(func(w *wState) {
			w.Entries[2].Elems = append(w.Entries[2].Elems, wElem{Value: `1`, Dots: []uint64{1, 1}})
		}),
		"counter dots unsorted": mod(func(w *wState) {
			w.Entries[1].Cnts = append(w.Entries[1].Cnts, wCnt{Replica: 0, Seq: 1})
		}),
		"float where int": func() []byte {
			b := bytes.Clone(valid)
			return append([]byte{b[0]}, append([]byte{0xfb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}, b[2:]...)...)
		}(),
		"negative version": func() []byte {
			b := bytes.Clone(valid)
			b[1] = 0x20
			return b
		}(),
		"byte string path": func() []byte {
			w := validWire()
			raw := mustMarshal(t, w)
			i := bytes.Index(raw, []byte{0x62, '/', 'k'})
			raw[i] = 0x42 // text(2) -> bytes(2)
			return raw
		}(),
		"invalid utf-8 path": func() []byte {
			raw := bytes.Clone(valid)
			i := bytes.Index(raw, []byte{0x62, '/', 'k'})
			raw[i+2] = 0xff
			return raw
		}(),
	}
	for name, b := range tests {
		_, err := delta.DecodeDelta(b)
		checkDecodeError(t, "DecodeDelta "+name, err)
	}
	// A document is the same layout with format 1 and no dots.
	w := validWire()
	w.Format, w.Dots = 1, nil
	docBytes := mustMarshal(t, w)
	if _, err := delta.DecodeDoc(docBytes); err != nil {
		t.Errorf("valid document: %v", err)
	}
	_, err := delta.DecodeDelta(docBytes)
	checkDecodeError(t, "DecodeDelta of a document", err)
	_, err = delta.DecodeDoc(valid)
	checkDecodeError(t, "DecodeDoc of a delta", err)
	w.Dots = []uint64{1, 3, 3}
	_, err = delta.DecodeDoc(mustMarshal(t, w))
	checkDecodeError(t, "DecodeDoc of a document with dots", err)
}

// wMsg mirrors SyncMessage with loose types, to build hostile messages.
type wMsg map[string]any

func TestDecodeSyncMessageHostile(t *testing.T) {
	payload := mustMarshal(t, validWire())
	good := func() wMsg {
		return wMsg{"sourceAgentId": "mars", "vectorClock": map[string]uint64{"a": 2, "b": 3},
			"payload": payload, "timestamp": int64(1767225600000)}
	}
	m, err := delta.DecodeSyncMessage(mustMarshal(t, good()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Delta(); err != nil {
		t.Fatal(err)
	}
	withExtra := good()
	withExtra["future"] = []int{1}
	if _, err := delta.DecodeSyncMessage(mustMarshal(t, withExtra)); err != nil {
		t.Errorf("unknown field rejected: %v", err)
	}
	mod := func(f func(m wMsg)) []byte {
		m := good()
		f(m)
		return mustMarshal(t, m)
	}
	dupKey := func() []byte { // the clock's map with "a" twice
		b := mustMarshal(t, good())
		i := bytes.Index(b, []byte{0xa2, 0x61, 'a', 0x02, 0x61, 'b', 0x03})
		copy(b[i+4:], []byte{0x61, 'a'})
		return b
	}()
	tests := map[string][]byte{
		"empty":            {},
		"array":            mustMarshal(t, []int{1}),
		"no clock":         mod(func(m wMsg) { delete(m, "vectorClock") }),
		"empty clock":      mod(func(m wMsg) { m["vectorClock"] = map[string]uint64{} }),
		"zero count":       mod(func(m wMsg) { m["vectorClock"] = map[string]uint64{"a": 0} }),
		"negative count":   mod(func(m wMsg) { m["vectorClock"] = map[string]int{"a": -1} }),
		"empty replica":    mod(func(m wMsg) { m["vectorClock"] = map[string]uint64{"": 1} }),
		"byte string key":  mod(func(m wMsg) { m["vectorClock"] = map[any]uint64{cbor.ByteString("a"): 1} }),
		"no source":        mod(func(m wMsg) { delete(m, "sourceAgentId") }),
		"control source":   mod(func(m wMsg) { m["sourceAgentId"] = "ma\x00rs" }),
		"no payload":       mod(func(m wMsg) { delete(m, "payload") }),
		"text payload":     mod(func(m wMsg) { m["payload"] = "x" }),
		"timestamp 0":      mod(func(m wMsg) { m["timestamp"] = 0 }),
		"timestamp float":  mod(func(m wMsg) { m["timestamp"] = 1.5 }),
		"case variant key": mod(func(m wMsg) { m["VectorClock"] = m["vectorClock"]; delete(m, "vectorClock") }),
		"duplicate key":    dupKey,
		"oversize":         make([]byte, delta.MaxEncodedSize+1),
		"tagged payload":   mod(func(m wMsg) { m["payload"] = cbor.Tag{Number: 24, Content: payload} }),
	}
	for name, b := range tests {
		_, err := delta.DecodeSyncMessage(b)
		checkDecodeError(t, "DecodeSyncMessage "+name, err)
	}
	for name, b := range map[string][]byte{
		"garbage payload":         mod(func(m wMsg) { m["payload"] = []byte("xx") }),
		"clock misses minted dot": mod(func(m wMsg) { m["vectorClock"] = map[string]uint64{"a": 2, "b": 2} }),
	} {
		m, err := delta.DecodeSyncMessage(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		_, err = m.Delta()
		checkDecodeError(t, "SyncMessage.Delta "+name, err)
	}
	// Validation errors also match ErrInvalidMessage.
	_, err = delta.DecodeSyncMessage(mod(func(m wMsg) { m["vectorClock"] = map[string]uint64{} }))
	if !errors.Is(err, delta.ErrInvalidMessage) {
		t.Errorf("empty clock: %v does not match ErrInvalidMessage", err)
	}
}

func TestSyncMessageValidate(t *testing.T) {
	d := newDoc(t, "a")
	x := apply(t, d)(d.Set("/k", raw(`1`)))
	if _, err := delta.NewSyncMessage("mars", delta.VersionVector{}, x, 1); !errors.Is(err, delta.ErrInvalidMessage) {
		t.Errorf("clock that does not cover the delta: %v", err)
	}
	if _, err := delta.NewSyncMessage("mars", d.Clock(), nil, 1); !errors.Is(err, delta.ErrInvalidMessage) {
		t.Errorf("nil delta: %v", err)
	}
	m, err := delta.NewSyncMessage("mars", d.Clock(), x, 1)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(m *delta.SyncMessage){
		"empty clock":  func(m *delta.SyncMessage) { m.VectorClock = nil },
		"zero count":   func(m *delta.SyncMessage) { m.VectorClock = delta.VersionVector{"a": 0} },
		"no source":    func(m *delta.SyncMessage) { m.SourceAgentID = "" },
		"no payload":   func(m *delta.SyncMessage) { m.Payload = nil },
		"no timestamp": func(m *delta.SyncMessage) { m.Timestamp = 0 },
	} {
		c := *m
		f(&c)
		if _, err := delta.EncodeSyncMessage(&c); !errors.Is(err, delta.ErrInvalidMessage) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRoundTripDelta(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs, xs := history(t, 3)
		cands := append(xs, docs[0].State(), docs[1].DeltaSince(docs[2].Context()), &delta.Delta{})
		if len(xs) > 1 {
			g := xs[0].Clone()
			g.Join(xs[1])
			cands = append(cands, g)
		}
		x := pick(t, cands, "delta")
		b, err := delta.EncodeDelta(x)
		if err != nil {
			t.Fatal(err)
		}
		y, err := delta.DecodeDelta(b)
		if err != nil {
			t.Fatalf("decoding an encoded delta: %v", err)
		}
		if !y.Equal(x) || y.Dots().Compare(x.Dots()) != delta.Equal {
			t.Fatal("round trip changed the delta")
		}
		b2, _ := delta.EncodeDelta(y)
		if !bytes.Equal(b, b2) {
			t.Fatal("re-encoding changed the bytes")
		}
	})
}

func TestRoundTripDoc(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs, _ := history(t, 3)
		d := pick(t, docs, "doc")
		b, err := delta.EncodeDoc(d)
		if err != nil {
			t.Fatal(err)
		}
		e, err := delta.DecodeDoc(b)
		if err != nil {
			t.Fatalf("decoding an encoded doc: %v", err)
		}
		if !e.Equal(d) || string(e.JSON()) != string(d.JSON()) {
			t.Fatal("round trip changed the document")
		}
		b2, _ := delta.EncodeDoc(e)
		if !bytes.Equal(b, b2) {
			t.Fatal("re-encoding changed the bytes")
		}
	})
}

// TestEncodingDeterministic: equal states reached in different orders
// encode to the same bytes.
func TestEncodingDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs, xs := history(t, 3)
		a, b := newDoc(t, "x"), newDoc(t, "y")
		for _, x := range xs {
			a.Join(x)
		}
		for _, i := range rapid.Permutation(rangeN(len(xs))).Draw(t, "order") {
			b.Join(xs[i])
			b.Join(xs[i])
		}
		_ = docs
		ea, _ := delta.EncodeDoc(a)
		eb, _ := delta.EncodeDoc(b)
		if !a.Equal(b) || !bytes.Equal(ea, eb) {
			t.Fatal("equal states, different bytes")
		}
	})
}

func rangeN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestRoundTripSyncMessage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs, xs := history(t, 2)
		if len(xs) == 0 {
			t.Skip("no update")
		}
		x := pick(t, xs, "delta")
		d := docs[0].Clone()
		d.Join(x)
		m, err := delta.NewSyncMessage(
			rapid.StringMatching(`[a-z][a-z0-9@.-]{0,20}`).Draw(t, "source"),
			d.Clock().Merge(docs[1].Clock()), x,
			rapid.Int64Range(1, 1<<62).Draw(t, "timestamp"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := delta.EncodeSyncMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := delta.DecodeSyncMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(m) {
			t.Fatalf("round trip: %+v != %+v", got, m)
		}
		y, err := got.Delta()
		if err != nil || !y.Equal(x) {
			t.Fatalf("payload: %v", err)
		}
		b2, _ := delta.EncodeSyncMessage(got)
		if !bytes.Equal(b, b2) {
			t.Fatal("re-encoding changed the bytes")
		}
	})
}

func TestDeltaAccessors(t *testing.T) {
	d := newDoc(t, "a")
	x := apply(t, d)(d.Set("/o", raw(`{"a":1,"b":{"c":2}}`)))
	if p := fmt.Sprint(x.Paths()); p != "[/o/a /o/b/c]" {
		t.Errorf("Paths %s", p)
	}
	if x.Context().String() != "{a:1-2}" || x.Dots().String() != "{a:1-2}" || x.IsEmpty() {
		t.Errorf("context %s dots %s", x.Context(), x.Dots())
	}
	if !(&delta.Delta{}).IsEmpty() {
		t.Error("zero delta not empty")
	}
}
