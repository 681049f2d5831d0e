package connhealth_test

import (
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	manet "github.com/multiformats/go-multiaddr/net"
	"golang.org/x/sys/unix"

	"github.com/nova-node/nova-node/node/connhealth"
	"github.com/nova-node/nova-node/testnet"
)

// Both ends of a TCP connection between two nodes carry the user timeout
// and the node's keepalive timers: the dialled socket and the accepted one.
// Without them a peer cut off the network is noticed only by yamux's
// keepalive, 40 s later.
func TestTCPConnectionsCarryTheUserTimeout(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithTransport(testnet.TCP))
	net.Connect(0, 1)
	conns := net.Nodes[0].Host().Network().ConnsToPeer(net.Nodes[1].Host().ID())
	if len(conns) == 0 {
		t.Fatal("no connection")
	}
	for _, c := range conns {
		local, err := manet.ToNetAddr(c.LocalMultiaddr())
		if err != nil {
			t.Fatal(err)
		}
		remote, err := manet.ToNetAddr(c.RemoteMultiaddr())
		if err != nil {
			t.Fatal(err)
		}
		lap, rap := netip.MustParseAddrPort(local.String()), netip.MustParseAddrPort(remote.String())
		// The dialler's socket (local -> remote) and the listener's
		// accepted one (remote -> local): both are in this process.
		for _, ends := range [][2]netip.AddrPort{{lap, rap}, {rap, lap}} {
			got, ok := socketTimers(t, ends[0], ends[1])
			if !ok {
				t.Fatalf("no socket %s -> %s in this process (%s)", ends[0], ends[1], dirOf(c))
			}
			if want := (timers{connhealth.TCPUserTimeout, connhealth.TCPKeepAliveIdle, connhealth.TCPKeepAliveInterval, true, 3}); got != want {
				t.Errorf("socket %s -> %s: user timeout, keepalive idle and interval %v, want %v", ends[0], ends[1], got, want)
			}
		}
	}
}

func dirOf(c network.Conn) string { return c.Stat().Direction.String() }

// timers are a socket's TCP_USER_TIMEOUT, TCP_KEEPIDLE and TCP_KEEPINTVL,
// and whether keepalive is on (SO_KEEPALIVE) with how many probes
// (TCP_KEEPCNT).
type timers struct {
	userTimeout, keepIdle, keepInterval time.Duration
	keepAlive                           bool
	keepCount                           int
}

// socketTimers finds this process's TCP socket from local to remote and
// reads its timers.
func socketTimers(t *testing.T, local, remote netip.AddrPort) (timers, bool) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list this process's sockets: %v", err)
	}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ls, err1 := unix.Getsockname(fd)
		rs, err2 := unix.Getpeername(fd)
		if err1 != nil || err2 != nil || !sameAddr(ls, local) || !sameAddr(rs, remote) {
			continue
		}
		read := func(opt int, unit time.Duration) time.Duration {
			v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, opt)
			if err != nil {
				t.Fatal(err)
			}
			return time.Duration(v) * unit
		}
		on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		if err != nil {
			t.Fatal(err)
		}
		return timers{read(unix.TCP_USER_TIMEOUT, time.Millisecond), read(unix.TCP_KEEPIDLE, time.Second), read(unix.TCP_KEEPINTVL, time.Second),
			on == 1, int(read(unix.TCP_KEEPCNT, 1))}, true
	}
	return timers{}, false
}

func sameAddr(sa unix.Sockaddr, ap netip.AddrPort) bool {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(sa.Addr) == ap.Addr().Unmap() && sa.Port == int(ap.Port())
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(sa.Addr) == ap.Addr() && sa.Port == int(ap.Port())
	}
	return false
}
