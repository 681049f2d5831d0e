package node

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/tiers"
)

// AuditFile is the append-only JSON-lines audit log inside the data dir.
const AuditFile = "audit.jsonl"

// MaxEventFieldLen bounds, in bytes, every string field of an event the
// [Observer] keeps, counts, passes to subscribers or audits. Many of them
// are chosen by peers (a channel-open frame's sender can be a whole frame
// long); a longer value is cut on a UTF-8 boundary and ends with
// "…(+N bytes)", the whole still within the bound. Valid agent addresses
// (envelope.MaxAgentLen), envelope ids and this node's codes are never cut.
const MaxEventFieldLen = 256

// EvtAuditSuppressed is the type of the audit line that says how many of a
// peer's security events the audit log's rate limit left out. It appears
// only in the audit log, never in the ring or to subscribers.
const EvtAuditSuppressed = "audit-suppressed"

// The audit log's rate limit on security events, per peer (the event's Peer;
// events without one share a bucket): a token bucket of auditRate events a
// second with a burst of auditBurst. A suppressed event is still kept,
// counted and sent to subscribers; only its audit line is left out, and
// counted in [localapi.Metrics].AuditSuppressed. The first event the peer's bucket
// admits again writes an [EvtAuditSuppressed] line first, at most once per
// auditSummaryEvery per peer; a peer evicted from the table, or the
// Observer's close, writes its pending count too. At most auditPeers peers
// are tracked: a new one evicts the peer idle the longest.
const (
	auditRate         = 100
	auditBurst        = 200
	auditSummaryEvery = time.Second
	auditPeers        = 1024
)

// Observer collects the node's events: recent events in a ring, the
// seed's metrics, and an audit line for every security event, every
// cross-tier message and every escalation refusal (an error event with code
// ESCALATION_REQUIRED). It stores, streams, audits and counts
// [localapi.Event], the event as the node reports it: the router's events
// arrive through [Observer.Emit] (its [protocol.EventSink]) and are copied
// into one, the node's own events (peers gone, MCP invocations, the task
// layer's) through [Observer.Record]. Emit and Record never block on
// anything but a short mutex and an append to the audit file. Every string
// field of an event is first cut to [MaxEventFieldLen] bytes, and security
// events are rate-limited per peer in the audit log (see auditRate).
//
// One failure is one error event: an error event that repeats the envelope
// id, sender and code of one among the last [errorsRemembered] error events
// is dropped (neither kept, counted, sent nor audited). The router reports
// the failure of a remote send it waits for twice, from the channel that
// gave up and from Send; an envelope id is new for every envelope the
// node's factory makes, so a second report with all three equal is the
// same failure.
type Observer struct {
	mu        sync.Mutex
	ring      []localapi.Event
	next      int
	full      bool
	m         localapi.Metrics // MessagesByType holds only types outside promTypes (none in practice)
	sentBy    []uint64         // messages sent by index in promTypes: no map update per message
	latencyNs float64
	decisions uint64
	audit     *os.File
	buckets   map[peer.ID]*auditBucket // the audit rate limit's, at most auditPeers
	subs      []*Subscription          // a slice, not a map: Record ranges over it on every event
	prom      *promMetrics
	errs      recentErrors
}

// errorsRemembered is how many error events the Observer remembers to drop
// a second report of the same failure (see [Observer]). A burst of failures
// larger than this (a peer gone with more waited sends in flight) could
// count some twice again; 1024 hashes cost 8 KiB and a map of them.
const errorsRemembered = 1024

// recentErrors remembers the last errorsRemembered error events that name
// an envelope, as hashes of (envelope id, sender, code).
type recentErrors struct {
	seed maphash.Seed
	ring []uint64
	next int
	set  map[uint64]struct{}
}

type errorKey struct{ id, sender, code string }

