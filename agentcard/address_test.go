package agentcard_test

import (
	"testing"

	"pgregory.net/rapid"
)

// HasAddress is exactly "addr == c.Address()", for the card's own address
// and for near misses (cut, extended, another separator, another host).
func TestHasAddressIsAddressEquality(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCard().Draw(t, "card")
		if rapid.Bool().Draw(t, "noHost") {
			c.Host = ""
		}
		own := c.Address()
		addr := rapid.OneOf(
			rapid.Just(own),
			rapid.Just(c.ID),
			rapid.Just(c.ID+"@"),
			rapid.Just(c.ID+"#"+c.Host),
			rapid.Just(own+"x"),
			rapid.Just("x"+own),
			rapid.Map(rapid.IntRange(0, len(own)), func(n int) string { return own[:n] }),
			rapid.String(),
		).Draw(t, "addr")
		if got, want := c.HasAddress(addr), addr == own; got != want {
			t.Fatalf("HasAddress(%q) = %v for address %q", addr, got, own)
		}
	})
}
