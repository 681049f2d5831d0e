package protocol

import (
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

// Codes owned by this package. The seed's codes CHANNEL_CLOSED and
// DELIVERY_FAILED, plus nova's own UNAUTHORIZED_SENDER, PROTOCOL_ERROR and
// INTERNAL.
const (
	CodeChannelClosed      = "CHANNEL_CLOSED"
	CodeDeliveryFailed     = "DELIVERY_FAILED"
	CodeUnauthorizedSender = "UNAUTHORIZED_SENDER"
	CodeProtocolError      = "PROTOCOL_ERROR"
	CodeInternal           = "INTERNAL"
	// CodeQueueFull: the channel's queue (or the node's outbox) is full;
	// retryable once the backlog drains (backpressure, not a lost peer).
	CodeQueueFull = "QUEUE_FULL"
	// CodePeerAway: the recipient's node is away; the envelope waits in
	// the outbox and goes when it returns, within its time to live.
	CodePeerAway = "PEER_AWAY"
)

// ErrQueueFull is returned when a channel or the outbox holds as many
// envelopes as it may: retry once the backlog drains.
var ErrQueueFull = errors.New("protocol: queue full")

// ErrPeerAway is reported to a sender waiting for an acknowledgement when
// the recipient's node is away: the envelope is not lost; it waits in the
// outbox and goes when the node returns, within its time to live.
var ErrPeerAway = errors.New("protocol: peer away; envelope queued")

// ErrChannelClosed is returned when sending on a closed channel or router.
var ErrChannelClosed = errors.New("protocol: channel closed")

// ErrDeliveryFailed is returned when an envelope could not be delivered
// after all retries, or when the recipient cannot take it (no handler).
var ErrDeliveryFailed = errors.New("protocol: delivery failed")

// ErrUnauthorizedSender is returned when an envelope names a sender that the
// peer at the other end of the stream does not host.
var ErrUnauthorizedSender = errors.New("protocol: sender not hosted by the sending peer")

// ErrProtocol is returned for a peer that breaks the wire protocol.
var ErrProtocol = errors.New("protocol: protocol error")

// ErrInternal stands for an error without a code.
var ErrInternal = errors.New("protocol: internal error")

// codeToError is the one table between wire codes and local sentinels, in
// the style of syncthing's codeToError/errorToCode. Every seed code that can
// cross /nova/a2a/1.0.0 is here.
var codeToError = map[string]error{
	agentcard.CodeAgentNotFound:        agentcard.ErrAgentNotFound,
	agentcard.CodeCapabilityNotFound:   agentcard.ErrCapabilityNotFound,
	agentcard.CodeInvalidCard:          agentcard.ErrInvalidCard,
	agentcard.CodeAmbiguousAgent:       agentcard.ErrAmbiguousAgent,
	tiers.CodeTierViolation:            tiers.ErrTierViolation,
	tiers.CodeEscalationRequired:       tiers.ErrEscalationRequired,
	sandbox.CodeSandboxViolation:       sandbox.ErrSandboxViolation,
	envelope.CodeSchemaVersionMismatch: envelope.ErrSchemaVersionMismatch,
	envelope.CodeInvalidEnvelope:       envelope.ErrInvalid,
	CodeChannelClosed:                  ErrChannelClosed,
	CodeDeliveryFailed:                 ErrDeliveryFailed,
	CodeUnauthorizedSender:             ErrUnauthorizedSender,
	CodeProtocolError:                  ErrProtocol,
	CodeInternal:                       ErrInternal,
	CodeQueueFull:                      ErrQueueFull,
	CodePeerAway:                       ErrPeerAway,
}

var errorToCode = func() map[error]string {
	m := make(map[error]string, len(codeToError))
	for c, e := range codeToError {
		m[e] = c
	}
	return m
}()

// Codes lists every code this package maps, for tests and docs.
func Codes() []string {
	out := make([]string, 0, len(codeToError))
	for c := range codeToError {
		out = append(out, c)
	}
	return out
}

// SentinelFor returns the local sentinel error of a wire code, or nil.
func SentinelFor(code string) error { return codeToError[code] }

type coder interface{ Code() string }

// CodeOf returns the seed code of err: the Code() of the first error in its
// chain that has one, else the code of a known sentinel, else INTERNAL.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	var c coder
	if errors.As(err, &c) {
		return c.Code()
	}
	for e, code := range errorToCode {
		if errors.Is(err, e) {
			return code
		}
	}
	return CodeInternal
}

