package testnet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/testnet"
)

// BenchmarkCRDTLateJoiner: node 0 holds a 10,000-key document; node 1
// connects and opens it. Reported: ms until node 1 has all of it.
func BenchmarkCRDTLateJoiner(b *testing.B) {
	for b.Loop() {
		net := testnet.New(b, 2, testnet.WithTransport(testnet.TCP))
		ctx := context.Background()
		for chunk := 0; chunk < 20; chunk++ { // values are capped at 64 KiB: 500 keys per write
			var sb strings.Builder
			sb.WriteString("{")
			for k := chunk * 500; k < (chunk+1)*500; k++ {
				if k > chunk*500 {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, `"k%d":%d`, k, k)
			}
			sb.WriteString("}")
			if _, err := net.Nodes[0].ApplyDocOp(ctx, "big", localapi.DocOp{Op: "set", Path: fmt.Sprintf("/data%d", chunk), Value: json.RawMessage(sb.String())}); err != nil {
				b.Fatal(err)
			}
		}
		net.Connect(1, 0)
		start := time.Now()
		net.Nodes[1].ReadDoc(ctx, "big", "")
		waitfor.Eventually(b, 30*time.Second, func() error {
			v, _ := net.Nodes[1].ReadDoc(ctx, "big", "/data19/k9999")
			if string(v.Value) != "9999" {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-current")
		for _, n := range net.Nodes {
			n.Close()
		}
	}
}

// BenchmarkCRDTConverge20x100: 20 nodes (ring plus discovery) each make 100
// writes at once to one document. Reported: ms from the first write until
// every node has the same document.
func BenchmarkCRDTConverge20x100(b *testing.B) {
	for b.Loop() {
		net := testnet.New(b, 20, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) { c.MetricsListen = "off" }))
		net.Ring()
		net.WaitForCards()
		ctx := context.Background()
		for _, nd := range net.Nodes {
			nd.ReadDoc(ctx, "load", "")
		}
		start := time.Now()
		var wg sync.WaitGroup
		for i, nd := range net.Nodes {
			wg.Go(func() {
				for k := 0; k < 100; k++ {
					nd.ApplyDocOp(ctx, "load", localapi.DocOp{Op: "set", Path: fmt.Sprintf("/n%d/k%d", i, k), Value: json.RawMessage(`1`)})
				}
			})
		}
		wg.Wait()
		waitfor.Eventually(b, 60*time.Second, func() error {
			for i, nd := range net.Nodes {
				v, _ := nd.ReadDoc(ctx, "load", "")
				var doc map[string]map[string]int
				json.Unmarshal(v.Value, &doc)
				total := 0
				for _, m := range doc {
					total += len(m)
				}
				if total != 2000 {
					return fmt.Errorf("node %d has %d of 2000 keys", i, total)
				}
			}
			return nil
		})
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-converged")
		for _, n := range net.Nodes {
			n.Close()
		}
	}
}
