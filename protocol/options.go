package protocol

import (
	"context"
	"errors"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/protocol/channel"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

// Option configures a Router.
type Option func(*options) error

type options struct {
	rules          tiers.Rules
	policy         sandbox.Policy
	maxFrame       int
	sink           EventSink
	auth           Authority
	factory        *envelope.Factory
	requestTimeout time.Duration
	concurrency    int
	helloInterval  time.Duration
	idleTimeout    time.Duration
	channel        channel.Config
	deliveryTTL    time.Duration // > 0: envelopes to a node that is away wait this long (channel.Config.Park)
	store          Store
	journal        Journal  // nil: the outbox is written behind the traffic only
	journalRecs    [][]byte // what an earlier run left in journal, replayed at Start
	persistAfter   time.Duration
	persistEvery   time.Duration
	ps             *pubsub.PubSub
	swarm          string
	resolver       Resolver
	lookupTimeout  time.Duration
	probeAfter     time.Duration // silence, after a write, before the peer is pinged
	probeTimeout   time.Duration // how long the ping may take before the peer counts as gone
	acks           AckCheck      // nil: TCP connections are never probed
	member         func(peer.ID) // nil: nobody is told
	findPeer       PeerFinder    // nil: only the peerstore's addresses are dialled
}

// defaults: the seed's tier rules, sandbox not enforced, 1 MiB frames, 30 s
// handler and request timeout, 256 concurrent handler calls, hello refresh
// every 3 minutes (well inside the registry's 10-minute remote TTL), inbound
// streams closed after 10 idle minutes, channels redial 3 times from 500 ms
// doubling, outbox in memory.
func defaults() options {
	return options{
		rules:          tiers.DefaultRules(),
		maxFrame:       frame.DefaultMaxSize,
		sink:           nopSink{},
		factory:        &envelope.Factory{Now: clock.Now, NewID: envelope.NewID},
		requestTimeout: 30 * time.Second,
		concurrency:    256,
		helloInterval:  3 * time.Minute,
		idleTimeout:    10 * time.Minute,
		channel:        channel.Config{Retries: 3, Base: 500 * time.Millisecond},
		store:          NewMemStore(),
		persistAfter:   time.Second,
		persistEvery:   20 * time.Millisecond,
		lookupTimeout:  5 * time.Second,
		probeAfter:     5 * time.Second,
		probeTimeout:   5 * time.Second,
	}
}

// WithTierRules sets the tier routing rules (default tiers.DefaultRules()).
func WithTierRules(r tiers.Rules) Option {
	return func(o *options) error {
		if err := r.Validate(); err != nil {
			return err
		}
		o.rules = r
		return nil
	}
}

// WithAuthority makes hellos carry the swarm authority's records and hands
// those peers present to a (default: none; hellos carry cards only).
func WithAuthority(a Authority) Option {
	return func(o *options) error { o.auth = a; return nil }
}

// WithSandboxPolicy sets the sandbox policy (default: not enforced).
func WithSandboxPolicy(p sandbox.Policy) Option {
	return func(o *options) error { o.policy = p; return nil }
}

// WithMaxFrameSize caps frame bodies in bytes (default 1 MiB, at least 4 KiB).
func WithMaxFrameSize(n int) Option {
	return func(o *options) error {
		if n < 4<<10 {
			return errors.New("protocol: max frame size must be at least 4096 bytes")
		}
		o.maxFrame = n
		return nil
	}
}

// WithEventSink receives the router's events. Emit must not block.
func WithEventSink(s EventSink) Option {
	return func(o *options) error {
		if s == nil {
			return errors.New("protocol: nil event sink")
		}
		o.sink = s
		return nil
	}
}

// WithMembers has f told of every peer that presents valid cards of its
// own agents in its hello, each time it does, whether or not this node held
// those cards already (through the roster's gossip or the DHT). f must not
// block. A node tags such peers as members: the relay serves them, the
// connection manager keeps them.
func WithMembers(f func(peer.ID)) Option {
	return func(o *options) error { o.member = f; return nil }
}

// PeerFinder looks up the current addresses of a peer (the swarm's DHT:
// kad-dht's FindPeer), for a dial that failed on the addresses the
// peerstore held.
type PeerFinder func(ctx context.Context, p peer.ID) ([]multiaddr.Multiaddr, error)

// WithPeerFinder has the router ask f for a peer's addresses when opening
// a stream to it fails while it is not connected, and try once more when f
// names an address the peerstore did not hold, as go-libp2p's routed host
// does. A laptop behind NAT is reachable only at the relay addresses it
// took after it started; a node that learnt its addresses earlier (from a
// DHT answer, say) holds only its private ones, and without this its
// messages failed with DELIVERY_FAILED until something else brought the
// new ones.
func WithPeerFinder(f PeerFinder) Option {
	return func(o *options) error { o.findPeer = f; return nil }
}

// WithFactory sets the envelope factory used for replies (clock and ids).
func WithFactory(f *envelope.Factory) Option {
	return func(o *options) error {
		if f == nil || f.Now == nil || f.NewID == nil {
			return errors.New("protocol: incomplete envelope factory")
		}
		o.factory = f
		return nil
	}
}

// WithRequestTimeout bounds each handler call (default 30 s).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return errors.New("protocol: request timeout must be positive")
		}
		o.requestTimeout = d
		return nil
	}
}

