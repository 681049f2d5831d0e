package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
)

func TestValidateHeaderSchemaVersionAndNil(t *testing.T) {
	e := valid()
	e.SchemaVersion = 2
	e.ID = "" // also invalid: the version must win, as in Validate
	if err := e.ValidateHeader(); !errors.Is(err, envelope.ErrSchemaVersionMismatch) {
		t.Errorf("ValidateHeader() = %v, want a schema version mismatch", err)
	}
	var nilEnv *envelope.Envelope
	if err := nilEnv.ValidateHeader(); !errors.Is(err, envelope.ErrInvalid) {
		t.Errorf("nil.ValidateHeader() = %v", err)
	}
	if _, err := envelope.EncodeCBORValidated(nil); !errors.Is(err, envelope.ErrInvalid) {
		t.Errorf("EncodeCBORValidated(nil) = %v", err)
	}
	if b, err := envelope.AppendCBORValidated([]byte("x"), nil); !errors.Is(err, envelope.ErrInvalid) || string(b) != "x" {
		t.Errorf("AppendCBORValidated(x, nil) = %q, %v", b, err)
	}
}

// EncodeCBORValidated refuses every header that EncodeCBOR refuses, with
// the same error.
func TestEncodeCBORValidatedChecksHeader(t *testing.T) {
	for name, mutate := range map[string]func(e *envelope.Envelope){
		"id":            func(e *envelope.Envelope) { e.ID = "a b" },
		"sender":        func(e *envelope.Envelope) { e.Sender = "" },
		"recipient":     func(e *envelope.Envelope) { e.Recipient = "\x00" },
		"correlationId": func(e *envelope.Envelope) { e.CorrelationID = "\xff" },
		"type":          func(e *envelope.Envelope) { e.Type = "gossip" },
		"timestamp":     func(e *envelope.Envelope) { e.Timestamp = 0 },
		"metadata.tier": func(e *envelope.Envelope) { e.Metadata.Tier = 9 },
	} {
		e := valid()
		mutate(e)
		_, want := envelope.EncodeCBOR(e)
		_, err := envelope.EncodeCBORValidated(e)
		var ie *envelope.InvalidError
		if !errors.As(err, &ie) || ie.Field != name || want == nil || err.Error() != want.Error() {
			t.Errorf("%s: EncodeCBORValidated = %v, EncodeCBOR = %v", name, err, want)
		}
	}
}

// For a normalized envelope EncodeCBORValidated writes EncodeCBOR's bytes,
// which decode to an equal envelope; so do envelopes from the Factory and
// the decoders.
func TestEncodeCBORValidatedRoundTrip(t *testing.T) {
	f := envelope.NewFactory()
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		if rapid.Bool().Draw(t, "spaced") && len(e.Payload) > 0 {
			var buf bytes.Buffer
			if err := json.Indent(&buf, e.Payload, " ", "  "); err != nil {
				t.Fatal(err)
			}
			e.Payload = buf.Bytes()
		}
		want := e.Clone()
		if err := e.Normalize(); err != nil {
			t.Fatalf("Normalize: %v", err)
		}
		if err := e.ValidateHeader(); err != nil {
			t.Fatalf("ValidateHeader: %v", err)
		}
		b, err := envelope.EncodeCBORValidated(e)
		if err != nil {
			t.Fatal(err)
		}
		if b2, err := envelope.EncodeCBOR(want); err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("EncodeCBOR gives other bytes (%v)", err)
		}
		// Appended to a buffer in use, of any capacity: its bytes follow
		// what the buffer held, which stays.
		prefix := []byte(rapid.StringN(0, 8, -1).Draw(t, "prefix"))
		dst := append(make([]byte, 0, rapid.IntRange(0, 2*len(b)).Draw(t, "cap")+len(prefix)), prefix...)
		if got, err := envelope.AppendCBORValidated(dst, e); err != nil || !bytes.Equal(got, append(prefix, b...)) {
			t.Fatalf("AppendCBORValidated: %v, bytes differ: %v", err, !bytes.Equal(got, append(prefix, b...)))
		}
		d, err := envelope.DecodeCBOR(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d, e) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", d, e)
		}
		// A decoded envelope may be forwarded as it is.
		if b3, err := envelope.EncodeCBORValidated(d); err != nil || !bytes.Equal(b, b3) {
			t.Fatalf("re-encoding the decoded envelope differs (%v)", err)
		}
		// So may a Factory's.
		r, err := f.ReplyAs("venus", e, envelope.TypeResponse, json.RawMessage(want.Payload))
		if err != nil {
			t.Fatal(err)
		}
		rb, err := envelope.EncodeCBORValidated(r)
		if err != nil {
			t.Fatal(err)
		}
		if rd, err := envelope.DecodeCBOR(rb); err != nil || !reflect.DeepEqual(rd, r) {
			t.Fatalf("factory envelope: got %+v, %v; want %+v", rd, err, r)
		}
	})
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"":                `null`,
		`{"a":1}`:         `{"a":1}`,
		" [ 1 ,\n2 ] ":    `[1,2]`,
		`{"a b" : "c d"}`: `{"a b":"c d"}`,
	} {
		e := valid()
		old := []byte(in)
		e.Payload = old
		if err := e.Normalize(); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if string(e.Payload) != want {
			t.Errorf("%q: payload %s, want %s", in, e.Payload, want)
		}
		if string(old) != in {
			t.Errorf("%q: Normalize wrote to the old payload: %q", in, old)
		}
	}
	e := valid()
	e.Payload = nil
	if err := e.Normalize(); err != nil || string(e.Payload) != "null" {
		t.Errorf("nil payload: %s, %v", e.Payload, err)
	}
	// An invalid envelope is left as it is.
	for _, mutate := range []func(e *envelope.Envelope){
		func(e *envelope.Envelope) { e.Payload = json.RawMessage(" [1, ") },
		func(e *envelope.Envelope) { e.Payload = json.RawMessage(" [1] "); e.Sender = "" },
	} {
		e := valid()
		mutate(e)
		before := e.Clone()
		if err := e.Normalize(); !errors.Is(err, envelope.ErrInvalid) {
			t.Errorf("Normalize() = %v", err)
		}
		if !reflect.DeepEqual(e, before) {
			t.Errorf("invalid envelope changed: %+v", e)
		}
	}
}
