package node

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-libp2p/p2p/transport/tcpreuse"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// TCPUserTimeout bounds how long bytes written on a TCP connection may go
// unacknowledged by the peer's kernel before the connection is dropped
// (Linux's TCP_USER_TIMEOUT, set on every TCP socket the node dials or
// accepts).
//
// Without it a peer cut off the network (a laptop closed or taken off the
// Wi-Fi: no reset is sent) is noticed only by yamux's keepalive, 30 s after
// the last byte received plus 10 s for its ping, and its channels wait that
// long before they redial and, in the end, report DELIVERY_FAILED. The
// kernel's acknowledgements are the safe probe at this layer: a slow or busy
// peer still acknowledges each segment as it arrives, however full the
// link, so only a peer that answers nothing at all is dropped. QUIC
// connections have the router's liveness check instead (protocol.WithLiveness).
const TCPUserTimeout = 10 * time.Second

// deadPaths closes, when one TCP connection times out, the other
// connections to the same peer at the same IP address: a host that
// acknowledged nothing for TCPUserTimeout on one is gone for all of them.
// Two nodes that found each other at once (mDNS) hold two connections, and
// a channel whose connection timed out would otherwise redial onto the
// other, idle and as dead, and wait out its timeout too.
type deadPaths struct {
	net  atomic.Pointer[network.Network] // set once the host exists
	dead chan peerAt                     // to the goroutine that closes (run)
}

// peerAt is a peer at an IP address, and the connection that timed out.
type peerAt struct {
	p                  peer.ID
	ip                 net.IP
	deadLocal, deadRem ma.Multiaddr
}

func newDeadPaths() *deadPaths { return &deadPaths{dead: make(chan peerAt, 16)} }

// timedOut runs on the connection's reader or writer as it fails: it finds
// the connection's peer while the swarm still lists it, and leaves the
// closing to run.
func (d *deadPaths) timedOut(c manet.Conn) {
	nw := d.net.Load()
	if nw == nil {
		return
	}
	local, remote := c.LocalMultiaddr(), c.RemoteMultiaddr()
	ip, err := manet.ToIP(remote)
	if err != nil {
		return
	}
	for _, conn := range (*nw).Conns() {
		if conn.LocalMultiaddr().Equal(local) && conn.RemoteMultiaddr().Equal(remote) {
			select {
			case d.dead <- peerAt{conn.RemotePeer(), ip, local, remote}:
			default: // a burst of timeouts: the later ones find their siblings closed anyway
			}
			return
		}
	}
}

// run closes the timed-out peers' other connections at the same IP address
// until done is closed.
func (d *deadPaths) run(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case pa := <-d.dead:
			nw := d.net.Load()
			closed := 0
			for _, conn := range (*nw).ConnsToPeer(pa.p) {
				if conn.LocalMultiaddr().Equal(pa.deadLocal) && conn.RemoteMultiaddr().Equal(pa.deadRem) {
					continue
				}
				if ip, err := manet.ToIP(conn.RemoteMultiaddr()); err == nil && ip.Equal(pa.ip) {
					_ = conn.Close()
					closed++
				}
			}
			if closed > 0 {
				log.Infow("peer stopped acknowledging: closed its other connections at that address", "peer", pa.p, "ip", pa.ip, "closed", closed)
			}
		}
	}
}

// tcpTransport is libp2p's TCP transport whose sockets carry TCPUserTimeout
// and report their timeouts to d: libp2p has no option for socket settings,
// so its upgrader, which sees each raw connection first, sets them.
func (d *deadPaths) tcpTransport(up transport.Upgrader, rcmgr network.ResourceManager, shared *tcpreuse.ConnMgr) (*tcp.TcpTransport, error) {
	return tcp.NewTCPTransport(userTimeoutUpgrader{up, TCPUserTimeout, d.timedOut}, rcmgr, shared)
}

// userTimeoutUpgrader sets the user timeout on each TCP connection before
// the upgrade, and watches it for timeouts: dialled ones in Upgrade,
// accepted ones in the listener's Accept (the TCP transport upgrades those
// through its listener).
type userTimeoutUpgrader struct {
	transport.Upgrader
	d        time.Duration
	timedOut func(manet.Conn)
}

func (u userTimeoutUpgrader) Upgrade(ctx context.Context, t transport.Transport, c manet.Conn, dir network.Direction, p peer.ID, scope network.ConnManagementScope) (transport.CapableConn, error) {
	return u.Upgrader.Upgrade(ctx, t, u.watch(c), dir, p, scope)
}

func (u userTimeoutUpgrader) UpgradeGatedMaListener(t transport.Transport, l transport.GatedMaListener) transport.Listener {
	return u.Upgrader.UpgradeGatedMaListener(t, userTimeoutListener{l, u})
}

func (u userTimeoutUpgrader) watch(c manet.Conn) manet.Conn {
	setUserTimeout(c, u.d)
	if u.timedOut == nil {
		return c
	}
	return &watchedConn{Conn: c, timedOut: u.timedOut}
}

type userTimeoutListener struct {
	transport.GatedMaListener
	u userTimeoutUpgrader
}

func (l userTimeoutListener) Accept() (manet.Conn, network.ConnManagementScope, error) {
	c, scope, err := l.GatedMaListener.Accept()
	if err != nil {
		return c, scope, err
	}
	return l.u.watch(c), scope, nil
}

// watchedConn reports the first read or write that fails with ETIMEDOUT:
// the kernel gave up on the peer (TCP_USER_TIMEOUT, or keepalive).
type watchedConn struct {
	manet.Conn
	timedOut func(manet.Conn)
	once     sync.Once
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.check(err)
	}
	return n, err
}

func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.check(err)
	}
	return n, err
}

func (c *watchedConn) check(err error) {
	if errors.Is(err, syscall.ETIMEDOUT) {
		c.once.Do(func() { c.timedOut(c.Conn) })
	}
}
