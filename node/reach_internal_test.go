package node

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
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
		// a nova relay's circuit carries no limit: relayed all the same
		{[]network.Conn{fakeConn{addr: relayed}}, "relayed", relayed},
		{[]network.Conn{fakeConn{addr: relayed}, fakeConn{addr: direct}}, "direct", direct},
	} {
		if path, addr := connPath(tc.conns); path != tc.path || addr != tc.addr {
			t.Errorf("connPath = %s %s, want %s %s", path, addr, tc.path, tc.addr)
		}
	}
}

// The relay carries swarm members only: a reservation for a peer that
// presented valid cards, a circuit between two of them; strangers, and a
// member reaching a stranger, are refused.
func TestRelayACLAdmitsMembersOnly(t *testing.T) {
	cm, err := connmgr.NewConnManager(10, 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	ids := make([]peer.ID, 3)
	for i := range ids {
		_, pub, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		if ids[i], err = peer.IDFromPublicKey(pub); err != nil {
			t.Fatal(err)
		}
	}
	member1, member2, stranger := ids[0], ids[1], ids[2]
	cm.TagPeer(member1, memberTag, memberValue)
	cm.TagPeer(member2, memberTag, memberValue)
	cm.TagPeer(stranger, "other", 5)
	acl := relayACL{cm: cm}
	addr := multiaddr.StringCast("/ip4/198.18.1.1/udp/4710/quic-v1")
	if !acl.AllowReserve(member1, addr) || acl.AllowReserve(stranger, addr) {
		t.Errorf("reservations: member %v, stranger %v; want true, false", acl.AllowReserve(member1, addr), acl.AllowReserve(stranger, addr))
	}
	for _, tc := range []struct {
		src, dest peer.ID
		want      bool
	}{{member1, member2, true}, {stranger, member2, false}, {member1, stranger, false}} {
		if got := acl.AllowConnect(tc.src, addr, tc.dest); got != tc.want {
			t.Errorf("AllowConnect(%s, %s) = %v, want %v", tc.src, tc.dest, got, tc.want)
		}
	}
	if rc := relayResources(); rc.Limit != nil {
		t.Errorf("the relay's circuits carry a limit %+v: go-libp2p would open no nova stream on them", rc.Limit)
	}
}
