package discovery_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// TestRosterListsEveryAgent: without a single lookup, and although no
// node is connected to every other (each bootstraps from at most three),
// every node's registry lists every other node's agent soon after the
// nodes publish: the roster reads the providers of the members key and
// the new members' indexes and cards.
func TestRosterListsEveryAgent(t *testing.T) {
	checkLeaks(t)
	nodes := network(t, 12, slow)
	waitRoutingTables(t, nodes, 3)
	publishAll(t, nodes)
	waitfor.Eventually(t, 30*time.Second, func() error {
		for i, n := range nodes {
			if got := len(n.reg.Remote()); got != len(nodes)-1 {
				return fmt.Errorf("node %d lists %d remote agents, want %d", i, got, len(nodes)-1)
			}
		}
		return nil
	})
	for i, n := range nodes {
		if st := n.svc.Stats(); st.RosterCards == 0 {
			t.Errorf("node %d: no card came from the roster: %+v", i, st)
		}
	}
}
