package protocol

import (
	"strings"

	"github.com/nova-node/nova-node/agentcard"
)

// sameAddr reports whether addr is c's canonical address (c.Address())
// without building that string: the message path compares addresses on
// every envelope.
func sameAddr(addr string, c agentcard.Card) bool {
	if c.Host == "" {
		return addr == c.ID
	}
	return len(addr) == len(c.ID)+1+len(c.Host) && addr[len(c.ID)] == '@' &&
		strings.HasPrefix(addr, c.ID) && strings.HasSuffix(addr, c.Host)
}

// seenKey names one delivered envelope for deduplication: its sender's
// canonical address and its ID, and whether it came as a broadcast.
type seenKey struct {
	from, id  string
	broadcast bool
}

// askKey names one question: a request or proposal in a thread, from an
// asker to an answerer. Keyed by thread rather than envelope ID so that the
// requests of a long task (all in the proposal's thread, property 24) can
// each be answered, by every agent that was asked.
type askKey struct{ thread, asker, answerer string }
