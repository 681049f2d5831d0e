package wirecodec_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"

	"github.com/nova-node/nova-node/internal/srccheck"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

var limits = wirecodec.Limits{MaxNestedLevels: 4, MaxArrayElements: 16, MaxMapPairs: 16}

type rec struct {
	S string `cbor:"s"`
	B []byte `cbor:"b"`
}

// TestDecModeRefuses: each hardening rule refuses its input, with the
// same mode accepting the well-formed counterpart.
func TestDecModeRefuses(t *testing.T) {
	dm := wirecodec.NewDecMode(limits)
	strict := wirecodec.NewDecMode(wirecodec.Limits{MaxNestedLevels: 4, MaxArrayElements: 16, MaxMapPairs: 16, RejectUnknownFields: true})
	for _, c := range []struct {
		name     string
		in, good []byte
		mode     cbor.DecMode
	}{
		{"invalid utf-8 text", []byte{0xa1, 0x61, 's', 0x62, 0xff, 0xfe}, []byte{0xa1, 0x61, 's', 0x62, 'o', 'k'}, dm},
		{"indefinite-length text", []byte{0xa1, 0x61, 's', 0x7f, 0x61, 'o', 0xff}, []byte{0xa1, 0x61, 's', 0x61, 'o'}, dm},
		{"indefinite-length map", []byte{0xbf, 0x61, 's', 0x61, 'o', 0xff}, []byte{0xa1, 0x61, 's', 0x61, 'o'}, dm},
		{"indefinite-length byte string", []byte{0xa1, 0x61, 'b', 0x5f, 0x41, 1, 0xff}, []byte{0xa1, 0x61, 'b', 0x41, 1}, dm},
		{"duplicate key", []byte{0xa2, 0x61, 's', 0x61, 'o', 0x61, 's', 0x61, 'p'}, []byte{0xa1, 0x61, 's', 0x61, 'p'}, dm},
		{"tag", []byte{0xa1, 0x61, 's', 0xc0, 0x61, 'o'}, []byte{0xa1, 0x61, 's', 0x61, 'o'}, dm},
		{"byte string as string", []byte{0xa1, 0x61, 's', 0x42, 'o', 'k'}, []byte{0xa1, 0x61, 's', 0x62, 'o', 'k'}, dm},
		{"byte string field name", []byte{0xa1, 0x41, 's', 0x61, 'o'}, []byte{0xa1, 0x61, 's', 0x61, 'o'}, dm},
		{"case-folded field name", []byte{0xa1, 0x61, 'S', 0x61, 'o'}, []byte{0xa1, 0x61, 's', 0x61, 'o'}, strict},
		{"unknown field, closed format", []byte{0xa1, 0x61, 'x', 0x61, 'o'}, []byte{0xa1, 0x61, 's', 0x61, 'o'}, strict},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v rec
			if err := c.mode.Unmarshal(c.in, &v); err == nil {
				t.Errorf("% x accepted as %+v", c.in, v)
			}
			if err := c.mode.Unmarshal(c.good, &v); err != nil {
				t.Errorf("% x refused: %v", c.good, err)
			}
		})
	}
	var v rec
	if err := dm.Unmarshal([]byte{0xa1, 0x61, 'x', 0x61, 'o'}, &v); err != nil {
		t.Errorf("unknown field refused by an open format: %v", err)
	}
}

func TestDecModeLimits(t *testing.T) {
	dm := wirecodec.NewDecMode(limits)
	var v any
	if err := dm.Unmarshal(append(bytes.Repeat([]byte{0x81}, 5), 0), &v); err == nil {
		t.Error("5 levels accepted, limit 4")
	}
	if err := dm.Unmarshal(append(bytes.Repeat([]byte{0x81}, 4), 0), &v); err != nil {
		t.Errorf("4 levels refused: %v", err)
	}
	if err := dm.Unmarshal(append([]byte{0x91}, make([]byte, 17)...), &v); err == nil {
		t.Error("17 array elements accepted, limit 16")
	}
	m17 := []byte{0xb1}
	for i := range 17 {
		m17 = append(m17, byte(i), 0)
	}
	if err := dm.Unmarshal(m17, &v); err == nil {
		t.Error("17 map pairs accepted, limit 16")
	}
}

