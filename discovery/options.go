package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/agentcard"
)

// Defaults of the options. [DefaultTTL] equals the registry's default
// remote TTL, and the republish interval is well inside it (three
// heartbeats per TTL), as seed 004's capability TTL/heartbeat asks.
const (
	DefaultTTL               = agentcard.DefaultRemoteTTL
	DefaultRepublishInterval = 3 * time.Minute
	DefaultLookupCacheTTL    = 30 * time.Second
	DefaultRetries           = 3
	DefaultRetryBase         = 200 * time.Millisecond
	DefaultRosterInterval    = 30 * time.Second
	DefaultMaxClockSkew      = time.Minute
)

// Option configures a [Service]. Options are applied in order by [New]; a
// bad value is an error that names the option.
type Option func(*config) error

type config struct {
	authPresent   func() [][]byte
	authAccept    func(host peer.ID, records [][]byte)
	bootstrap     []peer.AddrInfo
	mdns          bool
	mode          dht.ModeOpt
	ttl           time.Duration
	republish     time.Duration
	refresh       time.Duration // 0: same as republish
	roster        time.Duration // 0: no roster loop
	cacheTTL      time.Duration
	retries       int
	retryBase     time.Duration
	skew          time.Duration
	now           func() time.Time
	log           *zap.SugaredLogger
	dhtOptions    []dht.Option
	ips           func() ([]net.IP, error)                    // nil: moves are not followed
	ipsFromKernel bool                                        // ips are the system's: the kernel says when they change
	records       Limits                                      // bounds of the DHT's value record store
	providers     Limits                                      // bounds of the DHT's provider store
	gossip        func(ctx context.Context, msg []byte) error // publishes on the roster topic; nil: no roster gossip
	gossipPeers   func() int                                  // the roster topic's peers now; nil: not known
	events        func(SecurityEvent)                         // told of peers caught lying; nil: none
	withdrawn     func(host peer.ID, gone []string)           // told of agents a roster message withdrew; nil: none
}

func defaults() config {
	return config{
		mdns:          true,
		mode:          dht.ModeServer,
		ttl:           DefaultTTL,
		republish:     DefaultRepublishInterval,
		roster:        DefaultRosterInterval,
		cacheTTL:      DefaultLookupCacheTTL,
		retries:       DefaultRetries,
		retryBase:     DefaultRetryBase,
		skew:          DefaultMaxClockSkew,
		now:           time.Now,
		ips:           interfaceIPs,
		ipsFromKernel: true,
		records: Limits{PerAuthor: DefaultMaxRecordsPerAuthor, PerAuthorBytes: DefaultMaxRecordBytesPerAuthor,
			Total: DefaultMaxRecords, TotalBytes: DefaultMaxRecordBytes},
		providers: Limits{PerAuthor: DefaultMaxProvidersPerPeer, Total: DefaultMaxProviders},
	}
}

func (c *config) validate() error {
	if c.republish > c.ttl/2 {
		return fmt.Errorf("discovery: republish interval %s must be at most half the TTL %s, or records expire between heartbeats", c.republish, c.ttl)
	}
	if c.refresh == 0 {
		c.refresh = c.republish
	}
	if c.refresh > c.ttl/2 {
		return fmt.Errorf("discovery: refresh interval %s must be at most half the TTL %s", c.refresh, c.ttl)
	}
	return nil
}

// WithBootstrapPeers sets the peers to dial at Start and to seed the DHT's
// routing table from whenever it runs empty (default: none, ever; there is
// no public bootstrap list). Peers without addresses are refused.
func WithBootstrapPeers(peers []peer.AddrInfo) Option {
	return func(c *config) error {
		for i, p := range peers {
			if p.ID == "" || len(p.Addrs) == 0 {
				return fmt.Errorf("discovery: bootstrap peer %d (%s) needs a peer ID and at least one address", i, p.ID)
			}
		}
		c.bootstrap = append([]peer.AddrInfo(nil), peers...)
		return nil
	}
}

// WithMDNS turns LAN discovery over mDNS on or off (default on). The
// service name is "_nova-<swarm>._udp"; found peers are dialled. Tests
// pass false: mDNS only runs inside network namespaces.
func WithMDNS(on bool) Option {
	return func(c *config) error {
		c.mdns = on
		return nil
	}
}

// WithInterfaceAddrs sets where the service reads this machine's IP
// addresses to follow a move (a new DHCP lease, another network): by
// default the system's interfaces, read again when the kernel reports a
// change; f is read every 2 s. nil turns following off. Tests give their
// own to move a node without moving the machine.
func WithInterfaceAddrs(f func() ([]net.IP, error)) Option {
	return func(c *config) error {
		c.ips, c.ipsFromKernel = f, false
		return nil
	}
}

