package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/envelope"
)

// codec is one of the two codecs, for tests that run against both.
type codec struct {
	name   string
	encode func(*envelope.Envelope) ([]byte, error)
	decode func([]byte) (*envelope.Envelope, error)
	// raw encodes an arbitrary map the way a (possibly hostile) peer might.
	raw func(t *testing.T, v any) []byte
}

var codecs = []codec{
	{"cbor", envelope.EncodeCBOR, envelope.DecodeCBOR, func(t *testing.T, v any) []byte {
		t.Helper()
		b, err := envelope.EncMode().Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
	{"json", envelope.EncodeJSON, envelope.DecodeJSON, func(t *testing.T, v any) []byte {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
}

// rawMap returns valid() as a map, the payload in the codec's form.
func rawMap(c codec) map[string]any {
	e := valid()
	var payload any = json.RawMessage(e.Payload)
	if c.name == "cbor" {
		payload = []byte(e.Payload)
	}
	return map[string]any{
		"id": e.ID, "schemaVersion": e.SchemaVersion, "sender": e.Sender, "recipient": e.Recipient,
		"correlationId": e.CorrelationID, "type": string(e.Type), "timestamp": e.Timestamp,
		"payload": payload,
		"metadata": map[string]any{
			"tier": e.Metadata.Tier, "sandboxId": e.Metadata.SandboxID,
			"routingHint": e.Metadata.RoutingHint, "escalationJustification": e.Metadata.EscalationJustification,
		},
	}
}

func TestRoundTrip(t *testing.T) {
	cases := map[string]*envelope.Envelope{"full": valid()}
	min := valid()
	min.CorrelationID, min.Metadata, min.Payload = "", nil, nil
	cases["minimal"] = min
	zero := valid()
	zero.Metadata = &envelope.Metadata{}
	cases["zero metadata"] = zero
	bcast := valid()
	bcast.Recipient = envelope.Broadcast
	bcast.Payload = json.RawMessage(`"<script>&\u2028 é"`)
	cases["broadcast, escapes"] = bcast
	for _, c := range codecs {
		for name, e := range cases {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				b, err := c.encode(e)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.decode(b)
				if err != nil {
					t.Fatal(err)
				}
				if want := normalized(e); !reflect.DeepEqual(got, want) {
					t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
				}
			})
		}
	}
}

func TestEncodersCompactPayload(t *testing.T) {
	e := valid()
	e.Payload = json.RawMessage(" {\n  \"a\" : [1, 2],\t\"b\": \" x \" }\n")
	for _, c := range codecs {
		b, err := c.encode(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Payload) != `{"a":[1,2],"b":" x "}` {
			t.Errorf("%s: payload %s", c.name, got.Payload)
		}
	}
	if string(e.Payload[0]) != " " {
		t.Error("encoder modified its argument")
	}
}

func TestEncodersRefuseInvalid(t *testing.T) {
	e := valid()
	e.Sender = ""
	for _, c := range codecs {
		if _, err := c.encode(e); !errors.Is(err, envelope.ErrInvalid) {
			t.Errorf("%s: encode invalid = %v", c.name, err)
		}
		if _, err := c.encode(nil); !errors.Is(err, envelope.ErrInvalid) {
			t.Errorf("%s: encode nil = %v", c.name, err)
		}
	}
}

func TestJSONFieldNames(t *testing.T) {
	b, err := envelope.EncodeJSON(valid())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"0123456789abcdef0123456789abcdef","schemaVersion":1,` +
		`"sender":"mars@12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN","recipient":"venus",` +
		`"correlationId":"thread-1","type":"request","timestamp":1767225600000,` +
		`"payload":{"task":"map the craters","n":3},"metadata":{"tier":2,"sandboxId":"sandbox-a",` +
		`"routingHint":"capability","escalationJustification":"needs the orchestrator:\n\tcraters overlap"}}`
	if string(b) != want {
		t.Fatalf("EncodeJSON:\n got %s\nwant %s", b, want)
	}
	// The struct tags say the same as the hand-written encoder.
	std, err := json.Marshal(valid())
	if err != nil {
		t.Fatal(err)
	}
	if string(std) != want {
		t.Fatalf("json.Marshal:\n got %s\nwant %s", std, want)
	}
}

func TestCBORWireLayout(t *testing.T) {
	e := valid()
	b, err := envelope.EncodeCBOR(e)
	if err != nil {
		t.Fatal(err)
	}
	// A generic decoder sees a map with the JSON names and a byte-string payload.
	var m map[string]any
	if err := cbor.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "schemaVersion", "sender", "recipient", "correlationId", "type", "timestamp", "payload", "metadata"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing key %q", k)
		}
	}
	if p, ok := m["payload"].([]byte); !ok || !bytes.Equal(p, e.Payload) {
		t.Errorf("payload on the wire = %#v", m["payload"])
	}
	// Deterministic: the same envelope, built differently, gives the same bytes.
	b2, err := envelope.EncMode().Marshal(e)
	if err != nil || !bytes.Equal(b, b2) {
		t.Errorf("EncMode().Marshal differs from EncodeCBOR")
	}
	// Core deterministic order: shorter keys first.
	if !bytes.HasPrefix(b, []byte{0xa9, 0x62, 'i', 'd'}) {
		t.Errorf("unexpected head % x", b[:4])
	}
}

func TestDecodeSchemaVersionMismatch(t *testing.T) {
	for _, c := range codecs {
		// math.MinInt is the value DecodeCBOR presets to detect an absent version.
		for _, v := range []int{0, 2, 7, -3, 1 << 40, math.MinInt, math.MaxInt} {
			m := rawMap(c)
			m["schemaVersion"] = v
			b := c.raw(t, m)
			_, err := c.decode(b)
			var sv *envelope.SchemaVersionError
			if !errors.As(err, &sv) {
				t.Fatalf("%s v%d: got %v, want *SchemaVersionError", c.name, v, err)
			}
			if sv.Expected != 1 || sv.Actual != v {
				t.Errorf("%s: got %+v", c.name, sv)
			}
			if !errors.Is(err, envelope.ErrSchemaVersionMismatch) {
				t.Errorf("%s: errors.Is failed", c.name)
			}
			msg := err.Error()
			if !strings.Contains(msg, "expected 1") || !strings.Contains(msg, "got ") {
				t.Errorf("%s: message %q hides the versions", c.name, msg)
			}
			checkMessage(t, err, envelope.CodeSchemaVersionMismatch)
		}
	}
}

// A null or absent schemaVersion is missing, not a version.
func TestDecodeSchemaVersionMissing(t *testing.T) {
	for _, c := range codecs {
		for name, set := range map[string]func(m map[string]any){
			"null":   func(m map[string]any) { m["schemaVersion"] = nil },
			"absent": func(m map[string]any) { delete(m, "schemaVersion") },
		} {
			m := rawMap(c)
			set(m)
			_, err := c.decode(c.raw(t, m))
			var ie *envelope.InvalidError
			if !errors.As(err, &ie) || ie.Field != "schemaVersion" || ie.Reason != "missing" {
				t.Errorf("%s, %s: got %v, want schemaVersion missing", c.name, name, err)
			}
		}
	}
}

func TestDecodeSchemaVersionBeforeLayout(t *testing.T) {
	// A future version may change the layout; the version error still wins.
	for _, c := range codecs {
		m := rawMap(c)
		m["schemaVersion"] = 2
		m["id"] = 12345               // now a number
		m["payload"] = []int{1, 2, 3} // now an array
		delete(m, "sender")
		_, err := c.decode(c.raw(t, m))
		var sv *envelope.SchemaVersionError
		if !errors.As(err, &sv) || sv.Actual != 2 {
			t.Errorf("%s: got %v, want version mismatch", c.name, err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	type tc struct {
		name  string
		input func(t *testing.T, c codec) []byte
		field string
	}
	mod := func(f func(m map[string]any)) func(*testing.T, codec) []byte {
		return func(t *testing.T, c codec) []byte {
			m := rawMap(c)
			f(m)
			return c.raw(t, m)
		}
	}
	tests := []tc{
		{"missing schemaVersion", mod(func(m map[string]any) { delete(m, "schemaVersion") }), "schemaVersion"},
		{"missing id", mod(func(m map[string]any) { delete(m, "id") }), "id"},
		{"missing sender", mod(func(m map[string]any) { delete(m, "sender") }), "sender"},
		{"missing type", mod(func(m map[string]any) { delete(m, "type") }), "type"},
		{"missing timestamp", mod(func(m map[string]any) { delete(m, "timestamp") }), "timestamp"},
		{"unknown type", mod(func(m map[string]any) { m["type"] = "gossip" }), "type"},
		{"missing tier", mod(func(m map[string]any) { delete(m["metadata"].(map[string]any), "tier") }), "metadata.tier"},
		{"tier 4", mod(func(m map[string]any) { m["metadata"].(map[string]any)["tier"] = 4 }), "metadata.tier"},
		{"case variant key", mod(func(m map[string]any) { m["ID"] = m["id"]; delete(m, "id") }), "id"},
		{"not a map", func(t *testing.T, c codec) []byte { return c.raw(t, []int{1, 2}) }, ""},
		{"empty", func(t *testing.T, c codec) []byte { return nil }, ""},
		{"oversized", func(t *testing.T, c codec) []byte {
			return bytes.Repeat([]byte{' '}, envelope.MaxEncodedSize+1)
		}, ""},
		{"trailing data", func(t *testing.T, c codec) []byte {
			b := c.raw(t, rawMap(c))
			return append(b, b...)
		}, ""},
	}
	for _, c := range codecs {
		for _, tt := range tests {
			t.Run(c.name+"/"+tt.name, func(t *testing.T) {
				e, err := c.decode(tt.input(t, c))
				if e != nil {
					t.Fatalf("decoded %+v", e)
				}
				var ie *envelope.InvalidError
				if !errors.As(err, &ie) {
					t.Fatalf("got %v, want *InvalidError", err)
				}
				if ie.Field != tt.field {
					t.Errorf("Field = %q, want %q (%v)", ie.Field, tt.field, err)
				}
				checkMessage(t, err, envelope.CodeInvalidEnvelope)
			})
		}
	}
}

func TestDecodeIgnoresUnknownFields(t *testing.T) {
	for _, c := range codecs {
		m := rawMap(c)
		m["priority"] = map[string]any{"level": []any{1, "two", nil}}
		m["metadata"].(map[string]any)["region"] = "eu"
		got, err := c.decode(c.raw(t, m))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, valid()) {
			t.Errorf("%s: got %+v", c.name, got)
		}
	}
}

func TestDecodeNullMetadataAndPayload(t *testing.T) {
	for _, c := range codecs {
		m := rawMap(c)
		m["metadata"] = nil
		m["payload"] = nil
		got, err := c.decode(c.raw(t, m))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Metadata != nil || string(got.Payload) != "null" {
			t.Errorf("%s: got metadata %v payload %q", c.name, got.Metadata, got.Payload)
		}
		delete(m, "payload")
		got, err = c.decode(c.raw(t, m))
		if err != nil || string(got.Payload) != "null" {
			t.Errorf("%s: missing payload: %v %q", c.name, err, got.Payload)
		}
	}
}

func TestDecodeOversizedBeforeWork(t *testing.T) {
	// Garbage that any decoder would choke on: the size check must come first.
	b := bytes.Repeat([]byte{0xff}, envelope.MaxEncodedSize+1)
	for _, c := range codecs {
		_, err := c.decode(b)
		var ie *envelope.InvalidError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "over the 1048576-byte limit") {
			t.Errorf("%s: got %v", c.name, err)
		}
		if errors.Unwrap(err) != nil {
			t.Errorf("%s: a decoder ran: %v", c.name, errors.Unwrap(err))
		}
	}
	// Exactly at the limit is not rejected for its size.
	b = b[:envelope.MaxEncodedSize]
	for _, c := range codecs {
		if _, err := c.decode(b); err == nil || strings.Contains(err.Error(), "byte limit") {
			t.Errorf("%s: at the limit: %v", c.name, err)
		}
	}
}

func TestDecodeCBORHostile(t *testing.T) {
	valid := func(t *testing.T) []byte {
		b, err := envelope.EncodeCBOR(valid())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	nest := func(n int) []byte { // n nested one-element arrays around 0
		return append(bytes.Repeat([]byte{0x81}, n), 0x00)
	}
	withExtra := func(t *testing.T, key string, val []byte) []byte {
		// Append one pair to the top-level map (header a9 -> aa).
		b := valid(t)
		if b[0] != 0xa9 {
			t.Fatalf("head %x", b[0])
		}
		b[0] = 0xaa
		k, _ := cbor.Marshal(key)
		return append(append(b, k...), val...)
	}
	tests := []struct {
		name  string
		input func(t *testing.T) []byte
	}{
		{"deep nesting in unknown field", func(t *testing.T) []byte { return withExtra(t, "x", nest(20)) }},
		{"very deep nesting", func(t *testing.T) []byte { return nest(100000) }},
		{"duplicate key", func(t *testing.T) []byte {
			v, _ := cbor.Marshal("venus")
			return withExtra(t, "sender", v)
		}},
		{"indefinite-length map", func(t *testing.T) []byte {
			b := valid(t)
			b[0] = 0xbf // indefinite map
			return append(b, 0xff)
		}},
		{"tagged value", func(t *testing.T) []byte { return withExtra(t, "x", []byte{0xc1, 0x00}) }},
		{"bignum", func(t *testing.T) []byte { return withExtra(t, "x", []byte{0xc2, 0x41, 0x01}) }},
		{"huge array header", func(t *testing.T) []byte {
			return withExtra(t, "x", []byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		}},
		{"huge byte string header", func(t *testing.T) []byte {
			return withExtra(t, "x", []byte{0x5b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		}},
		{"too many array elements", func(t *testing.T) []byte {
			arr := append([]byte{0x99, 0x10, 0x01}, bytes.Repeat([]byte{0x00}, 4097)...)
			return withExtra(t, "x", arr)
		}},
		{"invalid utf-8 text", func(t *testing.T) []byte {
			m := rawMap(codecs[0])
			m["sender"] = "mars\xc3("
			return codecs[0].raw(t, m)
		}},
		{"truncated", func(t *testing.T) []byte { b := valid(t); return b[:len(b)-1] }},
		{"text-string payload", func(t *testing.T) []byte {
			m := rawMap(codecs[0])
			m["payload"] = "{}"
			return codecs[0].raw(t, m)
		}},
		{"payload not json", func(t *testing.T) []byte {
			m := rawMap(codecs[0])
			m["payload"] = []byte("{")
			return codecs[0].raw(t, m)
		}},
		{"timestamp overflow", func(t *testing.T) []byte {
			m := rawMap(codecs[0])
			m["timestamp"] = uint64(1 << 63)
			return codecs[0].raw(t, m)
		}},
		{"schemaVersion overflow", func(t *testing.T) []byte {
			m := rawMap(codecs[0])
			m["schemaVersion"] = uint64(1 << 63)
			return codecs[0].raw(t, m)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := envelope.DecodeCBOR(tt.input(t))
			if e != nil || !errors.Is(err, envelope.ErrInvalid) {
				t.Fatalf("DecodeCBOR = %v, %v; want ErrInvalid", e, err)
			}
			t.Log(err)
			checkMessage(t, err, envelope.CodeInvalidEnvelope)
		})
	}
}

func TestDecodeJSONHostile(t *testing.T) {
	good, err := envelope.EncodeJSON(valid())
	if err != nil {
		t.Fatal(err)
	}
	body := string(good[1 : len(good)-1]) // members without braces
	tests := map[string]string{
		"deep nesting in unknown field": `{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `,` + body + `}`,
		"very deep nesting":             strings.Repeat("[", 200000),
		"deep payload":                  `{"payload":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `,` + strings.Replace(body, `"payload"`, `"p"`, 1) + `}`,
		"duplicate key":                 `{` + body + `,"sender":"venus"}`,
		"duplicate escaped key":         `{` + body + `,"send\u0065r":"venus"}`,
		"duplicate metadata key":        strings.Replace(string(good), `{"tier":2`, `{"tier":2,"tier":0`, 1),
		"case variant key":              strings.Replace(string(good), `"id"`, `"ID"`, 1),
		"invalid utf-8":                 `{` + body + `,"x":"` + "\xff" + `"}`,
		"truncated":                     string(good[:len(good)-1]),
		"trailing garbage":              string(good) + `x`,
		"two objects":                   string(good) + string(good),
		"not an object":                 `"envelope"`,
		"null":                          `null`,
		"empty":                         ``,
		"number as string":              strings.Replace(string(good), `"timestamp":1767225600000`, `"timestamp":"1767225600000"`, 1),
		"float timestamp":               strings.Replace(string(good), `"timestamp":1767225600000`, `"timestamp":1.5`, 1),
		"float schemaVersion":           strings.Replace(string(good), `"schemaVersion":1`, `"schemaVersion":1.0`, 1),
		"null schemaVersion":            strings.Replace(string(good), `"schemaVersion":1`, `"schemaVersion":null`, 1),
		"metadata not an object":        string(good[:bytes.Index(good, []byte(`,"metadata":`))]) + `,"metadata":[1]}`,
		"tier overflow":                 strings.Replace(string(good), `"tier":2`, `"tier":258`, 1),
		"negative tier":                 strings.Replace(string(good), `"tier":2`, `"tier":-1`, 1),
		"too many members":              `{` + body + manyMembers(5000) + `}`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			e, err := envelope.DecodeJSON([]byte(in))
			if e != nil || !errors.Is(err, envelope.ErrInvalid) {
				t.Fatalf("DecodeJSON = %v, %v; want ErrInvalid", e, err)
			}
			t.Log(err)
			checkMessage(t, err, envelope.CodeInvalidEnvelope)
		})
	}
}

func manyMembers(n int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `,"k%d":0`, i)
	}
	return sb.String()
}

func TestDecodeJSONAcceptsEquivalentForms(t *testing.T) {
	good, err := envelope.EncodeJSON(valid())
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, good, "", "  "); err != nil {
		t.Fatal(err)
	}
	escaped := strings.Replace(string(good), `"sender"`, `"\u0073ender"`, 1)
	for name, in := range map[string]string{"indented": pretty.String(), "escaped key": escaped} {
		got, err := envelope.DecodeJSON([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, valid()) {
			t.Errorf("%s: got %+v", name, got)
		}
	}
}

func TestDecModeLimits(t *testing.T) {
	dm := envelope.DecMode()
	opts := dm.DecOptions()
	if opts.MaxNestedLevels != 16 || opts.MaxArrayElements != 4096 || opts.MaxMapPairs != 4096 ||
		opts.DupMapKey != cbor.DupMapKeyEnforcedAPF || opts.IndefLength != cbor.IndefLengthForbidden {
		t.Fatalf("DecOptions = %+v", opts)
	}
	var v any
	if err := dm.Unmarshal(append(bytes.Repeat([]byte{0x81}, 17), 0), &v); err == nil {
		t.Error("17 levels accepted")
	}
	if err := dm.Unmarshal(append(bytes.Repeat([]byte{0x81}, 15), 0), &v); err != nil {
		t.Errorf("15 levels rejected: %v", err)
	}
	if envelope.EncMode().EncOptions().Sort != cbor.SortCoreDeterministic {
		t.Error("EncMode is not core deterministic")
	}
}

func TestDecodePayloadSizeLimit(t *testing.T) {
	for _, c := range codecs {
		// Compact and one byte over: rejected, although the input fits.
		over := `"` + strings.Repeat("p", envelope.MaxPayloadSize-1) + `"`
		m := rawMap(c)
		delete(m, "metadata")
		if c.name == "cbor" {
			m["payload"] = []byte(over)
		} else {
			m["payload"] = json.RawMessage(over)
		}
		_, err := c.decode(c.raw(t, m))
		var ie *envelope.InvalidError
		if !errors.As(err, &ie) || ie.Field != "payload" {
			t.Errorf("%s: oversized payload: %v", c.name, err)
		}
		// Over as written, within the limit once compacted: accepted.
		n := envelope.MaxPayloadSize / 4
		spaced := "[" + strings.Repeat("1 , ", n) + "1]"
		if c.name == "cbor" {
			m["payload"] = []byte(spaced)
		} else {
			m["payload"] = json.RawMessage(spaced)
		}
		b := c.raw(t, m)
		if c.name == "json" {
			// encoding/json compacts RawMessage itself; put the spaces back.
			b = bytes.Replace(b, []byte(strings.Repeat("1,", n)+"1"), []byte(strings.Repeat("1 , ", n)+"1"), 1)
		}
		got, err := c.decode(b)
		if err != nil {
			t.Fatalf("%s: spaced payload: %v", c.name, err)
		}
		if want := "[" + strings.Repeat("1,", n) + "1]"; string(got.Payload) != want {
			t.Errorf("%s: payload not compacted", c.name)
		}
	}
}
