package envelope

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The character rules of identifiers and text in envelopes and in the
// payloads of the task protocols, whose one home is here. The errors say
// what is wrong without naming a field: each caller reports them in its
// own typed error, under its own field name.

// CheckID checks an identifier: 1 to max bytes of printable ASCII without
// spaces (0x21..0x7E), so that it can name a correlation thread and be
// printed and logged as it is.
func CheckID(s string, max int) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > max {
		return fmt.Errorf("%d bytes, over the %d-byte limit", len(s), max)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("byte 0x%02x at offset %d is not printable ascii", c, i)
		}
	}
	return nil
}

// CheckText checks text: at most max bytes of UTF-8 without control
// characters, but tab, newline and carriage return if newlines. Empty text
// passes: whether a field may be empty or blank is its owner's rule.
func CheckText(s string, max int, newlines bool) error {
	if len(s) > max {
		return fmt.Errorf("%d bytes, over the %d-byte limit", len(s), max)
	}
	if plainText(s, newlines) {
		return nil
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid utf-8")
	}
	for i, r := range s {
		if unicode.IsControl(r) && !(newlines && (r == '\t' || r == '\n' || r == '\r')) {
			return fmt.Errorf("control character U+%04X at offset %d", r, i)
		}
	}
	return nil
}

// plainText reports whether s is printable ASCII (with tab, newline and
// carriage return if newlines), the common case that passes CheckText's
// UTF-8 and control character rules without decoding runes.
func plainText(s string, newlines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f {
			if newlines && (c == '\t' || c == '\n' || c == '\r') {
				continue
			}
			return false
		}
	}
	return true
}
