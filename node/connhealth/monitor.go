package connhealth

import (
	"context"
	"errors"
	"sync"
	"time"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-libp2p/p2p/transport/tcpreuse"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/protocol"
)

var log = golog.Logger("nova/connhealth")

// ErrClosed is returned by [Monitor.Start] once the Monitor is closed.
var ErrClosed = errors.New("connhealth: closed")

// errNotAttached is returned by [Monitor.Start] before [Monitor.Attach].
var errNotAttached = errors.New("connhealth: Start before Attach")

// Option configures a Monitor.
type Option func(*config)

type config struct {
	store Store           // nil: no address book
	peers []peer.AddrInfo // kept connected
}

// WithStore remembers, in s, where the nova peers the node identifies can
// be dialled, and puts those addresses back in the peerstore on Attach.
// Without it nothing is remembered across restarts.
func WithStore(s Store) Option { return func(c *config) { c.store = s } }

// WithPeers keeps the node connected to peers: Start dials each, and each
// one that drops is dialled again every 10 s until Close. Each AddrInfo is
// dialled on its own, so one peer may be given at several addresses.
func WithPeers(peers ...peer.AddrInfo) Option {
	return func(c *config) { c.peers = append(c.peers, peers...) }
}

// Monitor owns the health of the node's connections: the TCP transport's
// socket timers and the closing of dead paths, the router's ack checks,
// the address book and the configured peers. New builds it, the host is
// built with [Monitor.TCPTransport], [Monitor.Attach] ties it to that
// host, [Monitor.Start] starts its goroutines and [Monitor.Close] stops
// them (see the package documentation for the order).
type Monitor struct {
	cfg   config
	paths *deadPaths

	mu      sync.Mutex
	h       host.Host          // set by Attach
	log     *zap.SugaredLogger // carries the host's ID once attached
	book    *addrBook          // nil without a Store or before Attach
	started bool
	closed  bool
	cancel  context.CancelFunc // ends the goroutines Start started
	wg      sync.WaitGroup
}

// New builds a Monitor with no host yet. It starts nothing.
func New(opts ...Option) *Monitor {
	m := &Monitor{paths: newDeadPaths(), log: &log.SugaredLogger}
	for _, o := range opts {
		o(&m.cfg)
	}
	return m
}

// TCPTransport is libp2p's TCP transport with the node's socket timers
// (TCPUserTimeout, TCPKeepAliveIdle, TCPKeepAliveInterval) on every
// connection it dials or accepts, each watched for the kernel giving up on
// its peer. Pass it to libp2p.Transport in place of tcp.NewTCPTransport.
func (m *Monitor) TCPTransport(up transport.Upgrader, rcmgr network.ResourceManager, shared *tcpreuse.ConnMgr) (*tcp.TcpTransport, error) {
	return m.paths.tcpTransport(up, rcmgr, shared)
}

// AckCheck is the router's [protocol.AckCheck]: what the peer's kernel has
// acknowledged on c, read from the socket (TCP_INFO, Linux). ok is false
// for a connection the TCP transport did not make, or elsewhere than Linux.
func (m *Monitor) AckCheck(c network.Conn) (protocol.AckState, bool) { return m.paths.acks(c) }

var _ protocol.AckCheck = (*Monitor)(nil).AckCheck

// Attach ties the Monitor to h, the host built with its TCPTransport, once
// and before h listens or dials: it watches h's connections, and puts the
// addresses the Store remembers into h's peerstore, so that whatever dials
// from Start on (the router's restored outbox, the configured peers)
// finds them. A Store that cannot be read is logged, not fatal: the node
// runs without its memory.
func (m *Monitor) Attach(h host.Host) {
	nw := h.Network()
	m.paths.net.Store(&nw)
	nw.Notify(&network.NotifyBundle{ConnectedF: m.paths.connected})
	id := h.ID().String()
	l := log.With("self", id[len(id)-6:])
	var book *addrBook
	if m.cfg.store != nil {
		book = newAddrBook(h, m.cfg.store, l)
		if known, err := loadAddrBook(h, m.cfg.store, time.Now()); err != nil {
			l.Warnw("peer addresses not loaded", "err", err)
		} else if known > 0 {
			l.Debugw("peer addresses loaded", "peers", known)
		}
	}
	// The configured peers' addresses are known from the start: a send
	// made before the keeper's first dial completes (just after a restart)
	// dials them too, rather than failing with "no addresses".
	for _, ai := range m.cfg.peers {
		h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.PermanentAddrTTL)
	}
	m.mu.Lock()
	m.h, m.log, m.book = h, l, book
	m.mu.Unlock()
}

// Start starts the Monitor's goroutines: the one that closes dead paths,
// the configured peers' keeper, and the address book's recorder and
// writer. ctx bounds start-up only; the goroutines run until Close. Start
// after Start does nothing; after Close it returns ErrClosed.
func (m *Monitor) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return ErrClosed
	case m.started:
		return nil
	case m.h == nil:
		return errNotAttached
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.started = true
	m.wg.Go(func() { m.paths.run(runCtx.Done()) })
	if len(m.cfg.peers) > 0 {
		m.wg.Go(func() { m.keepPeers(runCtx) })
	}
	if m.book != nil {
		sub, err := m.h.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted), eventbus.BufSize(256))
		if err != nil {
			m.log.Warnw("peer addresses will not be remembered", "err", err)
		} else {
			m.wg.Go(func() { m.book.run(sub, runCtx.Done()) })
			m.wg.Go(func() { m.book.flushLoop(runCtx.Done()) })
		}
	}
	return nil
}

// Close stops the goroutines Start started and waits for them; the
// address book writes what it has seen before it returns. It is
// idempotent and safe before Start. It does not close the host.
func (m *Monitor) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	if m.cancel != nil {
		m.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}