// WithMode sets the DHT mode (default dht.ModeServer). dht.ModeAuto never
// serves on a LAN, where AutoNAT finds no public address, so a LAN swarm of
// ModeAuto nodes has no DHT servers at all. dht.ModeClient suits a node
// that must not store records for others.
func WithMode(m dht.ModeOpt) Option {
	return func(c *config) error {
		switch m {
		case dht.ModeAuto, dht.ModeClient, dht.ModeServer, dht.ModeAutoServer:
			c.mode = m
			return nil
		}
		return fmt.Errorf("discovery: unknown DHT mode %d", m)
	}
}

// WithTTL sets how long a published card stays alive after its last
// heartbeat (default [DefaultTTL], 10 minutes). It must equal the TTL of
// the registry that receives remote cards (agentcard.WithRemoteTTL): it is
// the freshness bound discovery applies to cards it reads, and this node's
// DHT drops value and provider records that were not republished within
// it.
func WithTTL(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("discovery: TTL must be positive")
		}
		c.ttl = d
		return nil
	}
}

// WithRepublishInterval sets how often the local cards are re-signed with a
// new heartbeat and put into the DHT, and their name and capability
// provider records announced again (default [DefaultRepublishInterval], 3
// minutes). It must be at most half the TTL.
func WithRepublishInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("discovery: republish interval must be positive")
		}
		c.republish = d
		return nil
	}
}

// WithRefreshInterval sets how often the cards this node has found are
// read again from the DHT, so that live ones stay in the registry and new
// revisions arrive (default: the republish interval). It must be at most
// half the TTL.
func WithRefreshInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("discovery: refresh interval must be positive")
		}
		c.refresh = d
		return nil
	}
}

// WithRosterInterval sets how often the swarm's roster is read, to find
// the members whose cards this node has not found yet (see
// [Service.Roster]); the first pass runs one second after Start and the
// interval doubles up to d (default [DefaultRosterInterval], 30 seconds).
// Zero turns the roster loop off.
func WithRosterInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New("discovery: roster interval must not be negative")
		}
		c.roster = d
		return nil
	}
}

// WithLookupCacheTTL sets how long the result of a name or capability
// lookup, and a card or index read, is reused without asking the DHT again
// (default [DefaultLookupCacheTTL], 30 seconds). Zero disables the cache.
// Cached cards are still checked for freshness on every use.
func WithLookupCacheTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New("discovery: lookup cache TTL must not be negative")
		}
		c.cacheTTL = d
		return nil
	}
}

// WithRetry sets how many times a name or capability lookup that found
// nothing is retried, waiting base, then 2×base, 4×base… in between
// (default [DefaultRetries] retries from [DefaultRetryBase]). Provider
// records are not acknowledged, so a record announced a moment ago may not
// be findable yet.
func WithRetry(n int, base time.Duration) Option {
	return func(c *config) error {
		if n < 0 || base < 0 || (n > 0 && base == 0) {
			return fmt.Errorf("discovery: bad retry policy: %d retries from %s", n, base)
		}
		c.retries, c.retryBase = n, base
		return nil
	}
}

// WithMaxClockSkew sets how far in the future a card's heartbeat may be
// before the card is refused (default [DefaultMaxClockSkew], 1 minute).
// Heartbeats within the skew count as now.
func WithMaxClockSkew(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New("discovery: clock skew must not be negative")
		}
		c.skew = d
		return nil
	}
}

// WithClock sets the clock used for heartbeats, freshness and caches
// (default time.Now). Timers still run on real time.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("discovery: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithLogger sets the logger (default: go-log's "nova/discovery", with this
// node's short peer ID as "self").
func WithLogger(l *zap.SugaredLogger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("discovery: nil logger")
		}
		c.log = l
		return nil
	}
}

// WithRecordLimits bounds the value records (cards, indexes, public keys)
// this node's DHT keeps for its peers: per author, the peer that signed
// them, and in total, in records and bytes (defaults
// [DefaultMaxRecordsPerAuthor], [DefaultMaxRecordBytesPerAuthor],
// [DefaultMaxRecords], [DefaultMaxRecordBytes]). A put past a bound is
// refused with [ErrStoreFull] and counted (Stats.RecordsRefused); zero
// fields are unbounded.
func WithRecordLimits(l Limits) Option {
	return func(c *config) error {
		if l.PerAuthor < 0 || l.PerAuthorBytes < 0 || l.Total < 0 || l.TotalBytes < 0 {
			return fmt.Errorf("discovery: record limits must not be negative: %+v", l)
		}
		c.records = l
		return nil
	}
}

