package connhealth

import (
	"crypto/rand"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/nova-node/nova-node/protocol"
)

// fakeNet lists connections; only what deadPaths uses is implemented.
type fakeNet struct {
	network.Network
	conns []*fakeConn
}

func (f *fakeNet) Conns() []network.Conn {
	var out []network.Conn
	for _, c := range f.conns {
		out = append(out, c)
	}
	return out
}

func (f *fakeNet) ConnsToPeer(p peer.ID) []network.Conn {
	var out []network.Conn
	for _, c := range f.conns {
		if c.p == p {
			out = append(out, c)
		}
	}
	return out
}

type fakeConn struct {
	network.Conn
	p             peer.ID
	local, remote ma.Multiaddr
	closed        chan struct{}
}

func newFakeConn(p peer.ID, local, remote string) *fakeConn {
	return &fakeConn{p: p, local: ma.StringCast(local), remote: ma.StringCast(remote), closed: make(chan struct{})}
}

func (c *fakeConn) RemotePeer() peer.ID           { return c.p }
func (c *fakeConn) LocalMultiaddr() ma.Multiaddr  { return c.local }
func (c *fakeConn) RemoteMultiaddr() ma.Multiaddr { return c.remote }
func (c *fakeConn) Close() error                  { close(c.closed); return nil }

// rawConn is the manet.Conn deadPaths is told timed out.
type rawConn struct {
	manet.Conn
	local, remote ma.Multiaddr
}

func (c rawConn) LocalMultiaddr() ma.Multiaddr  { return c.local }
func (c rawConn) RemoteMultiaddr() ma.Multiaddr { return c.remote }

// A connection that timed out takes down the peer's other connections on
// the same path (same local and remote IP, whatever the transport; real
// QUIC connections on a wildcard listener report the wildcard locally, so
// they match only each other), and only those:
// the same peer on another path (another local interface, another address
// of its, a relay at its address) and other peers at that address stay.
func TestTimedOutPeerLosesItsOtherConnectionsOnThatPath(t *testing.T) {
	const a, b peer.ID = "peer-a", "peer-b"
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dead := newFakeConn(a, "/ip4/10.0.0.2/tcp/4001", "/ip4/10.0.0.1/tcp/50000")
	sameTCP := newFakeConn(a, "/ip4/10.0.0.2/tcp/50001", "/ip4/10.0.0.1/tcp/4001")
	sameQUIC := newFakeConn(a, "/ip4/10.0.0.2/udp/4001/quic-v1", "/ip4/10.0.0.1/udp/4001/quic-v1")
	// Two QUIC connections between the same ports (both nodes dialled)
	// differ only by identity.
	twinQUIC := newFakeConn(a, "/ip4/10.0.0.2/udp/4001/quic-v1", "/ip4/10.0.0.1/udp/4001/quic-v1")
	otherLocal := newFakeConn(a, "/ip4/10.0.0.3/tcp/50004", "/ip4/10.0.0.1/tcp/4001")
	otherRemote := newFakeConn(a, "/ip4/10.0.0.2/tcp/50002", "/ip4/192.168.1.5/tcp/4001")
	relayed := newFakeConn(a, "/ip4/10.0.0.2/tcp/50005", "/ip4/10.0.0.1/tcp/4003/p2p/"+relay.String()+"/p2p-circuit")
	otherPeer := newFakeConn(b, "/ip4/10.0.0.2/tcp/50003", "/ip4/10.0.0.1/tcp/4002")
	var nw network.Network = &fakeNet{conns: []*fakeConn{dead, sameTCP, sameQUIC, twinQUIC, otherLocal, otherRemote, relayed, otherPeer}}
	d := newDeadPaths()
	d.net.Store(&nw)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() { d.run(done); close(stopped) }()

	d.timedOut(&watchedConn{Conn: rawConn{local: dead.local, remote: dead.remote}, paths: d})
	for _, c := range []*fakeConn{sameTCP, sameQUIC, twinQUIC} {
		select {
		case <-c.closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s -> %s not closed", c.local, c.remote)
		}
	}
	close(done)
	<-stopped
	// run has handled the report: nothing else was closed. A report for a
	// peer with nothing else on its path closes nothing.
	if n := protocol.CloseSiblings(nw, otherPeer); n != 0 {
		t.Errorf("closed %d connections beside a peer's only one", n)
	}
	for _, c := range []*fakeConn{dead, otherLocal, otherRemote, relayed, otherPeer} {
		select {
		case <-c.closed:
			t.Errorf("%s -> %s closed, want it kept", c.local, c.remote)
		default:
		}
	}
}

