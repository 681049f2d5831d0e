package wirecodec

// ScanJSON walks possibly invalid JSON text once and reports the deepest
// nesting of arrays and objects and whether any white space lies outside
// strings (that is, whether the text is not compact). It stops early, with
// depth > limit, as soon as the nesting passes limit: pass len(b) for the
// exact depth. It does not validate; for valid JSON the depth is exact.
func ScanJSON(b []byte, limit int) (depth int, compact bool) {
	compact = true
	cur, inStr, esc := 0, false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			cur++
			if cur > depth {
				depth = cur
				if depth > limit {
					return depth, false
				}
			}
		case ']', '}':
			cur--
		case ' ', '\t', '\n', '\r':
			compact = false
		}
	}
	return depth, compact
}

// JSONDepth is the deepest nesting of arrays and objects in JSON text b.
func JSONDepth(b []byte) int {
	d, _ := ScanJSON(b, len(b))
	return d
}
