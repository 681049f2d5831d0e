package protocol_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
)

// A local answer sent by an agent with Send (found by review in session 6):
// the requester's answer is its own, not the sender's payload buffer.
func TestLocalAnswerIsTheRequesters(t *testing.T) {
	r, f := mockLocal(t, "a0", "b")
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