// WithProviderLimits bounds the provider records this node's DHT keeps:
// per providing peer and in total (defaults [DefaultMaxProvidersPerPeer]
// and [DefaultMaxProviders] records; bytes unbounded, each record is under
// 200 bytes). A provide past a bound is refused and counted
// (Stats.ProvidersRefused); zero fields are unbounded.
func WithProviderLimits(l Limits) Option {
	return func(c *config) error {
		if l.PerAuthor < 0 || l.PerAuthorBytes < 0 || l.Total < 0 || l.TotalBytes < 0 {
			return fmt.Errorf("discovery: provider limits must not be negative: %+v", l)
		}
		c.providers = l
		return nil
	}
}

// WithDHTOptions appends options to those [Service.Start] passes to
// dht.New. They come last, so they can override nova's choices; do not
// override the protocol prefix, the validator or the bootstrap peers. The
// value and provider datastores are nova's bounded ones ([WithRecordLimits],
// [WithProviderLimits]): dht.Datastore has no effect, and
// dht.ValueDatastore or dht.ProviderDatastore would remove the bounds.
func WithDHTOptions(opts ...dht.Option) Option {
	return func(c *config) error {
		c.dhtOptions = append(c.dhtOptions, opts...)
		return nil
	}
}

// WithAuthority carries the swarm authority's records in the DHT beside the
// cards: present returns the records this node publishes in its signed
// agent index (the admin log, then its own grants; at most [MaxIndexAuth]
// records of at most [MaxIndexAuthRecord] bytes, and 128 KiB in all: the
// rest are left out), and accept receives the records of every index a
// lookup fetches, before that host's cards reach the sink, so they are
// assessed with their grants. Discovery never interprets the records:
// accept must verify each (the host's signature over its index proves only
// who presents them). Either may be nil.
func WithAuthority(present func() [][]byte, accept func(host peer.ID, records [][]byte)) Option {
	return func(c *config) error {
		c.authPresent, c.authAccept = present, accept
		return nil
	}
}

// WithGossip carries the roster on a publish/subscribe topic
// ([RosterTopic], GossipSub's in a node): publish sends one message to
// every member. On every publish (its heartbeat and every change of its
// cards) the service publishes its signed index and cards with it, and the
// caller feeds every message the topic brings to [Service.TakeGossip]. A
// member then learns of another's cards, their changes, their heartbeats
// and the agents it removed from one message per publish, and the refresh
// loop reads from the DHT only the hosts no message has vouched for within
// half the TTL. Default: none, every card is kept alive by DHT reads.
func WithGossip(publish func(ctx context.Context, msg []byte) error) Option {
	return func(c *config) error {
		c.gossip = publish
		return nil
	}
}

// WithGossipPeers tells the service how many peers the roster topic has
// now (GossipSub's Topic.ListPeers in a node): with flood publishing, the
// peers a roster message goes out to at once, each of which forwards it
// on its mesh. A message that went out to at least [minGossipPeers] of
// them reaches the swarm, so this node does not send it again: a
// newcomer's second and third roster passes, and a publish that follows
// the routing table's doubling, send no roster message then (see
// [Service.regossip]); the heartbeat and every change of the cards still
// send one. A message due while the topic has no peer is held, and the
// latest sent once it has one. Default: not known, every one is sent, a newcomer's three
// roster messages (four with its routing table's first doubling) reaching
// every member each.
func WithGossipPeers(peers func() int) Option {
	return func(c *config) error {
		c.gossipPeers = peers
		return nil
	}
}

// WithSecurityEvents sets the function told of every peer caught lying to
// discovery (a roster message with a forged or mismatched record); default
// none. It is called on the goroutine that read the lie and must not
// block.
func WithSecurityEvents(f func(SecurityEvent)) Option {
	return func(c *config) error {
		c.events = f
		return nil
	}
}

// WithWithdrawals sets f, told of the agents a host's roster message no
// longer lists and that left the sink with it (their ids), so that the
// caller can say so as it does when the host's own greeting withdraws
// them; default none. It is called on the goroutine that took the
// message (GossipSub's validation) and must not block.
func WithWithdrawals(f func(host peer.ID, gone []string)) Option {
	return func(c *config) error {
		c.withdrawn = f
		return nil
	}
}
