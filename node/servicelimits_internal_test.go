package node

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/protocol"
)

// Every nova stream service has its limits, and a peer's inbound and
// outbound streams past its per-peer limit are refused while another
// peer's are not. Accounting only: nothing is dialed.
func TestServiceLimitsPerPeer(t *testing.T) {
	rm, err := newResourceManager()
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	newPeer := func() peer.ID {
		_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		p, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := map[string]bool{protocol.ServiceName: true, mcpbridge.ServiceName: true, crdt.ServiceName: true}
	for _, l := range serviceLimits {
		delete(want, l.name)
		for _, dir := range []network.Direction{network.DirInbound, network.DirOutbound} {
			limit := l.peer.StreamsInbound
			if dir == network.DirOutbound {
				limit = l.peer.StreamsOutbound
			}
			t.Run(l.name+"/"+dir.String(), func(t *testing.T) {
				// open attaches as many streams of p to the service as it
				// admits, up to n, and reports how many it admitted.
				open := func(p peer.ID, n int) int {
					ok := 0
					for i := range n {
						s, err := rm.OpenStream(p, dir)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(s.Done)
						// A protocol of its own per stream: only the
						// service's limit applies.
						if err := s.SetProtocol(libp2pprotocol.ID(fmt.Sprintf("/nova/test/%d", i))); err != nil {
							t.Fatal(err)
						}
						if err := s.SetService(l.name); err != nil {
							break
						}
						ok++
					}
					return ok
				}
				if got := open(newPeer(), limit+1); got != limit {
					t.Fatalf("one peer: %d streams admitted, want %d", got, limit)
				}
				if got := open(newPeer(), 1); got != 1 {
					t.Fatal("another peer's stream refused")
				}
			})
		}
	}
	if len(want) > 0 {
		t.Fatalf("services without limits: %v", want)
	}
}
