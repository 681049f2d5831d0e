package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/jsonstr"
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
// peer's audit entries the audit log's rate limit left out, and of which
// kind: its Code is [AuditKindSecurity] or [AuditKindCrossTier]. It appears
// only in the audit log, never in the ring or to subscribers.
const EvtAuditSuppressed = "audit-suppressed"

// The kinds of audit entries, each rate-limited per peer on its own (see
// auditRate), named in the Code of an [EvtAuditSuppressed] line.
const (
	// AuditKindSecurity: security events.
	AuditKindSecurity = "security"
	// AuditKindCrossTier: cross-tier messages, sent or received, and
	// escalation refusals.
	AuditKindCrossTier = "cross-tier"
)

// The audit log's rate limits, per peer and per kind of entry: a token
// bucket of auditRate security events a second with a burst of auditBurst,
// and one of auditMsgRate cross-tier entries a second with a burst of
// auditMsgBurst. An entry's peer is the event's Peer, or for a message this
// node sent, the host of its recipient; entries with neither (the node's
// own) share a bucket. An entry left out is still kept, counted and sent to
// subscribers; only its audit line is left out, and counted: a security
// event in [localapi.Metrics].AuditSuppressed, and every entry left out in
// an [EvtAuditSuppressed] line per peer and kind. That line is written
// before the first entry the bucket admits again, at most once per
// auditSummaryEvery per peer and kind; for a peer gone quiet, by the first
// event the Observer records auditSummaryEvery after its last; for a peer
// evicted from the table, then; and at the Observer's close. At most
// auditPeers peers are tracked: a new one evicts the peer idle the longest.
//
// The cross-tier rate covers a node exchanging 200 messages a second with
// one peer, each audited once on each side; its burst, a second of
// catching up after a stall.
const (
	auditRate         = 100
	auditBurst        = 200
	auditMsgRate      = 200
	auditMsgBurst     = 1000
	auditSummaryEvery = time.Second
	auditPeers        = 1024
)

// auditKind indexes an auditPeer's buckets.
type auditKind int

const (
	auditSecurity auditKind = iota
	auditCrossTier
	auditKinds
)

// auditLimits are each kind's rate, burst, Code and wording.
var auditLimits = [auditKinds]struct {
	rate, burst float64
	code, noun  string
}{
	auditSecurity:  {auditRate, auditBurst, AuditKindSecurity, "security events"},
	auditCrossTier: {auditMsgRate, auditMsgBurst, AuditKindCrossTier, "cross-tier entries"},
}

// Observer collects the node's events: recent events in a ring, the
// seed's metrics, and an audit line for every security event, every
// cross-tier message and every escalation refusal (an error event with code
// ESCALATION_REQUIRED). It stores, streams, audits and counts
// [localapi.Event], the event as the node reports it: the router's events
// arrive through [Observer.Emit] (its [protocol.EventSink]) and are copied
// into one, the node's own events (peers gone, MCP invocations, the task
// layer's) through [Observer.Record]. Emit and Record never block on
// anything but a short mutex and an append to the audit file. Every string
// field of an event is first cut to [MaxEventFieldLen] bytes. The audit log
// is bounded: its entries are rate-limited per peer and kind (see
// auditRate), and it is rotated by size, keeping a bounded number of old
// files (see [AuditConfig]).
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
	audit     *lumberjack.Logger
	auditBuf  []byte                 // the audit line being written, kept for the next
	auditPeer peerText               // the last peer named in an audit line, with its text
	buckets   map[peer.ID]*auditPeer // the audit rate limits', at most auditPeers
	pending   uint64                 // entries left out of the audit log whose count is not written yet
	swept     time.Time              // when pending counts were last looked for (see sweepSummaries)
	subs      []*Subscription        // a slice, not a map: Record ranges over it on every event
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

