package main

import (
	"slices"
	"strings"

	"github.com/nova-node/nova-node/node/localapi"
)

// reachLine is status's line on how peers outside this node's network
// reach it: at a public address AutoNAT confirmed or a peer on the
// internet connected to (and then it relays for peers behind NAT), through
// a relay it holds a reservation on, or not.
func reachLine(r localapi.Reach) string {
	switch {
	case len(r.Reachable) > 0 || len(r.ReachedAt) > 0:
		line := "reach    public: " + strings.Join(r.Reachable, ", ")
		if len(r.Reachable) == 0 {
			line += strings.Join(r.ReachedAt, ", ") + " (a peer on the internet connected to it; AutoNAT not confirmed yet)"
		}
		if r.Relaying {
			line += "; relaying for peers behind NAT"
		}
		return line
	case len(r.RelayAddrs) > 0:
		var relays []string
		for _, a := range r.RelayAddrs {
			if id := relayOf(a); id != "" && !slices.Contains(relays, id) {
				relays = append(relays, id)
			}
		}
		return "reach    behind NAT: through relay " + strings.Join(relays, ", ") + " (peers then punch through to a direct connection)"
	case len(r.Unreachable) > 0:
		return "reach    behind NAT, no relay: peers outside this network cannot reach this node (join with a token made by `invite --relay`)"
	}
	return "reach    no public address confirmed (LAN only, or not yet known)"
}

// relayOf is the relay's peer ID in a relayed address
// (.../p2p/<relay>/p2p-circuit/...).
func relayOf(addr string) string {
	before, _, ok := strings.Cut(addr, "/p2p-circuit")
	if !ok {
		return ""
	}
	i := strings.LastIndex(before, "/p2p/")
	if i < 0 {
		return ""
	}
	return before[i+len("/p2p/"):]
}
