package node_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

func TestReloadAgents(t *testing.T) {
	cfg := testnet.Config(t, 0, testnet.TCP)
	cfg.Agents = []node.AgentConfig{node.DefaultAgent("alice"), node.DefaultAgent("bob")}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, _ := n.Registry().Get("bob")
	next := cfg
	bob := node.DefaultAgent("bob")
	bob.Description = "bob, now with a description"
	next.Agents = []node.AgentConfig{bob, node.DefaultAgent("carol")}
	res, err := n.Reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Added) != 1 || res.Added[0] != "carol" || len(res.Changed) != 1 || res.Changed[0] != "bob" || len(res.Removed) != 1 || res.Removed[0] != "alice" {
		t.Fatalf("reload: %+v", res)
	}
	if _, ok := n.Registry().Get("alice"); ok {
		t.Error("alice still hosted")
	}
	if c, ok := n.Registry().Get("carol"); !ok || c.Host != n.ID().String() {
		t.Error("carol not hosted")
	}
	after, _ := n.Registry().Get("bob")
	if after.Revision <= before.Revision || after.Description != bob.Description {
		t.Errorf("bob's card: revision %d -> %d, %q", before.Revision, after.Revision, after.Description)
	}
	bad := next
	bad.Agents = append(bad.Agents, node.AgentConfig{Name: "no@at"})
	if _, err := n.Reload(bad); err == nil {
		t.Error("an invalid config was applied")
	}
}

// An agent removed by a reload leaves its peers' registries at once: the
// node's next hello lists the agents it still hosts. Before, peers kept
// the card for its TTL (10 minutes), showed the agent as connected, and
// sends to it failed with the host's AGENT_NOT_FOUND.
func TestReloadWithdrawsRemovedAgentFromPeers(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		if i == 1 {
			c.Agents = append(c.Agents, node.DefaultAgent("carol"))
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	host := net.Nodes[1]
	carol := "carol@" + host.ID().String()
	if _, ok := net.Nodes[0].Registry().Get(carol); !ok {
		t.Fatal("the peer does not know carol")
	}
	kept := host.Registry().Local()
	next := host.Config()
	next.Agents = slices.DeleteFunc(slices.Clone(next.Agents), func(a node.AgentConfig) bool { return a.Name == "carol" })
	if res, err := host.Reload(next); err != nil || !slices.Equal(res.Removed, []string{"carol"}) {
		t.Fatalf("reload: %+v, %v", res, err)
	}
	start := time.Now()
	waitfor.Eventually(t, 5*time.Second, func() error {
		if _, ok := net.Nodes[0].Registry().Get(carol); ok {
			return errors.New("the peer still lists carol")
		}
		return nil
	})
	t.Logf("carol withdrawn from the peer's registry in %s", time.Since(start).Round(time.Millisecond))
	for _, c := range kept {
		if c.ID == "carol" {
			continue
		}
		if _, ok := net.Nodes[0].Registry().Get(c.Address()); !ok {
			t.Errorf("%s, still hosted, left the peer's registry too", c.Address())
		}
	}
	withdrawn := false
	for _, e := range net.Nodes[0].Observer().Recent(0) {
		withdrawn = withdrawn || e.Type == protocol.EvtCardsReceived && strings.Contains(e.Detail, "withdrawn") && strings.Contains(e.Detail, carol)
	}
	if !withdrawn {
		t.Error("no event says carol was withdrawn")
	}
}
