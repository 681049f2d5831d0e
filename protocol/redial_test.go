package protocol_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
)

// TestRedialOutlivesItsWait: a peer whose handshake takes longer than a
// redial waits for it (a long round trip, a starved machine) is still
// reached. Each redial waits a second here, and the handshake through a
// proxy that holds every chunk 700 ms takes longer: were the
// dial given up with the wait, as libp2p does when its last waiter
// leaves, every redial would start over and fail, and the request with
// them.
func TestRedialOutlivesItsWait(t *testing.T) {
	routers, hosts, f := tcpPairHosts(t, func(i int) []protocol.Option {
		if i != 0 {
			return nil
		}
		// Four redials 0.1 to 0.8 s apart, each waiting 1 s (redialMin).
		return []protocol.Option{protocol.WithRetry(4, 100*time.Millisecond)}
	})
	a, b := hosts[0], hosts[1]
	request := func() error {
		env, err := f.New("a0", "a1", envelope.TypeRequest, []byte(`"are you there"`))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = routers[0].RequestWithin(t.Context(), env, 20*time.Second)
		return err
	}
	if err := request(); err != nil {
		t.Fatalf("request on the direct connection: %v", err)
	}

	// A round trip of 1.4 s: even one is more than a redial waits.
	proxy := slowProxy(t, b.Addrs()[0], 700*time.Millisecond)
	// b is reachable only through the proxy from now on, and b does not
	// dial a: only a's redials, each waiting 1 s, can reconnect them.
	cutOff(b, a.ID())
	a.Peerstore().ClearAddrs(b.ID())
	a.Peerstore().AddAddr(b.ID(), proxy, peerstore.TempAddrTTL)
	if err := a.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	// The idle channel redials to stay ready; it is open again only if a
	// handshake that outlasts every redial's wait completed.
	sawLoss := false
	waitfor.Eventually(t, 15*time.Second, func() error {
		for _, c := range routers[0].Channels() {
			if c.State != "open" {
				sawLoss = true
				return fmt.Errorf("channel %s", c.State)
			}
		}
		if !sawLoss {
			return fmt.Errorf("the channel has not seen its connection end yet")
		}
		if a.Network().Connectedness(b.ID()) != network.Connected {
			return fmt.Errorf("not connected")
		}
		return nil
	})
	for _, c := range a.Network().ConnsToPeer(b.ID()) {
		if c.Stat().Direction != network.DirOutbound {
			t.Fatalf("b dialled a (%s): the test did not cut b off", c.RemoteMultiaddr())
		}
	}
	if err := request(); err != nil {
		t.Fatalf("request through the slow link: %v", err)
	}
}

// TestRedialRestoresForgottenAddresses: a peer that told us, as it
// closed, that it has no addresses (go-libp2p's identify does so while its
// host shuts down, a race the receiving peer loses now and then) is
// dialled where it was last reached when it is back: its redials failed
// with "no addresses" although it listened at the same address again.
func TestRedialRestoresForgottenAddresses(t *testing.T) {
	routers, hosts, f := tcpPairHosts(t, func(i int) []protocol.Option {
		if i != 0 {
			return nil
		}
		return []protocol.Option{protocol.WithRetry(3, 100*time.Millisecond)}
	})
	a, b := hosts[0], hosts[1]
	request := func() error {
		env, err := f.New("a0", "a1", envelope.TypeRequest, []byte(`"are you there"`))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = routers[0].RequestWithin(t.Context(), env, 10*time.Second)
		return err
	}
	if err := request(); err != nil {
		t.Fatalf("first request: %v", err)
	}
	cutOff(b, a.ID())
	if err := a.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if a.Network().Connectedness(b.ID()) == network.Connected {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	a.Peerstore().ClearAddrs(b.ID()) // what the empty identify push does
	if err := request(); err != nil {
		t.Fatalf("request after the peerstore forgot the peer's addresses: %v", err)
	}
}

// cutOff leaves h only a closed port on loopback as p's address, so that
// h cannot dial p: an empty entry would be refilled from where h last
// reached p (Router.restoreAddrs).
func cutOff(h host.Host, p peer.ID) {
	h.Peerstore().ClearAddrs(p)
	h.Peerstore().AddAddr(p, multiaddr.StringCast("/ip4/127.0.0.1/tcp/1"), peerstore.TempAddrTTL)
}

// slowProxy forwards TCP connections to target, holding each chunk d in
// each direction (a round trip of 2d on top of loopback's), until the test
// ends.
func slowProxy(t *testing.T, target multiaddr.Multiaddr, d time.Duration) multiaddr.Multiaddr {
	t.Helper()
	_, to, err := manet.DialArgs(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp4", to)
			if err != nil {
				_ = in.Close()
				continue
			}
			track(in)
			track(out)
			wg.Go(func() { delayCopy(out, in, d) })
			wg.Go(func() { delayCopy(in, out, d) })
		}
	})
	a, err := manet.FromNetAddr(ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// delayCopy copies src to dst, each chunk written d after it was read, in
// order; it closes dst when src ends.
func delayCopy(dst, src net.Conn, d time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 1024)
	go func() { // ends when src does; delayCopy waits for it through q
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{buf[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	_ = dst.Close()
	for range q { // the reader ends when src is closed
	}
}
