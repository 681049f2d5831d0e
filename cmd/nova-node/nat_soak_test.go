//go:build soak

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/node/localapi"
)

// TestNATRelayRestart: two laptops behind symmetric NATs, whose only path
// is the public node's relay. The relay restarts while a1 sends to c1:
// the laptops take new reservations, and what a1 sent while the relay was
// down reaches c1 once it is back (parked in a1's outbox, not lost).
func TestNATRelayRestart(t *testing.T) {
	n := newNATNet(t, []natKind{natSymmetric, natSymmetric}, [][]string{{"a1"}, {"c1"}})
	natSwarm(t, n, "a1", "c1")
	natEventually(t, 20*time.Second, func() error {
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
	natEventually(t, 60*time.Second, func() error {
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

// TestNATSecondRelay: the token's relay goes away for good; pub2, another
// member with a public address, relays for the swarm, and the laptops
// behind symmetric NATs, which took a reservation on it too, keep talking
// through it.
func TestNATSecondRelay(t *testing.T) {
	n := newNATNet(t, []natKind{natSymmetric, natSymmetric}, [][]string{{"a1"}, {"c1"}})
	n.addPublic("pub2", "198.18.0.3")
	// pub2 joins first, so that it is a member the laptops meet.
	addrs := n.startPublic()
	var inv struct {
		Token string `json:"token"`
	}
	var relays []string
	for _, a := range addrs {
		if strings.Contains(a, natPublicAddr) && strings.Contains(a, "/tcp/4710/p2p/") {
			relays = append(relays, "--relay", a)
		}
	}
	if err := n.cliJSON("pub", &inv, append([]string{"invite", "--no-qr"}, relays...)...); err != nil {
		t.Fatalf("invite: %v", err)
	}
	for _, l := range []string{"pub2", "a1", "c1"} {
		n.join(l, inv.Token)
		n.run(l)
	}
	pub2 := n.peerID("pub2")
	var st localapi.Status
	natEventually(t, 30*time.Second, func() error {
		st = localapi.Status{}
		if err := n.cliJSON("pub2", &st, "status"); err != nil || !st.Reach.Relaying {
			return fmt.Errorf("pub2 does not relay yet: %+v %v", st.Reach, err)
		}
		return nil
	})
	for _, l := range []string{"a1", "c1"} {
		natEventually(t, 30*time.Second, func() error {
			var info localapi.IDInfo
			if err := n.cliJSON(l, &info, "id"); err != nil {
				return err
			}
			for _, a := range info.Addrs {
				if strings.Contains(a, "/p2p/"+pub2+"/p2p-circuit") {
					return nil
				}
			}
			return fmt.Errorf("%s holds no reservation on pub2: %v", l, info.Addrs)
		})
	}
	natEventually(t, 20*time.Second, func() error {
		var res localapi.SendResult
		return n.cliJSON("a1", &res, "send", "--to", "c1", "--payload", `"two relays"`)
	})
	n.stop("pub")
	gone := time.Now()
	natEventually(t, 60*time.Second, func() error {
		var res localapi.SendResult
		return n.cliJSON("a1", &res, "send", "--to", "c1", "--payload", `"through pub2"`)
	})
	p, err := n.ping("a1", n.peerID("c1"))
	if err != nil || p.Path != "relayed" || !strings.Contains(p.Addr, "/p2p/"+pub2+"/p2p-circuit") {
		t.Fatalf("a1 -> c1 ping: want relayed through pub2: %+v %v", p, err)
	}
	t.Logf("a1 -> c1 through pub2 %s after the first relay went away; ping avg %.3f ms", time.Since(gone).Round(time.Millisecond), p.Average)
}

// TestNATMappingChange: c1's router gets a new public address and forgets
// every mapping it held (a restart with a new DHCP lease): c1's packets
// leave from a new address and port, and peers must reach c1 again. Its
// QUIC connection to the relay follows the new mapping (QUIC tells a
// connection by its ID, not its addresses), so delivery goes on at once.
func TestNATMappingChange(t *testing.T) {
	if _, err := exec.LookPath("conntrack"); err != nil {
		t.Skip("needs conntrack (Debian's conntrack package) to make a router forget its mappings")
	}
	n := newNATNet(t, []natKind{natEIM, natSymmetric}, [][]string{{"a1"}, {"c1"}})
	natSwarm(t, n, "a1", "c1")
	natEventually(t, 20*time.Second, func() error {
		var res localapi.SendResult
		return n.cliJSON("a1", &res, "send", "--to", "c1", "--payload", `"before the new address"`)
	})
	r2 := n.tag + "-r2"
	n.must("-n", r2, "addr", "del", "198.18.2.1/15", "dev", "wan")
	n.must("-n", r2, "addr", "add", "198.18.2.9/15", "dev", "wan")
	// A restarted router has forgotten its mappings.
	if out, err := exec.Command("ip", "netns", "exec", r2, "conntrack", "-F").CombinedOutput(); err != nil {
		t.Fatalf("conntrack -F in c1's router: %v: %s", err, out)
	}
	changed := time.Now()
	natEventually(t, 90*time.Second, func() error {
		var res localapi.SendResult
		return n.cliJSON("a1", &res, "send", "--to", "c1", "--payload", `"after the new address"`)
	})
	t.Logf("a1 -> c1 delivered %s after c1's router changed its address", time.Since(changed).Round(time.Millisecond))
	natEventually(t, 90*time.Second, func() error {
		var res localapi.SendResult
		return n.cliJSON("c1", &res, "send", "--to", "a1", "--payload", `"back"`)
	})
	t.Logf("c1 -> a1 delivered %s after", time.Since(changed).Round(time.Millisecond))
}