// RemoteError is an error that a peer reported, with its seed code.
// errors.Is matches the local sentinel of the same code, so
// errors.Is(err, tiers.ErrTierViolation) holds whichever node refused.
type RemoteError struct {
	ErrCode string // the seed code, e.g. TIER_VIOLATION
	Message string
	Peer    peer.ID // who reported it; empty when unknown
}

// Code returns the seed code.
func (e *RemoteError) Code() string { return e.ErrCode }

func (e *RemoteError) Error() string {
	if e.Peer != "" {
		return fmt.Sprintf("peer %s refused: %s (%s)", shortID(e.Peer), e.Message, e.ErrCode)
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.ErrCode)
}

// Is matches the sentinel that codeToError maps e.ErrCode to.
func (e *RemoteError) Is(target error) bool {
	s, ok := codeToError[e.ErrCode]
	return ok && s == target
}

// Unwrap exposes the sentinel so generic checks see it too.
func (e *RemoteError) Unwrap() error { return codeToError[e.ErrCode] }

// deliveryError is DELIVERY_FAILED with the reason and the target.
type deliveryError struct {
	Target string
	Reason string
	Err    error
}

func (e *deliveryError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("protocol: delivery to %s failed: %s: %v", e.Target, e.Reason, e.Err)
	}
	return fmt.Sprintf("protocol: delivery to %s failed: %s", e.Target, e.Reason)
}
func (e *deliveryError) Code() string         { return CodeDeliveryFailed }
func (e *deliveryError) Is(target error) bool { return target == ErrDeliveryFailed }
func (e *deliveryError) Unwrap() error        { return e.Err }

// queueFullError is QUEUE_FULL: what is full, and how full.
type queueFullError struct {
	Target string
	Reason string
}

func (e *queueFullError) Error() string {
	return fmt.Sprintf("protocol: queue to %s full: %s; retry once it drains", e.Target, e.Reason)
}
func (e *queueFullError) Code() string         { return CodeQueueFull }
func (e *queueFullError) Is(target error) bool { return target == ErrQueueFull }

// PeerAwayError is PEER_AWAY: the envelope to Target waits in the outbox
// until Until (its time to live), for Target's node to return.
type PeerAwayError struct {
	Target string
	Until  time.Time
}

func (e *PeerAwayError) Error() string {
	return fmt.Sprintf("protocol: %s's node is away; the envelope waits in the outbox and goes when it returns (until %s)", e.Target, e.Until.Format(time.RFC3339))
}

// Code returns PEER_AWAY.
func (e *PeerAwayError) Code() string         { return CodePeerAway }
func (e *PeerAwayError) Is(target error) bool { return target == ErrPeerAway }

// senderError is UNAUTHORIZED_SENDER.
type senderError struct {
	Sender string
	Peer   peer.ID
	Reason string
}

func (e *senderError) Error() string {
	return fmt.Sprintf("protocol: sender %q refused from peer %s: %s", e.Sender, shortID(e.Peer), e.Reason)
}
func (e *senderError) Code() string         { return CodeUnauthorizedSender }
func (e *senderError) Is(target error) bool { return target == ErrUnauthorizedSender }

func shortID(p peer.ID) string {
	s := p.String()
	if len(s) > 12 {
		return s[:2] + "…" + s[len(s)-6:]
	}
	return s
}
