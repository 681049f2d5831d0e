package crdt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/internal/frame"
)

// The catch-up decoders read bytes from any peer on /nova/crdt/1.0.0:
// readCatchupRequest (serve) and readCatchupResponse (catchUp): one frame
// under its cap, decMode, and for a request the name check. Whatever the input, a decoder returns an error or a value that is within
// its limits and re-encodes (encMode, as the sender does) to bytes that
// decode to the same value. The seeds, added with f.Add, are the package's
// own encodings plus truncated, oversized and hostile variants.

// maxClockEntries is decMode's MaxMapPairs: the most replicas a clock may
// list.
const maxClockEntries = 1 << 16

// fuzzHistory is a small shared history of two replicas, and the clocks a
// replica of it has along the way (first the empty clock).
func fuzzHistory(tb testing.TB) (*delta.Doc, []delta.VersionVector) {
	tb.Helper()
	a, b := fuzzReplica(tb, "a"), fuzzReplica(tb, "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo")
	clocks := []delta.VersionVector{a.Clock()}
	for _, step := range []func() (*delta.Delta, error){
		func() (*delta.Delta, error) {
			return a.Set("/cfg", json.RawMessage(`{"name":"x","n":[1,2],"deep":{"q":null}}`))
		},
		func() (*delta.Delta, error) { return b.Set("/cfg/name", json.RawMessage(`"y"`)) },
		func() (*delta.Delta, error) { return a.SetAdd("/tags", json.RawMessage(`"t"`)) },
		func() (*delta.Delta, error) { return b.Incr("/n", 3) },
		func() (*delta.Delta, error) { return a.Delete("/cfg/deep") },
	} {
		x, err := step()
		if err != nil {
			tb.Fatal(err)
		}
		a.Join(x)
		b.Join(x)
		clocks = append(clocks, a.Clock())
	}
	return a, clocks
}

func fuzzReplica(tb testing.TB, id string) *delta.Doc {
	tb.Helper()
	d, err := delta.New(id)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func mustCBOR(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := encMode.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// hostileCBOR are inputs that break decMode's rules or no rule at all.
func hostileCBOR(tb testing.TB) [][]byte {
	tb.Helper()
	nested := []byte{0xa1, 0x61, 'z'} // {"z": [[[[[[[[[0]]]]]]]]]}: 10 levels
	nested = append(nested, bytes.Repeat([]byte{0x81}, 9)...)
	nested = append(nested, 0x00)
	return [][]byte{
		nil,
		{0xf6},       // null
		{0xa0},       // {}
		{0x80},       // []
		{0xff},       // a lone break
		{0xbf, 0xff}, // {_ }: indefinite length
		{0xc0, 0xa0}, // a tag
		{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // an array claiming 2^64-1 items
		nested,
		[]byte("not cbor at all"),
		mustCBOR(tb, map[string]any{"d": 1, "c": "x", "x": 7, "e": []int{1}}), // wrong types
		mustCBOR(tb, map[string]any{"d": "notes", "c": map[string]any{"a": -1}}),
		mustCBOR(tb, map[string]any{"d": "notes", "c": map[string]any{"a": 1.5}}),
		mustCBOR(tb, map[string]any{"D": "notes", "C": map[string]uint64{"a": 1}, "X": []byte{1}, "E": "e"}),
		{0xa2, 0x61, 'd', 0x61, 'a', 0x61, 'd', 0x61, 'b'}, // {"d":"a","d":"b"}
		{0xa1, 0x61, 'd', 0x62, 0xff, 0xfe},                // invalid UTF-8
	}
}

// framed adds the length prefix a stream carries.
func framed(body []byte) []byte { return frame.Append(nil, body) }

// checkFrameCap fails unless a body over max was refused as too large.
func checkFrameCap(t *testing.T, body []byte, max int, err error) {
	t.Helper()
	if len(body) > max && !errors.Is(err, frame.ErrTooLarge) {
		t.Fatalf("a %d-byte body over the %d-byte cap: %v", len(body), max, err)
	}
}

func FuzzCatchupRequest(f *testing.F) {
	_, clocks := fuzzHistory(f)
	for _, c := range clocks {
		f.Add(mustCBOR(f, catchupReq{Doc: "notes", Clock: c}))
	}
	full := mustCBOR(f, catchupReq{Doc: "team.plan-2_v1", Clock: clocks[len(clocks)-1]})
	for _, b := range [][]byte{
		full[:len(full)/2], full[:len(full)-1], append(full[:len(full):len(full)], 0x00),
		mustCBOR(f, catchupReq{Doc: "notes", Clock: delta.VersionVector{"a": 1 << 63, "z": ^uint64(0)}}),
		mustCBOR(f, catchupReq{Doc: "notes", Clock: delta.VersionVector{"": 3, "a": 0, "\x01": 1}}),
		mustCBOR(f, catchupReq{Doc: "notes", Clock: delta.VersionVector{}}),
		mustCBOR(f, catchupReq{Doc: "../etc", Clock: clocks[1]}),
		mustCBOR(f, catchupReq{Doc: strings.Repeat("n", 65)}),
		mustCBOR(f, catchupReq{}),
	} {
		f.Add(b)
	}
	for _, b := range hostileCBOR(f) {
		f.Add(b)
	}
	server, _ := fuzzHistory(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := readCatchupRequest(bytes.NewReader(framed(body)))
		checkFrameCap(t, body, catchupRequestMax, err)
		if err != nil {
			return
		}
		if !ValidName(req.Doc) || len(req.Clock) > maxClockEntries {
			t.Fatalf("accepted a request outside the limits: %q, %d clock entries", req.Doc, len(req.Clock))
		}
		enc, err := encMode.Marshal(req)
		if err != nil {
			t.Fatalf("re-encoding an accepted request: %v", err)
		}
		again, err := readCatchupRequest(bytes.NewReader(framed(enc)))
		if err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("round trip: %+v -> %x -> %+v (%v)", req, enc, again, err)
		}
		if enc2 := mustCBOR(t, again); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding not stable")
		}
		// Answer it as serve does; the asker must decode the answer to
		// the very delta that was sent.
		x := server.Clone().DeltaSince(req.Clock.Context())
		b, err := delta.EncodeDelta(x)
		if err != nil {
			t.Fatalf("encoding the answer: %v", err)
		}
		resp, err := readCatchupResponse(bytes.NewReader(framed(mustCBOR(t, catchupResp{Delta: b}))))
		if err != nil {
			t.Fatalf("decoding the answer: %v", err)
		}
		if len(resp.Delta) == 0 {
			return // an empty delta is sent as no delta
		}
		y, err := delta.DecodeDelta(resp.Delta)
		if err != nil || !y.Equal(x) {
			t.Fatalf("the answer does not decode to the delta sent (%v)", err)
		}
	})
}

