package connhealth

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"go.uber.org/zap"
)

// ForgetAfter is how long after its last connection closed a peer's
// protocols, metadata and key leave the peerstore (see [ForgetPeers]).
const ForgetAfter = 30 * time.Second

// maxForgetting bounds the disconnected peers waiting to be forgotten;
// past it a peer that disconnects is forgotten at once.
const maxForgetting = 1 << 16

// ForgetPeers drops from h's peerstore what libp2p keeps of a peer for
// the life of the process, apart from its addresses: the protocols it
// offered, its identify metadata (agent and protocol versions, observed
// address) and its public key, once the peer has had no connection for
// after. libp2p never drops them, so a node that meets many peers (a large
// swarm, churn, or one host presenting identity after identity) would hold
// them for every peer it ever met: about 1 KB each. What they are for is
// a connected peer, and identify writes them again on every new
// connection; the addresses stay, with libp2p's own expiry, for the DHT's
// routing table and for dialling the peer back. It returns when ctx ends;
// forgot counts the peers forgotten.
func ForgetPeers(ctx context.Context, h host.Host, after time.Duration, forgot *atomic.Uint64, log *zap.SugaredLogger) {
	sub, err := h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged), eventbus.Name("nova peerstore forget"), eventbus.BufSize(256))
	if err != nil {
		log.Warnw("cannot follow disconnections: the peerstore keeps every peer met", "err", err)
		return
	}
	defer sub.Close()
	ps := h.Peerstore()
	forget := func(p peer.ID) {
		if c := h.Network().Connectedness(p); p == h.ID() || c == network.Connected || c == network.Limited {
			return // back since, or never gone
		}
		ps.RemovePeer(p)
		forgot.Add(1)
	}
	gone := map[peer.ID]time.Time{} // disconnected peers, since
	tick := time.NewTicker(max(after/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sub.Out():
			if !ok {
				return
			}
			ev := e.(event.EvtPeerConnectednessChanged)
			switch {
			case ev.Connectedness != network.NotConnected:
				delete(gone, ev.Peer)
			case len(gone) >= maxForgetting:
				forget(ev.Peer)
			default:
				gone[ev.Peer] = time.Now()
			}
		case now := <-tick.C:
			for p, since := range gone {
				if now.Sub(since) >= after {
					delete(gone, p)
					forget(p)
				}
			}
		}
	}
}
