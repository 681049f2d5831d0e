package envelope

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/internal/wirecodec"
)

// refPayload is the reference for scanPayload: the three checks of
// checkPayloadSlow, built on encoding/json and unicode/utf8.
func refPayload(p []byte) (ok, compact bool) {
	depth, compact := wirecodec.ScanJSON(p, MaxPayloadDepth)
	if depth > MaxPayloadDepth || !utf8.Valid(p) || !json.Valid(p) {
		return false, false
	}
	return true, compact
}

// checkScanPayload fails t if scanPayload and refPayload disagree on p, or
// if checkPayload and checkPayloadSlow disagree.
func checkScanPayload(t interface {
	Helper()
	Fatalf(format string, args ...any)
}, p []byte) {
	t.Helper()
	ok, compact := scanPayload(p)
	wantOK, wantCompact := refPayload(p)
	if ok != wantOK || (ok && compact != wantCompact) {
		t.Fatalf("scanPayload(%q) = %v, %v; want %v, %v", p, ok, compact, wantOK, wantCompact)
	}
	if len(p) == 0 || len(p) > MaxPayloadSize {
		return
	}
	c1, err1 := checkPayload(p)
	c2, err2 := checkPayloadSlow(p)
	if c1 != c2 || (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
		t.Fatalf("checkPayload(%q) = %v, %v; slow path %v, %v", p, c1, err1, c2, err2)
	}
}

// scanCases are payloads at the edges of the grammar, of UTF-8 and of the
// depth limit.
var scanCases = []string{
	``, ` `, `1`, ` 1 `, `-`, `-0`, `-01`, `01`, `0.`, `0.5`, `.5`, `1e`, `1e+`, `1E-7`, `1.5e300`,
	`-1.0E+2`, `1ee2`, `+1`, `0x10`, `1 2`, `true`, `tru`, `truex`, `false`, `null`, `nul`, `NaN`,
	`""`, `"`, `"\"`, `"\\"`, `"\/"`, `"\u00e9"`, `"\u00G0"`, `"\u12"`, `"\ud800"`, `"\x"`,
	"\"\t\"", "\"\x00\"", "\"\x1f\"", "\"\x7f\"", `"é"`, "\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"",
	"\"\xef\xbf\xbd\"", "\"\xf4\x90\x80\x80\"", "\"\xc0\xaf\"", "\"😀\"", "é", "\xef\xbb\xbf1",
	`[]`, `[ ]`, `[,]`, `[1,]`, `[1,2]`, `[1 ,2]`, `[1;2]`, `{}`, `{ }`, `{"a"}`, `{"a":}`, `{"a":1}`,
	`{"a":1,}`, `{"a" : 1 , "b":[{}]}`, `{1:2}`, `{"a":1]`, `[1}`, `[[]`, `[]]`, `]`, `}`, `{"a":1}x`,
	"[\n1\r,\t2 ]", "[1]\n", "\n[1]", `["a b", {"c d":" "}]`, `{"a":"\"}"}`, `[""]`, `["\\"]`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64),
	strings.Repeat("[", 65) + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64),
	strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
	strings.Repeat("[", 65),
	strings.Repeat("[", 63) + `{"a":[1]}` + strings.Repeat("]", 63),
	strings.Repeat("[", 63) + `{"a":[[1]]}` + strings.Repeat("]", 63),
	strings.Repeat("[", 64) + "\xff" + strings.Repeat("]", 64),
	`[` + strings.Repeat(`"x",`, 100) + `"x"]`,
}

func TestScanPayloadCases(t *testing.T) {
	for _, c := range scanCases {
		checkScanPayload(t, []byte(c))
	}
}

// genSpacedJSON generates JSON text: a value encoded by encoding/json,
// perhaps indented, with some bytes perhaps changed.
func genSpacedJSON(t *rapid.T) []byte {
	var gen func(depth int) any
	gen = func(depth int) any {
		kind := rapid.IntRange(0, 7).Draw(t, "kind")
		if depth == 0 && kind >= 6 {
			kind = 0
		}
		switch kind {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "bool")
		case 2:
			return rapid.Int64().Draw(t, "int")
		case 3:
			return rapid.Float64Range(-1e300, 1e300).Draw(t, "float")
		case 4, 5:
			return rapid.String().Draw(t, "string")
		case 6:
			s := make([]any, rapid.IntRange(0, 3).Draw(t, "len"))
			for i := range s {
				s[i] = gen(depth - 1)
			}
			return s
		default:
			m := map[string]any{}
			for range rapid.IntRange(0, 3).Draw(t, "len") {
				m[rapid.String().Draw(t, "key")] = gen(depth - 1)
			}
			return m
		}
	}
	v := gen(rapid.IntRange(0, 70).Draw(t, "depth"))
	var b []byte
	var err error
	if rapid.Bool().Draw(t, "indent") {
		b, err = json.MarshalIndent(v, " ", "\t")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	for range rapid.IntRange(0, 2).Draw(t, "mutations") {
		if len(b) == 0 {
			break
		}
		i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
		b = bytes.Clone(b)
		b[i] = rapid.SampledFrom([]byte(" \t\n\"\\[]{}:,0-.eE+tfnu\x00\x1f\x7f\x80\xbf\xc3\xed\xff")).Draw(t, "byte")
	}
	return b
}

func TestScanPayloadRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		checkScanPayload(t, genSpacedJSON(t))
	})
}

// FuzzPayloadValidator holds the one-pass payload validator to the rules
// it replaces: it must accept exactly what the depth rule, utf8.Valid and
// json.Valid accept together, and agree with wirecodec.ScanJSON on compactness.
func FuzzPayloadValidator(f *testing.F) {
	for _, c := range scanCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		checkScanPayload(t, p)
	})
}

// The one-pass check against the three passes it replaces, on a typical
// 256-byte payload.
func BenchmarkCheckPayload(b *testing.B) {
	p := []byte(`{"task":"map the craters","n":3,"tags":["a","b"],"data":"` + strings.Repeat("x", 256-71) + `"}`)
	b.Run("onepass", func(b *testing.B) {
		for b.Loop() {
			if _, err := checkPayload(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("threepass", func(b *testing.B) {
		for b.Loop() {
			if _, err := checkPayloadSlow(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
