package envelope

import (
	"encoding/binary"
	"unicode/utf8"
)

// scanPayload is the fast path of checkPayload: one pass over p that
// accepts exactly the texts that pass the three checks of the slow path
// (wirecodec.ScanJSON's depth rule, utf8.Valid and json.Valid), and reports whether
// the text is compact (no whitespace outside strings). It returns ok ==
// false for every other text, without saying why: checkPayload then runs
// the slow path, so errors keep their exact wording and order. The
// differential fuzz target FuzzPayloadValidator holds it to that.
//
// It is a small pushdown automaton. Nesting is at most MaxPayloadDepth (64)
// levels, so one bit per level of a uint64 records whether that level is
// an object or an array.
func scanPayload(p []byte) (ok, compact bool) {
	const (
		wantValue  = iota // a value must follow
		afterValue        // a value has ended
		wantKey           // an object key must follow ('{' or ',' in an object)
	)
	var (
		objects uint64 // bit d-1 is set when level d is an object
		depth   int
		state   = wantValue
		n       = len(p)
	)
	compact = true
	for i := 0; ; {
		// Whitespace may surround any token.
		for i < n && isJSONSpace[p[i]] {
			compact = false
			i++
		}
		if i == n {
			return state == afterValue && depth == 0, compact
		}
		c := p[i]
		switch state {
		case wantKey:
			if c != '"' {
				return false, false
			}
			if i = scanString(p, i+1); i < 0 {
				return false, false
			}
			for i < n && isJSONSpace[p[i]] {
				compact = false
				i++
			}
			if i == n || p[i] != ':' {
				return false, false
			}
			i++
			state = wantValue
		case afterValue:
			if depth == 0 {
				return false, false // text after the value
			}
			inObject := objects&(1<<(depth-1)) != 0
			switch {
			case c == ',':
				i++
				if inObject {
					state = wantKey
				} else {
					state = wantValue
				}
			case c == '}' && inObject, c == ']' && !inObject:
				i++
				depth--
			default:
				return false, false
			}
		default: // wantValue
			switch {
			case c == '{' || c == '[':
				if depth == MaxPayloadDepth {
					return false, false
				}
				depth++
				bit := uint64(1) << (depth - 1)
				i++
				for i < n && isJSONSpace[p[i]] {
					compact = false
					i++
				}
				if c == '{' {
					objects |= bit
					if i < n && p[i] == '}' {
						i++
						depth--
						state = afterValue
					} else {
						state = wantKey
					}
				} else {
					objects &^= bit
					if i < n && p[i] == ']' {
						i++
						depth--
						state = afterValue
					}
				}
			case c == '"':
				if i = scanString(p, i+1); i < 0 {
					return false, false
				}
				state = afterValue
			case c == '-' || ('0' <= c && c <= '9'):
				if i = scanNumber(p, i); i < 0 {
					return false, false
				}
				state = afterValue
			case c == 't':
				if !hasLiteral(p, i, "true") {
					return false, false
				}
				i += 4
				state = afterValue
			case c == 'f':
				if !hasLiteral(p, i, "false") {
					return false, false
				}
				i += 5
				state = afterValue
			case c == 'n':
				if !hasLiteral(p, i, "null") {
					return false, false
				}
				i += 4
				state = afterValue
			default:
				return false, false
			}
		}
	}
}

// isJSONSpace holds the four whitespace bytes of JSON.
var isJSONSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// strPlain holds the bytes that stand for themselves in a JSON string:
// everything but the quote, the backslash, control characters (below
// 0x20) and the bytes of multi-byte UTF-8 sequences (0x80 and up), which
// need a closer look.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString scans the rest of a string whose opening quote precedes
// p[i], and returns the index after the closing quote, or -1 if the string
// is invalid JSON or invalid UTF-8.
func scanString(p []byte, i int) int {
	n := len(p)
	// Eight bytes at a time while none of them needs a look: most
	// payload text is plain ASCII, and this runs at least twice for each
	// envelope sent and once for each received.
	for i+8 <= n && plainWord(binary.LittleEndian.Uint64(p[i:])) {
		i += 8
	}
	for i < n {
		c := p[i]
		if strPlain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 == n {
				return -1
			}
			switch p[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > n {
					return -1
				}
				for _, h := range p[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default: // c >= 0x80: must start a valid UTF-8 sequence
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size
		}
	}
	return -1 // unterminated
}

// plainWord reports whether none of the eight bytes of x is a control
// character (< 0x20), a quote, a backslash or a non-ASCII byte: exactly the
// bytes for which strPlain is true (TestPlainWordMatchesTable).
func plainWord(x uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs } // nonzero iff a byte of v is 0
	less := (x - 0x20*ones) & ^x & highs                             // nonzero iff a byte is < 0x20
	return (less | zero(x^('"'*ones)) | zero(x^('\\'*ones)) | x&highs) == 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanNumber scans a number starting at p[i] ('-' or a digit) by the JSON
// grammar, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and returns the
// index after it, or -1.
func scanNumber(p []byte, i int) int {
	n := len(p)
	if p[i] == '-' {
		i++
		if i == n {
			return -1
		}
	}
	switch c := p[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i++
		for i < n && isDigit(p[i]) {
			i++
		}
	default:
		return -1
	}
	if i < n && p[i] == '.' {
		i++
		if i == n || !isDigit(p[i]) {
			return -1
		}
		for i < n && isDigit(p[i]) {
			i++
		}
	}
	if i < n && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < n && (p[i] == '+' || p[i] == '-') {
			i++
		}
		if i == n || !isDigit(p[i]) {
			return -1
		}
		for i < n && isDigit(p[i]) {
			i++
		}
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// hasLiteral reports whether p holds lit at i.
func hasLiteral(p []byte, i int, lit string) bool {
	return len(p)-i >= len(lit) && string(p[i:i+len(lit)]) == lit
}
