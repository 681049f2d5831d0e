package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	blankhost "github.com/libp2p/go-libp2p/p2p/host/blank"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/multiformats/go-multiaddr"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// fakeConn is a connection with only its addresses, direction and
// relayed flag.
type fakeConn struct {
	network.Conn
	addr, local string
	dir         network.Direction
	limited     bool
}

func (c fakeConn) RemoteMultiaddr() multiaddr.Multiaddr { return multiaddr.StringCast(c.addr) }
func (c fakeConn) LocalMultiaddr() multiaddr.Multiaddr  { return multiaddr.StringCast(c.local) }
func (c fakeConn) Stat() network.ConnStats {
	return network.ConnStats{Stats: network.Stats{Limited: c.limited, Direction: c.dir}}
}

// What proves a node reachable from the internet: a peer on a public
// address dialled one of its public addresses directly. Not a connection
// it dialled itself, not one to or from a private address (a laptop's),
// not a relayed one.
func TestReachedFromInternet(t *testing.T) {
	const pub, peerPub, lan = "/ip4/8.8.8.8/tcp/4710", "/ip4/9.9.9.9/tcp/51000", "/ip4/192.168.1.20/tcp/4710"
	const circuit = "/ip4/8.8.4.4/tcp/4710/p2p/12D3KooWRDwca7FCvuczA5GAEZAyivH4CUFiJbV3XQkegHhkZzX2/p2p-circuit"
	for _, tc := range []struct {
		c    fakeConn
		want bool
	}{
		{fakeConn{local: pub, addr: peerPub, dir: network.DirInbound}, true},
		{fakeConn{local: pub, addr: peerPub, dir: network.DirOutbound}, false},
		{fakeConn{local: lan, addr: peerPub, dir: network.DirInbound}, false},
		{fakeConn{local: pub, addr: "/ip4/10.1.2.3/tcp/51000", dir: network.DirInbound}, false},
		{fakeConn{local: pub, addr: circuit, dir: network.DirInbound}, false},
	} {
		if got := reachedFromInternet(tc.c); got != tc.want {
			t.Errorf("reachedFromInternet(local %s, remote %s, %s) = %v, want %v", tc.c.local, tc.c.addr, tc.c.dir, got, tc.want)
		}
	}
}

// The relay runs while the node has a proof of reach: a direct connection
// from the internet to an address it still advertises and AutoNAT v2 has
// not found unreachable, or an address AutoNAT v2 confirmed.
func TestRelayServiceFollowsProofOfReach(t *testing.T) {
	h := bareHost(t)
	s, err := startRelayService(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.close() })
	emitters := map[string]event.Emitter{}
	for name, proto := range map[string]any{"addrs": new(event.EvtLocalAddressesUpdated), "reach": new(event.EvtHostReachableAddrsChanged)} {
		em, err := h.EventBus().Emitter(proto)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = em.Close() })
		emitters[name] = em
	}
	emit := func(name string, evt any) {
		t.Helper()
		if err := emitters[name].Emit(evt); err != nil {
			t.Fatal(err)
		}
	}
	relaying := func(want bool, after string) {
		t.Helper()
		waitfor.Eventually(t, 10*time.Second, func() error {
			if s.Relaying() != want {
				return fmt.Errorf("after %s: relaying %v, want %v", after, !want, want)
			}
			return nil
		})
	}
	tcp, quic := multiaddr.StringCast("/ip4/8.8.8.8/tcp/4710"), multiaddr.StringCast("/ip4/8.8.8.8/udp/4710/quic-v1")
	if s.Relaying() {
		t.Fatal("relaying before any proof")
	}
	s.inbound <- tcp
	relaying(true, "a direct connection from the internet")
	if got := s.ReachedAt(); !slices.Equal(got, []string{"/ip4/8.8.8.8/tcp/4710"}) {
		t.Errorf("ReachedAt = %v, want the address reached", got)
	}
	emit("addrs", event.EvtLocalAddressesUpdated{Current: []event.UpdatedAddress{{Address: quic}}})
	relaying(false, "the address it was reached at is no longer advertised")
	s.inbound <- tcp
	relaying(true, "a direct connection again")
	emit("reach", event.EvtHostReachableAddrsChanged{Unreachable: []multiaddr.Multiaddr{tcp.Encapsulate(multiaddr.StringCast("/ws"))}})
	relaying(false, "AutoNAT v2 found the address unreachable")
	emit("reach", event.EvtHostReachableAddrsChanged{Reachable: []multiaddr.Multiaddr{quic}})
	relaying(true, "AutoNAT v2 confirmed an address")
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

// bareHost is a host with no transport, listener or address manager: the
// events on its bus are the test's alone.
func bareHost(t *testing.T) *blankhost.BlankHost {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pstoremem.NewPeerstore()
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.AddPrivKey(id, key); err != nil {
		t.Fatal(err)
	}
	sw, err := swarm.NewSwarm(id, ps, eventbus.NewBus())
	if err != nil {
		t.Fatal(err)
	}
	h := blankhost.NewBlankHost(sw)
	t.Cleanup(func() { _ = h.Close() })
	return h
}
