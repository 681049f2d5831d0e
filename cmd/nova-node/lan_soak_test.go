//go:build soak

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node/connhealth"
	"github.com/nova-node/nova-node/node/localapi"
)

// An idle TCP connection to a laptop cut off the network is dropped within
// about 15 s: the kernel probes it after TCPKeepAliveIdle, and with the
// user timeout drops it at the next probe. Before, it lasted until yamux's
// keepalive found it: 35 to 40 s (`peers` listed the laptop, and capability
// routing took its node for connected, that long). Over QUIC, where the
// node cannot set these, it still takes QUIC's 30 s idle timeout (about
// 40 s measured by hand).
func TestIdlePeerCutOffIsDropped(t *testing.T) {
	t.Parallel() // its wait overlaps the other cut-off tests'
	l := newLAN(t, 2)
	for i := range 2 {
		l.run(i, "--listen", fmt.Sprintf("/ip4/%s/tcp/4001", l.addr(i)))
	}
	l.waitForAgents(1, 2, 45*time.Second)
	if out, err := l.cli(1, "send", "--to", "laptop0", "--payload", "1"); err != nil {
		t.Fatalf("before the cut: %v\n%s", err, out)
	}
	// Let the acknowledgements and greetings settle: bytes in flight at the
	// cut would trip the user timeout (TestPeerCutOffIsGivenUp), not the
	// keepalive.
	// A quiet spell of the scenario, not synchronisation: the connection
	// must be idle when the link goes down.
	time.Sleep(3 * time.Second)
	if err := l.ip("link", "set", l.veths[0], "down"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	limit := connhealth.TCPKeepAliveIdle + connhealth.TCPKeepAliveInterval + 5*time.Second
	waitfor.Eventually(t, limit, func() error {
		out, err := l.cli(1, "peers", "--json")
		if err != nil || strings.Contains(out, l.addr(0)) {
			return fmt.Errorf("laptop1 still lists laptop0 %s after the cut: %v\n%s", time.Since(start).Round(time.Second), err, out)
		}
		return nil
	})
	t.Logf("laptop0 dropped from laptop1's peers %s after the cut", time.Since(start).Round(100*time.Millisecond))
}

// A laptop that leaves keeps its cards in the others' registries for their
// TTL (10 minutes). A capability send that picked its agent fails once, and
// the next goes to another agent with the capability at once: the node it
// could not reach goes last. Before, every capability send for those 10
// minutes picked the same agent and failed 12.5 s later.
func TestCapabilitySendAvoidsALaptopThatLeft(t *testing.T) {
	t.Parallel() // its 18 s wait overlaps the other cut-off tests'
	l := newLAN(t, 3)
	for i := range 3 {
		args := []string{"--listen", fmt.Sprintf("/ip4/%s/tcp/4001", l.addr(i))}
		if i != 1 {
			args = append(args, "--agent", fmt.Sprintf("worker%d:2:translate", i))
		}
		l.run(i, args...)
	}
	l.waitForAgents(1, 5, 45*time.Second)
	send := func() (localapi.SendResult, time.Duration) {
		start := time.Now()
		out, _ := l.cli(1, "send", "--capability", "translate", "--type", "notification", "--payload", `"hola"`, "--json")
		var res localapi.SendResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sent == nil {
			t.Fatalf("send --capability: %v\n%s", err, out)
		}
		return res, time.Since(start)
	}
	// Both workers are equally vouched for: laptop1's salted tie-break
	// picks one, the same every time. Cut that one's laptop off.
	res, _ := send()
	if !res.Result.Delivered || !strings.HasPrefix(res.Result.TargetAgentID, "worker0@") && !strings.HasPrefix(res.Result.TargetAgentID, "worker2@") {
		t.Fatalf("before the cut: %+v, want delivered to worker0 or worker2", res.Result)
	}
	cut, other, laptop := "worker0", "worker2", 0
	if strings.HasPrefix(res.Result.TargetAgentID, "worker2@") {
		cut, other, laptop = "worker2", "worker0", 2
	}
	if err := l.ip("link", "set", l.veths[laptop], "down"); err != nil {
		t.Fatal(err)
	}
	// Its node counts as away: the notification waits for it in the outbox.
	if res, took := send(); res.Result.Delivered || res.Error == nil || res.Error.Code != "PEER_AWAY" {
		t.Fatalf("%s cut off: %+v after %s, want PEER_AWAY", cut, res.Result, took)
	} else {
		t.Logf("%s cut off: PEER_AWAY after %s", cut, took.Round(100*time.Millisecond))
	}
	for range 2 {
		res, took := send()
		if !res.Result.Delivered || !strings.HasPrefix(res.Result.TargetAgentID, other+"@") || took > 3*time.Second {
			t.Fatalf("the next capability send: %+v after %s, want delivered to %s at once", res.Result, took, other)
		}
		t.Logf("then delivered to %s in %s", other, took.Round(time.Millisecond))
	}
}
