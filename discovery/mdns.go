package discovery

import (
	"io"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
)

func init() { startMDNS = startLibp2pMDNS }

// startLibp2pMDNS runs go-libp2p's mDNS service: it advertises the host's
// LAN addresses under service and reports the peers advertising the same
// service. The service calls the notifee on a goroutine of its own per
// peer found.
func startLibp2pMDNS(h host.Host, service string, found func(peer.AddrInfo)) (io.Closer, error) {
	svc := mdns.NewMdnsService(h, service, notifee(found))
	if err := svc.Start(); err != nil {
		_ = svc.Close()
		return nil, err
	}
	return svc, nil
}

type notifee func(peer.AddrInfo)

func (f notifee) HandlePeerFound(ai peer.AddrInfo) { f(ai) }
