package crdt

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/internal/frame"
)

// The catch-up decoders read bytes from any peer on /nova/crdt/2.0.0:
// readCatchupRequest (serve), decodeCatchupFrame (catchUp) and
// DecodeUpdate (every update, from gossip, catch-up and the store).
// Whatever the input, a decoder returns an error or a value that is
// within its limits and re-encodes to bytes that decode to the same value.
// The seeds, added with f.Add, are the package's own encodings plus
// truncated, oversized and hostile variants.

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
		mustCBOR(tb, map[string]any{"d": 1, "h": "x", "u": 7, "e": []int{1}}), // wrong types
		mustCBOR(tb, map[string]any{"d": "notes", "h": []any{[]any{"a", -1, []byte{1}}}}),
		mustCBOR(tb, map[string]any{"d": "notes", "h": []any{[]any{"a", 1.5, make([]byte, 32)}}}),
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

// fuzzUpdates signs a short history of two replicas (the second depends
// on the first), returning the updates' bytes.
func fuzzUpdates(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	ka, kb := fuzzKey(tb), fuzzKey(tb)
	la, lb := fuzzLog(tb, ka), fuzzLog(tb, kb)
	step := func(l *docLog, k crypto.PrivKey, mk func(d *delta.Doc) (*delta.Delta, error)) {
		x, err := mk(l.d)
		if err != nil {
			tb.Fatal(err)
		}
		u, err := l.local(k, "w@"+l.self, x, 1)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, u.Raw)
		for _, o := range []*docLog{la, lb} {
			if o != l {
				v, _ := DecodeUpdate(u.Raw)
				if _, err := o.add(v, "p"); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	step(la, ka, func(d *delta.Doc) (*delta.Delta, error) {
		return d.Set("/cfg", json.RawMessage(`{"name":"x","n":[1,2]}`))
	})
	step(lb, kb, func(d *delta.Doc) (*delta.Delta, error) { return d.Set("/cfg/name", json.RawMessage(`"y"`)) })
	step(la, ka, func(d *delta.Doc) (*delta.Delta, error) { return d.SetAdd("/tags", json.RawMessage(`"t"`)) })
	step(lb, kb, func(d *delta.Doc) (*delta.Delta, error) { return d.Incr("/n", 3) })
	return out
}

func fuzzKey(tb testing.TB) crypto.PrivKey {
	tb.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func fuzzLog(tb testing.TB, k crypto.PrivKey) *docLog {
	tb.Helper()
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := newDocLog("notes", id.String())
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// FuzzUpdate: DecodeUpdate accepts only updates that keep every rule of
// one update (see Update), and what it accepts decodes again the same.
func FuzzUpdate(f *testing.F) {
	ups := fuzzUpdates(f)
	for _, b := range ups {
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(b[:len(b)-1])
		flipped := bytes.Clone(b)
		flipped[len(flipped)/2] ^= 1
		f.Add(flipped)
	}
	for _, b := range hostileCBOR(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := DecodeUpdate(data)
		if err != nil {
			if ErrorCode(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		if len(data) > MaxUpdateSize || u.Author != u.Signer.String() || u.First < 1 || u.First > u.Last || u.Last > MaxSeq {
			t.Fatalf("accepted an update out of bounds: %+v", u)
		}
		r, lo, hi, ok := u.Delta.MintedRange()
		if !ok || r != u.Author || lo != u.First || hi != u.Last || !u.Delta.EntriesMinted() {
			t.Fatal("accepted an update minting other dots")
		}
		ctx := u.Delta.Context()
		for _, rep := range ctx.Replicas() {
			if rep == u.Author {
				if ctx.Max(rep) > u.Last {
					t.Fatal("accepted a context beyond the author's last dot")
				}
				continue
			}
			found := false
			for _, d := range u.Deps {
				found = found || (d.Replica == rep && d.Seq >= ctx.Max(rep))
			}
			if !found {
				t.Fatalf("accepted a context holding %s without a dep covering it", rep)
			}
		}
		again, err := DecodeUpdate(u.Raw)
		if err != nil || again.Hash != u.Hash || !reflect.DeepEqual(again.Deps, u.Deps) {
			t.Fatalf("decoding again: %v", err)
		}
	})
}

// FuzzCatchupRequest: a request is within its limits and round-trips.
func FuzzCatchupRequest(f *testing.F) {
	l := fuzzLog(f, fuzzKey(f))
	for _, b := range fuzzUpdates(f) {
		u, _ := DecodeUpdate(b)
		l.add(u, "p")
	}
	full := mustCBOR(f, catchupReq{Doc: "notes", Holding: summaryToWire(l.summary())})
	for _, b := range [][]byte{
		full, full[:len(full)/2], full[:len(full)-1], append(full[:len(full):len(full)], 0x00),
		mustCBOR(f, catchupReq{Doc: "notes"}),
		mustCBOR(f, catchupReq{Doc: "notes", Holding: []summaryWire{{Replica: "b", Last: 1, Digest: make([]byte, 32)}, {Replica: "a", Last: 1, Digest: make([]byte, 32)}}}),
		mustCBOR(f, catchupReq{Doc: "notes", Holding: []summaryWire{{Replica: "a", Last: 1 << 60, Digest: make([]byte, 32)}}}),
		mustCBOR(f, catchupReq{Doc: "../etc"}),
		mustCBOR(f, catchupReq{}),
	} {
		f.Add(b)
	}
	for _, b := range hostileCBOR(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := readCatchupRequest(bytes.NewReader(framed(body)))
		checkFrameCap(t, body, catchupRequestMax, err)
		if err != nil {
			return
		}
		if !ValidName(req.Doc) || len(req.Holding) > maxClockEntries {
			t.Fatalf("accepted %q with %d replicas", req.Doc, len(req.Holding))
		}
		for i, h := range req.Holding {
			if h.Last > MaxSeq || len(h.Digest) != 32 || (i > 0 && req.Holding[i-1].Replica >= h.Replica) {
				t.Fatalf("accepted a bad summary entry %+v", h)
			}
		}
		again, err := readCatchupRequest(bytes.NewReader(framed(mustCBOR(t, req))))
		if err != nil || again.Doc != req.Doc || len(again.Holding) != len(req.Holding) {
			t.Fatalf("round trip: %v", err)
		}
		_ = l.since(req.summary()) // what serve does next
	})
}

// FuzzCatchupFrame: an answer frame is an update, an end, or an error.
func FuzzCatchupFrame(f *testing.F) {
	for _, b := range fuzzUpdates(f) {
		f.Add(mustCBOR(f, catchupFrame{Update: b}))
	}
	for _, b := range [][]byte{
		mustCBOR(f, catchupFrame{End: true}), mustCBOR(f, catchupFrame{Err: "unknown document"}), mustCBOR(f, catchupFrame{}),
		mustCBOR(f, catchupFrame{Update: []byte("garbage")}),
	} {
		f.Add(b)
	}
	for _, b := range hostileCBOR(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ar := newAnswerReader(bytes.NewReader(framed(body)))
		u, done, err := ar.next()
		checkFrameCap(t, body, catchupFrameMax, err)
		if err != nil {
			if !errors.As(err, new(undecodable)) && !errors.Is(err, frame.ErrTooLarge) {
				t.Fatalf("an undecodable frame not marked as such: %v", err)
			}
			return
		}
		if !done && len(u) == 0 {
			t.Fatal("an empty update accepted")
		}
		if !done {
			_, _ = DecodeUpdate(u) // what catchUp does next
		}
	})
}

// TestCatchupDecodeLimits feeds the catch-up decoders inputs at and just
// over each cap.
func TestCatchupDecodeLimits(t *testing.T) {
	req := padTo(t, map[string]any{"d": "notes"}, catchupRequestMax)
	if _, err := readCatchupRequest(bytes.NewReader(framed(req))); err != nil {
		t.Fatalf("a request of exactly the cap: %v", err)
	}
	req = padTo(t, map[string]any{"d": "notes"}, catchupRequestMax+1)
	if _, err := readCatchupRequest(bytes.NewReader(framed(req))); !errors.Is(err, frame.ErrTooLarge) {
		t.Fatalf("a request over the cap: %v", err)
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0xa0}
	if _, _, err := newAnswerReader(bytes.NewReader(huge)).next(); !errors.Is(err, frame.ErrTooLarge) {
		t.Fatalf("a 4 GiB length prefix: %v", err)
	}
	big := make([]summaryWire, maxClockEntries+1)
	for i := range big {
		big[i] = summaryWire{Replica: fmt.Sprintf("r%08x", i), Last: 1, Digest: make([]byte, 32)}
	}
	_, err := readCatchupRequest(bytes.NewReader(framed(mustCBOR(t, catchupReq{Doc: "notes", Holding: big}))))
	if e := (*cbor.MaxArrayElementsError)(nil); !errors.As(err, &e) {
		t.Fatalf("a summary of %d replicas: %v", maxClockEntries+1, err)
	}
	if _, err := DecodeUpdate(make([]byte, MaxUpdateSize+1)); ErrorCode(err) != CodeDeserializationFailed {
		t.Fatalf("an update over the cap: %v", err)
	}
}

// padTo encodes m with an extra byte-string field "pad" that makes it exactly
// size bytes long (decoders skip fields they do not know).
func padTo(tb testing.TB, m map[string]any, size int) []byte {
	tb.Helper()
	pad := size
	for range 4 {
		m["pad"] = make([]byte, max(pad, 0))
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
