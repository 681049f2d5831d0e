package delta

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on paths.
const (
	// MaxPathLen is the longest path, in bytes of its escaped form.
	MaxPathLen = 1024
	// MaxPathDepth is the most segments a path may have.
	MaxPathDepth = 32
)

// SplitPath parses a path (an RFC 6901 JSON Pointer, see the package
// documentation) into its unescaped segments. The root "" has none.
func SplitPath(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if len(p) > MaxPathLen {
		return nil, pathErr(p, "longer than %d bytes", MaxPathLen)
	}
	if p[0] != '/' {
		return nil, pathErr(p, "must be empty or start with '/'")
	}
	if !utf8.ValidString(p) {
		return nil, pathErr(p, "not valid UTF-8")
	}
	n := strings.Count(p, "/")
	if n > MaxPathDepth {
		return nil, pathErr(p, "deeper than %d segments", MaxPathDepth)
	}
	segs := make([]string, 0, n)
	for raw := range strings.SplitSeq(p[1:], "/") {
		seg, err := unescapeSegment(raw)
		if err != nil {
			return nil, pathErr(p, "%s", err.Error())
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

func unescapeSegment(raw string) (string, error) {
	for _, r := range raw {
		if unicode.IsControl(r) {
			return "", errString("control character in a segment")
		}
	}
	if !strings.Contains(raw, "~") {
		return raw, nil
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '~' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(raw) {
			return "", errString("'~' at the end of a segment (escape '~' as ~0)")
		}
		switch raw[i+1] {
		case '0':
			b.WriteByte('~')
		case '1':
			b.WriteByte('/')
		default:
			return "", errString("'~' must be followed by 0 or 1")
		}
		i++
	}
	return b.String(), nil
}

// JoinPath builds a path from unescaped segments, escaping '~' as "~0" and
// '/' as "~1". JoinPath() is the root "". The result is not validated:
// [ValidatePath] checks its length, depth and characters.
func JoinPath(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(escapeSegment(s))
	}
	return b.String()
}

func escapeSegment(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// ValidatePath returns nil if p is a valid path, and a *[PathError]
// (matching [ErrInvalidPath]) otherwise.
func ValidatePath(p string) error {
	_, err := SplitPath(p)
	return err
}

// checkSegments validates segments produced by flattening a JSON object:
// the path they form must be one SplitPath accepts.
func checkSegments(segs []string) (string, error) {
	p := JoinPath(segs...)
	if len(segs) > MaxPathDepth {
		return "", pathErr(p, "deeper than %d segments", MaxPathDepth)
	}
	if len(p) > MaxPathLen {
		return "", pathErr(p, "longer than %d bytes", MaxPathLen)
	}
	for _, s := range segs {
		if !utf8.ValidString(s) {
			return "", pathErr(p, "not valid UTF-8")
		}
		for _, r := range s {
			if unicode.IsControl(r) {
				return "", pathErr(p, "control character in a segment")
			}
		}
	}
	return p, nil
}

type errString string

func (e errString) Error() string { return string(e) }
