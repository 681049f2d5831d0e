package negotiation

import "strings"

// SameAgent reports whether two agent addresses name the same agent: they
// are equal, or one is a bare name ("mars") and the other a full address
// with that name ("mars@<peerID>"). Two full addresses on different peers
// are different agents. Empty addresses match nothing.
func SameAgent(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if a == b {
		return true
	}
	an, ah, _ := strings.Cut(a, "@")
	bn, bh, _ := strings.Cut(b, "@")
	return an == bn && (ah == "" || bh == "")
}

// AgentName returns the name part of an address ("mars" for
// "mars@<peerID>").
func AgentName(addr string) string {
	n, _, _ := strings.Cut(addr, "@")
	return n
}
