//go:build soak

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node/localapi"
)

// TestNATRelayRestart: two laptops behind symmetric NATs, whose only path
// is the public node's relay. The relay restarts while a1 sends to c1:
// the laptops take new reservations, and what a1 sent while the relay was
// down reaches c1 once it is back (parked in a1's outbox, not lost).
func TestNATRelayRestart(t *testing.T) {
	n := newNATNet(t, []natKind{natSymmetric, natSymmetric}, [][]string{{"a1"}, {"c1"}})
	natSwarm(t, n, "a1", "c1")
	waitfor.Eventually(t, 20*time.Second, func() error {
		var res localapi.SendResult
		return n.cliJSON("a1", &res, "send", "--to", "c1", "--payload", `"before the restart"`)
	})
	n.stop("pub")
	out, err := n.cli("a1", "send", "--to", "c1", "--type", "notification", "--payload", `"while the relay is down"`, "--json")
	t.Logf("a1 -> c1 while the relay is down: %v %s", err, out)
	var sent localapi.SendResult
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.Sent == nil || !strings.Contains(out, "PEER_AWAY") {
		t.Fatalf("send while the relay is down: want the envelope accepted and parked (PEER_AWAY): %v %s", err, out)
	}
	restart := time.Now()
	n.startPublic()
	waitfor.Eventually(t, 60*time.Second, func() error {
		out, err := n.cli("c1", "events", "--limit", "1000", "--json")
		if err != nil || !strings.Contains(out, sent.Sent.ID) {
			return fmt.Errorf("c1 has not received %s: %v", sent.Sent.ID, err)
		}
		return nil
	})
	t.Logf("c1 received what a1 sent while the relay was down %s after the relay restarted", time.Since(restart).Round(time.Millisecond))
	var res localapi.SendResult
	if err := n.cliJSON("a1", &res, "send", "--to", "c1", "--payload", `"after the restart"`); err != nil {
		t.Fatalf("a1 -> c1 after the restart: %v", err)
	}
}
