//go:build soak

package testnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
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
				ops := []localapi.DocOp{
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
	waitfor.Eventually(t, 30*time.Second, func() error {
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
