package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

// FindAgents finds agents by name, capability or tier (exactly one),
// asking discovery first for names and capabilities, and applies the sandbox
// discovery filter as seen by local agent `as` (no filter when empty).
func (n *Node) FindAgents(ctx context.Context, name, capability, tier, as string) ([]agentcard.Card, error) {
	given := 0
	for _, v := range []string{name, capability, tier} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		return nil, errors.New("node: give exactly one of name, capability or tier")
	}
	n.mu.Lock()
	disc := n.disc
	n.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var cards []agentcard.Card
	switch {
	case name != "":
		if disc != nil {
			_, _ = disc.FindByName(lctx, name)
		}
		for _, c := range n.reg.List() {
			if c.ID == name {
				cards = append(cards, c)
			}
		}
		if len(cards) == 0 {
			return nil, &agentcard.NotFoundError{Query: name, Where: "the registry and the swarm's DHT"}
		}
	case capability != "":
		if disc != nil {
			_, _ = disc.FindByCapability(lctx, capability)
		}
		cards = n.reg.FindByCapability(capability)
		if len(cards) == 0 {
			return nil, &agentcard.CapabilityNotFoundError{Capability: capability, Where: "the registry and the swarm's DHT"}
		}
	default:
		t, err := tiers.ParseTier(tier)
		if err != nil {
			return nil, err
		}
		cards = n.reg.FindByTier(t)
	}
	if as != "" {
		viewer, ok := n.reg.Get(as)
		if !ok || viewer.Origin != agentcard.OriginLocal {
			return nil, &agentcard.NotFoundError{Query: as, Where: "agents hosted on this node (--as names the local agent whose view to apply)"}
		}
		cards = sandbox.Filter(n.cfg.Sandbox, viewer.SandboxAgent(), cards,
			func(c agentcard.Card) sandbox.Agent { return c.SandboxAgent() })
	}
	if cards == nil {
		cards = []agentcard.Card{}
	}
	return cards, nil
}

// Ping measures count round trips (libp2p ping) to a peer ID or to the
// node hosting an agent (name or name@peerID).
func (n *Node) Ping(ctx context.Context, target string, count int) (localapi.PingResult, error) {
	h := n.host
	if count <= 0 || count > 100 {
		count = 3
	}
	res := localapi.PingResult{}
	p, err := peer.Decode(target)
	if err != nil || strings.Contains(target, "@") {
		c, rerr := n.reg.Resolve(target)
		if rerr != nil && n.disc != nil {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if strings.Contains(target, "@") {
				_, _ = n.disc.Lookup(lctx, target)
			} else {
				_, _ = n.disc.FindByName(lctx, target)
			}
			cancel()
			c, rerr = n.reg.Resolve(target)
		}
		if rerr != nil {
			return res, rerr
		}
		if p, err = peer.Decode(c.Host); err != nil {
			return res, err
		}
		res.Agent = c.Address()
	}
	res.Peer = p.String()
	if p == h.ID() {
		// This node, or an agent it hosts: reachable, with no network
		// between (what a user pinging their own agent expects).
		res.Path, res.RTTs = "local", []float64{}
		return res, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if h.Network().Connectedness(p) != network.Connected {
		// A dial that failed a moment ago (the peer was restarting) puts
		// the peer in libp2p's dial backoff, and every dial in the next
		// seconds fails at once with "dial backoff". ping is the user
		// asking now: it dials now.
		if sw, ok := h.Network().(*swarm.Swarm); ok {
			sw.Backoff().Clear(p)
		}
		ai := peer.AddrInfo{ID: p}
		if len(h.Peerstore().Addrs(p)) == 0 {
			ai = n.findPeer(pctx, p) // a peer ID never met: its addresses are in the DHT
		}
		if err := h.Connect(pctx, ai); err != nil {
			return res, &PeerUnreachableError{Peer: p, Err: err}
		}
	}
	ch := ping.Ping(network.WithAllowLimitedConn(pctx, "nova-ping"), h, p)
	var sum float64
	for i := 0; i < count; i++ {
		r, ok := <-ch
		if !ok {
			break
		}
		if r.Error != nil {
			return res, &PeerUnreachableError{Peer: p, Err: r.Error, Connected: true}
		}
		ms := float64(r.RTT.Microseconds()) / 1000
		res.RTTs = append(res.RTTs, ms)
		sum += ms
	}
	cancel()
	if len(res.RTTs) > 0 {
		// To the microsecond, as each round trip is.
		res.Average = math.Round(sum/float64(len(res.RTTs))*1000) / 1000
	}
	res.Path, res.Addr = connPath(h.Network().ConnsToPeer(p))
	return res, nil
}

// PeerUnreachableError says ping could not connect to a peer, or lost it
// while measuring.
type PeerUnreachableError struct {
	Peer      peer.ID
	Err       error
	Connected bool // the connection was up; a round trip failed
}

func (e *PeerUnreachableError) Error() string {
	switch {
	case e.Connected:
		return fmt.Sprintf("node: ping %s: %v", e.Peer, e.Err)
	case errors.Is(e.Err, swarm.ErrNoAddresses):
		return fmt.Sprintf("node: cannot reach %s: this node knows no address of it", e.Peer)
	}
	return fmt.Sprintf("node: cannot reach %s: %v", e.Peer, e.Err)
}

func (e *PeerUnreachableError) Unwrap() error { return e.Err }

// Code is the error's code.
func (e *PeerUnreachableError) Code() string { return "PEER_UNREACHABLE" }
