package delta_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/nova-node/nova-node/crdt/delta"
)

// The decoders see wire bytes from any peer. Whatever the input, they
// return a *DeserializationError or a value that is valid: it re-encodes
// within the size cap to bytes that decode to an equal value and are
// stable, and every operation on it works without panicking.
// Seed corpora: testdata/fuzz/<target>/seed-* (TestWriteFuzzCorpus).

func checkRejected(t *testing.T, err error) {
	t.Helper()
	var de *delta.DeserializationError
	if !errors.Is(err, delta.ErrDeserialization) || !errors.As(err, &de) || de.Code() != delta.CodeDeserializationFailed {
		t.Fatalf("error %v is not a deserialization error", err)
	}
}

func FuzzDecodeDelta(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := delta.DecodeDelta(b)
		if err != nil {
			checkRejected(t, err)
			return
		}
		enc, err := delta.EncodeDelta(x)
		if err != nil {
			t.Fatalf("re-encoding an accepted delta: %v", err)
		}
		if len(enc) > delta.MaxEncodedSize {
			t.Fatal("re-encoding over the size cap")
		}
		y, err := delta.DecodeDelta(enc)
		if err != nil {
			t.Fatalf("decoding a re-encoded delta: %v", err)
		}
		if !y.Equal(x) {
			t.Fatal("re-encoded delta differs")
		}
		if enc2, _ := delta.EncodeDelta(y); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding not stable")
		}
		// Use it: join it twice into a replica with history, read, answer
		// a catch-up, mutate afterwards.
		d := newDoc(t, "fuzz")
		apply(t, d)(d.Set("/a", raw(`{"b":1}`)))
		d.Join(x)
		once := d.Clone()
		d.Join(x)
		if !d.Equal(once) {
			t.Fatal("join not idempotent")
		}
		_ = d.JSON()
		for _, p := range d.Paths() {
			if _, ok := d.Get(p); !ok {
				t.Fatalf("listed path %q has no value", p)
			}
			_ = d.Values(p)
		}
		_ = d.Ready(d.Clock(), x)
		_ = d.Seen(x)
		g := x.Clone()
		g.Join(d.DeltaSince(x.Context()))
		if _, err := delta.EncodeDelta(g); err != nil && !errors.Is(err, delta.ErrTooLarge) {
			t.Fatal(err)
		}
		_, _ = d.Apply(d.Set("/a/c", raw(`2`)))
		_, _ = d.Apply(d.Incr("/n", 1))
	})
}

func FuzzDecodeDoc(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := delta.DecodeDoc(b)
		if err != nil {
			checkRejected(t, err)
			return
		}
		enc, err := delta.EncodeDoc(d)
		if err != nil {
			t.Fatalf("re-encoding an accepted doc: %v", err)
		}
		e, err := delta.DecodeDoc(enc)
		if err != nil {
			t.Fatalf("decoding a re-encoded doc: %v", err)
		}
		if !e.Equal(d) || string(e.JSON()) != string(d.JSON()) {
			t.Fatal("re-encoded doc differs")
		}
		if enc2, _ := delta.EncodeDoc(e); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding not stable")
		}
		// Restore it as a replica and keep working.
		r := newDoc(t, "fuzz")
		r.JoinDoc(d)
		if !r.Equal(d) {
			t.Fatal("restored state differs")
		}
		_, _ = r.Apply(r.Set("/x", raw(`1`)))
		_, _ = r.Apply(r.Delete(""))
		other := newDoc(t, "other")
		other.Join(d.DeltaSince(other.Context()))
		if !other.Equal(d) {
			t.Fatal("DeltaSince from nothing differs from the state")
		}
	})
}

func FuzzDecodeSyncMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := delta.DecodeSyncMessage(b)
		if err != nil {
			checkRejected(t, err)
			return
		}
		if len(m.VectorClock) == 0 {
			t.Fatal("accepted a message with an empty vector clock")
		}
		enc, err := delta.EncodeSyncMessage(m)
		if err != nil {
			t.Fatalf("re-encoding an accepted message: %v", err)
		}
		m2, err := delta.DecodeSyncMessage(enc)
		if err != nil || !m2.Equal(m) {
			t.Fatalf("round trip: %v", err)
		}
		x, err := m.Delta()
		if err != nil {
			checkRejected(t, err)
			return
		}
		d := newDoc(t, "fuzz")
		_ = d.Ready(m.VectorClock, x)
		d.Join(x)
	})
}
