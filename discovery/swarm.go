package discovery

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/multiformats/go-multiaddr"
)

// PSK derives the libp2p private-network key of a swarm from its 32-byte
// secret: HMAC-SHA256 keyed with the secret over "nova/pnet/v1/<swarm>".
// The secret itself is never used as a key, and a secret reused by
// mistake in another swarm still gives another network. Pass the result
// to libp2p.PrivateNetwork; go-libp2p's PSK is incompatible with QUIC, so
// such a host listens on TCP and WebSocket only.
func PSK(swarm string, secret []byte) (pnet.PSK, error) {
	if err := ValidateSwarm(swarm); err != nil {
		return nil, err
	}
	if len(secret) != 32 {
		return nil, fmt.Errorf("discovery: swarm secret is %d bytes, want 32", len(secret))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("nova/pnet/v1/" + swarm))
	return pnet.PSK(m.Sum(nil)), nil
}

// ParseAddrs turns multiaddrs ending in /p2p/<peerID> (bootstrap or relay
// addresses from the config, flags or an invite token) into address infos,
// one per peer, in first-seen order, with the addresses of the same peer
// merged. An address without /p2p is an error naming it.
func ParseAddrs(addrs []string) ([]peer.AddrInfo, error) {
	var out []peer.AddrInfo
	at := map[peer.ID]int{}
	for _, a := range addrs {
		m, err := multiaddr.NewMultiaddr(a)
		if err != nil {
			return nil, fmt.Errorf("discovery: %q is not a multiaddr: %w", a, err)
		}
		ai, err := peer.AddrInfoFromP2pAddr(m)
		if err != nil {
			return nil, fmt.Errorf("discovery: %q must end in /p2p/<peerID>: %w", a, err)
		}
		if i, ok := at[ai.ID]; ok {
			out[i].Addrs = append(out[i].Addrs, ai.Addrs...)
			continue
		}
		at[ai.ID] = len(out)
		out = append(out, *ai)
	}
	return out, nil
}
