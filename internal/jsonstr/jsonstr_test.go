package jsonstr_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/internal/jsonstr"
)

// Append writes what encoding/json writes, with HTML escaping on and off,
// for any string: valid or not UTF-8, control characters, U+2028/9.
func TestAppendMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '<', '>', '&', '\n', 0, 0x1f, '\u2028', '\u2029', 'é', 'a'})),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) })).Draw(t, "s")
		for _, html := range []bool{true, false} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			if got := jsonstr.Append([]byte("x"), s, html); !bytes.Equal(got[1:], bytes.TrimSuffix(want.Bytes(), []byte("\n"))) || got[0] != 'x' {
				t.Fatalf("html=%v: Append(%q) = %s, encoding/json: %s", html, s, got, want.Bytes())
			}
		}
	})
}
