package localapi

import (
	"encoding/json"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol"
)

// IDInfo describes the running node (GET /v1/id).
type IDInfo struct {
	PeerID     string   `json:"peerId"`
	Addrs      []string `json:"addrs"`
	Version    string   `json:"version"`
	Swarm      string   `json:"swarm"`
	DataDir    string   `json:"dataDir"`
	Agents     []string `json:"agents"`
	Peers      int      `json:"connectedPeers"`
	MetricsURL string   `json:"metricsUrl,omitempty"`
	// MCPURL is the streamable HTTP MCP face; A2AURL the A2A gateway.
	MCPURL string `json:"mcpUrl,omitempty"`
	A2AURL string `json:"a2aUrl,omitempty"`
}

// SendRequest asks the node to send an envelope from one of its agents
// (POST /v1/send).
type SendRequest struct {
	From          string          `json:"from,omitempty"` // default: the node's default agent
	To            string          `json:"to"`
	Type          envelope.Type   `json:"type"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	CorrelationID string          `json:"correlationId,omitempty"`
	Capability    bool            `json:"capability,omitempty"` // To is a capability id
	Justification string          `json:"escalationJustification,omitempty"`
	NoWait        bool            `json:"noWait,omitempty"` // do not wait for the answer of a request
}

// MaxSendRequest is the largest SendRequest the API takes, in bytes of
// JSON: payload included. (An envelope must also fit the node's
// MaxFrameSize.)
const MaxSendRequest = 2 << 20

// SendResult is what happened to a SendRequest.
type SendResult struct {
	Sent     *envelope.Envelope     `json:"sent,omitempty"`
	Result   protocol.RoutingResult `json:"result"`
	Response *envelope.Envelope     `json:"response,omitempty"`
	// RoundTripMs is, for a request that waited for its answer, the time
	// from sending to the answer (or failure). Result.LatencyMs is only the
	// routing decision: a request is routed once queued on its channel,
	// which may be long before it is delivered.
	RoundTripMs float64   `json:"roundTripMs,omitempty"`
	Error       *APIError `json:"error,omitempty"`
}

// PeerStatus describes one connected peer.
type PeerStatus struct {
	PeerID  string   `json:"peerId"`
	Addrs   []string `json:"addrs"`
	Relayed bool     `json:"relayed"`
	Agents  []string `json:"agents"`
	// Basis is on what ground this node holds the peer's agents' tiers and
	// sandboxes: "grant", "trust", "none" (least privilege), or several
	// joined by "+" when its agents differ; absent when it presented no
	// agents.
	Basis string `json:"basis,omitempty"`
	// Expires is the earliest instant a grant or trust of its agents ends
	// (absent: none does).
	Expires time.Time `json:"expires,omitzero"`
}

// Reach is how peers outside the node's network reach it.
type Reach struct {
	// Reachable are the node's public addresses that peers confirmed they
	// could dial (AutoNAT v2); Unreachable those they could not.
	Reachable   []string `json:"reachable,omitempty"`
	Unreachable []string `json:"unreachable,omitempty"`
	// ReachedAt are the node's public addresses (IP and port) that a peer
	// on the internet connected to directly, which proves them reachable
	// before AutoNAT v2 confirms them.
	ReachedAt []string `json:"reachedAt,omitempty"`
	// Relaying: the node offers circuit relay to peers behind NAT (it has
	// a reachable address).
	Relaying bool `json:"relaying"`
	// RelayAddrs are the node's addresses through the relays it holds a
	// reservation on (.../p2p/<relay>/p2p-circuit).
	RelayAddrs []string `json:"relayAddrs,omitempty"`
}

// Status is what `nova-node status` shows (GET /v1/status).
type Status struct {
	IDInfo
	Reach        Reach                  `json:"reach"`
	PeerList     []PeerStatus           `json:"peers"`
	Channels     []protocol.ChannelInfo `json:"channels"`
	Metrics      Metrics                `json:"metrics"`
	RecentErrors []Event                `json:"recentErrors"`
}

// Metrics are the seed's A2AMetrics for messaging (GET /v1/metrics).
type Metrics struct {
	TotalMessagesSent       uint64                   `json:"totalMessagesSent"`
	TotalMessagesReceived   uint64                   `json:"totalMessagesReceived"`
	MessagesByType          map[envelope.Type]uint64 `json:"messagesByType"`
	AverageRoutingLatencyMs float64                  `json:"averageRoutingLatencyMs"` // of the messages routed; failures count in ErrorCount
	ErrorCount              uint64                   `json:"errorCount"`
	SecurityEvents          uint64                   `json:"securityEvents"`
	AuditWriteErrors        uint64                   `json:"auditWriteErrors"`
	AuditSuppressed         uint64                   `json:"auditSuppressed"` // security events left out of the audit log by its rate limit
}

// PingResult is what `nova-node ping` prints (POST /v1/ping).
type PingResult struct {
	Peer    string    `json:"peer"`
	Agent   string    `json:"agent,omitempty"`
	Path    string    `json:"path"` // direct or relayed
	Addr    string    `json:"addr"`
	RTTs    []float64 `json:"rttMs"`
	Average float64   `json:"avgMs"`
}

// Event types a node emits that its clients match, besides protocol's.
const (
	// EvtNodeStopped is the type of the last event of a followed events
	// stream (GET /v1/events?follow=1) when it ends because the node is
	// stopping. It is never in the ring, sent to subscribers or audited.
	EvtNodeStopped = "node-stopped"
	// EvtPeerGone is the event type of a peer that left while its agents
	// ran sub-tasks of this node's swarms: it stayed disconnected for the
	// node's TaskOptions.PeerGoneAfter and could not be dialled. The
	// running sub-tasks of its agents are reassigned; the detail says how
	// many.
	EvtPeerGone = "peer-gone"
	// EvtMCPInvoked is the event of one MCP tool call made or served
	// through the node (property 33).
	EvtMCPInvoked = "mcp-invocation"
)

// DocOp is one change to a replicated document (POST /v1/crdt/{doc}).
type DocOp struct {
	Op    string          `json:"op"` // set, delete, add, remove, incr
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
	By    int64           `json:"by,omitempty"`
	Agent string          `json:"agent,omitempty"` // default: the node's default agent
}

// DocView is a document's content at a path.
type DocView struct {
	Doc    string            `json:"doc"`
	Path   string            `json:"path"`
	Value  json.RawMessage   `json:"value"`
	Values []json.RawMessage `json:"values,omitempty"` // every concurrent value, winner first
	Clock  map[string]uint64 `json:"clock"`
}

// DocForgotten is the answer to DELETE /v1/crdt/{doc} (`crdt forget`):
// the document is closed on this node and its local copy deleted.
type DocForgotten struct {
	Doc       string `json:"doc"`
	Forgotten bool   `json:"forgotten"`
}

// MCPUpgrade is the Upgrade token of the MCP relay (POST /v1/mcp): the
// connection becomes newline-delimited JSON-RPC to the node's aggregated
// MCP server.
const MCPUpgrade = "nova-mcp"
