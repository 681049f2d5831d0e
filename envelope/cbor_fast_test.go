package envelope_test

import (
	"bytes"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
)

// Every envelope this package encodes takes the fast path, and DecodeCBOR
// (fast) and the strict decoder return the same envelope for it.
func TestCanonicalFastPathCoversEncoder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		b, err := envelope.EncodeCBOR(e)
		if err != nil {
			t.Skip("not encodable:", err)
		}
		if n, ok := envelope.DecodeCanonicalLen(b); !ok || n != len(b) {
			t.Fatalf("fast path stepped aside (%d of %d bytes, ok=%v) on %x", n, len(b), ok, b)
		}
		if msg := envelope.FastWireAgrees(b); msg != "" {
			t.Fatal(msg)
		}
		fast, err1 := envelope.DecodeCBOR(b)
		strict, err2 := envelope.DecodeCBORStrict(b)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(fast, strict) {
			t.Fatalf("fast %+v (%v), strict %+v (%v)", fast, err1, strict, err2)
		}
		// As a prefix of a longer input (a frame), with what follows ignored.
		pe, n, ok := envelope.DecodeCanonicalPrefix(append(b, 0x61, 'h'))
		if !ok || n != len(b) || !reflect.DeepEqual(pe, strict) {
			t.Fatalf("prefix: ok=%v n=%d of %d", ok, n, len(b))
		}
	})
}

// FuzzDecodeFast: on any input, where the fast path reads something the
// strict decoder must accept it and read the same, and DecodeCBOR must
// give exactly the strict decoder's envelope or error.
func FuzzDecodeFast(f *testing.F) {
	for _, e := range seedEnvelopes() {
		if b, err := envelope.EncodeCBOR(e); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if msg := envelope.FastWireAgrees(b); msg != "" {
			t.Fatalf("%s: %x", msg, b)
		}
		fast, err1 := envelope.DecodeCBOR(b)
		strict, err2 := envelope.DecodeCBORStrict(b)
		if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
			t.Fatalf("errors differ: fast %v, strict %v", err1, err2)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("envelopes differ: fast %+v, strict %+v", fast, strict)
		}
	})
}

// The canonical encoder must write exactly what the reflective encoder
// writes for the same envelope, valid or not, with every optional field
// present or absent and integers at every head size.
func TestCanonicalEncoderMatchesReflective(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := func(label string) string {
			return rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringN(20, 300, 300)).Draw(t, label)
		}
		num := rapid.OneOf(rapid.Int64Range(-30, 30), rapid.Int64(), rapid.Int64Range(250, 70000),
			rapid.Int64Range(1<<32-3, 1<<32+3), rapid.Int64Range(-70000, -250))
		e := &envelope.Envelope{
			ID: str("id"), SchemaVersion: int(num.Draw(t, "version")), Sender: str("sender"),
			Recipient: str("recipient"), CorrelationID: str("correlation"), Type: envelope.Type(str("type")),
			Timestamp: num.Draw(t, "timestamp"),
			Payload:   []byte(rapid.StringMatching(`"[a-z]{0,300}"|null|[0-9]{1,5}`).Draw(t, "payload")),
		}
		if rapid.Bool().Draw(t, "metadata") {
			e.Metadata = &envelope.Metadata{Tier: rapid.Uint8().Draw(t, "tier"), SandboxID: str("sandbox"),
				RoutingHint: str("hint"), EscalationJustification: str("justification")}
		}
		want, err := envelope.EncMode().Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := envelope.AppendCanonical(nil, e); !bytes.Equal(got, want) {
			t.Fatalf("canonical encoder\n got %x\nwant %x", got, want)
		}
	})
}
