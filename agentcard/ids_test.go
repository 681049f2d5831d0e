package agentcard_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/agentcard"
)

// The id checks are the documented patterns, byte for byte, at and around
// the length limits; CheckCapabilityID says why an id fails.
func TestIDChecksArePatterns(t *testing.T) {
	idRe, capRe := regexp.MustCompile(agentcard.IDPattern), regexp.MustCompile(agentcard.CapabilityIDPattern)
	var cases []string
	for b := 0; b < 256; b++ {
		c := string([]byte{byte(b)})
		cases = append(cases, c, "a"+c, "a"+c+"b", c+"a")
	}
	for _, n := range []int{agentcard.MaxIDLen - 1, agentcard.MaxIDLen, agentcard.MaxIDLen + 1,
		agentcard.MaxCapabilityIDLen - 1, agentcard.MaxCapabilityIDLen, agentcard.MaxCapabilityIDLen + 1} {
		cases = append(cases, strings.Repeat("a", n), strings.Repeat("a.", n/2), "a"+strings.Repeat("/", n-1))
	}
	cases = append(cases, "", "a@b", "mars\n", "é", "a:b/c-d_e.f")
	for _, s := range cases {
		if got, want := agentcard.ValidID(s), idRe.MatchString(s); got != want {
			t.Errorf("ValidID(%q) = %v, pattern %v", s, got, want)
		}
		want := capRe.MatchString(s)
		if got := agentcard.ValidCapabilityID(s); got != want {
			t.Errorf("ValidCapabilityID(%q) = %v, pattern %v", s, got, want)
		}
		if err := agentcard.CheckCapabilityID(s); (err == nil) != want {
			t.Errorf("CheckCapabilityID(%q) = %v, pattern %v", s, err, want)
		}
	}
	for id, reason := range map[string]string{
		"":                       "capability id must not be empty",
		strings.Repeat("a", 129): "capability id is 129 bytes, over the 128-byte limit",
		"-x":                     `capability id "-x" must match ` + agentcard.CapabilityIDPattern,
	} {
		if err := agentcard.CheckCapabilityID(id); err == nil || err.Error() != reason {
			t.Errorf("CheckCapabilityID(%.20q) = %v, want %q", id, err, reason)
		}
	}
}
