package node_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
)

// Embedding a node: build it, host an agent with a handler, start it, and
// send a request to another agent. Here both agents live on the same node;
// with a peer connected, "to" can be any agent in the swarm.
func Example() {
	dir, _ := os.MkdirTemp("", "nova-example")
	defer os.RemoveAll(dir)

	cfg := node.DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.MDNS = false        // stay off the LAN in this example
	n, err := node.New(cfg) // the default config hosts an echo agent named "echo"
	if err != nil {
		panic(err)
	}
	defer n.Close()

	card := node.AgentConfig{Name: "shouter", Capabilities: []node.CapabilityConfig{{ID: "shout"}}}.Card()
	_, err = n.RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
		return strings.ToUpper(string(env.Payload)), nil
	})
	if err != nil {
		panic(err)
	}
	if err := n.Start(context.Background()); err != nil {
		panic(err)
	}

	req, _ := n.NewEnvelope("echo", "shouter", envelope.TypeRequest, "hello")
	resp, res, err := n.Request(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Path, string(resp.Payload))
	// Output: local "\"HELLO\""
}