func FuzzCatchupResponse(f *testing.F) {
	server, clocks := fuzzHistory(f)
	var answers [][]byte
	for _, c := range clocks {
		b, err := delta.EncodeDelta(server.DeltaSince(c.Context()))
		if err != nil {
			f.Fatal(err)
		}
		answers = append(answers, mustCBOR(f, catchupResp{Delta: b}))
	}
	for _, b := range answers {
		f.Add(b)
	}
	full := answers[0]
	for _, b := range [][]byte{
		full[:len(full)/2], full[:len(full)-1], append(full[:len(full):len(full)], 0x00),
		mustCBOR(f, catchupResp{Err: "unknown document"}),
		mustCBOR(f, catchupResp{}),
		mustCBOR(f, catchupResp{Delta: []byte("garbage"), Err: "x"}),
		mustCBOR(f, catchupResp{Delta: []byte("garbage")}),
		mustCBOR(f, map[string]any{"x": []byte{}}),
		mustCBOR(f, map[string]any{"x": "a text string"}),
		mustCBOR(f, map[string]any{"x": []int{1, 2, 3}}),
	} {
		f.Add(b)
	}
	for _, b := range hostileCBOR(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := readCatchupResponse(bytes.NewReader(framed(body)))
		checkFrameCap(t, body, catchupResponseMax, err)
		if err != nil {
			return
		}
		enc, err := encMode.Marshal(resp)
		if err != nil {
			t.Fatalf("re-encoding an accepted answer: %v", err)
		}
		again, err := readCatchupResponse(bytes.NewReader(framed(enc)))
		// omitempty: an empty delta comes back as none.
		if err != nil || !bytes.Equal(again.Delta, resp.Delta) || again.Err != resp.Err {
			t.Fatalf("round trip: %+v -> %x -> %+v (%v)", resp, enc, again, err)
		}
		if enc2 := mustCBOR(t, again); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding not stable")
		}
		if resp.Err != "" || len(resp.Delta) == 0 {
			return
		}
		// What catchUp does next: decode the delta, check whose dots it
		// claims, join it.
		x, err := delta.DecodeDelta(resp.Delta)
		if err != nil {
			if !errors.Is(err, delta.ErrDeserialization) {
				t.Fatalf("delta error without code: %v", err)
			}
			return
		}
		own := "a"
		local := fuzzReplica(t, own)
		_ = x.Context().Max(own)
		_ = x.Context().Replicas()
		local.Join(x)
		if o := local.Context().Compare(x.Context()); o != delta.Equal && o != delta.After {
			t.Fatalf("after the join the replica does not cover the delta: %v", o)
		}
	})
}

