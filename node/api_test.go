package node_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/localapi"
)

// TestAPIErrorNamesItsCodeOnce: a peer's refusal already ends with its
// code; the API error does not add it a second time.
func TestAPIErrorNamesItsCodeOnce(t *testing.T) {
	for _, c := range []struct {
		e    localapi.APIError
		want string
	}{
		{localapi.APIError{Code: "ESCALATION_REQUIRED", Message: "peer 12…x refused: justify it (ESCALATION_REQUIRED)"}, "peer 12…x refused: justify it (ESCALATION_REQUIRED)"},
		{localapi.APIError{Code: "AGENT_NOT_FOUND", Message: `agent not found: "x"`}, `agent not found: "x" (AGENT_NOT_FOUND)`},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}

// TestBroadcastOfAQuestionRefused: the API refuses to broadcast a type that
// asks for an answer (nobody can answer "*"), before anything is sent; a
// notification is broadcast.
func TestBroadcastOfAQuestionRefused(t *testing.T) {
	n := tierNode(t)
	for _, typ := range []envelope.Type{envelope.TypeRequest, envelope.TypeTaskProposal} {
		res := n.SendFromAPI(t.Context(), localapi.SendRequest{From: "t0", To: envelope.Broadcast, Type: typ, Payload: json.RawMessage(`"hi"`)})
		if res.Error == nil || res.Error.Code != envelope.CodeInvalidEnvelope || res.Sent != nil || !strings.Contains(res.Error.Message, "cannot be answered") {
			t.Errorf("broadcast %s: %+v", typ, res)
		}
		if err := envelope.CheckBroadcastType(typ); !errors.Is(err, envelope.ErrInvalid) {
			t.Errorf("CheckBroadcastType(%s) = %v", typ, err)
		}
	}
	if m := n.Observer().Metrics(); m.TotalMessagesSent != 0 {
		t.Errorf("%d messages sent by refused broadcasts", m.TotalMessagesSent)
	}
	res := n.SendFromAPI(t.Context(), localapi.SendRequest{From: "t0", To: envelope.Broadcast, Type: envelope.TypeNotification})
	if res.Error != nil {
		t.Errorf("broadcast notification: %+v", res.Error)
	}
}

// TestSendRequestTooLarge: a send whose request is over MaxSendRequest is
// refused with a message that says so.
func TestSendRequestTooLarge(t *testing.T) {
	n := tierNode(t)
	cl := localapi.NewClient(n.Config().APISocketPath())
	big := json.RawMessage(`"` + strings.Repeat("x", localapi.MaxSendRequest) + `"`)
	_, err := cl.Send(t.Context(), localapi.SendRequest{From: "t0", To: "t1", Type: envelope.TypeNotification, Payload: big})
	if err == nil || !strings.Contains(err.Error(), "too large") || !errors.Is(err, envelope.ErrInvalid) {
		t.Fatalf("oversized send: %v", err)
	}
}
