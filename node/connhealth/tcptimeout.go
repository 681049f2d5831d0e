package connhealth

import (
	"context"
	"errors"
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

	"github.com/nova-node/nova-node/protocol"
)

// TCPUserTimeout bounds how long bytes written on a TCP connection may go
// unacknowledged by the peer's kernel before the connection is dropped
// (Linux's TCP_USER_TIMEOUT, set on every socket of libp2p's TCP transport
// the node dials or accepts, through [Monitor.TCPTransport]; WebSocket's
// are left alone).
//
// Without it a peer cut off the network (a laptop closed or taken off the
// Wi-Fi: no reset is sent) is noticed only by yamux's keepalive, 30 s after
// the last byte received plus 10 s for its ping, and its channels wait that
// long before they redial and, in the end, report DELIVERY_FAILED. The
// kernel's acknowledgements are a probe that a busy link does not fool: a
// slow peer, or a full uplink, still acknowledges each segment as it
// arrives. Two kinds of live peer are dropped too, and lose nothing by it
// (the channels redial and retransmit): one whose network is out for longer
// than this while something is in flight, and one whose whole process is
// frozen this long (its kernel's receive window stays full: Linux counts
// that as a timeout even though it answers the window probes). QUIC
// connections have the router's liveness check instead
// (protocol.WithLiveness).
const TCPUserTimeout = 10 * time.Second

// TCPKeepAliveIdle and TCPKeepAliveInterval are when the kernel probes an
// idle TCP connection of the node (libp2p sets 30 s): after this long with
// nothing received, then at each interval. A probe is an empty segment and
// its acknowledgement, sent by the kernel alone. On Linux, with
// TCPUserTimeout, a connection whose peer answers no probe is dropped at
// the first one due once nothing was received for the user timeout, 15 s
// after the peer went silent. Without them an idle connection to a peer
// cut off the network lasts until yamux's keepalive finds it, 35 to 40 s
// (and `peers` lists the peer, and capability routing takes its node for
// connected, that long).
const (
	TCPKeepAliveIdle     = 10 * time.Second
	TCPKeepAliveInterval = 5 * time.Second
	tcpKeepAliveCount    = 3 // probes, where no user timeout decides
)

// deadPaths watches the node's TCP connections. It lists them while they
// are open, so that the router can ask what a connection's peer has
// acknowledged (acks, protocol.WithAckCheck). And when one times out it
// closes the peer's other connections on the same path
// (protocol.CloseSiblings): a host that acknowledged nothing for
// TCPUserTimeout on one is gone for all of them. Two nodes that found each
// other at once (mDNS) hold two connections, and a channel whose connection
// timed out would otherwise redial onto the other, idle and as dead, and
// wait out its timeout too.
type deadPaths struct {
	net  atomic.Pointer[network.Network] // set once the host exists (Monitor.Attach)
	dead chan network.Conn               // to the goroutine that closes (run)

	mu    sync.Mutex
	socks map[sockKey]*watchedConn // the open TCP connections, for acks
}

// sockKey names a TCP connection by its two ends, as libp2p's connection
// reports them.
type sockKey struct{ local, remote string }

func keyOf(local, remote ma.Multiaddr) sockKey { return sockKey{local.String(), remote.String()} }

func newDeadPaths() *deadPaths {
	return &deadPaths{dead: make(chan network.Conn, 16), socks: map[sockKey]*watchedConn{}}
}

// acks is the router's protocol.AckCheck, read from c's socket (TCP_INFO;
// Linux).
func (d *deadPaths) acks(c network.Conn) (protocol.AckState, bool) {
	d.mu.Lock()
	w := d.socks[keyOf(c.LocalMultiaddr(), c.RemoteMultiaddr())]
	d.mu.Unlock()
	if w == nil {
		return protocol.AckState{}, false
	}
	return ackState(w.Conn)
}

// connected is the swarm's Connected notification: it ties the swarm's
// connection to the watched socket under it, so that a timeout is reported
// even after the swarm has let go of the connection (the reader may see
// the connection end before the writer sees why).
func (d *deadPaths) connected(_ network.Network, c network.Conn) {
	d.mu.Lock()
	w := d.socks[keyOf(c.LocalMultiaddr(), c.RemoteMultiaddr())]
	d.mu.Unlock()
	if w != nil {
		w.swarm.Store(&c)
	}
}