// newObserver returns an Observer keeping the last size events and, unless
// auditPath is "", auditing to that file, rotated as ac says.
//
// The file is created mode 0600, or set to 0600 if it has looser
// permissions, before lumberjack opens it: lumberjack gives each new file
// the mode of the one it rotates away (0600 only when there is none), and
// renaming keeps a rotated file's mode, so every file of the audit log is
// 0600. The log is opened here, so that a data dir where it cannot be
// written fails the node's start; that also starts lumberjack's goroutine
// (which deletes rotated files beyond ac.MaxBackups). In lumberjack v2.2.1
// that goroutine outlives Close: one idle goroutine per Observer opened.
func newObserver(auditPath string, size int, ac AuditConfig) (*Observer, error) {
	o := &Observer{ring: make([]localapi.Event, size), prom: newPromMetrics(), sentBy: make([]uint64, len(promTypes)),
		buckets: map[peer.ID]*auditPeer{}}
	o.m.MessagesByType = map[envelope.Type]uint64{}
	if auditPath == "" {
		return o, nil
	}
	if err := createPrivate(auditPath); err != nil {
		return nil, err
	}
	lj := &lumberjack.Logger{Filename: auditPath, MaxSize: ac.MaxSizeMiB, MaxBackups: ac.MaxBackups, Compress: ac.Compress}
	if _, err := lj.Write(nil); err != nil {
		return nil, err
	}
	o.audit = lj
	return o, nil
}

// createPrivate creates the file at path with mode 0600, or makes an
// existing one 0600 (see newObserver).
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode().Perm()&0o077 != 0 {
		err = f.Chmod(0o600)
	}
	return errors.Join(err, f.Close())
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
	if o.audit == nil {
		return
	}
	kind := auditKinds // not audited
	switch ev.Type {
	case protocol.EvtSecurityRaised:
		kind = auditSecurity
	case protocol.EvtMessageSent, protocol.EvtMessageReceived:
		if ev.SourceTier >= 0 && ev.TargetTier >= 0 && ev.SourceTier != ev.TargetTier {
			kind = auditCrossTier
		}
	case protocol.EvtErrorRaised:
		// An escalation refusal is not a security event (nothing was
		// forged), but it is a tier decision an auditor asks about, as
		// cross-tier messages are: audited, and limited with them.
		if ev.Code == tiers.CodeEscalationRequired {
			kind = auditCrossTier
		}
	}
	if o.pending > 0 && ev.Time.Sub(o.swept) >= auditSummaryEvery {
		o.sweepSummaries(ev.Time)
	}
	if kind == auditKinds {
		return
	}
	if !o.admitAudit(auditPeerOf(&ev), kind, time.Now()) {
		if kind == auditSecurity {
			o.m.AuditSuppressed++
		}
		return
	}
	o.writeAudit(ev)
}

// auditPeerOf is the peer whose rate limit an audit entry counts against:
// the event's Peer, or for a message this node sent (which names no peer),
// the host of its recipient, so that the answers to a peer's flood of
// requests count against that peer; "" for neither.
func auditPeerOf(ev *localapi.Event) peer.ID {
	if ev.Peer != "" || ev.Type != protocol.EvtMessageSent {
		return ev.Peer
	}
	if i := strings.LastIndexByte(ev.Recipient, '@'); i >= 0 {
		if p, err := peer.Decode(ev.Recipient[i+1:]); err == nil {
			return p
		}
	}
	return ""
}

// writeAudit appends ev to the audit log and reports whether it was
// written. The caller holds o.mu and has checked that o.audit is open.
func (o *Observer) writeAudit(ev localapi.Event) bool { // by value: &ev would move Record's ev to the heap
	b, ok := appendAuditJSON(o.auditBuf[:0], &ev, &o.auditPeer)
	var err error
	if !ok {
		// A time appendAuditJSON leaves to encoding/json (its year or zone
		// outside RFC 3339), which reports the error.
		b, err = json.Marshal(ev)
	}
	if err == nil {
		b = append(b, '\n')
		_, err = o.audit.Write(b)
	}
	if cap(b) <= maxAuditBuf {
		o.auditBuf = b
	}
	if err != nil {
		o.m.AuditWriteErrors++
		return false
	}
	return true
}

