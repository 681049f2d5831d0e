package agentcard

import "time"

// A Lease vouches for the result of registry lookups made after it was
// taken: it holds while no card has been stored in or removed from the
// registry since, and, when the lookups returned remote cards, until the
// first of them reaches its TTL. (A refresh of a remote card's equal
// revision moves its LastSeenAt forward without ending leases.) Hot paths
// (the router's per-message resolution and attribution) keep a lease with
// the cards they cached and check it with [Registry.Holds], a load and a
// compare, instead of looking the cards up again.
//
// A lease vouches for cards found, not for lookups that failed: a name that
// is ambiguous now becomes unique when one of its remote cards expires.
//
// Take the lease before the lookups ([Registry.Lease]) and bound it by
// their cards after ([Registry.For]): a change in between then shows as a
// lease that no longer holds, never as a stale card that seems current.
type Lease struct {
	gen   uint64
	until time.Time // zero: no remote card bounds it
}

// Lease returns a lease on the registry as it is now.
func (r *Registry) Lease() Lease {
	return Lease{gen: r.gen.Load()}
}

// For bounds l by the TTL of each remote card in cs (local cards never
// expire) and returns it. The bound comes from the card's LastSeenAt,
// which is at most a millisecond before the registry's own time, so a
// lease ends at or before its card does.
func (r *Registry) For(l Lease, cs ...*Card) Lease {
	if r.ttl <= 0 {
		return l
	}
	for _, c := range cs {
		if c.Origin != OriginRemote {
			continue
		}
		until := time.UnixMilli(c.LastSeenAt).Add(r.ttl)
		if l.until.IsZero() || until.Before(l.until) {
			l.until = until
		}
	}
	return l
}

// Holds reports whether lookups made under l would still return what they
// did: nothing was stored or removed since, and no remote card they
// returned has expired. It reads the clock only for a lease bounded by a
// remote card.
func (r *Registry) Holds(l Lease) bool {
	if r.gen.Load() != l.gen {
		return false
	}
	return l.until.IsZero() || r.now().Before(l.until)
}
