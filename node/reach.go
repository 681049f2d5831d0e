package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/node/localapi"
)

// relayRetry is how soon a node behind NAT asks a configured relay for a
// reservation again after it refused or could not be reached (go-libp2p
// waits an hour). A relay refuses until AutoNAT has confirmed it reachable,
// which takes the first few peers that connect to it: those peers are the
// very laptops that want its reservations, and the first ask of each is
// refused. One reservation request every 3 s to a configured relay is
// cheap.
const relayRetry = 3 * time.Second

// relayCandidates are the peers a node asks for relay reservations: its
// configured relays, then its bootstrap peers. A token from `invite` names
// the inviting node as bootstrap peer; when that node is reachable from the
// internet it relays (relayService), so a laptop behind NAT that joined
// with a token made without --relay is reachable too. A bootstrap peer
// that does not relay refuses, costing one request per relayRetry.
func relayCandidates(cfg Config) ([]peer.AddrInfo, error) {
	relays, err := discovery.ParseAddrs(cfg.Relays)
	if err != nil {
		return nil, fmt.Errorf("node: relays: %w", err)
	}
	boot, err := discovery.ParseAddrs(cfg.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("node: bootstrap: %w", err)
	}
	for _, b := range boot {
		if !slices.ContainsFunc(relays, func(r peer.AddrInfo) bool { return r.ID == b.ID }) {
			relays = append(relays, b)
		}
	}
	return relays, nil
}

// autorelayOptions tune the relay client of a node with configured relays:
// a reservation on two relays when there are two (one left when the other
// goes), asked for as soon as one candidate is known.
func autorelayOptions() []autorelay.Option {
	return []autorelay.Option{autorelay.WithBackoff(relayRetry), autorelay.WithMinInterval(relayRetry),
		autorelay.WithNumRelays(2), autorelay.WithMinCandidates(1), autorelay.WithBootDelay(0)}
}

// relaySource is where the relay client of a node behind NAT finds its
// relays: the configured ones and the bootstrap peers first
// (relayCandidates), then every connected swarm member that relays (it
// speaks circuit relay v2's hop protocol, which a nova node does while
// reachable: relayService). So when the relay of the token is gone for
// good, another member with a public address carries the laptops.
type relaySource struct {
	static []peer.AddrInfo
	h      atomic.Pointer[host.Host] // set once the host exists
}

// peers implements autorelay.PeerSource.
func (s *relaySource) peers(ctx context.Context, num int) <-chan peer.AddrInfo {
	out := make([]peer.AddrInfo, 0, num)
	out = append(out, s.static[:min(num, len(s.static))]...)
	if hp := s.h.Load(); hp != nil && len(out) < num {
		h := *hp
		cm := h.ConnManager()
		for _, p := range h.Network().Peers() {
			if len(out) == num {
				break
			}
			if slices.ContainsFunc(out, func(a peer.AddrInfo) bool { return a.ID == p }) {
				continue
			}
			if ok, _ := h.Peerstore().SupportsProtocols(p, relayHop); len(ok) == 0 {
				continue
			}
			if ti := cm.GetTagInfo(p); ti == nil || ti.Tags[memberTag] == 0 {
				continue
			}
			out = append(out, h.Peerstore().PeerInfo(p))
		}
	}
	ch := make(chan peer.AddrInfo, len(out))
	for _, a := range out {
		ch <- a
	}
	close(ch)
	return ch
}

// relayHop is circuit relay v2's protocol for reservations and circuits,
// which a peer speaks only while it relays.
const relayHop = "/libp2p/circuit/relay/0.2.0/hop"

// relayResources are the relay service's bounds. The circuits it carries
// have no duration or data limit: a relayed connection with a limit is one
// go-libp2p marks limited, on which it opens no stream for any protocol
// that did not ask for it (the router, the card exchange, the DHT,
// GossipSub), so a laptop behind a symmetric NAT, where the hole punch
// cannot work and the relay is the only path, would be reachable by ping
// alone. In exchange the relay carries only swarm members (relayACL). The
// other bounds: 1,024 reservations in all and 32 per IP address (an
// office behind one NAT), 16 circuits per peer, 16 KiB of buffer per
// circuit and direction.
func relayResources() relayv2.Resources {
	rc := relayv2.DefaultResources()
	rc.Limit = nil
	rc.MaxReservations = 1024
	rc.MaxReservationsPerIP = 32
	rc.MaxReservationsPerASN = 0 // no ASN table in a swarm of private address ranges
	rc.BufferSize = 16 << 10
	return rc
}

// relayACL admits to the relay, for a reservation or a circuit, only the
// peers that presented valid signed cards to this node (memberTag): the
// swarm's members, each through its own signature, in a private swarm
// past its secret as well. A peer asks for its reservation as soon as it
// has connected, often before its cards arrived: it is refused once and
// asks again relayRetry later. A circuit needs both ends to be members.
type relayACL struct{ cm connmgr.ConnManager }

