package protocol

import (
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

// agentCopy gives every handler its own header and metadata, and its own
// payload unless the envelope's payload is that handler's alone (a
// broadcast's is shared by every local agent it reaches).
func TestAgentCopy(t *testing.T) {
	env := &envelope.Envelope{ID: "id", Sender: "a", Recipient: "b", Type: envelope.TypeRequest,
		Payload: []byte(`"p"`), Metadata: &envelope.Metadata{Tier: 2}}
	for _, own := range []bool{false, true} {
		c := agentCopy(env, own)
		c.Sender, c.Metadata.Tier = "x", 0
		c.Payload[1] = 'q'
		if env.Sender != "a" || env.Metadata.Tier != 2 {
			t.Fatalf("own=%v: the handler's header or metadata is the router's", own)
		}
		if shared := env.Payload[1] == 'q'; shared != own {
			t.Fatalf("own=%v: payload shared %v", own, shared)
		}
		env.Payload[1] = 'p'
	}
	if c := agentCopy(&envelope.Envelope{ID: "id"}, false); c.Metadata != nil || c.Payload != nil {
		t.Fatalf("copy of an envelope without metadata or payload: %+v", c)
	}
}
