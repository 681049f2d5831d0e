package tasknode

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/sandbox"
)

// capabilityLookupTimeout bounds the DHT lookup of a capability that no
// known card offers.
const capabilityLookupTimeout = 5 * time.Second

// taskDirectory is the taskswarm.Directory of a node: the agents that have a
// capability, local and remote, as the local agent `as` may discover them
// (sandbox discovery filter), without the agents of peers that left.
//
// The registry is asked first: it holds the cards of every connected peer
// (presented on connection) and of earlier lookups. The swarm's DHT is asked
// only when the registry has none, so that creating a swarm does not wait
// for a lookup when the agents are known.
type taskDirectory struct{ ts *Service }

func (d taskDirectory) Capable(ctx context.Context, as, capability string) ([]agentcard.Card, error) {
	reg := d.ts.cfg.Registry
	viewer, ok := reg.Get(as)
	if !ok || viewer.Origin != agentcard.OriginLocal {
		return nil, &agentcard.NotFoundError{Query: as, Where: "agents hosted on this node (a swarm's creator must be local)"}
	}
	cards := d.visible(viewer, reg.FindByCapability(capability))
	if len(cards) == 0 {
		lctx, cancel := context.WithTimeout(ctx, capabilityLookupTimeout)
		_, _ = d.ts.cfg.FindByCapability(lctx, capability) // found cards land in the registry
		cancel()
		cards = d.visible(viewer, reg.FindByCapability(capability))
	}
	if len(cards) == 0 {
		return nil, &agentcard.CapabilityNotFoundError{Capability: capability, Where: "the registry and the swarm's DHT, as " + viewer.Address() + " may see them"}
	}
	return cards, nil
}

func (d taskDirectory) visible(viewer agentcard.Card, cards []agentcard.Card) []agentcard.Card {
	out := cards[:0:0]
	for _, c := range cards {
		if c.Origin != agentcard.OriginLocal && d.ts.isGone(c.Host) {
			continue
		}
		out = append(out, c)
	}
	return sandbox.Filter(d.ts.cfg.Sandbox, viewer.SandboxAgent(), out,
		func(c agentcard.Card) sandbox.Agent { return c.SandboxAgent() })
}

// watchPeers follows the host's connections for the Coordinator: a peer
// whose agents run sub-tasks of this node's swarms, whose last connection
// closed, that is still disconnected after PeerGoneAfter and that does not
// answer one dial, has left, and Coordinator.PeerGone reassigns what its
// agents were doing. A peer that connects again is no longer gone. A peer
// with nothing running here is not dialled: the connection manager closes
// idle connections to keep a node within its watermarks, and dialling each
// back a second later would undo that, over and over (in a 100-node swarm
// that churn was most of an idle node's CPU).
func (ts *Service) watchPeers(ctx context.Context) {
	h := ts.cfg.Host
	sub, err := h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged), eventbus.BufSize(256))
	if err != nil {
		ts.log.Warnw("cannot follow peer departures: swarm sub-tasks of departed peers wait for their timeout", "err", err)
		return
	}
	defer sub.Close()
	// cards-received only: a peer's agents are known (again). Any other event
	// would wake this goroutine for nothing, several times per message.
	cards, stopCards := ts.cfg.Subscribe(256, protocol.EvtCardsReceived)
	defer stopCards()
	if f := ts.hooks.watching; f != nil {
		f()
	}
	due := map[peer.ID]time.Time{} // disconnected peers, checked at this time
	backed := map[peer.ID]bool{}   // peers told to the Coordinator as back since they connected
	back := func(p peer.ID) {
		if backed[p] {
			return
		}
		backed[p] = true
		ts.peerBack(p)
	}
	for _, p := range h.Network().Peers() { // connected before this goroutine subscribed
		if ts.knowsAgentsOf(p) {
			back(p)
		}
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	probes := make(chan peer.ID, 64)
	for {
		next := time.Now().Add(time.Hour)
		for _, t := range due {
			if t.Before(next) {
				next = t
			}
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sub.Out():
			if !ok {
				return
			}
			ev := e.(event.EvtPeerConnectednessChanged)
			if ev.Connectedness == network.Connected {
				delete(due, ev.Peer)
				ts.mu.Lock()
				delete(ts.gone, ev.Peer)
				ts.mu.Unlock()
				if ts.knowsAgentsOf(ev.Peer) {
					back(ev.Peer)
				}
				continue
			}
			if ev.Connectedness == network.NotConnected {
				delete(backed, ev.Peer)
				after := ts.options().PeerGoneAfter
				if after <= 0 {
					after = DefaultPeerGoneAfter
				}
				due[ev.Peer] = time.Now().Add(after)
			}
		case e, ok := <-cards:
			if !ok {
				return
			}
			if e.Peer != "" && h.Network().Connectedness(e.Peer) == network.Connected {
				back(e.Peer)
			}
		case p := <-probes:
			ts.peerGone(p)
		case <-timer.C:
			now := time.Now()
			for p, t := range due {
				if t.After(now) {
					continue
				}
				delete(due, p)
				if h.Network().Connectedness(p) == network.Connected || !ts.hasWorkOn(p) {
					if f := ts.hooks.due; f != nil {
						f(p, false)
					}
					continue
				}
				if f := ts.hooks.due; f != nil {
					f(p, true)
				}
				ts.wg.Go(func() { // one dial, off this loop
					dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					err := h.Connect(dctx, peer.AddrInfo{ID: p})
					cancel()
					if err != nil && ctx.Err() == nil {
						select {
						case probes <- p:
						case <-ctx.Done():
						}
					}
				})
			}
		}
	}
}

