package testnet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// TestEscalationToRemoteAgentRefusedBySender: with the default tier rules
// on both nodes, a task proposal from an L3 agent on node 0 to an L0 agent
// on node 1 without metadata.escalationJustification is refused on node 0
// with ESCALATION_REQUIRED, whichever way it is sent (Send, Post, Request),
// and never reaches node 1: node 1's handler is not called, and node 1
// has no event about it (no message-received, no refusal). The same
// proposal with a justification is delivered.
func TestEscalationToRemoteAgentRefusedBySender(t *testing.T) {
	l3, l0 := tiers.L3, tiers.L0
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		c.TierRules = nil // the seed's default rules: L3 -> L0 proposals need a justification
		if i == 0 {
			c.Agents = []node.AgentConfig{{Name: "l3", Tier: &l3, Capabilities: []node.CapabilityConfig{{ID: "x"}}}}
		} else {
			c.Agents = nil
		}
	}))
	var mu sync.Mutex
	got := map[string]int{} // envelope id -> calls of sun's handler
	sun := node.AgentConfig{Name: "sun", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "x"}}}.Card()
	if _, err := net.Nodes[1].RegisterAgent(sun, func(_ context.Context, env *envelope.Envelope) (any, error) {
		mu.Lock()
		got[env.ID]++
		mu.Unlock()
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	net.Connect(0, 1)
	net.WaitForCards()
	a, b := net.Nodes[0], net.Nodes[1]
	proposal := func() *envelope.Envelope {
		env, err := a.NewEnvelope("l3", "sun", envelope.TypeTaskProposal, map[string]string{"task": "review the schema"})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}

	sends := []struct {
		name string
		send func(*envelope.Envelope) error
	}{
		{"Send", func(env *envelope.Envelope) error { _, err := a.Send(t.Context(), env); return err }},
		{"Post", func(env *envelope.Envelope) error { _, err := a.Router().Post(t.Context(), env); return err }},
		{"Request", func(env *envelope.Envelope) error {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, _, err := a.Request(ctx, env)
			return err
		}},
	}
	type refusal struct{ how, id string }
	var refused []refusal
	for _, s := range sends {
		env := proposal()
		err := s.send(env)
		var re *protocol.RemoteError
		if !errors.Is(err, tiers.ErrEscalationRequired) || protocol.CodeOf(err) != tiers.CodeEscalationRequired {
			t.Fatalf("%s without justification: %v, want ESCALATION_REQUIRED", s.name, err)
		}
		if errors.As(err, &re) {
			t.Fatalf("%s without justification: refused by node 1 (%v), not by the sending node", s.name, err)
		}
		refused = append(refused, refusal{s.name, env.ID})
	}

	// Justified, the same proposal goes through, on the channel the refused
	// ones would have used: once it is handled, anything sent before it on
	// that channel would have reached node 1 first.
	ok := proposal()
	ok.Metadata = &envelope.Metadata{EscalationJustification: "schema change needs L0 sign-off"}
	res, err := a.Send(t.Context(), ok)
	if err != nil || !res.Delivered || res.Path != protocol.PathRemote {
		t.Fatalf("justified proposal: %+v %v", res, err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if got[ok.ID] != 1 {
			return fmt.Errorf("sun's handler got the justified proposal %d times", got[ok.ID])
		}
		return nil
	})

	mu.Lock()
	if len(got) != 1 {
		t.Errorf("sun's handler got %d envelopes, want only the justified proposal: %v", len(got), got)
	}
	mu.Unlock()
	for _, r := range refused {
		for _, e := range b.Observer().Recent(0) {
			if e.EnvelopeID == r.id {
				t.Errorf("node 1 has a %s event (code %q) for the proposal refused by %s: it left node 0", e.Type, e.Code, r.how)
			}
		}
		reported := 0
		for _, e := range a.Observer().Recent(0) {
			if e.Type == protocol.EvtErrorRaised && e.EnvelopeID == r.id {
				reported++
				if e.Code != tiers.CodeEscalationRequired || e.Path != protocol.PathRemote {
					t.Errorf("node 0's error event for the proposal refused by %s: code %q path %q, want ESCALATION_REQUIRED on the remote path", r.how, e.Code, e.Path)
				}
			}
		}
		if reported != 1 {
			t.Errorf("node 0 reported the proposal refused by %s %d times, want once", r.how, reported)
		}
	}
	if n := securityEvents(b, tiers.CodeEscalationRequired); n != 0 {
		t.Errorf("node 1 logged %d ESCALATION_REQUIRED security events: an unjustified proposal reached it", n)
	}
}
