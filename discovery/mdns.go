package discovery

import (
	"io"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

func init() { startMDNS = startLibp2pMDNS }

// startLibp2pMDNS runs go-libp2p's mDNS service: it advertises the host's
// LAN addresses under service and reports the peers advertising the same
// service. The service calls the notifee on a goroutine of its own per
// peer found.
func startLibp2pMDNS(h host.Host, service string, found func(peer.AddrInfo)) (io.Closer, error) {
	svc := mdns.NewMdnsService(freshAddrs{h}, service, notifee(found))
	if err := svc.Start(); err != nil {
		_ = svc.Close()
		return nil, err
	}
	return svc, nil
}

type notifee func(peer.AddrInfo)

func (f notifee) HandlePeerFound(ai peer.AddrInfo) { f(ai) }

// freshAddrs is h with the swarm's interface addresses read afresh: the
// swarm caches them for a minute, and the mDNS service restarted after a
// move (addrLoop) would advertise the old ones.
type freshAddrs struct{ host.Host }

func (h freshAddrs) Network() network.Network { return freshNet{h.Host.Network()} }

type freshNet struct{ network.Network }

func (n freshNet) InterfaceListenAddresses() ([]ma.Multiaddr, error) {
	return manet.ResolveUnspecifiedAddresses(n.ListenAddresses(), nil)
}
