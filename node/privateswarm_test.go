package node_test

import (
	"strings"
	"testing"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/connhealth"
	"github.com/nova-node/nova-node/testnet"
)

// A dial between a node with a swarm secret and one without reaches the
// peer and fails its handshake: that is told apart from a peer that is
// down, so the node can say once that the peer is likely in a private
// swarm rather than repeat a raw "failed to negotiate security protocol"
// on every redial.
func TestPrivateSwarmMismatchIsRecognised(t *testing.T) {
	net := testnet.New(t, 3, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		if i == 0 {
			c.SwarmSecret = strings.Repeat("ab", 32)
		}
	}))
	private, open, other := net.Nodes[0], net.Nodes[1], net.Nodes[2]
	for _, c := range []struct{ from, to *node.Node }{{open, private}, {private, open}} {
		_, err := c.from.Connect(t.Context(), c.to.Addrs()[0].String())
		if err == nil || !connhealth.PrivateSwarmMismatch(err) {
			t.Errorf("dial across a swarm secret: %v", err)
		}
	}
	addr := other.Addrs()[0].String()
	net.Kill(2)
	if _, err := open.Connect(t.Context(), addr); err == nil || connhealth.PrivateSwarmMismatch(err) {
		t.Errorf("dial of a stopped node: %v", err)
	}
}
