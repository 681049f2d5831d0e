package discovery

import (
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	manet "github.com/multiformats/go-multiaddr/net"
)

// maxRedialsOnMove bounds the dials addrLoop runs at once after a move.
const maxRedialsOnMove = 16

// addrPollInterval is how often addrLoop reads the machine's IP addresses
// where the kernel does not tell it of changes (netlink, on Linux), or when
// the addresses come from WithInterfaceAddrs.
var addrPollInterval = 2 * time.Second

// addrSettle lets a burst of address changes (an old address deleted, a
// new one added, routes) end before addrLoop reads the result.
const addrSettle = 200 * time.Millisecond

// addrLoop follows the machine's IP addresses until the service closes.
// libp2p notices a change only when its one-minute cache of them expires.
// When the machine moves (a new DHCP lease, another Wi-Fi, Ethernet plugged
// in):
//
//   - connections from an IP address the machine no longer has are dead:
//     the answers to them no longer arrive, yet nothing would say so until
//     a timeout. They are closed, and their peers dialled again, from the
//     new address: they learn it from the connection, and their channels
//     to this node resume at once (the router probes the old connection
//     when a peer identifies from another address).
//   - mDNS still advertised the old addresses (go-libp2p's service reads
//     them once, at start): it is restarted, so the LAN hears the new ones.
//
// On Linux the kernel says when an address changes (a netlink
// subscription, no cost while nothing changes); elsewhere, or with
// WithInterfaceAddrs, the addresses are read every addrPollInterval.
func (s *Service) addrLoop(source func() ([]net.IP, error), kernel bool) {
	ips := func() (map[string]net.IP, error) {
		l, err := source()
		if err != nil {
			return nil, err
		}
		m := make(map[string]net.IP, len(l))
		for _, ip := range l {
			m[ip.String()] = ip
		}
		return m, nil
	}
	prev, err := ips()
	if err != nil {
		s.log.Warnw("this machine's addresses cannot be read (tried again at each change)", "err", err)
	}
	var changed <-chan struct{}
	if kernel {
		c, stop, err := watchAddrs()
		if err != nil {
			s.log.Debugw("no address notifications from the kernel: polling", "err", err)
		} else {
			defer stop()
			changed = c
		}
	}
	var tick <-chan time.Time
	if changed == nil {
		t := time.NewTicker(addrPollInterval)
		defer t.Stop()
		tick = t.C
	}
	var lastRestart time.Time
	var restartDue <-chan time.Time // a restart held back by mdnsRestartGap
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-restartDue:
			restartDue, lastRestart = nil, time.Now()
			s.restartMDNS()
			continue
		case <-tick:
		case <-changed:
			select {
			case <-time.After(addrSettle):
			case <-s.ctx.Done():
				return
			}
		}
		cur, err := ips()
		if err != nil {
			continue
		}
		if prev == nil { // the first read failed
			prev = cur
			continue
		}
		gone, added := diffIPs(prev, cur)
		prev = cur
		if len(gone) == 0 && !added {
			continue
		}
		s.log.Infow("this machine's addresses changed", "gone", gone, "new", added)
		s.stats.moves.Add(1)
		if wait := mdnsRestartGap - time.Since(lastRestart); wait <= 0 {
			// A held-back restart whose timer fired while this change
			// was read is this one: drop it, or it restarts mDNS again
			// at once.
			restartDue, lastRestart = nil, time.Now()
			s.restartMDNS()
		} else if restartDue == nil {
			restartDue = time.After(wait)
		}
		s.redialFrom(gone)
	}
}

// mdnsRestartGap is the least time between two restarts of mDNS: an
// interface that flaps (a VPN, containers coming and going) would otherwise
// restart it, and make every node of the LAN answer its new browse, at
// each change. The changes within the gap are advertised by one restart at
// its end.
var mdnsRestartGap = 5 * time.Second

// interfaceIPs are the machine's IP addresses, link-local IPv6 ones aside.
func interfaceIPs() ([]net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || (n.IP.To4() == nil && n.IP.IsLinkLocalUnicast()) {
			continue
		}
		out = append(out, n.IP)
	}
	return out, nil
}

// diffIPs returns the addresses of prev that cur lacks, and whether cur
// has one prev lacked.
func diffIPs(prev, cur map[string]net.IP) (gone []net.IP, added bool) {
	for k, ip := range prev {
		if _, ok := cur[k]; !ok {
			gone = append(gone, ip)
		}
	}
	for k := range cur {
		if _, ok := prev[k]; !ok {
			added = true
		}
	}
	return gone, added
}

// redialFrom closes the connections whose local IP address is in gone and
// dials their peers again.
func (s *Service) redialFrom(gone []net.IP) {
	if len(gone) == 0 {
		return
	}
	var peers []peer.ID
	had := map[peer.ID]bool{}
	for _, c := range s.h.Network().Conns() {
		ip, err := manet.ToIP(c.LocalMultiaddr())
		if err != nil || !containsIP(gone, ip) {
			continue
		}
		_ = c.Close()
		if p := c.RemotePeer(); !had[p] {
			had[p] = true
			peers = append(peers, p)
		}
	}
	if len(peers) == 0 {
		return
	}
	s.log.Infow("closed the connections from addresses this host no longer has; dialling their peers again", "peers", len(peers))
	sem := make(chan struct{}, maxRedialsOnMove)
	var wg sync.WaitGroup
	for _, p := range peers {
		select {
		case sem <- struct{}{}:
		case <-s.ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if s.h.Network().Connectedness(p) != network.Connected {
				s.connect(s.ctx, peer.AddrInfo{ID: p}, "address change")
			}
		})
	}
	wg.Wait()
}

func containsIP(ips []net.IP, ip net.IP) bool {
	for _, x := range ips {
		if x.Equal(ip) {
			return true
		}
	}
	return false
}

// restartMDNS starts mDNS again, so that it advertises the host's current
// addresses. A failure is logged; the next change tries again.
func (s *Service) restartMDNS() {
	if !s.cfg.mdns || startMDNS == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.mdns != nil {
		_ = s.mdns.Close()
		s.mdns = nil
	}
	md, err := startMDNS(s.h, ServiceName(s.swarm), s.peerFound)
	if err != nil {
		s.log.Warnw("mDNS could not restart after an address change", "err", err)
		return
	}
	s.mdns = md
}
