package node

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/node/tasknode"
	"github.com/nova-node/nova-node/protocol"
)

// TestEventJSONMatchesRouter: an event of every kind the node reports
// marshals to the same bytes as a localapi.Event and as a protocol.Event,
// so that the events stream, Status.RecentErrors and the audit log carry
// the router's events as they always have, and the node's own events in
// the same shape. The router's events go through fromRouter, the node's
// are built as their emitters build them; one sets every field, one none,
// to cover each omitempty.
func TestEventJSONMatchesRouter(t *testing.T) {
	p := testPeer(t)
	now := time.Date(2026, 11, 27, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	router := []protocol.Event{
		{Type: protocol.EvtMessageSent, Time: now, EnvelopeID: "e1", Sender: "a@p", Recipient: "b@q", MessageType: envelope.TypeRequest,
			Path: protocol.PathRemote, Latency: 40 * time.Microsecond, Success: true, Peer: p, SourceTier: 1, TargetTier: 2},
		{Type: protocol.EvtMessageReceived, Time: now, EnvelopeID: "e1", Sender: "a@p", Recipient: "b@q", MessageType: envelope.TypeResponse,
			Path: protocol.PathLocal, Success: true, SourceTier: 0, TargetTier: 0},
		{Type: protocol.EvtRouteDecided, Time: now, EnvelopeID: "e2", Sender: "a@p", Recipient: "b@q", Path: protocol.PathBroadcast,
			Latency: time.Second, Success: false, SourceTier: -1, TargetTier: -1},
		{Type: protocol.EvtErrorRaised, Time: now, EnvelopeID: "e3", Code: protocol.CodeDeliveryFailed, Detail: "no route", SourceTier: -1, TargetTier: -1},
		{Type: protocol.EvtSecurityRaised, Time: now, Code: protocol.CodeProtocolError, Detail: "bad frame \"<&>\" é", Peer: p, SourceTier: -1, TargetTier: -1},
		{Type: protocol.EvtCardsReceived, Time: now, Peer: p, Success: true, Detail: "2 new or updated cards", SourceTier: -1, TargetTier: -1},
		{}, // every omitempty field left out
	}
	for _, ev := range router {
		compareEventJSON(t, fromRouter(ev), ev)
	}
	node := []localapi.Event{
		{Type: localapi.EvtNodeStopped, Time: now, Success: true, Detail: "the node is stopping", SourceTier: -1, TargetTier: -1},
		{Type: localapi.EvtPeerGone, Time: now, Peer: p, Success: true, Detail: "left", SourceTier: -1, TargetTier: -1},
		{Type: localapi.EvtMCPInvoked, Time: now, Sender: "a@p", Detail: "tool: boom", Code: "TOOL_FAILED", Latency: 1500 * time.Microsecond,
			SourceTier: -1, TargetTier: -1},
		{Type: protocol.EvtSecurityRaised, Time: now, Code: "MCP_DENIED", Detail: "tier", Peer: p, SourceTier: -1, TargetTier: -1},
		{Type: EvtAuditSuppressed, Time: now, Peer: p, Detail: "3 security events suppressed", SourceTier: -1, TargetTier: -1},
		{Type: "proposal-sent", Time: now, EnvelopeID: "prop", Sender: "a@p", Recipient: "b@q", MessageType: envelope.TypeTaskProposal,
			Success: true, Detail: "outbound, pending", SourceTier: -1, TargetTier: -1},
		{Type: "swarm-subtask-failed", Time: now, EnvelopeID: "swarm", Recipient: "b@q", Code: "TIMEOUT", Detail: "s1 attempt 2: late",
			SourceTier: -1, TargetTier: -1},
		{Type: tasknode.EvtSwarmNotice, Time: now, EnvelopeID: "swarm", Sender: "a@p", Recipient: "b@q", MessageType: envelope.TypeNotification,
			Success: true, Detail: "completed", SourceTier: -1, TargetTier: -1},
		{},
	}
	for _, ev := range node {
		compareEventJSON(t, ev, protocol.Event(ev))
	}
}

func compareEventJSON(t *testing.T, got localapi.Event, want protocol.Event) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Fatalf("%s event:\nlocalapi.Event %s\nprotocol.Event %s", want.Type, g, w)
	}
	var back localapi.Event
	if err := json.Unmarshal(w, &back); err != nil || !back.Time.Equal(got.Time) {
		t.Fatalf("%s event: a client reads %s as %+v (%v)", want.Type, w, back, err)
	}
}
