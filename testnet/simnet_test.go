//go:build sim

package testnet_test

import (
	"container/heap"
	"errors"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/p2p/transport/quicreuse"
	"github.com/quic-go/quic-go"
	"go.uber.org/fx"
)

// packetNet is a simulated UDP network for QUIC: datagrams between its
// endpoints arrive after a latency fixed per pair of addresses, or are
// lost with probability loss, on simulated time inside a synctest bubble.
// Each endpoint queues the datagrams on their way to it and delivers them
// from one timer, armed for the earliest arrival: a timer (and the
// goroutine that runs its function) per datagram cost a swarm of 100
// nodes over 100,000 goroutines at the instants many datagrams arrive.
// It stands in for go-libp2p's x/simlibp2p and marcopolo/simnet (which
// this module does not require), without their bandwidth model: links are
// as fast as the CPU.
type packetNet struct {
	latency func(from, to netip.AddrPort) time.Duration
	loss    func() bool // nil: no loss

	mu    sync.Mutex
	conns map[netip.AddrPort]*packetConn // by address: no string per datagram

	sent, lost, dropped atomic.Int64
}

func newPacketNet(latency func(from, to netip.AddrPort) time.Duration) *packetNet {
	return &packetNet{latency: latency, conns: map[netip.AddrPort]*packetConn{}}
}

// addrKey is where a datagram to a goes: its address and port, an IPv4
// address in its 4-byte form; the zero AddrPort for an address that is
// not UDP.
func addrKey(a net.Addr) netip.AddrPort {
	u, ok := a.(*net.UDPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := u.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// listen opens the endpoint at addr.
func (n *packetNet) listen(addr *net.UDPAddr) (*packetConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := addrKey(addr)
	if _, ok := n.conns[key]; ok {
		return nil, errors.New("packetnet: address in use: " + addr.String())
	}
	c := &packetConn{net: n, addr: addr, key: key, in: make(chan datagram, 1024), closed: make(chan struct{}), wake: make(chan struct{})}
	c.arrive = time.AfterFunc(time.Hour, c.deliver)
	c.arrive.Stop()
	n.conns[key] = c
	return c, nil
}

type datagram struct {
	b    []byte
	from net.Addr
}

// inFlight is a datagram on its way, due at at; seq keeps datagrams due at
// the same instant in the order they were sent.
type inFlight struct {
	at  time.Time
	seq uint64
	d   datagram
}

// flightQueue is a min-heap of datagrams on their way, earliest first.
type flightQueue []inFlight

func (q flightQueue) Len() int { return len(q) }
func (q flightQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q flightQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *flightQueue) Push(x any)   { *q = append(*q, x.(inFlight)) }
func (q *flightQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	old[len(old)-1] = inFlight{}
	*q = old[:len(old)-1]
	return x
}

// packetConn is one endpoint: a net.PacketConn with a receive buffer of
// 1,024 datagrams (a full buffer drops, as a UDP socket does).
type packetConn struct {
	net    *packetNet
	addr   *net.UDPAddr
	key    netip.AddrPort // addrKey(addr)
	in     chan datagram
	closed chan struct{}
	once   sync.Once

	mu       sync.Mutex
	deadline chan struct{} // closed when the read deadline passes; nil: none
	timer    *time.Timer
	wake     chan struct{} // closed when the deadline changes

	qmu     sync.Mutex
	flights flightQueue // datagrams on their way here
	seq     uint64
	arrive  *time.Timer // runs deliver when the earliest is due
	armed   time.Time   // when arrive fires; zero: stopped
}

// enqueue puts d on its way here, due at at.
func (c *packetConn) enqueue(at time.Time, d datagram) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.seq++
	heap.Push(&c.flights, inFlight{at: at, seq: c.seq, d: d})
	if c.armed.IsZero() || at.Before(c.armed) {
		c.armed = at
		c.arrive.Reset(time.Until(at))
	}
}

// deliver hands every datagram that is due to the reader, dropping those
// that find the receive buffer full or the endpoint closed, and arms the
// timer for the next.
func (c *packetConn) deliver() {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	now := time.Now()
	for len(c.flights) > 0 && !c.flights[0].at.After(now) {
		f := heap.Pop(&c.flights).(inFlight)
		select {
		case c.in <- f.d:
		default:
			c.net.dropped.Add(1)
		}
	}
	c.armed = time.Time{}
	select {
	case <-c.closed:
		c.net.dropped.Add(int64(len(c.flights)))
		c.flights = nil
		return
	default:
	}
	if len(c.flights) > 0 {
		c.armed = c.flights[0].at
		c.arrive.Reset(c.flights[0].at.Sub(now))
	}
}

func (c *packetConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		c.mu.Lock()
		dl, wake := c.deadline, c.wake
		c.mu.Unlock()
		select {
		case d := <-c.in:
			return copy(b, d.b), d.from, nil
		case <-c.closed:
			return 0, nil, net.ErrClosed
		case <-dl:
			return 0, nil, os.ErrDeadlineExceeded
		case <-wake:
		}
	}
}