// hasWorkOn reports whether an active swarm of this node's Coordinator has
// a running sub-task assigned to an agent hosted by p.
func (ts *Service) hasWorkOn(p peer.ID) bool {
	ts.mu.Lock()
	coord := ts.coord
	ts.mu.Unlock()
	return coord != nil && runningOn(coord.List(), p) > 0
}

// knowsAgentsOf reports whether the registry holds cards hosted by p.
func (ts *Service) knowsAgentsOf(p peer.ID) bool {
	ps := p.String()
	for _, c := range ts.cfg.Registry.Remote() {
		if c.Host == ps {
			return true
		}
	}
	return false
}

// peerBack tells the Coordinator that p is reachable: the running
// sub-tasks of its agents are sent again (same attempt).
func (ts *Service) peerBack(p peer.ID) {
	ts.mu.Lock()
	coord := ts.coord
	ts.mu.Unlock()
	if coord != nil {
		coord.PeerBack(p.String())
	}
}

// peerGone marks p as gone and tells the Coordinator.
func (ts *Service) peerGone(p peer.ID) {
	ts.mu.Lock()
	already := ts.gone[p]
	ts.gone[p] = true
	coord := ts.coord
	ts.mu.Unlock()
	if already || coord == nil || ts.cfg.Host.Network().Connectedness(p) == network.Connected {
		return
	}
	ts.cfg.Emit(localapi.Event{Type: localapi.EvtPeerGone, Time: time.Now(), Peer: p, Success: true,
		Detail: peerGoneDetail(p, runningOn(coord.List(), p)), SourceTier: -1, TargetTier: -1})
	coord.PeerGone(p.String())
}

// runningOn counts the running sub-tasks of active swarms whose agent is
// hosted by p.
func runningOn(swarms []taskswarm.Swarm, p peer.ID) int {
	suffix, n := "@"+p.String(), 0
	for _, s := range swarms {
		if s.Status != taskswarm.StatusActive {
			continue
		}
		for _, st := range s.SubTasks {
			if st.Status == taskswarm.SubTaskRunning && strings.HasSuffix(st.AssignedAgent, suffix) {
				n++
			}
		}
	}
	return n
}

// peerGoneDetail is the text of a peer-gone event: what leaves with the
// peer, only when something does.
func peerGoneDetail(p peer.ID, running int) string {
	switch running {
	case 0:
		return fmt.Sprintf("%s left: it stayed unreachable", p)
	case 1:
		return fmt.Sprintf("%s left: its running sub-task is reassigned", p)
	}
	return fmt.Sprintf("%s left: its %d running sub-tasks are reassigned", p, running)
}
