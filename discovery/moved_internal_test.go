package discovery

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/internal/waitfor"
)

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// An address that flaps (a VPN, containers) restarts mDNS at most once per
// mdnsRestartGap, and the last change is still advertised: one restart
// follows it.
func TestFlappingAddressRestartsMDNSAtMostOncePerGap(t *testing.T) {
	oldPoll, oldGap, oldStart := addrPollInterval, mdnsRestartGap, startMDNS
	addrPollInterval, mdnsRestartGap = 10*time.Millisecond, 300*time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	startMDNS = func(host.Host, string, func(peer.AddrInfo)) (io.Closer, error) {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		return nopCloser{}, nil
	}
	t.Cleanup(func() { addrPollInterval, mdnsRestartGap, startMDNS = oldPoll, oldGap, oldStart })

	h, key := NewTestHost(t)
	t.Cleanup(func() { h.Close() })
	reg := agentcard.NewRegistry(h.ID())
	var ipMu sync.Mutex
	ips := []net.IP{net.ParseIP("192.0.2.10")}
	svc, err := New(h, key, "flap", reg, reg, WithMDNS(true), WithInterfaceAddrs(func() ([]net.IP, error) {
		ipMu.Lock()
		defer ipMu.Unlock()
		return append([]net.IP(nil), ips...), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })

	var lastChange time.Time
	flapStart := time.Now()
	for i := range 30 { // a VPN address comes and goes every 30 ms for 0.9 s
		ipMu.Lock()
		if i%2 == 0 {
			ips = []net.IP{net.ParseIP("192.0.2.10"), net.ParseIP("198.51.100.7")}
		} else {
			ips = []net.IP{net.ParseIP("192.0.2.10")}
		}
		ipMu.Unlock()
		lastChange = time.Now()
		time.Sleep(30 * time.Millisecond) // the flap's pace: part of the scenario
	}
	// The last change is advertised: a restart follows it.
	waitfor.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if last := starts[len(starts)-1]; last.Before(lastChange) {
			return fmt.Errorf("the last restart came %s before the last change: it is not advertised", lastChange.Sub(last))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	restarts := len(starts) - 1 // the first is Start's
	t.Logf("%d changes, %d mDNS restarts", svc.Stats().Moves, restarts)
	// One restart per gap at most, and one after the last change: the
	// bound follows the flap's real length (a loaded machine stretches it).
	flap := lastChange.Sub(flapStart)
	if most := int(flap/mdnsRestartGap) + 2; restarts < 1 || restarts > most {
		t.Errorf("%d mDNS restarts for a %s flap, want 1 to %d (one per %s at most)", restarts, flap.Round(time.Millisecond), most, mdnsRestartGap)
	}
	for i := 2; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < mdnsRestartGap-50*time.Millisecond {
			t.Errorf("restarts %d and %d only %s apart", i-1, i, gap)
		}
	}
}