func (c *packetConn) WriteTo(b []byte, to net.Addr) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	n := c.net
	n.sent.Add(1)
	if n.loss != nil && n.loss() {
		n.lost.Add(1)
		return len(b), nil
	}
	key := addrKey(to)
	n.mu.Lock()
	dst := n.conns[key]
	n.mu.Unlock()
	if dst == nil {
		// Nobody listens there (a node that left): the datagram is lost,
		// as UDP to a closed port is.
		n.dropped.Add(1)
		return len(b), nil
	}
	dst.enqueue(time.Now().Add(n.latency(c.key, key)), datagram{b: append([]byte(nil), b...), from: c.addr})
	return len(b), nil
}

func (c *packetConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.net.mu.Lock()
		if c.net.conns[c.key] == c {
			delete(c.net.conns, c.key)
		}
		c.net.mu.Unlock()
		c.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		c.mu.Unlock()
		c.qmu.Lock()
		c.arrive.Stop()
		c.armed = time.Time{}
		c.net.dropped.Add(int64(len(c.flights)))
		c.flights = nil
		c.qmu.Unlock()
	})
	return nil
}

func (c *packetConn) LocalAddr() net.Addr { return c.addr }

func (c *packetConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *packetConn) SetWriteDeadline(time.Time) error { return nil }

func (c *packetConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	close(c.wake)
	c.wake = make(chan struct{})
	if t.IsZero() {
		c.deadline = nil
		return nil
	}
	ch := make(chan struct{})
	c.deadline = ch
	if d := time.Until(t); d <= 0 {
		close(ch)
	} else {
		c.timer = time.AfterFunc(d, func() { close(ch) })
	}
	return nil
}

// sourceIP makes quicreuse dial from the listening address (the one
// address of a simulated host).
type sourceIP struct{ ip atomic.Pointer[net.IP] }

func (s *sourceIP) PreferredSourceIPForDestination(*net.UDPAddr) (net.IP, error) {
	return *s.ip.Load(), nil
}

// quicOn makes a libp2p host's QUIC transport listen and dial on the
// simulated network (as x/simlibp2p's QUICSimnet does on simnet).
func quicOn(pn *packetNet) libp2p.Option {
	src := &sourceIP{}
	return libp2p.QUICReuse(
		func(l fx.Lifecycle, reset quic.StatelessResetKey, token quic.TokenGeneratorKey, opts ...quicreuse.Option) (*quicreuse.ConnManager, error) {
			cm, err := quicreuse.NewConnManager(reset, token, opts...)
			if err != nil {
				return nil, err
			}
			l.Append(fx.StopHook(cm.Close)) // a conn manager passed in is not closed by the host
			return cm, nil
		},
		quicreuse.OverrideSourceIPSelector(func() (quicreuse.SourceIPSelector, error) { return src, nil }),
		quicreuse.OverrideListenUDP(func(_ string, addr *net.UDPAddr) (net.PacketConn, error) {
			src.ip.Store(&addr.IP)
			return pn.listen(addr)
		}),
	)
}

// ipFor is the simulated address of node idx: a public IPv4 address, so
// the DHT treats its peers as it treats peers on the internet.
func ipFor(idx int) net.IP { return net.IPv4(1, byte(idx>>16), byte(idx>>8), byte(idx)).To4() }

// pairLatency is the one-way latency between two simulated addresses:
// 10 to 70 ms, fixed per pair and the same both ways, so round trips
// range over 20 to 140 ms, as between hosts of one continent and across
// an ocean.
func pairLatency(from, to netip.AddrPort) time.Duration {
	if from.Compare(to) > 0 {
		from, to = to, from
	}
	var b [2 * (16 + 2)]byte
	for i, ap := range [2]netip.AddrPort{from, to} {
		a := ap.Addr().As16()
		copy(b[i*18:], a[:])
		b[i*18+16], b[i*18+17] = byte(ap.Port()>>8), byte(ap.Port())
	}
	h := fnv.New32a()
	h.Write(b[:])
	return 10*time.Millisecond + time.Duration(h.Sum32()%61)*time.Millisecond
}