// timedOut runs on the connection's reader or writer as it fails: it finds
// the swarm's connection (tied by connected, else among those the swarm
// lists) and leaves the closing to run.
func (d *deadPaths) timedOut(w *watchedConn) {
	var conn network.Conn
	if c := w.swarm.Load(); c != nil {
		conn = *c
	} else if nw := d.net.Load(); nw != nil {
		local, remote := w.LocalMultiaddr(), w.RemoteMultiaddr()
		for _, c := range (*nw).Conns() {
			if c.LocalMultiaddr().Equal(local) && c.RemoteMultiaddr().Equal(remote) {
				conn = c
				break
			}
		}
	}
	if conn == nil {
		return
	}
	select {
	case d.dead <- conn:
	default: // a burst of timeouts: the later ones find their siblings closed anyway
	}
}

// run closes the timed-out peers' other connections on the same path
// until done is closed.
func (d *deadPaths) run(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case conn := <-d.dead:
			if n := protocol.CloseSiblings(*d.net.Load(), conn); n > 0 {
				log.Infow("peer stopped acknowledging: closed its other connections on that path", "peer", conn.RemotePeer(), "closed", n)
			}
		}
	}
}

// tcpTransport is libp2p's TCP transport whose sockets carry TCPUserTimeout
// and report their timeouts to d: libp2p has no option for socket settings,
// so its upgrader, which sees each raw connection first, sets them.
func (d *deadPaths) tcpTransport(up transport.Upgrader, rcmgr network.ResourceManager, shared *tcpreuse.ConnMgr) (*tcp.TcpTransport, error) {
	return tcp.NewTCPTransport(userTimeoutUpgrader{up, TCPUserTimeout, d}, rcmgr, shared)
}

// userTimeoutUpgrader sets the user timeout on each TCP connection before
// the upgrade, and watches it for timeouts: dialled ones in Upgrade,
// accepted ones in the listener's Accept (the TCP transport upgrades those
// through its listener).
type userTimeoutUpgrader struct {
	transport.Upgrader
	d     time.Duration
	paths *deadPaths // nil: the connections are not watched
}

func (u userTimeoutUpgrader) Upgrade(ctx context.Context, t transport.Transport, c manet.Conn, dir network.Direction, p peer.ID, scope network.ConnManagementScope) (transport.CapableConn, error) {
	return u.Upgrader.Upgrade(ctx, t, u.watch(c), dir, p, scope)
}

// UpgradeListener is deprecated in libp2p and unused by its TCP transport;
// it goes through the wrapper all the same.
func (u userTimeoutUpgrader) UpgradeListener(t transport.Transport, l manet.Listener) transport.Listener {
	return u.UpgradeGatedMaListener(t, u.GateMaListener(l))
}

func (u userTimeoutUpgrader) UpgradeGatedMaListener(t transport.Transport, l transport.GatedMaListener) transport.Listener {
	return u.Upgrader.UpgradeGatedMaListener(t, userTimeoutListener{l, u})
}

func (u userTimeoutUpgrader) watch(c manet.Conn) manet.Conn {
	setUserTimeout(c, u.d)
	if u.paths == nil {
		return c
	}
	w := &watchedConn{Conn: c, paths: u.paths, key: keyOf(c.LocalMultiaddr(), c.RemoteMultiaddr())}
	u.paths.mu.Lock()
	u.paths.socks[w.key] = w
	u.paths.mu.Unlock()
	return w
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

// watchedConn is a TCP connection the node watches: it reports the first
// read or write that fails with ETIMEDOUT (the kernel gave up on the peer:
// TCP_USER_TIMEOUT, or keepalive), and is listed in paths.socks while open.
type watchedConn struct {
	manet.Conn
	paths *deadPaths
	key   sockKey
	swarm atomic.Pointer[network.Conn] // the swarm's connection over it, once connected
	once  sync.Once
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

func (c *watchedConn) Close() error {
	c.paths.mu.Lock()
	if c.paths.socks[c.key] == c {
		delete(c.paths.socks, c.key)
	}
	c.paths.mu.Unlock()
	return c.Conn.Close()
}

func (c *watchedConn) check(err error) {
	if errors.Is(err, syscall.ETIMEDOUT) {
		c.once.Do(func() { c.paths.timedOut(c) })
	}
}
