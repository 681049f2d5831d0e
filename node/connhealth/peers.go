package connhealth

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// peerRedial is how often the configured peers that dropped are dialled
// again, and how long one dial may take.
const peerRedial = 10 * time.Second

// keepPeers dials the configured peers and redials any that drop, every
// peerRedial, until ctx ends.
func (m *Monitor) keepPeers(ctx context.Context) {
	t := time.NewTicker(peerRedial)
	defer t.Stop()
	for {
		for _, ai := range m.cfg.peers {
			if m.h.Network().Connectedness(ai.ID) == network.Connected {
				continue
			}
			dctx, cancel := context.WithTimeout(ctx, peerRedial)
			if err := m.h.Connect(dctx, ai); err != nil {
				m.log.Infow("peer not reachable yet", "peer", ai.ID, "addrs", ai.Addrs, "err", err)
			} else {
				m.log.Infow("connected to peer", "peer", ai.ID)
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
