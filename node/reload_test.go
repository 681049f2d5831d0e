package node_test

import (
	"context"
	"testing"

	"github.com/nova-node/nova-node/node"
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
