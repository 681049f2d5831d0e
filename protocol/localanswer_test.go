package protocol_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol"
)

// A local answer sent by an agent with Send (found by review in session 6):
// the requester's answer is its own, not the sender's payload buffer.
func TestLocalAnswerIsTheRequesters(t *testing.T) {
	mn := mocknet.New()
	defer mn.Close()
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	reg := agentcard.NewRegistry(h.ID())
	for _, n := range []string{"a0", "b"} {
		if _, err := reg.Register(agentcard.Card{ID: n, Name: n, Version: "1.0.0", Tier: 3, Capabilities: []agentcard.Capability{}}); err != nil {
			t.Fatal(err)
		}
	}
	f := envelope.NewFactory()
	r, err := protocol.New(h, reg, protocol.WithFactory(f))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Handle("a0", func(context.Context, *envelope.Envelope) (any, error) { return nil, nil })
	sent := make(chan []byte, 1)
	r.Handle("b", func(_ context.Context, env *envelope.Envelope) (any, error) {
		go func() {
			buf := []byte(`"accepted"`)
			ans, _ := f.Reply(env, envelope.TypeTaskAccept, json.RawMessage(buf))
			ans.Payload = buf // the agent's own buffer
			if _, err := r.Send(context.Background(), ans); err != nil {
				t.Error(err)
			}
			sent <- buf
		}()
		return nil, nil
	})
	prop, _ := f.New("a0", "b", envelope.TypeTaskProposal, json.RawMessage(`"do it"`))
	resp, _, err := r.RequestWithin(t.Context(), prop, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	buf := <-sent
	copy(buf, `"REUSED!!"`) // the sender reuses its buffer after Send returned
	if string(resp.Payload) != `"accepted"` {
		t.Errorf("requester's answer changed by the sender: %s", resp.Payload)
	}
}