func TestNewDecModePanicsOnUnsetLimit(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for unset limits")
		}
	}()
	wirecodec.NewDecMode(wirecodec.Limits{MaxNestedLevels: 4})
}

func TestEncModeIsCoreDeterministic(t *testing.T) {
	if wirecodec.EncMode().EncOptions().Sort != cbor.SortCoreDeterministic {
		t.Error("not core deterministic")
	}
}

// TestAppendHead: the hand-written head is the encoder's, for every width.
func TestAppendHead(t *testing.T) {
	for _, v := range []uint64{0, 1, 23, 24, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64} {
		want, err := wirecodec.EncMode().Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got := wirecodec.AppendHead(nil, 0, v)
		if !bytes.Equal(got, want) || wirecodec.HeadLen(v) != len(got) {
			t.Errorf("%d: % x (len %d), encoder % x", v, got, wirecodec.HeadLen(v), want)
		}
		if v < 1<<20 {
			s := strings.Repeat("x", int(v))
			want, _ := wirecodec.EncMode().Marshal(s)
			if got := append(wirecodec.AppendHead(nil, 3, v), s...); !bytes.Equal(got, want) {
				t.Errorf("text of %d bytes: head % x, encoder % x", v, got[:min(len(got), 9)], want[:min(len(want), 9)])
			}
		}
	}
}

func TestScanJSON(t *testing.T) {
	for _, c := range []struct {
		in      string
		limit   int
		depth   int
		compact bool
	}{
		{`null`, 8, 0, true},
		{`[1,{"a":[2]}]`, 8, 3, true},
		{`[ 1 ]`, 8, 1, false},
		{`["[[[ ","\"{"]`, 8, 1, true},
		{`[[[[]]]]`, 2, 3, false}, // stops as soon as the limit is passed
	} {
		d, compact := wirecodec.ScanJSON([]byte(c.in), c.limit)
		if d != c.depth || compact != c.compact {
			t.Errorf("ScanJSON(%s, %d) = %d, %v; want %d, %v", c.in, c.limit, d, compact, c.depth, c.compact)
		}
	}
	deep := strings.Repeat("[", 500) + strings.Repeat("]", 500)
	if !json.Valid([]byte(deep)) || wirecodec.JSONDepth([]byte(deep)) != 500 {
		t.Errorf("JSONDepth of 500 levels = %d", wirecodec.JSONDepth([]byte(deep)))
	}
}

// TestLeaf: the pure packages import this one, so it imports nothing of
// ours and no network code, and starts no goroutines.
func TestLeaf(t *testing.T) {
	fset, files := srccheck.Files(t)
	for _, imp := range srccheck.Imports(files) {
		if !imp.Std && imp.Path != "github.com/fxamacker/cbor/v2" {
			t.Errorf("%s imports %s: only the standard library and cbor are allowed", imp.File, imp.Path)
		}
		if strings.HasPrefix(imp.Path, "net") || imp.Path == "os" || imp.Path == "testing" || imp.Path == "unsafe" {
			t.Errorf("%s imports %s", imp.File, imp.Path)
		}
	}
	for _, pos := range srccheck.GoStatements(fset, files) {
		t.Errorf("go statement at %v: the package starts no goroutines", pos)
	}
}

func TestQuoteTruncates(t *testing.T) {
	long := strings.Repeat("é", 100)
	q := wirecodec.Quote(long)
	if len(q) > wirecodec.QuoteLen+8 || !strings.HasSuffix(q, "...") {
		t.Errorf("Quote = %s", q)
	}
	if s := wirecodec.Truncate(long, 5); !utf8.ValidString(s) || len(s) != 4 {
		t.Errorf("Truncate split a rune: %q", s)
	}
	if q := wirecodec.Quote("a\nb\x1b[31m"); q != `"a\nb\x1b[31m"` {
		t.Errorf("Quote left a control character: %s", q)
	}
}