// A timeout before the host exists, or of a connection the swarm no longer
// lists, is ignored.
func TestTimeoutOfUnknownConnectionIgnored(t *testing.T) {
	d := newDeadPaths()
	c := rawConn{local: ma.StringCast("/ip4/10.0.0.2/tcp/1"), remote: ma.StringCast("/ip4/10.0.0.1/tcp/2")}
	d.timedOut(&watchedConn{Conn: c, paths: d})
	var nw network.Network = &fakeNet{}
	d.net.Store(&nw)
	d.timedOut(&watchedConn{Conn: c, paths: d})
	if len(d.dead) != 0 {
		t.Fatalf("%d reports queued, want none", len(d.dead))
	}
}

// failingConn fails every read and write with err.
type failingConn struct {
	rawConn
	err error
}

func (c failingConn) Read([]byte) (int, error)  { return 0, c.err }
func (c failingConn) Write([]byte) (int, error) { return 0, c.err }

// Only the kernel giving up on the peer (ETIMEDOUT) is reported, once; a
// deadline that passed (yamux's write timeout) or a reset is not.
func TestOnlyKernelTimeoutsAreReported(t *testing.T) {
	raw := rawConn{local: ma.StringCast("/ip4/10.0.0.2/tcp/1"), remote: ma.StringCast("/ip4/10.0.0.1/tcp/2")}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}, 1},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, 0},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, 0},
		{io.EOF, 0},
	} {
		d := newDeadPaths()
		var nw network.Network = &fakeNet{conns: []*fakeConn{{p: "peer-a", local: raw.local, remote: raw.remote}}}
		d.net.Store(&nw)
		c := userTimeoutUpgrader{paths: d}.watch(failingConn{raw, tc.err})
		_, _ = c.Read(nil)
		_, _ = c.Write(nil)
		_, _ = c.Read(nil)
		if got := len(d.dead); got != tc.want {
			t.Errorf("%v: reported %d times, want %d", tc.err, got, tc.want)
		}
	}
}

// A watched connection is listed, for the router's ack checks, until it
// closes.
func TestWatchedConnectionsListedUntilClosed(t *testing.T) {
	d := newDeadPaths()
	raw := rawConn{local: ma.StringCast("/ip4/10.0.0.2/tcp/1"), remote: ma.StringCast("/ip4/10.0.0.1/tcp/2")}
	c := userTimeoutUpgrader{paths: d}.watch(closableConn{raw})
	if len(d.socks) != 1 {
		t.Fatalf("%d connections listed, want 1", len(d.socks))
	}
	_ = c.Close()
	if len(d.socks) != 0 {
		t.Fatalf("%d connections listed after Close, want 0", len(d.socks))
	}
}

type closableConn struct{ rawConn }

func (closableConn) Close() error { return nil }

func (c rawConn) RemoteAddr() net.Addr { a, _ := manet.ToNetAddr(c.remote); return a }

// A timeout is reported even once the swarm no longer lists the
// connection (the reader saw it end before the writer saw why): the
// Connected notification tied the swarm's connection to the socket.
func TestTimeoutReportedAfterTheSwarmLetGo(t *testing.T) {
	d := newDeadPaths()
	var nw network.Network = &fakeNet{} // lists nothing any more
	d.net.Store(&nw)
	raw := rawConn{local: ma.StringCast("/ip4/10.0.0.2/tcp/1"), remote: ma.StringCast("/ip4/10.0.0.1/tcp/2")}
	c := userTimeoutUpgrader{paths: d}.watch(failingConn{raw, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ETIMEDOUT)}})
	swarmConn := newFakeConn("peer-a", "/ip4/10.0.0.2/tcp/1", "/ip4/10.0.0.1/tcp/2")
	d.connected(nw, swarmConn)
	_, _ = c.Write(nil)
	select {
	case got := <-d.dead:
		if got != network.Conn(swarmConn) {
			t.Fatalf("reported %v, want the swarm's connection", got)
		}
	default:
		t.Fatal("the timeout was not reported")
	}
}
