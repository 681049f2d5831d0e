package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf16"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
)

// Feature: a2a-mcp-protocols. Each seed property is one rapid.Check with
// rapid's default of 100 cases.

// Generators of valid parts.

var idRunes = func() []rune {
	var rs []rune
	for r := rune(0x21); r <= 0x7e; r++ {
		rs = append(rs, r)
	}
	return rs
}()

func genID() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringOfN(rapid.RuneFrom(idRunes), 1, envelope.MaxIDLen, envelope.MaxIDLen),
		rapid.StringMatching(`[0-9a-f]{32}`), // NewID's shape
	)
}

// textRune is any rune but a control character.
var textRune = rapid.Rune().Filter(func(r rune) bool { return !unicode.IsControl(r) })

func genAgent() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.SampledFrom([]string{"sun", "mercury", "venus", "earth", "mars", "jupiter", "saturn"}),
		rapid.StringMatching(`[a-z]{1,12}@12D3KooW[1-9A-HJ-NP-Za-km-z]{44}`),
		rapid.StringOfN(textRune, 1, 64, envelope.MaxAgentLen),
	)
}

func genRecipient() *rapid.Generator[string] {
	return rapid.OneOf(genAgent(), rapid.Just(envelope.Broadcast))
}

// genJSON generates JSON-able values nested at most depth levels.
func genJSON(depth int) *rapid.Generator[any] {
	leaf := rapid.OneOf(
		rapid.Just[any](nil),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.Int64(), func(n int64) any { return n }),
		rapid.Map(rapid.Float64Range(-1e300, 1e300), func(f float64) any { return f }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
	)
	if depth == 0 {
		return leaf
	}
	inner := rapid.Deferred(func() *rapid.Generator[any] { return genJSON(depth - 1) })
	return rapid.OneOf(
		leaf,
		rapid.Map(rapid.SliceOfN(inner, 0, 4), func(s []any) any { return s }),
		rapid.Map(rapid.MapOfN(rapid.String(), inner, 0, 4), func(m map[string]any) any { return m }),
	)
}

// genPayload generates a compact JSON payload, or nil (null).
func genPayload() *rapid.Generator[json.RawMessage] {
	return rapid.OneOf(
		rapid.Just[json.RawMessage](nil),
		rapid.Custom(func(t *rapid.T) json.RawMessage {
			v := genJSON(3).Draw(t, "value")
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(rapid.Bool().Draw(t, "escape html")) // either way it is compact JSON
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		}),
	)
}

func genMetadata() *rapid.Generator[*envelope.Metadata] {
	return rapid.Ptr(rapid.Custom(func(t *rapid.T) envelope.Metadata {
		return envelope.Metadata{
			Tier: rapid.Uint8Range(0, 3).Draw(t, "tier"),
			SandboxID: rapid.OneOf(rapid.Just(""),
				rapid.StringOfN(textRune, 1, 32, envelope.MaxSandboxLen)).Draw(t, "sandboxId"),
			RoutingHint: rapid.SampledFrom([]string{"", envelope.RoutingHintCapability}).Draw(t, "routingHint"),
			EscalationJustification: rapid.OneOf(rapid.Just(""),
				rapid.StringOfN(rapid.OneOf(textRune, rapid.SampledFrom([]rune{'\n', '\t', '\r'})),
					1, 200, envelope.MaxJustificationLen)).Draw(t, "escalationJustification"),
		}
	}), true)
}

// genEnvelope generates valid envelopes over the whole domain.
func genEnvelope() *rapid.Generator[*envelope.Envelope] {
	return rapid.Custom(func(t *rapid.T) *envelope.Envelope {
		return &envelope.Envelope{
			ID:            genID().Draw(t, "id"),
			SchemaVersion: envelope.SchemaVersion,
			Sender:        genAgent().Draw(t, "sender"),
			Recipient:     genRecipient().Draw(t, "recipient"),
			CorrelationID: rapid.OneOf(rapid.Just(""), genID()).Draw(t, "correlationId"),
			Type:          rapid.SampledFrom(envelope.Types()).Draw(t, "type"),
			Timestamp:     rapid.Int64Range(1, 1<<62).Draw(t, "timestamp"),
			Payload:       genPayload().Draw(t, "payload"),
			Metadata:      genMetadata().Draw(t, "metadata"),
		}
	})
}

