package mcpbridge_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/mcpbridge"
)

// An agent that publishes tools has an agent id without '.': exactly the
// documented ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$.
func TestValidAgentNameIsPattern(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	cases := []string{"", "a.b", "mars", "a-b_c", strings.Repeat("a", 64), strings.Repeat("a", 65), "a@b", "a\n"}
	for b := 0; b < 256; b++ {
		c := string([]byte{byte(b)})
		cases = append(cases, c, "a"+c)
	}
	for _, s := range cases {
		if got, want := mcpbridge.ValidAgentName(s), re.MatchString(s); got != want {
			t.Errorf("ValidAgentName(%q) = %v, pattern %v", s, got, want)
		}
	}
}