// TestCatchupDecodeLimits feeds the catch-up decoders inputs at and just
// over each cap: the frame sizes, and decMode's clock size and nesting.
func TestCatchupDecodeLimits(t *testing.T) {
	req := padTo(t, map[string]any{"d": "notes", "c": map[string]uint64{"a": 1}}, catchupRequestMax)
	if _, err := readCatchupRequest(bytes.NewReader(framed(req))); err != nil {
		t.Fatalf("a request of exactly the cap: %v", err)
	}
	req = padTo(t, map[string]any{"d": "notes", "c": map[string]uint64{"a": 1}}, catchupRequestMax+1)
	if _, err := readCatchupRequest(bytes.NewReader(framed(req))); !errors.Is(err, frame.ErrTooLarge) {
		t.Fatalf("a request over the cap: %v", err)
	}
	resp := padTo(t, map[string]any{"e": "unknown document"}, catchupResponseMax)
	if _, err := readCatchupResponse(bytes.NewReader(framed(resp))); err != nil {
		t.Fatalf("an answer of exactly the cap: %v", err)
	}
	resp = padTo(t, map[string]any{"e": "unknown document"}, catchupResponseMax+1)
	if _, err := readCatchupResponse(bytes.NewReader(framed(resp))); !errors.Is(err, frame.ErrTooLarge) {
		t.Fatalf("an answer over the cap: %v", err)
	}
	// A frame announcing 4 GiB is refused after its length prefix.
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0xa0}
	if _, err := readCatchupResponse(bytes.NewReader(huge)); !errors.Is(err, frame.ErrTooLarge) {
		t.Fatalf("a 4 GiB length prefix: %v", err)
	}

	if r, err := readCatchupRequest(bytes.NewReader(framed(mustCBOR(t, catchupReq{Doc: "notes", Clock: bigClock(maxClockEntries)})))); err != nil || len(r.Clock) != maxClockEntries {
		t.Fatalf("a clock of %d replicas: %v", maxClockEntries, err)
	}
	_, err := readCatchupRequest(bytes.NewReader(framed(mustCBOR(t, catchupReq{Doc: "notes", Clock: bigClock(maxClockEntries + 1)}))))
	if e := (*cbor.MaxMapPairsError)(nil); !errors.As(err, &e) {
		t.Fatalf("a clock of %d replicas: %v", maxClockEntries+1, err)
	}
	for _, levels := range []int{8, 9} {
		b := []byte{0xa1, 0x61, 'z'} // {"z": [[...[0]...]]}, a field no one reads
		b = append(b, bytes.Repeat([]byte{0x81}, levels-1)...)
		b = append(b, 0x00)
		_, err := readCatchupResponse(bytes.NewReader(framed(b)))
		if e := (*cbor.MaxNestedLevelError)(nil); (levels > 8) != errors.As(err, &e) {
			t.Fatalf("%d levels of nesting: %v", levels, err)
		}
	}
}

// padTo encodes m with an extra byte-string field "p" that makes it exactly
// size bytes long (decoders skip fields they do not know).
func padTo(tb testing.TB, m map[string]any, size int) []byte {
	tb.Helper()
	pad := size
	for range 4 {
		m["p"] = make([]byte, max(pad, 0))
		b := mustCBOR(tb, m)
		if len(b) == size {
			return b
		}
		pad += size - len(b)
	}
	tb.Fatalf("cannot pad to %d bytes", size)
	return nil
}

// bigClock is a clock of n distinct replicas.
func bigClock(n int) delta.VersionVector {
	v := make(delta.VersionVector, n)
	for i := range n {
		v[fmt.Sprintf("r%x", i)] = uint64(i + 1)
	}
	return v
}
