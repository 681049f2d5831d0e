package node

import (
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/multiformats/go-multiaddr"
)

// addrConn is a connection with a remote address and a stat, all a
// status line reads.
type addrConn struct {
	network.Conn
	addr    multiaddr.Multiaddr
	limited bool
}

func (c addrConn) RemoteMultiaddr() multiaddr.Multiaddr { return c.addr }
func (c addrConn) Stat() network.ConnStats {
	return network.ConnStats{Stats: network.Stats{Limited: c.limited}}
}

// A peer connected twice over QUIC (a dial each way, both from the
// listening port) is listed with its address once.
func TestConnAddrsOnce(t *testing.T) {
	quic := multiaddr.StringCast("/ip4/127.0.0.1/udp/4710/quic-v1")
	tcp := multiaddr.StringCast("/ip4/127.0.0.1/tcp/4710")
	addrs, relayed := connAddrs([]network.Conn{addrConn{addr: quic}, addrConn{addr: quic}, addrConn{addr: tcp}})
	if !slices.Equal(addrs, []string{quic.String(), tcp.String()}) || relayed {
		t.Fatalf("addresses %v, relayed %v", addrs, relayed)
	}
	if _, relayed := connAddrs([]network.Conn{addrConn{addr: tcp, limited: true}}); !relayed {
		t.Fatal("a limited connection is relayed")
	}
	circuit := multiaddr.StringCast("/ip4/198.18.0.2/udp/4710/quic-v1/p2p/12D3KooWRDwca7FCvuczA5GAEZAyivH4CUFiJbV3XQkegHhkZzX2/p2p-circuit")
	if _, relayed := connAddrs([]network.Conn{addrConn{addr: circuit}}); !relayed {
		t.Fatal("a circuit without limit (a nova relay's) is relayed")
	}
}
