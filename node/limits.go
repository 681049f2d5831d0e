package node

import (
	"net/netip"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/x/rate"

	"github.com/nova-node/nova-node/protocol"
)

// lanPrefixes are loopback (libp2p's own default exemption, which
// WithNetworkPrefixLimit replaces) and the private and link-local ranges
// where a LAN full of swarm members lives.
var lanPrefixes = []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "fc00::/7", "fe80::/10"}

// newResourceManager is libp2p's resource manager with its scaled default
// limits, a service limit for nova's a2a streams (a peer needs two, one
// each way; 16 per peer and 4096 in all), and LAN-friendly connection
// limits: by default libp2p allows 8 connections and 0.2 new connections/s
// per IPv4 address outside loopback, which would throttle a LAN of members
// behind one switch. Private and link-local ranges get 1,024 connections
// and no rate limit; public addresses keep libp2p's defaults.
func newResourceManager() (network.ResourceManager, error) {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	limits.AddServiceLimit(protocol.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 1024, StreamsOutbound: 1024, Streams: 2048, Memory: 64 << 20},
		rcmgr.BaseLimitIncrease{StreamsInbound: 512, StreamsOutbound: 512, Streams: 1024, Memory: 32 << 20})
	limits.AddServicePeerLimit(protocol.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 8, StreamsOutbound: 8, Streams: 16, Memory: 8 << 20},
		rcmgr.BaseLimitIncrease{})
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
	return rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()),
		rcmgr.WithNetworkPrefixLimit(v4, v6),
		rcmgr.WithConnRateLimiters(limiter))
}