// Property 6: A2A Envelope structure and uniqueness. For any set of
// envelopes created by the factory, each has a unique id, a positive
// timestamp and all required fields.
// Validates: Requirements 2.1, 2.2, 13.6.
func TestProperty6_EnvelopeStructureAndUniqueness(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := envelope.NewFactory()
		injected := rapid.Bool().Draw(t, "injected clock")
		ms := rapid.Int64Range(-1<<40, 1<<42).Draw(t, "clock ms")
		if injected {
			f.Now = func() time.Time { return time.UnixMilli(ms) }
		}
		n := rapid.IntRange(1, 50).Draw(t, "n")
		seen := make(map[string]bool, n)
		for i := range n {
			sender := genAgent().Draw(t, "sender")
			recipient := genRecipient().Draw(t, "recipient")
			typ := rapid.SampledFrom(envelope.Types()).Draw(t, "type")
			payload := genPayload().Draw(t, "payload")
			before := time.Now().UnixMilli()
			e, err := f.New(sender, recipient, typ, payload)
			if err != nil {
				t.Fatalf("envelope %d: %v", i, err)
			}
			if seen[e.ID] {
				t.Fatalf("duplicate id %q", e.ID)
			}
			seen[e.ID] = true
			if e.Timestamp <= 0 {
				t.Fatalf("timestamp %d", e.Timestamp)
			}
			if injected && e.Timestamp != max(1, ms) {
				t.Fatalf("timestamp %d, clock says %d", e.Timestamp, ms)
			}
			if !injected && (e.Timestamp < before || e.Timestamp > time.Now().UnixMilli()) {
				t.Fatalf("timestamp %d is not now", e.Timestamp)
			}
			if e.SchemaVersion != envelope.SchemaVersion || e.Sender != sender || e.Recipient != recipient ||
				e.Type != typ || e.Payload == nil || e.ID == "" {
				t.Fatalf("fields not set: %+v", e)
			}
			if err := e.Validate(); err != nil {
				t.Fatal(err)
			}
			// Required fields are present on the wire too.
			b, err := envelope.EncodeJSON(e)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"id", "schemaVersion", "sender", "recipient", "type", "timestamp", "payload"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("%s missing from %s", k, b)
				}
			}
		}
	})
}

// Property 7: A2A Envelope serialization round trip. For any valid envelope,
// serializing to JSON and back gives an equal envelope, schemaVersion
// included. Validates: Requirements 2.3, 13.1, 13.2, 13.3.
func TestProperty7_EnvelopeJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		b, err := envelope.EncodeJSON(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > envelope.MaxEncodedSize {
			t.Fatalf("encoded %d bytes", len(b))
		}
		got, err := envelope.DecodeJSON(b)
		if err != nil {
			t.Fatalf("DecodeJSON(%s): %v", b, err)
		}
		if want := normalized(e); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
		if got.SchemaVersion != envelope.SchemaVersion {
			t.Fatalf("schemaVersion %d", got.SchemaVersion)
		}
		// Any JSON decoder reads the same object (field names are the seed's).
		var std envelope.Envelope
		if err := json.Unmarshal(b, &std); err != nil || !reflect.DeepEqual(&std, normalized(e)) {
			t.Fatalf("encoding/json reads %+v, %v", std, err)
		}
	})
}

// Property 7 for the wire codec: any valid envelope survives CBOR, the
// encoding is deterministic, and it is never larger than the JSON one.
func TestProperty7_EnvelopeCBORRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		b, err := envelope.EncodeCBOR(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := envelope.DecodeCBOR(b)
		if err != nil {
			t.Fatalf("DecodeCBOR(%x): %v", b, err)
		}
		if want := normalized(e); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
		b2, err := envelope.EncodeCBOR(got)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("re-encoding differs: %v", err)
		}
		j, err := envelope.EncodeJSON(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > len(j) {
			t.Fatalf("cbor %d bytes > json %d bytes", len(b), len(j))
		}
	})
}

