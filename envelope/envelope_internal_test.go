package envelope

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// The hand-written JSON encoder agrees with encoding/json and with jsonLen.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	strs := rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '\b', '\f', '\n', '\r', '\t', 0, 0x1f, 0x7f, '<', '>', '&', '\u2028', '\u2029', 'é', '😀'})))
	rapid.Check(t, func(t *rapid.T) {
		e := &Envelope{
			ID:            strs.Draw(t, "id"),
			SchemaVersion: rapid.Int().Draw(t, "v"),
			Sender:        strs.Draw(t, "sender"),
			Recipient:     strs.Draw(t, "recipient"),
			CorrelationID: strs.Draw(t, "corr"),
			Type:          Type(strs.Draw(t, "type")),
			Timestamp:     rapid.Int64().Draw(t, "ts"),
			Payload:       json.RawMessage(rapid.SampledFrom([]string{`null`, `{"a":[1,"\u2028<"]}`, `"` + "\u2028" + `"`}).Draw(t, "payload")),
		}
		if rapid.Bool().Draw(t, "metadata") {
			e.Metadata = &Metadata{
				Tier:                    rapid.Uint8().Draw(t, "tier"),
				SandboxID:               strs.Draw(t, "sandbox"),
				RoutingHint:             strs.Draw(t, "hint"),
				EscalationJustification: strs.Draw(t, "just"),
			}
		}
		got := appendJSON(nil, e, e.Payload)
		if n := jsonLen(e, len(e.Payload)); n != len(got) {
			t.Fatalf("jsonLen = %d, len = %d (%s)", n, len(got), got)
		}
		if b := jsonLenBound(e, len(e.Payload)); b < len(got) {
			t.Fatalf("jsonLenBound = %d, len = %d (%s)", b, len(got), got)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
		if want := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
			t.Fatalf("appendJSON:\n got %s\nwant %s", got, want)
		}
	})
}

func TestJSONStringLenInvalidUTF8(t *testing.T) {
	for _, s := range []string{"\xff", "a\xc3", "\xe2\x80", "\xed\xa0\x80"} {
		if got, want := jsonStringLen(s), len(appendJSONString(nil, s)); got != want {
			t.Errorf("%q: jsonStringLen %d, len %d", s, got, want)
		}
	}
}

func TestScanJSON(t *testing.T) {
	tests := []struct {
		in      string
		depth   int
		compact bool
	}{
		{``, 0, true},
		{`1`, 0, true},
		{`[1,{"a":[]}]`, 3, true},
		{`"[[[{{{"`, 0, true},
		{`["\"[[[", "x"]`, 1, false},
		{`["\\", [2]]`, 2, false},
		{"[\n]", 1, false},
		{`"a b"`, 0, true},
	}
	for _, tt := range tests {
		d, c := wirecodec.ScanJSON([]byte(tt.in), 100)
		if d != tt.depth || c != tt.compact {
			t.Errorf("wirecodec.ScanJSON(%q) = %d, %v; want %d, %v", tt.in, d, c, tt.depth, tt.compact)
		}
	}
	if d, _ := wirecodec.ScanJSON([]byte(strings.Repeat("[", 1000)), 10); d != 11 {
		t.Errorf("early stop: depth %d", d)
	}
}

func TestNormalizePayload(t *testing.T) {
	// Over the size limit as written, within it once compacted.
	inner := strings.Repeat("1,", MaxPayloadSize/3)
	spaced := "[ " + strings.ReplaceAll(inner, ",", ", ") + "1 ]"
	if len(spaced) <= MaxPayloadSize {
		t.Fatal("test payload too small")
	}
	p, err := normalizePayload([]byte(spaced))
	if err != nil {
		t.Fatal(err)
	}
	if string(p) != "["+inner+"1]" {
		t.Error("not compacted")
	}
	if _, err := normalizePayload([]byte("[" + strings.Repeat("1,", MaxPayloadSize) + "1]")); err == nil {
		t.Error("oversized compact payload accepted")
	}
	// Compact input is returned as is; null is a fresh slice.
	in := []byte(`{"a":1}`)
	if p, _ := normalizePayload(in); &p[0] != &in[0] {
		t.Error("compact payload copied")
	}
	n1, _ := normalizePayload(nil)
	n1[0] = 'X'
	if n2, _ := normalizePayload(nil); string(n2) != "null" || string(jsonNull) != "null" {
		t.Error("null shared")
	}
}

func TestInvalidErrorUnwrap(t *testing.T) {
	_, err := DecodeCBOR([]byte{0xa1}) // truncated map
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.cause == nil || errors.Unwrap(err) == nil {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Error("not ErrInvalid")
	}
}

func TestDecOptionsAreValid(t *testing.T) {
	if _, err := wirecodec.DecOptions(decLimits).DecMode(); err != nil {
		t.Fatal(err)
	}
}

// The bound holds for the worst strings: every byte escaped to six, the
// longest numbers, every optional field.
func TestJSONLenBoundWorstCase(t *testing.T) {
	worst := func(n int) string { return strings.Repeat("\x01", n) }
	e := &Envelope{
		ID: worst(MaxIDLen), SchemaVersion: -1 << 63, Sender: worst(MaxAgentLen),
		Recipient: worst(MaxAgentLen), CorrelationID: worst(MaxIDLen), Type: Type(worst(20)),
		Timestamp: -1 << 63, Payload: json.RawMessage("null"),
		Metadata: &Metadata{Tier: 255, SandboxID: worst(MaxSandboxLen), RoutingHint: worst(20),
			EscalationJustification: worst(MaxJustificationLen)},
	}
	if n, b := len(appendJSON(nil, e, e.Payload)), jsonLenBound(e, len(e.Payload)); b < n {
		t.Fatalf("jsonLenBound = %d, len = %d", b, n)
	}
	for _, s := range []string{"", "x", "\xff", "\u2028", worst(3)} {
		e := &Envelope{ID: s, Sender: s, Recipient: s, Type: Type(s), SchemaVersion: -1 << 63, Timestamp: -1 << 63,
			Payload: json.RawMessage("1"), Metadata: &Metadata{Tier: 255}}
		if n, b := len(appendJSON(nil, e, e.Payload)), jsonLenBound(e, len(e.Payload)); b < n || b-n > jsonFixedLen+6*4*len(s) {
			t.Errorf("%q: jsonLenBound = %d, len = %d", s, b, n)
		}
	}
}

// plainWord must say "plain" for exactly the words whose eight bytes are
// all plain by the strPlain table: every byte value at every position, and
// random words (bytes from the edges of each class, where borrows between
// bytes could fool the arithmetic).
func TestPlainWordMatchesTable(t *testing.T) {
	check := func(w [8]byte) {
		want := true
		for _, c := range w {
			want = want && strPlain[c]
		}
		if got := plainWord(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("plainWord(% x) = %v, want %v", w, got, want)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			w := [8]byte{'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a'}
			w[pos] = byte(c)
			check(w)
		}
	}
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', 0x23, 0x5b, '\\', 0x5d, 0x7e, 0x7f, 0x80, 0x81, 0xff}
	rapid.Check(t, func(rt *rapid.T) {
		var w [8]byte
		for i := range w {
			w[i] = rapid.OneOf(rapid.SampledFrom(edges), rapid.Byte()).Draw(rt, "b")
		}
		check(w)
	})
}
