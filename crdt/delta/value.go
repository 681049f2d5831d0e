package delta

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits on JSON values.
const (
	// MaxValueSize is the largest JSON text, in bytes, that Set, SetAdd and
	// SetRemove accept, and the largest stored leaf value or set element.
	MaxValueSize = 64 << 10
	// MaxValueDepth is the deepest nesting of arrays and objects in a JSON
	// value.
	MaxValueDepth = 32
)

// jvalue is a parsed JSON value with its canonical text.
type jvalue struct {
	text string // canonical JSON text
	// For objects: members sorted by key.
	obj  bool
	keys []string
	vals []*jvalue
}

// parseJSON parses one JSON value and computes its canonical form: no
// insignificant whitespace, object members sorted by key (bytewise), strings
// escaped minimally (only '"', '\\' and control characters, the latter as
// \b \f \n \r \t or \u00XX), numbers kept as written. Duplicate object keys,
// invalid UTF-8, trailing data and values over the limits are errors.
func parseJSON(b []byte) (*jvalue, error) {
	if len(b) > MaxValueSize {
		return nil, valueErr("%d bytes, over the %d-byte limit", len(b), MaxValueSize)
	}
	if !utf8.Valid(b) {
		return nil, valueErr("not valid UTF-8")
	}
	if t, ok := simpleScalar(b); ok {
		return &jvalue{text: t}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseToken(dec, 0)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, valueErr("empty or truncated JSON")
		}
		var ve *ValueError
		if errors.As(err, &ve) {
			return nil, ve
		}
		return nil, valueErr("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, valueErr("data after the JSON value")
	}
	return v, nil
}

func parseToken(dec *json.Decoder, depth int) (*jvalue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= MaxValueDepth {
			return nil, valueErr("nested deeper than %d levels", MaxValueDepth)
		}
		switch t {
		case '{':
			return parseObject(dec, depth)
		case '[':
			return parseArray(dec, depth)
		}
		return nil, valueErr("unexpected %q", t.String())
	case string:
		return &jvalue{text: string(appendQuoted(nil, t))}, nil
	case json.Number:
		return &jvalue{text: string(t)}, nil
	case bool:
		if t {
			return &jvalue{text: "true"}, nil
		}
		return &jvalue{text: "false"}, nil
	case nil:
		return &jvalue{text: "null"}, nil
	}
	return nil, valueErr("unexpected token")
}

func parseObject(dec *json.Decoder, depth int) (*jvalue, error) {
	v := &jvalue{obj: true}
	seen := make(map[string]int)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := kt.(string)
		if !ok {
			return nil, valueErr("object key is not a string")
		}
		if _, dup := seen[k]; dup {
			return nil, valueErr("duplicate object key %q", truncate(k, 64))
		}
		m, err := parseToken(dec, depth+1)
		if err != nil {
			return nil, err
		}
		seen[k] = len(v.keys)
		v.keys = append(v.keys, k)
		v.vals = append(v.vals, m)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	order := make([]int, len(v.keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(v.keys[a], v.keys[b]) })
	keys, vals := make([]string, len(order)), make([]*jvalue, len(order))
	var b []byte
	b = append(b, '{')
	for i, o := range order {
		keys[i], vals[i] = v.keys[o], v.vals[o]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, keys[i])
		b = append(b, ':')
		b = append(b, vals[i].text...)
	}
	b = append(b, '}')
	v.keys, v.vals, v.text = keys, vals, string(b)
	return v, nil
}

func parseArray(dec *json.Decoder, depth int) (*jvalue, error) {
	var b []byte
	b = append(b, '[')
	for n := 0; dec.More(); n++ {
		e, err := parseToken(dec, depth+1)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, e.text...)
	}
	if _, err := dec.Token(); err != nil { // ']'
		return nil, err
	}
	b = append(b, ']')
	return &jvalue{text: string(b)}, nil
}

// simpleScalar recognises, without a decoder, the values most updates
// carry: a literal, a number, or a string without escapes or control
// characters, with no surrounding space. Their canonical text is b itself.
// Anything else (false negatives included) takes the decoder's path.
func simpleScalar(b []byte) (string, bool) {
	if isSimpleScalar(b) {
		return string(b), true
	}
	return "", false
}

func isSimpleScalar[S ~string | ~[]byte](b S) bool {
	switch string(b) {
	case "true", "false", "null":
		return true
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		for i := 1; i < len(b)-1; i++ {
			if c := b[i]; c < 0x20 || c == '"' || c == '\\' {
				return false
			}
		}
		return true // UTF-8 checked by the caller
	}
	return isNumber(b)
}

// isNumber reports whether b is exactly a JSON number (RFC 8259 section 6).
func isNumber[S ~string | ~[]byte](b S) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// appendQuoted appends s as a canonical JSON string.
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
	}
	return append(b, '"')
}

// canonicalJSON returns the canonical text of b.
func canonicalJSON(b []byte) (string, error) {
	v, err := parseJSON(b)
	if err != nil {
		return "", err
	}
	return v.text, nil
}

// isCanonical reports whether s is a JSON value in canonical form.
func isCanonical(s string) bool {
	if len(s) <= MaxValueSize && utf8.ValidString(s) && isSimpleScalar(s) {
		return true
	}
	c, err := canonicalJSON([]byte(s))
	return err == nil && c == s
}

// emptyObject is the canonical text of {}: as a register value it marks an
// object that exists without members.
const emptyObject = "{}"

// leaf is one register write produced by flattening a value at a path.
type leaf struct {
	segs []string
	val  string
}

// flatten spreads v at base into leaves: a non-empty object becomes its
// members' leaves, anything else (scalars, arrays, {}) is one leaf.
func flatten(base []string, v *jvalue, out []leaf) ([]leaf, error) {
	if v.obj && len(v.keys) > 0 {
		for i, k := range v.keys {
			var err error
			out, err = flatten(append(slices.Clip(base), k), v.vals[i], out)
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if _, err := checkSegments(base); err != nil {
		return nil, err
	}
	return append(out, leaf{segs: base, val: v.text}), nil
}
