package node_test

import (
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	manet "github.com/multiformats/go-multiaddr/net"
	"golang.org/x/sys/unix"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// Both ends of a TCP connection between two nodes carry the user timeout:
// the dialled socket and the accepted one. Without it a peer cut off the
// network is noticed only by yamux's keepalive, 40 s later.
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
			got, ok := socketUserTimeout(t, ends[0], ends[1])
			if !ok {
				t.Fatalf("no socket %s -> %s in this process (%s)", ends[0], ends[1], dirOf(c))
			}
			if got != node.TCPUserTimeout {
				t.Errorf("socket %s -> %s: TCP_USER_TIMEOUT %s, want %s", ends[0], ends[1], got, node.TCPUserTimeout)
			}
		}
	}
}

func dirOf(c network.Conn) string { return c.Stat().Direction.String() }

// socketUserTimeout finds this process's TCP socket from local to remote
// and reads its TCP_USER_TIMEOUT.
func socketUserTimeout(t *testing.T, local, remote netip.AddrPort) (time.Duration, bool) {
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
		ms, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ms) * time.Millisecond, true
	}
	return 0, false
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