// maxAuditBuf is the largest audit line buffer the Observer keeps for the
// next line; a larger one (fields near MaxEventFieldLen) is left to the GC.
const maxAuditBuf = 16 << 10

// peerText is a peer ID with its text (base58), kept for the next event
// of the same peer: a burst of broadcasts names one publisher in every
// audit line, and encoding it costs microseconds.
type peerText struct {
	id   peer.ID
	text string
}

// appendAuditJSON appends ev to b as encoding/json's Marshal writes it:
// the same fields, order, omitempty rules and string escaping (HTML
// characters, U+2028, U+2029 and invalid UTF-8 included), without its
// reflection and allocations. It reports false, leaving the line to
// encoding/json, for a time RFC 3339 cannot express. last caches the text
// of the last peer encoded.
func appendAuditJSON(b []byte, ev *localapi.Event, last *peerText) ([]byte, bool) {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, ev.Type)
	b = append(b, `,"time":"`...)
	n0 := len(b)
	b = ev.Time.AppendFormat(b, time.RFC3339Nano)
	if !strictRFC3339(b[n0:]) {
		return b, false
	}
	b = append(b, '"')
	b = appendJSONField(b, `,"envelopeId":`, ev.EnvelopeID)
	b = appendJSONField(b, `,"sender":`, ev.Sender)
	b = appendJSONField(b, `,"recipient":`, ev.Recipient)
	b = appendJSONField(b, `,"messageType":`, string(ev.MessageType))
	b = appendJSONField(b, `,"routingPath":`, ev.Path)
	if ev.Latency != 0 {
		b = append(b, `,"latencyNs":`...)
		b = strconv.AppendInt(b, int64(ev.Latency), 10)
	}
	b = append(b, `,"success":`...)
	b = strconv.AppendBool(b, ev.Success)
	b = appendJSONField(b, `,"code":`, ev.Code)
	b = appendJSONField(b, `,"detail":`, ev.Detail)
	if ev.Peer != "" {
		if last.id != ev.Peer || last.text == "" {
			*last = peerText{id: ev.Peer, text: ev.Peer.String()}
		}
		b = append(b, `,"peer":`...)
		b = appendJSONString(b, last.text)
	}
	b = append(b, `,"sourceTier":`...)
	b = strconv.AppendInt(b, int64(ev.SourceTier), 10)
	b = append(b, `,"targetTier":`...)
	b = strconv.AppendInt(b, int64(ev.TargetTier), 10)
	return append(b, '}'), true
}

// strictRFC3339 reports whether t, a time formatted as time.RFC3339Nano,
// is one time.Time's MarshalJSON accepts: a four-digit year and a zone
// offset under 24 hours.
func strictRFC3339(t []byte) bool {
	if len(t) < len("2006-01-02T15:04:05Z") || t[4] != '-' {
		return false
	}
	if t[len(t)-1] == 'Z' {
		return true
	}
	c := t[len(t)-len("Z07:00")]
	h := t[len(t)-len("07:00"):]
	return !('0' <= c && c <= '9') && 10*(h[0]-'0')+(h[1]-'0') < 24
}

// appendJSONField appends name and s as a JSON string, unless s is empty
// (omitempty).
func appendJSONField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, name...), s)
}

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping (its default).
func appendJSONString(b []byte, s string) []byte { return jsonstr.Append(b, s, true) }

// auditPeer is one peer's token buckets in the audit log, one per kind.
type auditPeer struct {
	last time.Time // of the peer's last audit entry, of any kind
	kind [auditKinds]auditBucket
}

