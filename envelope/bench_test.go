package envelope_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

// benchEnvelope is a typical envelope with a 256-byte JSON payload.
func benchEnvelope(b *testing.B) *envelope.Envelope {
	e := valid()
	e.Payload = json.RawMessage(`{"data":"` + strings.Repeat("x", 256-len(`{"data":""}`)) + `"}`)
	if len(e.Payload) != 256 {
		b.Fatalf("payload is %d bytes", len(e.Payload))
	}
	return e
}

func BenchmarkEncodeCBOR(b *testing.B) {
	e := benchEnvelope(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.EncodeCBOR(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeCBORValidated(b *testing.B) {
	e := benchEnvelope(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.EncodeCBORValidated(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateHeader(b *testing.B) {
	e := benchEnvelope(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.ValidateHeader(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCBOR(b *testing.B) {
	data, err := envelope.EncodeCBOR(benchEnvelope(b))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.DecodeCBOR(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeJSON(b *testing.B) {
	e := benchEnvelope(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.EncodeJSON(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeJSON(b *testing.B) {
	data, err := envelope.EncodeJSON(benchEnvelope(b))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.DecodeJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	e := benchEnvelope(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = envelope.NewID()
	}
}

// benchPayload is a struct that encodes to 256 bytes of JSON.
type benchPayload struct {
	Data string `json:"data"`
}

func BenchmarkFactoryNew(b *testing.B) {
	f := envelope.NewFactory()
	p := benchPayload{Data: strings.Repeat("x", 256-len(`{"data":""}`))}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.New("mars", "venus", envelope.TypeRequest, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFactoryReplyAsRaw(b *testing.B) {
	f := envelope.NewFactory()
	to := benchEnvelope(b)
	raw := to.Payload // a 256-byte json.RawMessage
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.ReplyAs("venus", to, envelope.TypeResponse, raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOneWayEnvelope is the per-envelope work of protocol's
// BenchmarkOneWay/codec-floor, each step alone on one goroutine: building
// a notification with a 256-byte raw JSON payload (as Node.NewEnvelope
// does), encoding it into a reused buffer, and decoding it with every check.
func BenchmarkOneWayEnvelope(b *testing.B) {
	f := envelope.NewFactory()
	payload := []byte(`"` + strings.Repeat("x", 254) + `"`)
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.New("a0", "sink", envelope.TypeNotification, payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	e, err := f.New("a0", "sink", envelope.TypeNotification, payload)
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = envelope.AppendCBORValidated(buf[:0], e); err != nil {
				b.Fatal(err)
			}
		}
	})
	if buf, err = envelope.AppendCBORValidated(buf[:0], e); err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := envelope.DecodeCanonicalPrefix(buf); !ok {
				b.Fatal("the encoded envelope does not decode")
			}
		}
	})
}
