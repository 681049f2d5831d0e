package envelope_test

import (
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

func TestCheckIDAndText(t *testing.T) {
	for _, c := range []struct {
		s, id, text, lines string // "" when accepted
	}{
		{"abc-1", "", "", ""},
		{"", "must not be empty", "", ""},
		{"a b", "byte 0x20 at offset 1 is not printable ascii", "", ""},
		{"abcdefghi", "9 bytes, over the 8-byte limit", "9 bytes, over the 8-byte limit", "9 bytes, over the 8-byte limit"},
		{"a\tb", "byte 0x09 at offset 1 is not printable ascii", "control character U+0009 at offset 1", ""},
		{"é\x7f", "byte 0xc3 at offset 0 is not printable ascii", "control character U+007F at offset 2", "control character U+007F at offset 2"},
		{"a\xff", "byte 0xff at offset 1 is not printable ascii", "not valid utf-8", "not valid utf-8"},
	} {
		for _, k := range []struct {
			name string
			err  error
			want string
		}{
			{"CheckID", envelope.CheckID(c.s, 8), c.id},
			{"CheckText", envelope.CheckText(c.s, 8, false), c.text},
			{"CheckText(newlines)", envelope.CheckText(c.s, 8, true), c.lines},
		} {
			got := ""
			if k.err != nil {
				got = k.err.Error()
			}
			if got != k.want {
				t.Errorf("%s(%q) = %q, want %q", k.name, c.s, got, k.want)
			}
		}
	}
}
