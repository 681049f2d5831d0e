package protocol

import (
	"bytes"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
)

// checkEnvFrame: wherever decodeEnvFrame reads a frame, the strict decoder
// must accept it and read the same frame, and the envelope inside must be
// what DecodeCBOR gives.
func checkEnvFrame(t interface{ Fatalf(string, ...any) }, b []byte) {
	m, ok := decodeEnvFrame(b)
	if !ok {
		return
	}
	s, err := decodeMsgStrict(b)
	if err != nil {
		t.Fatalf("fast path read a frame the strict decoder refuses (%v): %x", err, b)
	}
	if s.Kind != m.Kind || s.Seq != m.Seq || s.Ch != m.Ch || s.Ack != m.Ack || !bytes.Equal(s.Env, m.Env) ||
		s.From != "" || s.To != "" || s.W != 0 || s.Cards != nil || s.Code != "" || s.Msg != "" {
		t.Fatalf("frames differ: fast %+v, strict %+v", m, s)
	}
	e, err := envelope.DecodeCBOR(s.Env)
	if err != nil || !reflect.DeepEqual(e, m.env) {
		t.Fatalf("envelopes differ: fast %+v, strict %+v (%v)", m.env, e, err)
	}
}

func genFrame(t *rapid.T) ([]byte, string, uint64, bool) {
	f := envelope.NewFactory()
	payload := rapid.SampledFrom([]any{nil, "x", 42, map[string]any{"a": []any{1, "b", nil}}, rapid.String().Draw(t, "s")}).Draw(t, "payload")
	env, err := f.New(rapid.StringMatching(`[a-z]{1,8}@[A-Za-z0-9]{1,60}`).Draw(t, "from"),
		rapid.StringMatching(`[a-z]{1,8}(@[A-Za-z0-9]{1,60})?`).Draw(t, "to"),
		rapid.SampledFrom(envelope.Types()).Draw(t, "type"), payload)
	if err != nil {
		t.Skip(err)
	}
	if rapid.Bool().Draw(t, "thread") {
		env.CorrelationID = envelope.NewID()
	}
	if rapid.Bool().Draw(t, "metadata") {
		env.Metadata = &envelope.Metadata{Tier: rapid.Uint8Range(0, 3).Draw(t, "tier"),
			SandboxID: rapid.StringMatching(`([a-z]{1,20})?`).Draw(t, "sandbox")}
		if rapid.Bool().Draw(t, "justified") {
			env.Metadata.EscalationJustification = rapid.String().Draw(t, "why")
		}
	}
	raw, err := envelope.EncodeCBOR(env)
	if err != nil {
		t.Skip(err)
	}
	ch := rapid.StringMatching(`[0-9a-f]{1,64}`).Draw(t, "ch")
	seq := rapid.OneOf(rapid.Uint64Range(1, 30), rapid.Uint64Range(1, 1<<40)).Draw(t, "seq")
	ack := rapid.Bool().Draw(t, "ack")
	return appendEnvFrame(nil, ch, seq, raw, ack), ch, seq, ack
}

// Every frame this node writes takes the fast path.
func TestEnvFrameFastPathCoversEncoder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, ch, seq, ack := genFrame(t)
		m, ok := decodeEnvFrame(b)
		if !ok {
			t.Fatalf("fast path stepped aside on %x", b)
		}
		if m.Ch != ch || m.Seq != seq || m.Ack != ack || m.env == nil {
			t.Fatalf("read %+v", m)
		}
		checkEnvFrame(t, b)
	})
}

// FuzzDecodeEnvFrame runs checkEnvFrame on any input (see decodeEnvFrame).
func FuzzDecodeEnvFrame(f *testing.F) {
	raw, _ := envelope.EncodeCBOR(&envelope.Envelope{ID: "e1", SchemaVersion: 1, Sender: "a@x", Recipient: "b@y",
		Type: envelope.TypeRequest, Timestamp: 1, Payload: []byte(`{"k":[1,"v"]}`), CorrelationID: "t1",
		Metadata: &envelope.Metadata{Tier: 2, SandboxID: "s"}})
	f.Add(appendEnvFrame(nil, "0123456789abcdef0123456789abcdef", 1, raw, false))
	f.Add(appendEnvFrame(nil, "c", 1<<33, raw, true))
	f.Fuzz(func(t *testing.T, b []byte) { checkEnvFrame(t, b) })
}
