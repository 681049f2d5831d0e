//go:build nattest

package main

import (
	"net"

	manet "github.com/multiformats/go-multiaddr/net"
)

// A nova-node built with -tags nattest (only the NAT tests do) counts
// 198.18.0.0/15 as public internet. The tests' namespace internet uses that
// range because it is reserved for such test networks (RFC 2544) and so can
// never reach a real host; go-libp2p lists it as unroutable, and its AutoNAT,
// hole punching (DCUtR) and relay service only ever consider public
// addresses, so without this none of them would engage in the test.
func init() {
	_, bench, _ := net.ParseCIDR("198.18.0.0/15")
	kept := manet.Unroutable4[:0:0]
	for _, n := range manet.Unroutable4 {
		if n.String() != bench.String() {
			kept = append(kept, n)
		}
	}
	manet.Unroutable4 = kept
}
