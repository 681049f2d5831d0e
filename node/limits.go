package node

import (
	"net/netip"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	"github.com/libp2p/go-libp2p/x/rate"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/protocol"
)

// lanPrefixes are loopback (libp2p's own default exemption, which
// WithNetworkPrefixLimit replaces) and the private and link-local ranges
// where a LAN full of swarm members lives.
var lanPrefixes = []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "fc00::/7", "fe80::/10"}

// Service limits of nova's stream protocols, next to libp2p's own
// (identify, ping, ...). Every handler and every stream nova opens attaches
// its stream to its service before reading and reserves the memory its
// buffers hold in the stream's scope (internal/streamscope), so these
// bound both the streams and the bytes a peer can make a node hold. A
// stream refused, or whose reservation is refused, is reset and logged at
// Debug by its handler, and counted by the resource manager
// (libp2p_rcmgr_blocked_resources in the node's /metrics). Memory limits
// scale like libp2p's: the increase is per GiB of the memory the resource
// manager may use (an eighth of the machine's).
//
//   - nova.a2a (/nova/a2a/1.0.0, envelopes): a peer needs two streams, one
//     each way. 8 in and 8 out per peer (16 in all), 8 MiB per peer;
//     1,024 in and 1,024 out in all (+512 each per GiB), 128 MiB (+64 MiB
//     per GiB). An inbound stream holds 8 KiB of buffers plus its largest
//     frame so far (at most 1 MiB by default).
//   - nova.mcp (/nova/mcp/1.0.0, one long-lived MCP session per peer pair
//     and direction): 4 in and 4 out per peer, leaving room for a session
//     redialled while the old one ends, 32 MiB per peer (a session each way
//     with a line at the cap); 512 in and 512 out in all (+256 each per
//     GiB), 64 MiB (+32 MiB per GiB). A stream holds 4 KiB plus its longest
//     JSON-RPC line so far (at most mcpbridge.MaxLine, 12 MiB: a large
//     tool result).
//   - nova.crdt (/nova/crdt/1.0.0, one catch-up per stream, at most 15 s;
//     one at a time per peer and document, each document at once when a
//     peer connects): 64 in and 64 out per peer, 64 MiB per peer; 1,024
//     in and 1,024 out in all (+512 each per GiB), 256 MiB (+64 MiB per
//     GiB). A stream holds 4 KiB plus the request it read (at most 1 MiB)
//     and the answer (a delta, at most 8 MiB).
//   - nova.records (/nova/records/1.0.0, a capability lookup's read of a
//     provider's records, within 5 s): 8 in and 8 out per peer, 4 MiB per
//     peer; 1,024 in and 1,024 out in all (+512 each per GiB), 64 MiB
//     (+32 MiB per GiB). A stream holds 4 KiB plus, when reading an
//     answer, its records (at most 1 MiB).
var serviceLimits = []struct {
	name          string
	total         rcmgr.BaseLimit
	totalIncrease rcmgr.BaseLimitIncrease
	peer          rcmgr.BaseLimit
}{
	{protocol.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 1024, StreamsOutbound: 1024, Streams: 2048, Memory: 128 << 20},
		rcmgr.BaseLimitIncrease{StreamsInbound: 512, StreamsOutbound: 512, Streams: 1024, Memory: 64 << 20},
		rcmgr.BaseLimit{StreamsInbound: 8, StreamsOutbound: 8, Streams: 16, Memory: 8 << 20}},
	{mcpbridge.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 512, StreamsOutbound: 512, Streams: 1024, Memory: 64 << 20},
		rcmgr.BaseLimitIncrease{StreamsInbound: 256, StreamsOutbound: 256, Streams: 512, Memory: 32 << 20},
		rcmgr.BaseLimit{StreamsInbound: 4, StreamsOutbound: 4, Streams: 8, Memory: 32 << 20}},
	{crdt.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 1024, StreamsOutbound: 1024, Streams: 2048, Memory: 256 << 20},
		rcmgr.BaseLimitIncrease{StreamsInbound: 512, StreamsOutbound: 512, Streams: 1024, Memory: 64 << 20},
		rcmgr.BaseLimit{StreamsInbound: 64, StreamsOutbound: 64, Streams: 128, Memory: 64 << 20}},
	{discovery.RecordsService,
		rcmgr.BaseLimit{StreamsInbound: 1024, StreamsOutbound: 1024, Streams: 2048, Memory: 64 << 20},
		rcmgr.BaseLimitIncrease{StreamsInbound: 512, StreamsOutbound: 512, Streams: 1024, Memory: 32 << 20},
		rcmgr.BaseLimit{StreamsInbound: 8, StreamsOutbound: 8, Streams: 16, Memory: 4 << 20}},
}

