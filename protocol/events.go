package protocol

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/nova-node/nova-node/envelope"
)

// Event types, after the seed's A2ALogEvent, plus "security". The Go names
// follow Evt<Entity><PastTense>, as the task layer's do; the strings are what
// the events stream, the metrics and the audit log carry.
const (
	EvtMessageSent     = "message-sent"
	EvtMessageReceived = "message-received"
	EvtRouteDecided    = "routing-decision"
	EvtErrorRaised     = "error"
	EvtSecurityRaised  = "security"
	EvtCardsReceived   = "cards-received"
)

// Routing paths.
const (
	PathLocal     = "local"
	PathRemote    = "remote"
	PathBroadcast = "broadcast"
)

// Event is one observable step of the router. Tier fields are -1 when not
// applicable.
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

// EventSink receives router events. Emit must not block: the router calls it
// on its hot path and from stream handlers. Implementations buffer and count
// what they drop.
type EventSink interface {
	Emit(Event)
}

type nopSink struct{}

func (nopSink) Emit(Event) {}

// RoutingResult is the seed's RoutingResult.
type RoutingResult struct {
	Delivered     bool    `json:"delivered"`
	Path          string  `json:"path"`
	TargetAgentID string  `json:"targetAgentId"`
	LatencyMs     float64 `json:"latencyMs"`
	Error         string  `json:"error,omitempty"`
}