// auditBucket is one peer's token bucket for one kind of audit entry.
type auditBucket struct {
	tokens     float64
	last       time.Time // of the last refill: the peer's last entry of this kind
	suppressed uint64    // entries left out since the last summary line
	summarized time.Time // when the last summary line was written
}

// admitAudit reports whether an audit entry of the kind k for peer p may be
// written to the audit log at now, taking a token from p's bucket, and
// writes p's summary line for k first when it is due. The caller holds o.mu
// and has checked that o.audit is open.
func (o *Observer) admitAudit(p peer.ID, k auditKind, now time.Time) bool {
	ap := o.buckets[p]
	if ap == nil {
		if len(o.buckets) >= auditPeers {
			o.evictIdlest(now)
		}
		ap = &auditPeer{}
		for i := range ap.kind {
			ap.kind[i] = auditBucket{tokens: auditLimits[i].burst, last: now}
		}
		o.buckets[p] = ap
	}
	ap.last = now
	b, lim := &ap.kind[k], &auditLimits[k]
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(lim.burst, b.tokens+d.Seconds()*lim.rate)
	}
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		o.pending++
		return false
	}
	b.tokens--
	if b.suppressed > 0 && now.Sub(b.summarized) >= auditSummaryEvery {
		o.writeSummary(p, k, b, now)
	}
	return true
}

// sweepSummaries writes the pending summary of every peer and kind whose
// last entry is at least auditSummaryEvery old: a peer that flooded and
// went quiet has its count written within about auditSummaryEvery of the
// next event the Observer records, not only when it is evicted or the
// Observer closes. It runs at most once per auditSummaryEvery, and only
// while counts are pending. The caller holds o.mu and has checked that
// o.audit is open.
func (o *Observer) sweepSummaries(now time.Time) {
	o.swept = now
	for _, p := range slices.Sorted(maps.Keys(o.buckets)) {
		ap := o.buckets[p]
		for k := range ap.kind {
			if b := &ap.kind[k]; b.suppressed > 0 && now.Sub(b.last) >= auditSummaryEvery {
				o.writeSummary(p, auditKind(k), b, now)
			}
		}
	}
}

// evictIdlest drops the buckets of the peer whose last audit entry is the
// oldest, writing its pending summaries. The caller holds o.mu and has
// checked that o.audit is open.
func (o *Observer) evictIdlest(now time.Time) {
	var idlest peer.ID
	var ip *auditPeer
	for p, ap := range o.buckets {
		if ip == nil || ap.last.Before(ip.last) {
			idlest, ip = p, ap
		}
	}
	if ip == nil {
		return
	}
	for k := range ip.kind {
		if b := &ip.kind[k]; b.suppressed > 0 {
			o.writeSummary(idlest, auditKind(k), b, now)
		}
	}
	delete(o.buckets, idlest)
}

// writeSummary writes the line saying how many of p's entries of kind k
// were left out, and resets the count once the line is written (a count
// whose line failed is written with the next one). The caller holds o.mu
// and has checked that o.audit is open.
func (o *Observer) writeSummary(p peer.ID, k auditKind, b *auditBucket, now time.Time) {
	who := "peer " + p.String()
	if p == "" {
		who = "no peer (local)"
	}
	lim := &auditLimits[k]
	if !o.writeAudit(localapi.Event{Type: EvtAuditSuppressed, Time: now, Peer: p, Code: lim.code, SourceTier: -1, TargetTier: -1,
		Detail: fmt.Sprintf("%d %s from %s suppressed (audit limit %g/s, burst %g)", b.suppressed, lim.noun, who, lim.rate, lim.burst)}) {
		return
	}
	o.pending -= b.suppressed
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
		ap := o.buckets[p]
		for k := range ap.kind {
			if b := &ap.kind[k]; b.suppressed > 0 {
				o.writeSummary(p, auditKind(k), b, now)
			}
		}
	}
	err := o.audit.Close()
	o.audit = nil
	return err
}
