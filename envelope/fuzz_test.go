package envelope_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

// Seed corpora live in testdata/fuzz/<Target>/ (see corpus_test.go); the
// valid encodings below are added as well, so a fresh checkout fuzzes from
// good inputs even if testdata is pruned.

func FuzzDecodeCBOR(f *testing.F) {
	for _, e := range seedEnvelopes() {
		b, err := envelope.EncodeCBOR(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := envelope.DecodeCBOR(b)
		checkDecoded(t, e, err)
	})
}

func FuzzDecodeJSON(f *testing.F) {
	for _, e := range seedEnvelopes() {
		b, err := envelope.EncodeJSON(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := envelope.DecodeJSON(b)
		checkDecoded(t, e, err)
	})
}

// checkDecoded checks the invariants of a decoder's result: a coded error
// matching exactly one sentinel, or a valid envelope that round-trips
// through both codecs within the size limit, deterministically.
func checkDecoded(t *testing.T, e *envelope.Envelope, err error) {
	t.Helper()
	if err != nil {
		if e != nil {
			t.Fatalf("envelope and error: %v", err)
		}
		var coded interface{ Code() string }
		if !errors.As(err, &coded) {
			t.Fatalf("error without Code(): %v", err)
		}
		if errors.Is(err, envelope.ErrInvalid) == errors.Is(err, envelope.ErrSchemaVersionMismatch) {
			t.Fatalf("error matches no sentinel or both: %v", err)
		}
		return
	}
	if e.Payload == nil {
		t.Fatal("nil payload")
	}
	if err := e.Validate(); err != nil {
		t.Fatalf("decoded envelope is invalid: %v", err)
	}
	for _, c := range codecs {
		b, err := c.encode(e)
		if err != nil {
			t.Fatalf("%s: re-encode: %v", c.name, err)
		}
		if len(b) > envelope.MaxEncodedSize {
			t.Fatalf("%s: re-encoded to %d bytes", c.name, len(b))
		}
		e2, err := c.decode(b)
		if err != nil {
			t.Fatalf("%s: decode re-encoding: %v", c.name, err)
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("%s: round trip:\n got %+v\nwant %+v", c.name, e2, e)
		}
		b2, err := c.encode(e2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("%s: encoding not stable: %v", c.name, err)
		}
	}
}

// seedEnvelopes are valid envelopes covering the optional parts.
func seedEnvelopes() map[string]*envelope.Envelope {
	full := valid()
	minimal := valid()
	minimal.CorrelationID, minimal.Metadata, minimal.Payload = "", nil, nil
	bcast := valid()
	bcast.Recipient = envelope.Broadcast
	bcast.Sender = "Jupiter ♃ \"quoted\" \\ agent"
	bcast.Payload = []byte(`["<&>","\u2028",{"nested":{"deeper":[1.5e300,-0,true,null]}}]`)
	zero := valid()
	zero.Metadata = &envelope.Metadata{}
	zero.Type = envelope.TypeStreamData
	zero.Payload = []byte(`"` + string(bytes.Repeat([]byte("x"), 300)) + `"`)
	return map[string]*envelope.Envelope{"full": full, "minimal": minimal, "broadcast": bcast, "zero-metadata": zero}
}