func (a relayACL) member(p peer.ID) bool {
	ti := a.cm.GetTagInfo(p)
	return ti != nil && ti.Tags[memberTag] > 0
}

// AllowReserve implements relayv2.ACLFilter.
func (a relayACL) AllowReserve(p peer.ID, _ multiaddr.Multiaddr) bool { return a.member(p) }

// AllowConnect implements relayv2.ACLFilter.
func (a relayACL) AllowConnect(src peer.ID, _ multiaddr.Multiaddr, dest peer.ID) bool {
	return a.member(src) && a.member(dest)
}

// relayService is circuit relay v2 service, offered while the node is
// reachable from the internet. go-libp2p's own switch (EnableRelayService)
// waits for AutoNAT v1 to call the node public, which never happens in a
// swarm of nova nodes: v1 needs peers that run its dial-back service, and
// nova nodes run AutoNAT v2 instead. This one relays while either says the
// node is reachable:
//
//   - AutoNAT v2 confirmed at least one of its addresses. go-libp2p
//     confirms an address after two dial-backs of that same address and
//     asks each server at most once in two minutes, so a public node whose
//     only peers are two laptops can wait minutes for it.
//   - A peer on a public address connected to one of its public addresses
//     (an inbound direct connection): that address is reachable from the
//     internet, proven by a peer that reached it. The proof lapses when
//     the node stops advertising that address (its network changed) or
//     AutoNAT v2 finds it unreachable.
//
// It also follows v1 when something does run that, for a node whose reach
// is forced. A node behind NAT sees no such inbound connection (its local
// address is private), and a hole-punched connection is one both ends
// dialled.
type relayService struct {
	h       host.Host
	sub     event.Subscription
	notify  *network.NotifyBundle
	inbound chan multiaddr.Multiaddr // local addresses peers reached from the internet
	done    chan struct{}

	// Owned by follow.
	confirmed bool                // AutoNAT v2 confirmed an address
	reachedAt map[string]struct{} // thin waists (ip and port) a peer reached from the internet

	mu      sync.Mutex
	relay   *relayv2.Relay
	reached []string // reachedAt's keys, sorted, for status
}

// startRelayService starts following h's reachability.
func startRelayService(h host.Host) (*relayService, error) {
	sub, err := h.EventBus().Subscribe([]any{new(event.EvtHostReachableAddrsChanged), new(event.EvtLocalReachabilityChanged),
		new(event.EvtLocalAddressesUpdated)}, eventbus.Name("nova relay service"))
	if err != nil {
		return nil, err
	}
	s := &relayService{h: h, sub: sub, inbound: make(chan multiaddr.Multiaddr, 1), done: make(chan struct{}),
		reachedAt: map[string]struct{}{}}
	s.notify = &network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if reachedFromInternet(c) {
			select {
			case s.inbound <- c.LocalMultiaddr():
			default: // follow has one to take; the next connection says it again
			}
		}
	}}
	h.Network().Notify(s.notify)
	go s.follow()
	return s, nil
}

// reachedFromInternet reports whether c is a direct connection a peer on
// a public address opened to a public address of this node.
func reachedFromInternet(c network.Conn) bool {
	return c.Stat().Direction == network.DirInbound && !relayed(c) &&
		manet.IsPublicAddr(c.LocalMultiaddr()) && manet.IsPublicAddr(c.RemoteMultiaddr())
}

// thinWaist is a's IP address and TCP or UDP port, the part of an
// address a connection and an advertised address share.
func thinWaist(a multiaddr.Multiaddr) string {
	var out multiaddr.Multiaddr
	for _, c := range a {
		out = append(out, c)
		if p := c.Protocol().Code; p == multiaddr.P_TCP || p == multiaddr.P_UDP {
			return out.String()
		}
	}
	return a.String()
}

func (s *relayService) follow() {
	defer close(s.done)
	for {
		select {
		case a := <-s.inbound:
			if _, ok := s.reachedAt[thinWaist(a)]; !ok {
				log.Infow("a peer on the internet reached this node directly", "addr", a)
				s.reachedAt[thinWaist(a)] = struct{}{}
			}
		case e, ok := <-s.sub.Out():
			if !ok {
				return
			}
			switch e := e.(type) {
			case event.EvtHostReachableAddrsChanged:
				s.confirmed = len(e.Reachable) > 0
				for _, a := range e.Unreachable {
					delete(s.reachedAt, thinWaist(a))
				}
			case event.EvtLocalAddressesUpdated:
				current := map[string]bool{}
				for _, u := range e.Current {
					current[thinWaist(u.Address)] = true
				}
				for w := range s.reachedAt {
					if !current[w] {
						delete(s.reachedAt, w)
					}
				}
			case event.EvtLocalReachabilityChanged:
				if e.Reachability == network.ReachabilityPublic {
					s.confirmed = true
				}
			}
		}
		s.mu.Lock()
		s.reached = slices.Sorted(maps.Keys(s.reachedAt))
		s.mu.Unlock()
		s.set(s.confirmed || len(s.reachedAt) > 0)
	}
}