// Property 8: Correlation threading. For any set of envelopes sharing a
// correlationId, the thread of that id is exactly those envelopes (and the
// root, if held), in timestamp order. Validates: Requirements 2.4.
//
// The index holds the most recent envelopes within its count and byte
// bounds (the byte bound drawn small here, with payloads of varied size,
// so that both bounds and the log's wrapping and growth are reached), and
// what Thread returns are copies equal to what was added.
func TestProperty8_CorrelationThreading(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		roots := rapid.SliceOfNDistinct(genID(), 1, 4, rapid.ID[string]).Draw(t, "roots")
		n := rapid.IntRange(0, 60).Draw(t, "n")
		limit := rapid.IntRange(1, n+5).Draw(t, "limit")
		maxBytes := rapid.IntRange(200, 6000).Draw(t, "maxBytes")
		th := envelope.NewThreadsSmall(limit, maxBytes)
		var added []*envelope.Envelope
		var sizes []int
		rootAdded := make(map[string]bool)
		for i := range n {
			e := &envelope.Envelope{
				ID: fmt.Sprintf("m%d", i), SchemaVersion: 1, Sender: "a", Recipient: "b",
				Type:      envelope.TypeNotification,
				Timestamp: rapid.Int64Range(1, 8).Draw(t, "timestamp"), // small range: many ties
				Payload:   json.RawMessage(`"` + strings.Repeat("p", rapid.IntRange(0, 700).Draw(t, "payload")) + `"`),
			}
			switch rapid.IntRange(0, 4).Draw(t, "kind") {
			case 0: // a root, once
				r := rapid.SampledFrom(roots).Draw(t, "root")
				if rootAdded[r] {
					continue
				}
				rootAdded[r] = true
				e.ID = r
			case 1: // not threaded
			default:
				e.CorrelationID = rapid.SampledFrom(roots).Draw(t, "correlationId")
			}
			raw, err := envelope.EncodeCBOR(e)
			if err != nil {
				t.Fatal(err)
			}
			if rapid.Bool().Draw(t, "encoded") {
				th.AddEncoded(e, raw)
			} else {
				th.Add(e)
			}
			if len(raw) > maxBytes {
				continue // too large to hold: not added
			}
			added = append(added, e)
			sizes = append(sizes, len(raw))
		}
		// The model: the most recent envelopes within both bounds. The log
		// may leave up to one encoding's size unused at its end when it
		// wraps, so the byte bound is checked as a range below.
		from := max(0, len(added)-limit)
		held := added[from:]
		total := 0
		for _, sz := range sizes[from:] {
			total += sz
		}
		for len(held) > 0 && total > maxBytes {
			total -= sizes[len(added)-len(held)]
			held = held[1:]
		}
		got := th.Len()
		if got > len(held) || th.Bytes() > maxBytes {
			t.Fatalf("Len = %d (model %d), Bytes = %d (bound %d)", got, len(held), th.Bytes(), maxBytes)
		}
		// The index holds a suffix of what was added: the last got envelopes.
		held = held[len(held)-got:]
		if got > 0 && got < len(added[from:]) {
			// It evicted for bytes: what it holds plus the one before would
			// not have fit twice over (a wrapped log wastes less than one
			// encoding).
			if next := sizes[len(added)-got-1]; th.Bytes()+next <= maxBytes/2 {
				t.Fatalf("evicted too much: holds %d bytes of %d, the next older is %d bytes", th.Bytes(), maxBytes, next)
			}
		}
		for _, r := range roots {
			var want []*envelope.Envelope
			for _, e := range held { // insertion order
				if e.CorrelationID == r || e.ID == r {
					want = append(want, e)
				}
			}
			slices.SortStableFunc(want, func(a, b *envelope.Envelope) int {
				return int(a.Timestamp - b.Timestamp)
			})
			if got := th.Thread(r); !reflect.DeepEqual(got, want) {
				t.Fatalf("Thread(%q) = %v, want %v", r, ids(got), ids(want))
			}
		}
	})
}

// Property 9: Message type validation. Every type of the valid set passes
// validation; any other string fails. Validates: Requirements 2.5.
func TestProperty9_MessageTypeValidation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		for _, typ := range envelope.Types() {
			e.Type = typ
			if err := e.Validate(); err != nil {
				t.Fatalf("type %q: %v", typ, err)
			}
			if _, err := envelope.ParseType(string(typ)); err != nil {
				t.Fatal(err)
			}
		}
		s := rapid.OneOf(
			rapid.String(),
			rapid.Map(rapid.SampledFrom(envelope.Types()), func(t envelope.Type) string {
				return strings.ToUpper(string(t)) // near misses
			}),
			rapid.Map(rapid.SampledFrom(envelope.Types()), func(t envelope.Type) string { return string(t) + " " }),
		).Filter(func(s string) bool { return !slices.Contains(envelope.Types(), envelope.Type(s)) }).Draw(t, "type")
		e.Type = envelope.Type(s)
		if e.Type.Valid() {
			t.Fatalf("%q is valid", s)
		}
		var ie *envelope.InvalidError
		if err := e.Validate(); !errors.As(err, &ie) || ie.Field != "type" {
			t.Fatalf("Validate with type %q = %v", s, err)
		}
		if _, err := envelope.ParseType(s); !errors.Is(err, envelope.ErrInvalid) {
			t.Fatalf("ParseType(%q) = %v", s, err)
		}
		// Decoders reject it too.
		if _, err := envelope.EncodeJSON(e); err == nil {
			t.Fatal("encoded an invalid type")
		}
		m := map[string]any{"id": e.ID, "schemaVersion": 1, "sender": e.Sender, "recipient": e.Recipient,
			"type": s, "timestamp": e.Timestamp}
		b, _ := json.Marshal(m)
		if _, err := envelope.DecodeJSON(b); !errors.As(err, &ie) || ie.Field != "type" {
			t.Fatalf("DecodeJSON with type %q = %v", s, err)
		}
		c, _ := envelope.EncMode().Marshal(m)
		if _, err := envelope.DecodeCBOR(c); !errors.As(err, &ie) || ie.Field != "type" {
			t.Fatalf("DecodeCBOR with type %q = %v", s, err)
		}
	})
}

