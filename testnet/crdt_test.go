package testnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// TestTwentyNodesConvergeOnADocument: 20 nodes in a ring write to the same
// document at the same time (their own keys, a shared counter and a set);
// every node ends with the same document and nothing is lost.
func TestTwentyNodesConvergeOnADocument(t *testing.T) {
	const n = 20
	net := testnet.New(t, n, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) { c.MetricsListen = "off" }))
	net.Ring()
	net.WaitForCards()
	ctx := context.Background()
	for _, nd := range net.Nodes {
		if _, err := nd.ReadDoc(ctx, "board", ""); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i, nd := range net.Nodes {
		wg.Go(func() {
			for k := 0; k < 5; k++ {
				ops := []node.DocOp{
					{Op: "set", Path: fmt.Sprintf("/n%d/k%d", i, k), Value: json.RawMessage(fmt.Sprint(k))},
					{Op: "incr", Path: "/total", By: 1},
					{Op: "add", Path: "/seen", Value: json.RawMessage(fmt.Sprintf(`"%d-%d"`, i, k))},
				}
				for _, o := range ops {
					if _, err := nd.ApplyDocOp(ctx, "board", o); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	start := time.Now()
	testnet.Eventually(t, 30*time.Second, func() error {
		first, _ := net.Nodes[0].ReadDoc(ctx, "board", "")
		for i, nd := range net.Nodes[1:] {
			v, _ := nd.ReadDoc(ctx, "board", "")
			if !bytes.Equal(v.Value, first.Value) {
				return fmt.Errorf("node %d differs from node 0", i+1)
			}
		}
		return nil
	})
	t.Logf("20 nodes converged %s after the last write", time.Since(start).Round(time.Millisecond))
	v, _ := net.Nodes[7].ReadDoc(ctx, "board", "/total")
	if string(v.Value) != fmt.Sprint(n*5) {
		t.Fatalf("counter %s, want %d", v.Value, n*5)
	}
	s, _ := net.Nodes[13].ReadDoc(ctx, "board", "/seen")
	var seen []string
	json.Unmarshal(s.Value, &seen)
	if len(seen) != n*5 {
		t.Fatalf("%d set elements, want %d", len(seen), n*5)
	}
}

// TestDocumentSurvivesRestart: a node restarted from its data dir has its
// documents as they were, and catches up on what it missed while down.
func TestDocumentSurvivesRestart(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	ctx := context.Background()
	for _, nd := range net.Nodes {
		nd.ReadDoc(ctx, "notes", "")
	}
	if _, err := net.Nodes[1].ApplyDocOp(ctx, "notes", node.DocOp{Op: "set", Path: "/a", Value: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, 10*time.Second, func() error {
		v, _ := net.Nodes[0].ReadDoc(ctx, "notes", "/a")
		if string(v.Value) != "1" {
			return fmt.Errorf("node 0 sees %s", v.Value)
		}
		return nil
	})
	cfg := net.Nodes[1].Config()
	cfg.Listen = nil
	for _, a := range net.Nodes[1].Host().Addrs() {
		cfg.Listen = append(cfg.Listen, a.String())
	}
	net.Kill(1)
	// Written while node 1 is down.
	net.Nodes[0].ApplyDocOp(ctx, "notes", node.DocOp{Op: "set", Path: "/b", Value: json.RawMessage(`2`)})
	nd := net.Start(1, cfg, nil)
	v, err := nd.ReadDoc(ctx, "notes", "/a")
	if err != nil || string(v.Value) != "1" {
		t.Fatalf("after restart /a = %s (%v)", v.Value, err)
	}
	net.Connect(1, 0)
	testnet.Eventually(t, 10*time.Second, func() error {
		v, _ := nd.ReadDoc(ctx, "notes", "/b")
		if string(v.Value) != "2" {
			return fmt.Errorf("restarted node has not caught up: /b = %s", v.Value)
		}
		return nil
	})
}