// repeated reports whether ev, an error event naming an envelope, repeats
// one remembered, and remembers it if not. The caller holds the Observer's
// mutex.
func (r *recentErrors) repeated(ev *localapi.Event) bool {
	if r.set == nil {
		r.seed, r.ring, r.set = maphash.MakeSeed(), make([]uint64, 0, errorsRemembered), make(map[uint64]struct{}, errorsRemembered)
	}
	h := maphash.Comparable(r.seed, errorKey{ev.EnvelopeID, ev.Sender, ev.Code})
	if _, ok := r.set[h]; ok {
		return true
	}
	if len(r.ring) < errorsRemembered {
		r.ring = append(r.ring, h)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = h
		r.next = (r.next + 1) % errorsRemembered
	}
	r.set[h] = struct{}{}
	return false
}

// Subscription receives events as they happen. Its channel is buffered;
// when the subscriber falls behind, events are dropped (never blocking the
// router) and counted in Dropped. Events of a type it did not ask for are
// neither sent nor counted as dropped.
type Subscription struct {
	C       <-chan localapi.Event
	c       chan localapi.Event
	o       *Observer
	types   []string // nil: every type
	dropped uint64
}

// wants reports whether s asked for events of type t. The list is short
// (one or two types), so a scan beats a map.
func (s *Subscription) wants(t string) bool {
	if s.types == nil {
		return true
	}
	for _, w := range s.types {
		if w == t {
			return true
		}
	}
	return false
}

// Dropped reports how many events this subscriber missed.
func (s *Subscription) Dropped() uint64 {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	return s.dropped
}

// Close ends the subscription and closes C.
func (s *Subscription) Close() {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	for i, sub := range s.o.subs {
		if sub == s {
			s.o.subs = slices.Delete(s.o.subs, i, i+1)
			close(s.c)
			return
		}
	}
}

