package node

import (
	"encoding/json"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol"
)

// AuditFile is the append-only JSON-lines audit log inside the data dir.
const AuditFile = "audit.jsonl"

// Metrics are the seed's A2AMetrics for messaging.
type Metrics struct {
	TotalMessagesSent       uint64                   `json:"totalMessagesSent"`
	TotalMessagesReceived   uint64                   `json:"totalMessagesReceived"`
	MessagesByType          map[envelope.Type]uint64 `json:"messagesByType"`
	AverageRoutingLatencyMs float64                  `json:"averageRoutingLatencyMs"`
	ErrorCount              uint64                   `json:"errorCount"`
	SecurityEvents          uint64                   `json:"securityEvents"`
	AuditWriteErrors        uint64                   `json:"auditWriteErrors"`
}

// Observer collects the router's events: recent events in a ring, the
// seed's metrics, and an audit line for every security event and every
// cross-tier message. Emit never blocks on anything but a short mutex and an
// append to the audit file.
type Observer struct {
	mu        sync.Mutex
	ring      []protocol.Event
	next      int
	full      bool
	m         Metrics  // MessagesByType holds only types outside promTypes (none in practice)
	sentBy    []uint64 // messages sent by index in promTypes: no map update per message
	latencyNs float64
	decisions uint64
	audit     *os.File
	subs      []*Subscription // a slice, not a map: Emit ranges over it on every event
	prom      *promMetrics
}

// Subscription receives events as they happen. Its channel is buffered;
// when the subscriber falls behind, events are dropped (never blocking the
// router) and counted in Dropped. Events of a type it did not ask for are
// neither sent nor counted as dropped.
type Subscription struct {
	C       <-chan protocol.Event
	c       chan protocol.Event
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
// that receives the events of the given types (protocol.EventCardsReceived,
// ...), or every event when no type is given. A subscriber that wants one
// kind of event should name it: the router emits several events per
// message, and each one sent to a subscriber that throws it away is a
// goroutine wake-up on the message's path.
func (o *Observer) Subscribe(n int, types ...string) *Subscription {
	if n <= 0 {
		n = 256
	}
	c := make(chan protocol.Event, n)
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
	o := &Observer{ring: make([]protocol.Event, size), prom: newPromMetrics(), sentBy: make([]uint64, len(promTypes))}
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

// Emit implements protocol.EventSink.
func (o *Observer) Emit(ev protocol.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ring[o.next] = ev
	if o.next++; o.next == len(o.ring) {
		o.next, o.full = 0, true
	}
	ti := -1 // ev.MessageType's index in promTypes, for the events counted by type
	switch ev.Type {
	case protocol.EventMessageSent:
		o.m.TotalMessagesSent++
		if ti = promTypeIndex(ev.MessageType); ti >= 0 {
			o.sentBy[ti]++
		} else {
			o.m.MessagesByType[ev.MessageType]++
		}
	case protocol.EventMessageReceived:
		o.m.TotalMessagesReceived++
		ti = promTypeIndex(ev.MessageType)
	case protocol.EventRoutingDecision:
		o.decisions++
		o.latencyNs += float64(ev.Latency)
		o.m.AverageRoutingLatencyMs = o.latencyNs / float64(o.decisions) / 1e6
	case protocol.EventError:
		o.m.ErrorCount++
	case protocol.EventSecurity:
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
	crossTier := (ev.Type == protocol.EventMessageSent || ev.Type == protocol.EventMessageReceived) &&
		ev.SourceTier >= 0 && ev.TargetTier >= 0 && ev.SourceTier != ev.TargetTier
	if o.audit != nil && (ev.Type == protocol.EventSecurity || crossTier) {
		b, err := json.Marshal(ev)
		if err == nil {
			_, err = o.audit.Write(append(b, '\n'))
		}
		if err != nil {
			o.m.AuditWriteErrors++
		}
	}
}

// Recent returns up to limit most recent events, oldest first.
func (o *Observer) Recent(limit int) []protocol.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.next
	if o.full {
		n = len(o.ring)
	}
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]protocol.Event, 0, limit)
	for i := limit; i > 0; i-- {
		out = append(out, o.ring[(o.next-i+len(o.ring))%len(o.ring)])
	}
	return out
}

// Metrics returns a copy of the current metrics.
func (o *Observer) Metrics() Metrics {
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
	o.m = Metrics{MessagesByType: map[envelope.Type]uint64{}}
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
	err := o.audit.Close()
	o.audit = nil
	return err
}
