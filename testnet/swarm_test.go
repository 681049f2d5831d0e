package testnet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// TestWrongSwarmSecretCannotConnect: nodes sharing a swarm secret talk; a
// node with another secret cannot complete a handshake with them, so it
// cannot open any stream. A secret also drops QUIC (not usable with PSK).
func TestWrongSwarmSecretCannotConnect(t *testing.T) {
	secretA := strings.Repeat("ab", 32)
	secretB := strings.Repeat("cd", 32)
	net := testnet.New(t, 3, testnet.WithConfig(func(i int, c *node.Config) {
		c.SwarmSecret = secretA
		if i == 2 {
			c.SwarmSecret = secretB
		}
	}))
	for i, n := range net.Nodes {
		for _, a := range n.Host().Addrs() {
			if strings.Contains(a.String(), "quic") {
				t.Fatalf("node %d listens on QUIC %s with a swarm secret", i, a)
			}
		}
	}
	net.Connect(0, 1)
	net.WaitForCards()
	if _, _, err := request(t, net.Nodes[0], "a0", "a1", "member"); err != nil {
		t.Fatalf("members cannot talk: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	outsider := net.Nodes[2]
	err := outsider.Host().Connect(ctx, peer.AddrInfo{ID: net.Nodes[0].ID(), Addrs: net.Nodes[0].Host().Addrs()})
	if err == nil {
		t.Fatal("a node with the wrong secret connected to the swarm")
	}
	if _, err := outsider.Host().NewStream(ctx, net.Nodes[0].ID(), "/nova/a2a/1.0.0"); err == nil {
		t.Fatal("a node with the wrong secret opened a stream")
	}
}