// Subscribe returns a subscription with a buffer of n events (default 256)
// that receives the events of the given types (protocol.EvtCardsReceived,
// ...), or every event when no type is given. A subscriber that wants one
// kind of event should name it: the router emits several events per
// message, and each one sent to a subscriber that throws it away is a
// goroutine wake-up on the message's path.
func (o *Observer) Subscribe(n int, types ...string) *Subscription {
	if n <= 0 {
		n = 256
	}
	c := make(chan localapi.Event, n)
	s := &Subscription{C: c, c: c, o: o}
	if len(types) > 0 {
		s.types = slices.Clone(types) // the caller's slice may change after the call
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.subs = append(o.subs, s)
	return s
}

func newObserver(auditPath string, size int) (*Observer, error) {
	o := &Observer{ring: make([]localapi.Event, size), prom: newPromMetrics(), sentBy: make([]uint64, len(promTypes)),
		buckets: map[peer.ID]*auditBucket{}}
	o.m.MessagesByType = map[envelope.Type]uint64{}
	if auditPath != "" {
		f, err := os.OpenFile(auditPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		o.audit = f
	}
	return o, nil
}

// Emit implements [protocol.EventSink] for the router: it records the
// router's event, copied into a [localapi.Event] (see fromRouter), as
// [Observer.Record] does.
func (o *Observer) Emit(ev protocol.Event) { o.Record(fromRouter(ev)) }

// fromRouter copies a router's event into the event the node reports. The
// two types have the same fields, so this is a conversion, a struct copy
// that allocates nothing; a field added to one and not the other stops it
// compiling. Their JSON is compared in TestEventJSONMatchesRouter.
func fromRouter(ev protocol.Event) localapi.Event { return localapi.Event(ev) }

// Record keeps, counts, sends to subscribers and audits ev, an event of
// the node's own (a peer gone, an MCP invocation, a task-layer event) or
// of the router's (through Emit).
func (o *Observer) Record(ev localapi.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	if !fieldsShort(&ev) {
		cutEvent(&ev) // outside the lock: only a long field allocates
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ev.Type == protocol.EvtErrorRaised && ev.EnvelopeID != "" && o.errs.repeated(&ev) {
		return // the same failure, reported again (see Observer)
	}
	o.ring[o.next] = ev
	if o.next++; o.next == len(o.ring) {
		o.next, o.full = 0, true
	}
	ti := -1 // ev.MessageType's index in promTypes, for the events counted by type
	switch ev.Type {
	case protocol.EvtMessageSent:
		o.m.TotalMessagesSent++
		if ti = promTypeIndex(ev.MessageType); ti >= 0 {
			o.sentBy[ti]++
		} else {
			o.m.MessagesByType[ev.MessageType]++
		}
	case protocol.EvtMessageReceived:
		o.m.TotalMessagesReceived++
		ti = promTypeIndex(ev.MessageType)
	case protocol.EvtRouteDecided:
		// Of the messages routed: a failure (an agent looked up for 1.4 s
		// and not found, a peer given up on after its redials) is an error,
		// counted as one, and its wait would swamp the average.
		if ev.Success {
			o.decisions++
			o.latencyNs += float64(ev.Latency)
			o.m.AverageRoutingLatencyMs = o.latencyNs / float64(o.decisions) / 1e6
		}
	case protocol.EvtErrorRaised:
		o.m.ErrorCount++
	case protocol.EvtSecurityRaised:
		o.m.SecurityEvents++
	}
	o.prom.observe(&ev, ti)
	for _, sub := range o.subs {
		if !sub.wants(ev.Type) {
			continue
		}
		select {
		case sub.c <- ev:
		default:
			sub.dropped++
		}
	}
	crossTier := (ev.Type == protocol.EvtMessageSent || ev.Type == protocol.EvtMessageReceived) &&
		ev.SourceTier >= 0 && ev.TargetTier >= 0 && ev.SourceTier != ev.TargetTier
	// An escalation refusal is not a security event (nothing was forged),
	// but it is a tier decision an auditor asks about, as cross-tier
	// messages are: audited, and like them not rate-limited.
	escalation := ev.Type == protocol.EvtErrorRaised && ev.Code == tiers.CodeEscalationRequired
	if o.audit != nil && (ev.Type == protocol.EvtSecurityRaised || crossTier || escalation) {
		if ev.Type == protocol.EvtSecurityRaised && !o.admitAudit(ev.Peer, time.Now()) {
			o.m.AuditSuppressed++
			return
		}
		o.writeAudit(ev)
	}
}

// writeAudit appends ev to the audit log. The caller holds o.mu and has
// checked that o.audit is open.
func (o *Observer) writeAudit(ev localapi.Event) { // by value: &ev would move Record's ev to the heap
	b, err := json.Marshal(ev)
	if err == nil {
		_, err = o.audit.Write(append(b, '\n'))
	}
	if err != nil {
		o.m.AuditWriteErrors++
	}
}

// auditBucket is one peer's token bucket for security events in the audit
// log.
type auditBucket struct {
	tokens     float64
	last       time.Time // of the last refill: the peer's last security event
	suppressed uint64    // events left out since the last summary line
	summarized time.Time // when the last summary line was written
}

// admitAudit reports whether a security event of peer p may be written to
// the audit log at now, taking a token from p's bucket, and writes p's
// summary line first when it is due. The caller holds o.mu and has checked
// that o.audit is open.
func (o *Observer) admitAudit(p peer.ID, now time.Time) bool {
	b := o.buckets[p]
	if b == nil {
		if len(o.buckets) >= auditPeers {
			o.evictIdlest(now)
		}
		b = &auditBucket{tokens: auditBurst, last: now}
		o.buckets[p] = b
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(auditBurst, b.tokens+d.Seconds()*auditRate)
	}
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return false
	}
	b.tokens--
	if b.suppressed > 0 && now.Sub(b.summarized) >= auditSummaryEvery {
		o.writeSummary(p, b, now)
	}
	return true
}

// evictIdlest drops the bucket of the peer whose last security event is
// the oldest, writing its pending summary. The caller holds o.mu.
func (o *Observer) evictIdlest(now time.Time) {
	var idlest peer.ID
	var ib *auditBucket
	for p, b := range o.buckets {
		if ib == nil || b.last.Before(ib.last) {
			idlest, ib = p, b
		}
	}
	if ib == nil {
		return
	}
	if ib.suppressed > 0 && o.audit != nil {
		o.writeSummary(idlest, ib, now)
	}
	delete(o.buckets, idlest)
}

// writeSummary writes the line saying how many of p's security events were
// left out, and resets the count. The caller holds o.mu and has checked
// that o.audit is open.
func (o *Observer) writeSummary(p peer.ID, b *auditBucket, now time.Time) {
	who := "peer " + p.String()
	if p == "" {
		who = "no peer (local)"
	}
	o.writeAudit(localapi.Event{Type: EvtAuditSuppressed, Time: now, Peer: p, SourceTier: -1, TargetTier: -1,
		Detail: fmt.Sprintf("%d security events from %s suppressed (audit limit %d/s, burst %d)", b.suppressed, who, auditRate, auditBurst)})
	b.suppressed, b.summarized = 0, now
}

// fieldsShort reports whether every string field of ev is under
// MaxEventFieldLen: one test of their lengths' bitwise or, which is at least
// each length, and under the bound only if all are. It is inlined in Record:
// an event whose fields are all short costs that test, and no store. A new
// string field of localapi.Event must be added here and in cutEvent
// (TestEmitCapsEveryStringField checks both).
func fieldsShort(ev *localapi.Event) bool {
	return len(ev.Type)|len(ev.EnvelopeID)|len(ev.Sender)|len(ev.Recipient)|len(ev.MessageType)|
		len(ev.Path)|len(ev.Code)|len(ev.Detail)|len(ev.Peer) < MaxEventFieldLen
}

// cutEvent cuts every string field of ev to MaxEventFieldLen bytes (see
// fieldsShort).
func cutEvent(ev *localapi.Event) {
	ev.Type = capField(ev.Type)
	ev.EnvelopeID = capField(ev.EnvelopeID)
	ev.Sender = capField(ev.Sender)
	ev.Recipient = capField(ev.Recipient)
	ev.MessageType = capField(ev.MessageType)
	ev.Path = capField(ev.Path)
	ev.Code = capField(ev.Code)
	ev.Detail = capField(ev.Detail)
	ev.Peer = capField(ev.Peer) // authenticated and short; cut all the same
}

// capField returns s, or s cut to MaxEventFieldLen bytes (see cutField). It
// is small enough to be inlined: a field under the bound costs a compare.
func capField[S ~string](s S) S {
	if len(s) <= MaxEventFieldLen {
		return s
	}
	return S(cutField(string(s)))
}

// cutField cuts s, longer than MaxEventFieldLen, on a UTF-8 boundary and
// appends "…(+N bytes)", N the bytes cut, so that the result is at most
// MaxEventFieldLen bytes.
func cutField(s string) string {
	// N < len(s), so the marker for len(s) is at least as long as the real one.
	keep := MaxEventFieldLen - len(cutMarker(len(s)))
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + cutMarker(len(s)-keep)
}

func cutMarker(n int) string { return "…(+" + strconv.Itoa(n) + " bytes)" }

// Recent returns up to limit most recent events, oldest first.
func (o *Observer) Recent(limit int) []localapi.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.next
	if o.full {
		n = len(o.ring)
	}
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]localapi.Event, 0, limit)
	for i := limit; i > 0; i-- {
		out = append(out, o.ring[(o.next-i+len(o.ring))%len(o.ring)])
	}
	return out
}

// Metrics returns a copy of the current metrics.
func (o *Observer) Metrics() localapi.Metrics {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.m
	m.MessagesByType = make(map[envelope.Type]uint64, len(o.m.MessagesByType))
	for k, v := range o.m.MessagesByType {
		m.MessagesByType[k] = v
	}
	for i, v := range o.sentBy {
		if v > 0 { // as with the map alone: a type appears once it was sent
			m.MessagesByType[promTypes[i]] = v
		}
	}
	return m
}

// Reset zeroes the metrics (the seed's resetMetrics); events stay.
func (o *Observer) Reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m = localapi.Metrics{MessagesByType: map[envelope.Type]uint64{}}
	clear(o.sentBy)
	o.latencyNs, o.decisions = 0, 0
}

func (o *Observer) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, sub := range o.subs {
		close(sub.c)
	}
	o.subs = nil
	if o.audit == nil {
		return nil
	}
	now := time.Now()
	for _, p := range slices.Sorted(maps.Keys(o.buckets)) {
		if b := o.buckets[p]; b.suppressed > 0 {
			o.writeSummary(p, b, now)
		}
	}
	err := o.audit.Close()
	o.audit = nil
	return err
}
