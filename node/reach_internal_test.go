package node

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/multiformats/go-multiaddr"
)

// fakeConn is a connection with only an address and a relayed flag.
type fakeConn struct {
	network.Conn
	addr    string
	limited bool
}

func (c fakeConn) RemoteMultiaddr() multiaddr.Multiaddr { return multiaddr.StringCast(c.addr) }
func (c fakeConn) Stat() network.ConnStats {
	return network.ConnStats{Stats: network.Stats{Limited: c.limited}}
}

// Once a hole punch has succeeded, the relayed connection lingers beside
// the direct one: ping says direct, with the direct address, whatever
// order go-libp2p lists them in.
func TestConnPathPrefersTheDirectConnection(t *testing.T) {
	const relayed = "/ip4/198.18.0.2/udp/4710/quic-v1/p2p/12D3KooWRDwca7FCvuczA5GAEZAyivH4CUFiJbV3XQkegHhkZzX2/p2p-circuit"
	const direct = "/ip4/198.18.2.1/udp/4710/quic-v1"
	for _, tc := range []struct {
		conns      []network.Conn
		path, addr string
	}{
		{[]network.Conn{fakeConn{addr: relayed, limited: true}, fakeConn{addr: direct}}, "direct", direct},
		{[]network.Conn{fakeConn{addr: direct}, fakeConn{addr: relayed, limited: true}}, "direct", direct},
		{[]network.Conn{fakeConn{addr: relayed, limited: true}}, "relayed", relayed},
	} {
		if path, addr := connPath(tc.conns); path != tc.path || addr != tc.addr {
			t.Errorf("connPath = %s %s, want %s %s", path, addr, tc.path, tc.addr)
		}
	}
}
