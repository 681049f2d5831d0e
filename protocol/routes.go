package protocol

import (
	"sync"
	"sync/atomic"

	"github.com/nova-node/nova-node/agentcard"
)

// maxRoutes bounds the cached resolutions of one router. Past it the cache
// starts over: it holds successes only, so its size is about the number of
// agent pairs that talk, spelled the ways their callers spell them.
const maxRoutes = 4096

// route is two agents' cards and canonical addresses, found under a
// registry lease, and standing while the lease holds (no card stored or
// removed since, no remote card expired): a resolution of (sender,
// recipient) as a caller spelled them, or an inbound channel's last
// attribution of its pair.
type route struct {
	lease            agentcard.Lease
	from, to         agentcard.Card
	fromAddr, toAddr string
}

// routeCache keeps the resolutions of direct envelopes, so that an agent
// pair that talks resolves once per registry change rather than per
// message (two registry lookups under its lock, and a sandbox discovery
// check for a bare name). Reads take no lock.
type routeCache struct {
	m sync.Map // agentPair -> *route
	n atomic.Int64
}

// get returns the route cached for k if its lease still holds.
func (c *routeCache) get(reg *agentcard.Registry, k agentPair) *route {
	v, ok := c.m.Load(k)
	if !ok {
		return nil
	}
	rt := v.(*route)
	if !reg.Holds(rt.lease) {
		return nil
	}
	return rt
}

// put caches rt for k.
func (c *routeCache) put(k agentPair, rt *route) {
	if _, loaded := c.m.Swap(k, rt); !loaded && c.n.Add(1) > maxRoutes {
		c.m.Clear()
		c.n.Store(0)
	}
}
