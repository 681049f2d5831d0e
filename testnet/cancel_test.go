package testnet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// TestRequestCanceledStopsItsHandler: a requester that stops waiting (its
// context canceled) makes the handler running its request see its context
// canceled, on the recipient's node and on its own.
func TestRequestCanceledStopsItsHandler(t *testing.T) {
	net := testnet.New(t, 2)
	started := make(chan struct{}, 2)
	ended := make(chan error, 2)
	slow := func(ctx context.Context, _ *envelope.Envelope) (any, error) {
		started <- struct{}{}
		<-ctx.Done() // works until told to stop (or its timeout)
		ended <- ctx.Err()
		return nil, ctx.Err()
	}
	for _, n := range net.Nodes {
		card := node.AgentConfig{Name: "slow-" + n.ID().String()[len(n.ID().String())-4:], Capabilities: []node.CapabilityConfig{{ID: "slow"}}}.Card()
		if _, err := n.RegisterAgent(card, slow); err != nil {
			t.Fatal(err)
		}
	}
	net.Connect(0, 1)
	net.WaitForCards()
	for _, target := range []*node.Node{net.Nodes[1], net.Nodes[0]} {
		name := "slow-" + target.ID().String()[len(target.ID().String())-4:] + "@" + target.ID().String()
		env, err := net.Nodes[0].NewEnvelope("a0", name, envelope.TypeRequest, "work")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, _, err := net.Nodes[0].Router().Request(ctx, env)
			errc <- err
		}()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the handler never started", name)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: Request after cancel: %v", name, err)
		}
		select {
		case err := <-ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: the handler's context ended with %v, want canceled", name, err)
			}
		case <-time.After(5 * time.Second): // its own timeout is 10 s: only the cancel ends it sooner
			t.Fatalf("%s: the handler still runs after its requester canceled", name)
		}
	}
}