// newResourceManager is libp2p's resource manager with its scaled default
// limits, the service limits of nova's streams (serviceLimits), and
// LAN-friendly connection limits: by default libp2p allows 8 connections
// and 0.2 new connections/s per IPv4 address outside loopback, which would
// throttle a LAN of members behind one switch. Private and link-local
// ranges get 1,024 connections and no rate limit; public addresses keep
// libp2p's defaults.
func newResourceManager() (network.ResourceManager, error) {
	return newResourceManagerFrom(limitConfig(0))
}

// limitConfig is the concrete limit set newResourceManager enforces:
// libp2p's defaults scaled to the machine, with nova's service limits. A
// positive inboundConns replaces the system inbound-connection limit (a
// Go-only knob, Config.Admission, that lets a test fill a node's inbound
// limit with a few hosts).
func limitConfig(inboundConns int) rcmgr.ConcreteLimitConfig {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	for _, l := range serviceLimits {
		limits.AddServiceLimit(l.name, l.total, l.totalIncrease)
		limits.AddServicePeerLimit(l.name, l.peer, rcmgr.BaseLimitIncrease{})
	}
	// libp2p's ping service allows a peer 2 inbound streams. `nova-node
	// ping`, the router's liveness probes (QUIC) and the address-move probe
	// all use it, and a ping stream closes on the peer a moment after the
	// pinger is done: three pings in a row were refused now and then
	// (a stream reset with StreamResourceLimitExceeded). 4 each way.
	limits.AddServicePeerLimit(ping.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 4, StreamsOutbound: 4, Streams: 8, Memory: 32 * (256<<20 + 16<<10)}, // libp2p's,
		rcmgr.BaseLimitIncrease{})
	cl := limits.AutoScale()
	if inboundConns > 0 {
		p := cl.ToPartialLimitConfig()
		p.System.ConnsInbound = rcmgr.LimitVal(inboundConns)
		cl = p.Build(cl)
	}
	return cl
}

// newResourceManagerFrom is the resource manager enforcing limits, with
// the LAN-friendly connection limits of newResourceManager.
func newResourceManagerFrom(limits rcmgr.ConcreteLimitConfig) (network.ResourceManager, error) {
	var v4, v6 []rcmgr.NetworkPrefixLimit
	var rateLimits []rate.PrefixLimit
	for _, s := range lanPrefixes {
		p := netip.MustParsePrefix(s)
		l := rcmgr.NetworkPrefixLimit{Network: p, ConnCount: 1024}
		if p.Addr().Is4() {
			v4 = append(v4, l)
		} else {
			v6 = append(v6, l)
		}
		rateLimits = append(rateLimits, rate.PrefixLimit{Prefix: p}) // zero Limit: unlimited
	}
	limiter := &rate.Limiter{
		NetworkPrefixLimits: rateLimits,
		SubnetRateLimiter: rate.SubnetLimiter{
			IPv4SubnetLimits: []rate.SubnetLimit{{PrefixLength: 32, Limit: rate.Limit{RPS: 0.2, Burst: 16}}},
			IPv6SubnetLimits: []rate.SubnetLimit{{PrefixLength: 56, Limit: rate.Limit{RPS: 0.2, Burst: 16}}, {PrefixLength: 48, Limit: rate.Limit{RPS: 0.5, Burst: 80}}},
			GracePeriod:      time.Minute,
		},
	}
	return rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits),
		rcmgr.WithNetworkPrefixLimit(v4, v6),
		rcmgr.WithConnRateLimiters(limiter))
}