// The JSON decoder reads every spelling of an envelope the same way: any
// member order, whitespace, escaping, explicit nulls for absent optional
// fields, an indented payload, unknown members.
func TestDecodeJSONEquivalentSpellings(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEnvelope().Draw(t, "envelope")
		ws := func() string {
			return rapid.SampledFrom([]string{"", "", " ", "\n", "\t", "\r\n  "}).Draw(t, "ws")
		}
		str := func(s string) string {
			if !rapid.Bool().Draw(t, "escape everything") {
				b, _ := json.Marshal(s) // escapes <, >, & and U+2028 as \uXXXX
				return string(b)
			}
			var sb strings.Builder
			sb.WriteByte('"')
			for _, r := range s {
				if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
					fmt.Fprintf(&sb, `\u%04x\u%04X`, r1, r2)
				} else {
					fmt.Fprintf(&sb, `\u%04x`, r)
				}
			}
			sb.WriteByte('"')
			return sb.String()
		}
		type member struct{ key, val string }
		object := func(ms []member) string {
			ms = rapid.Permutation(ms).Draw(t, "order")
			var sb strings.Builder
			sb.WriteString("{" + ws())
			for i, m := range ms {
				if i > 0 {
					sb.WriteString("," + ws())
				}
				sb.WriteString(str(m.key) + ws() + ":" + ws() + m.val + ws())
			}
			sb.WriteString("}")
			return sb.String()
		}
		absent := func(ms []member, key, empty string) []member {
			switch rapid.IntRange(0, 2).Draw(t, "absent as") {
			case 1:
				return append(ms, member{key, "null"})
			case 2:
				if empty != "" {
					return append(ms, member{key, empty})
				}
			}
			return ms
		}
		ms := []member{
			{"id", str(e.ID)}, {"schemaVersion", "1"}, {"sender", str(e.Sender)},
			{"recipient", str(e.Recipient)}, {"type", str(string(e.Type))},
			{"timestamp", strconv.FormatInt(e.Timestamp, 10)},
		}
		if e.CorrelationID != "" {
			ms = append(ms, member{"correlationId", str(e.CorrelationID)})
		} else {
			ms = absent(ms, "correlationId", `""`)
		}
		if e.Payload != nil {
			var buf bytes.Buffer
			if err := json.Indent(&buf, e.Payload, ws(), ws()); err != nil {
				t.Fatal(err)
			}
			ms = append(ms, member{"payload", buf.String()})
		} else {
			ms = absent(ms, "payload", "")
		}
		if m := e.Metadata; m != nil {
			mm := []member{{"tier", strconv.Itoa(int(m.Tier))}}
			for _, f := range []struct{ key, val string }{
				{"sandboxId", m.SandboxID}, {"routingHint", m.RoutingHint}, {"escalationJustification", m.EscalationJustification},
			} {
				if f.val != "" {
					mm = append(mm, member{f.key, str(f.val)})
				} else {
					mm = absent(mm, f.key, `""`)
				}
			}
			if rapid.Bool().Draw(t, "unknown metadata member") {
				mm = append(mm, member{"region", `{"a":[1,"}"]}`})
			}
			ms = append(ms, member{"metadata", object(mm)})
		} else {
			ms = absent(ms, "metadata", "")
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "unknown members") {
			v, _ := json.Marshal(genJSON(2).Draw(t, "unknown value"))
			ms = append(ms, member{fmt.Sprintf("future%d", i), string(v)})
		}
		text := ws() + object(ms) + ws()
		got, err := envelope.DecodeJSON([]byte(text))
		if err != nil {
			t.Fatalf("DecodeJSON(%s): %v", text, err)
		}
		if want := normalized(e); !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeJSON(%s):\n got %+v\nwant %+v", text, got, want)
		}
	})
}