// WithHelloInterval sets how often cards are re-announced to connected
// peers (default 3 minutes).
func WithHelloInterval(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return errors.New("protocol: hello interval must be positive")
		}
		o.helloInterval = d
		return nil
	}
}

// AckState is what a TCP connection's socket says of the peer's kernel.
type AckState struct {
	Silent         time.Duration // since it last acknowledged anything
	InFlight       bool          // bytes sent wait for its acknowledgement
	Retransmitting bool          // the retransmission timer fired: bytes went a whole RTO unacknowledged
	RTO            time.Duration // the connection's retransmission timeout, backed off (for logs)
}

// dead reports whether the state proves the peer's kernel gone after a
// probe of timeout: bytes in flight, nothing acknowledged for the whole
// probe, and the retransmission timer fired. A link merely slow (a round
// trip longer than the probe: bufferbloat, a congested cellular link) has
// an RTO above its round trip, so its timer has not fired; a lossy one
// that still works acknowledges within the probe.
func (a AckState) dead(timeout time.Duration) bool {
	return a.InFlight && a.Retransmitting && a.Silent >= timeout
}

// AckCheck reads a TCP connection's AckState; ok is false when it cannot
// tell (not TCP, not found, not Linux). The node reads it from the socket
// (TCP_INFO).
type AckCheck func(c network.Conn) (st AckState, ok bool)

// WithAckCheck lets the router probe TCP connections: a ping there may wait
// behind what the connection has buffered, so its missing answer proves
// nothing; the peer's kernel leaving the ping's bytes unacknowledged past
// a retransmission does (AckState.dead). Without it TCP connections are
// left to the transport's timeouts.
func WithAckCheck(f AckCheck) Option {
	return func(o *options) error {
		o.acks = f
		return nil
	}
}

// WithLiveness sets when a peer this node is waiting on is checked (a
// libp2p ping after probeAfter with nothing read since the last write) and
// how long that ping may take before the peer's connections are closed as
// dead (defaults 5 s and 5 s). See livenessLoop.
func WithLiveness(probeAfter, probeTimeout time.Duration) Option {
	return func(o *options) error {
		if probeAfter <= 0 || probeTimeout <= 0 {
			return errors.New("protocol: liveness delays must be positive")
		}
		o.probeAfter, o.probeTimeout = probeAfter, probeTimeout
		return nil
	}
}

// WithRetry sets how often a channel redials after losing its transport and
// the first delay; each next delay doubles (default 3, 500 ms). When every
// redial fails, each pending envelope fails once with DELIVERY_FAILED.
func WithRetry(retries int, base time.Duration) Option {
	return func(o *options) error {
		if retries < 0 || base <= 0 {
			return errors.New("protocol: retries must be >= 0 and base delay positive")
		}
		o.channel.Retries, o.channel.Base = retries, base
		return nil
	}
}

// WithDeliveryTTL keeps envelopes to a node that is away (its channel's
// redials spent) in the outbox for ttl from when they were sent, instead of
// failing them: the channel dials again on a schedule (doubling up to 30 s)
// and at once when the peer connects, and delivers them in order. Only
// when an envelope's time to live ends does it fail, once, with
// DELIVERY_FAILED. A request (its sender waits for an answer) still fails
// when the redials are spent; a sender waiting for the acknowledgement of
// anything else is told PEER_AWAY and the envelope stays queued. 0 (the
// default) fails every pending envelope when the redials are spent.
// [WithSendTTL] sets one envelope's time to live.
func WithDeliveryTTL(ttl time.Duration) Option {
	return func(o *options) error {
		if ttl < 0 {
			return errors.New("protocol: negative delivery TTL")
		}
		o.deliveryTTL = ttl
		o.channel.Park = ttl > 0
		return nil
	}
}

type sendTTLKey struct{}

// WithSendTTL returns a context whose sends (Send, Post) give their
// envelope time to live ttl instead of the router's [WithDeliveryTTL].
func WithSendTTL(ctx context.Context, ttl time.Duration) context.Context {
	return context.WithValue(ctx, sendTTLKey{}, ttl)
}

// sendTTL is ctx's time to live for an envelope, or the router's.
func (r *Router) sendTTL(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(sendTTLKey{}).(time.Duration); ok && d > 0 {
		return d
	}
	return r.o.deliveryTTL
}

// WithStore persists the outbox and channel watermarks (default: in memory,
// lost at Close).
func WithStore(s Store) Option {
	return func(o *options) error {
		if s == nil {
			return errors.New("protocol: nil store")
		}
		o.store = s
		return nil
	}
}

// WithPersistDelay sets how long an envelope may stay unacknowledged before
// it is written to the outbox (default 1 s; envelopes on a channel that is
// not open are written at the next pass, every 20 ms, and everything at
// Close). Envelopes acknowledged sooner never touch the disk: with 10 ms a
// burst of 20,000 posts spent its time writing and deleting its own backlog
// (3-38k msgs/s instead of a steady 31-36k).
func WithPersistDelay(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return errors.New("protocol: negative persist delay")
		}
		o.persistAfter = d
		return nil
	}
}

// WithResolver makes the router look up, through res, recipients and
// capabilities its registry does not know before answering AGENT_NOT_FOUND
// or CAPABILITY_NOT_FOUND (requirement 4.4), waiting at most timeout
// (default 5 s when <= 0).
func WithResolver(res Resolver, timeout time.Duration) Option {
	return func(o *options) error {
		o.resolver = res
		if timeout > 0 {
			o.lookupTimeout = timeout
		}
		return nil
	}
}
