package wirecodec

import (
	"strconv"
	"unicode/utf8"
)

// QuoteLen is how many bytes of a peer's value Quote puts in a message.
const QuoteLen = 64

// Quote quotes at most QuoteLen bytes of s, cut at a rune boundary and
// marked "..." when cut, for an error message about a peer's input: the
// quoting escapes control characters and invalid UTF-8, so a hostile value
// cannot forge lines or terminal sequences in a log or a CLI's output.
func Quote(s string) string {
	if len(s) > QuoteLen {
		return strconv.Quote(Truncate(s, QuoteLen)) + "..."
	}
	return strconv.Quote(s)
}

// Truncate returns at most n bytes of s, cut at a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
