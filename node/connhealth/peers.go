package connhealth

import (
	"context"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// PrivateSwarmHint is said once per peer whose dials reach it but fail
// the security handshake (PrivateSwarmMismatch).
const PrivateSwarmHint = "peer answers, but the connection's security handshake fails: one of the two nodes is likely in a " +
	"private swarm (a swarm secret) that the other has not joined. Ask a member for a token (`nova-node invite`) and run " +
	"`nova-node join TOKEN` on the node without the secret, then restart it; nodes with different secrets never connect " +
	"(dials go on, at debug level)"

// PrivateSwarmMismatch reports whether err is a dial that reached the
// peer but failed the security handshake: what a swarm secret on one side
// only (or two different secrets) does, as libp2p's private network
// encrypts the connection from its first byte and the other side reads
// noise where it expects the handshake.
func PrivateSwarmMismatch(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed to negotiate security protocol")
}

// peerRedial is how often the configured peers that dropped are dialled
// again, and how long one dial may take.
const peerRedial = 10 * time.Second

// keepPeers dials the configured peers and redials any that drop, every
// peerRedial, until ctx ends.
func (m *Monitor) keepPeers(ctx context.Context) {
	t := time.NewTicker(peerRedial)
	defer t.Stop()
	told := map[peer.ID]bool{} // of a secret on one side only
	for {
		for _, ai := range m.cfg.peers {
			if m.h.Network().Connectedness(ai.ID) == network.Connected {
				continue
			}
			dctx, cancel := context.WithTimeout(ctx, peerRedial)
			err := m.h.Connect(dctx, ai)
			switch {
			case err == nil:
				delete(told, ai.ID)
				m.log.Infow("connected to peer", "peer", ai.ID)
			case PrivateSwarmMismatch(err) && !told[ai.ID]:
				told[ai.ID] = true
				m.log.Warnw(PrivateSwarmHint, "peer", ai.ID, "addrs", ai.Addrs)
			case PrivateSwarmMismatch(err):
				m.log.Debugw("peer not reachable yet", "peer", ai.ID, "addrs", ai.Addrs, "err", err)
			default:
				m.log.Infow("peer not reachable yet", "peer", ai.ID, "addrs", ai.Addrs, "err", err)
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