// ReachedAt is the public addresses (IP and port) a peer on the internet
// connected to directly and that still count as proof of reach.
func (s *relayService) ReachedAt() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reached)
}

// set starts or stops the relay.
func (s *relayService) set(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.relay == nil:
		r, err := relayv2.New(s.h, relayv2.WithResources(relayResources()), relayv2.WithACL(relayACL{cm: s.h.ConnManager()}))
		if err != nil {
			log.Warnw("relay service", "err", err)
			return
		}
		s.relay = r
		log.Infow("reachable from the internet: relaying for swarm members behind NAT (circuit relay v2)")
	case !on && s.relay != nil:
		_ = s.relay.Close()
		s.relay = nil
		log.Infow("no longer known reachable from the internet: relay service stopped")
	}
}

// Relaying reports whether the node offers relay service now (false
// before Start).
func (s *relayService) Relaying() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relay != nil
}

// close stops following and the relay.
func (s *relayService) close() error {
	s.h.Network().StopNotify(s.notify)
	_ = s.sub.Close()
	<-s.done
	s.set(false)
	return nil
}

// startRelayClient sets go-libp2p's relay client (autorelay) looking for
// reservations on its relay candidates (relayCandidates) at once. It
// starts on an AutoNAT v1 verdict of private or unknown, which, like the
// relay service's public, never comes in a swarm of nova nodes: without
// this, a node behind NAT never took a reservation, so nothing could reach
// it. Unknown is what the node knows until AutoNAT v1 (if anything runs
// its service) says more. The emitter is closed with the node.
func startRelayClient(h host.Host) (func() error, error) {
	em, err := h.EventBus().Emitter(new(event.EvtLocalReachabilityChanged), eventbus.Stateful)
	if err != nil {
		return nil, err
	}
	if err := em.Emit(event.EvtLocalReachabilityChanged{Reachability: network.ReachabilityUnknown}); err != nil {
		_ = em.Close()
		return nil, err
	}
	return em.Close, nil
}

// relayed reports whether c runs through a relay: its remote address
// names the relay (/p2p/<relay>/p2p-circuit), or go-libp2p marks it
// limited, which only a relay does. A nova relay's circuits carry no limit
// (relayResources), so Limited alone is not the test.
func relayed(c network.Conn) bool {
	if c.Stat().Limited {
		return true
	}
	_, err := c.RemoteMultiaddr().ValueForProtocol(multiaddr.P_CIRCUIT)
	return err == nil
}

// connPath is how a node reaches a peer over conns: "direct" with the
// address of a direct connection when it has one (go-libp2p opens new
// streams on it), else "relayed" with the relayed connection's address,
// which names the relay. A relayed connection the hole punch (DCUtR) has
// superseded stays open beside the direct one for relayedGrace.
func connPath(conns []network.Conn) (path, addr string) {
	for _, c := range conns {
		if !relayed(c) {
			return "direct", c.RemoteMultiaddr().String()
		}
	}
	if len(conns) > 0 {
		return "relayed", conns[0].RemoteMultiaddr().String()
	}
	return "direct", ""
}

// reach is what status says of how peers outside reach the node.
func (n *Node) reach() localapi.Reach {
	r := localapi.Reach{Reachable: []string{}, Unreachable: []string{}, RelayAddrs: []string{}, Relaying: n.relay.Relaying(),
		ReachedAt: n.relay.ReachedAt()}
	if c, ok := n.host.(interface {
		ConfirmedAddrs() (reachable, unreachable, unknown []multiaddr.Multiaddr)
	}); ok {
		reachable, unreachable, _ := c.ConfirmedAddrs()
		for _, a := range reachable {
			r.Reachable = append(r.Reachable, a.String())
		}
		for _, a := range unreachable {
			r.Unreachable = append(r.Unreachable, a.String())
		}
	}
	for _, a := range n.host.Addrs() {
		if _, err := a.ValueForProtocol(multiaddr.P_CIRCUIT); err == nil {
			r.RelayAddrs = append(r.RelayAddrs, a.String())
		}
	}
	return r
}

// findPeer asks the swarm's DHT for p's addresses (its relay addresses,
// for a node behind NAT): what `ping <peer ID>` dials when this node never
// met p. Without an answer it returns p with no addresses.
func (n *Node) findPeer(ctx context.Context, p peer.ID) peer.AddrInfo {
	if d := n.disc.DHT(); d != nil {
		if ai, err := d.FindPeer(ctx, p); err == nil {
			return ai
		}
	}
	return peer.AddrInfo{ID: p}
}
