package localapi

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/nova-node/nova-node/envelope"
)

// Event is one event as the node reports it: a line of the events stream
// (GET /v1/events), of the audit log (audit.jsonl) and of
// [Status].RecentErrors, and what the node's subscribers receive. Its Type
// is one of the router's (protocol.EvtMessageSent, ...), of the node's
// ([EvtPeerGone], [EvtMCPInvoked], [EvtNodeStopped], ...) or of the task
// layer's. It has the fields, JSON names and omitempty rules of the
// router's protocol.Event, which the node copies into it (a struct
// conversion), so that the router's events and the node's read alike. Tier
// fields are -1 when not applicable.
type Event struct {
	Type        string        `json:"type"`
	Time        time.Time     `json:"time"`
	EnvelopeID  string        `json:"envelopeId,omitempty"`
	Sender      string        `json:"sender,omitempty"`
	Recipient   string        `json:"recipient,omitempty"`
	MessageType envelope.Type `json:"messageType,omitempty"`
	Path        string        `json:"routingPath,omitempty"`
	Latency     time.Duration `json:"latencyNs,omitempty"`
	Success     bool          `json:"success"`
	Code        string        `json:"code,omitempty"`
	Detail      string        `json:"detail,omitempty"`
	Peer        peer.ID       `json:"peer,omitempty"`
	SourceTier  int           `json:"sourceTier"`
	TargetTier  int           `json:"targetTier"`
}
