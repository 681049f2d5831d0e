package testnet_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/testnet"
)

// BenchmarkA2ASend compares, in one run, an A2A message/send through node
// A's gateway to an agent on node B with the same agent's request/response
// over the mesh directly from A, and the same send over the REST binding.
//
//	go test -run '^$' -bench BenchmarkA2ASend -benchtime 2000x -count 3 ./testnet/
func BenchmarkA2ASend(b *testing.B) {
	net := testnet.New(b, 2, testnet.WithConfig(func(i int, c *node.Config) { c.A2A.Listen = "127.0.0.1:0" }))
	card := node.AgentConfig{Name: "oracle", Capabilities: []node.CapabilityConfig{{ID: "answer"}}}.Card()
	if _, err := net.Nodes[1].RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
		return a2ahttp.Answer{Text: "42"}, nil
	}); err != nil {
		b.Fatal(err)
	}
	net.Connect(0, 1)
	net.WaitForCards()
	a := net.Nodes[0]
	b.Run("mesh-request", func(b *testing.B) {
		for b.Loop() {
			env, _ := a.NewEnvelope("a0", "oracle", envelope.TypeRequest, a2ahttp.Request{Text: "q"})
			if _, _, err := a.Request(b.Context(), env); err != nil {
				b.Fatal(err)
			}
		}
	})
	url := a.A2AURL() + "/a2a/oracle/"
	// message/send as any client sends it: one blocking JSON-RPC POST (v0.3).
	b.Run("gateway-message-send", func(b *testing.B) {
		hc := localClient(b, a)
		for i := 0; b.Loop(); i++ {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"m%d","role":"user","parts":[{"kind":"text","text":"q"}]}}}`, i, i)
			resp, err := hc.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(out), `"completed"`) {
				b.Fatalf("%d %s", resp.StatusCode, out)
			}
		}
	})
	// The same send over the v1.0 REST binding: POST .../v1/message:send.
	b.Run("gateway-rest-send", func(b *testing.B) {
		hc := localClient(b, a)
		for i := 0; b.Loop(); i++ {
			body := fmt.Sprintf(`{"message":{"messageId":"r%d","role":"ROLE_USER","parts":[{"text":"q"}]}}`, i)
			resp, err := hc.Post(url+"v1/message:send", "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(out), `"TASK_STATE_COMPLETED"`) {
				b.Fatalf("%d %s", resp.StatusCode, out)
			}
		}
	})
	// The outbound client with streaming (message/stream, SSE).
	b.Run("gateway-message-stream", func(b *testing.B) {
		c := a2ahttp.NewClient(a2ahttp.WithStreaming(true), a2ahttp.WithBearerToken(localToken(b, a)))
		if _, err := c.Card(b.Context(), url); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if r := c.Send(b.Context(), url, a2ahttp.Message{Text: "q"}); !r.Success {
				b.Fatalf("%+v", r)
			}
		}
	})
}