// Admission: a peer that connects counts against the resource manager's
// system inbound-connection limit (libp2p's scaled default: 64 plus 64 per
// GiB it may use), and the connection manager trims connections once the
// node holds more than its high watermark. The watermarks sit below that
// limit (watermarks), so a node full of connections from keys that never
// become members is trimmed before newcomers are refused; the grace period
// (admissionGrace) is what a new connection gets to present its cards
// before it may be trimmed. Members are kept: the router protects a peer
// it has an open channel to, and the node tags every peer that presented
// valid cards (memberTag), so trimming closes unknown peers first.
const (
	admissionGrace = 10 * time.Second
	memberTag      = "nova/member"
	memberValue    = 100
)

// Admission overrides the connection limits, for tests that fill a node's
// inbound limit with a few hosts. Zero fields keep the defaults.
type Admission struct {
	InboundConns int           // system inbound-connection limit
	GracePeriod  time.Duration // a new connection's time before it may be trimmed (admissionGrace)
	TrimInterval time.Duration // how often the connection manager checks its high watermark (libp2p's 10 s)
}

// watermarks are the connection manager's low and high watermarks for the
// limits in force: half and three quarters of the system inbound-connection
// limit (or of the total connection limit, when smaller). The connection
// manager counts every connection, inbound or outbound, so a full inbound
// limit is always above the high watermark.
func watermarks(limits rcmgr.ConcreteLimitConfig) (low, high int) {
	sys := rcmgr.NewFixedLimiter(limits).GetSystemLimits()
	in := min(sys.GetConnLimit(network.DirInbound), sys.GetConnTotalLimit())
	high = max(in*3/4, 1)
	low = max(in/2, 1)
	return low, high
}

// softProtect is the value of the tag that stands for kad-dht's and
// GossipSub's protection of a peer (see ProtectAsTag).
const softProtect = 50

// ProtectAsTag returns h with a connection manager on which Protect tags
// the peer with softProtect instead, for kad-dht and GossipSub. kad-dht
// protects every peer of its two buckets farthest from the node's key (up
// to 40 peers in a swarm of a hundred or more) and GossipSub every mesh
// peer of every topic (up to 12 each): together enough to hold a node
// above its high watermark for good, its inbound limit full, and
// newcomers that know only this node refused. As a tag they still count:
// trimming closes the peers that are neither first. Losing the connection
// costs neither: kad-dht keeps the peer in its routing table and dials it
// when a lookup needs it, GossipSub grafts another connected peer at its
// next heartbeat. The router's protection of peers with an open channel,
// and every other use of the host, are unchanged.
func ProtectAsTag(h host.Host) host.Host { return tagProtectHost{h} }

type tagProtectHost struct{ host.Host }

func (h tagProtectHost) ConnManager() connmgr.ConnManager {
	return tagProtectCM{h.Host.ConnManager()}
}

type tagProtectCM struct{ connmgr.ConnManager }

func (c tagProtectCM) Protect(p peer.ID, tag string) {
	c.ConnManager.TagPeer(p, "protect/"+tag, softProtect)
}

// Unprotect removes the tag and reports whether the peer is still
// protected by anyone else (the router).
func (c tagProtectCM) Unprotect(p peer.ID, tag string) bool {
	c.ConnManager.UntagPeer(p, "protect/"+tag)
	return c.ConnManager.IsProtected(p, "")
}
