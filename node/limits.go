package node

import (
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"

	"github.com/nova-node/nova-node/protocol"
)

// newResourceManager is libp2p's resource manager with its scaled default
// limits plus a service limit for nova's a2a streams: a peer needs two
// (one each way), so 16 per peer and 4096 in all leave ample room while
// capping what one peer can hold open.
func newResourceManager() (network.ResourceManager, error) {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	limits.AddServiceLimit(protocol.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 1024, StreamsOutbound: 1024, Streams: 2048, Memory: 64 << 20},
		rcmgr.BaseLimitIncrease{StreamsInbound: 512, StreamsOutbound: 512, Streams: 1024, Memory: 32 << 20})
	limits.AddServicePeerLimit(protocol.ServiceName,
		rcmgr.BaseLimit{StreamsInbound: 8, StreamsOutbound: 8, Streams: 16, Memory: 8 << 20},
		rcmgr.BaseLimitIncrease{})
	return rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.AutoScale()))
}
