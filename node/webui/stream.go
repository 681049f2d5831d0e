package webui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/nova-node/nova-node/node/localapi"
)

// The stream's messages (server-sent events), by event name:
//
//	hello     {"events": [...], "samples": [...]}  once, first: the node's last events and metrics history
//	snapshot  Snapshot                             then whenever the state differs from the last one sent
//	events    [Event, ...]                         the events recorded since the last message
//	sample    Sample                               once per tick
const (
	// helloEvents is how many of the node's last events the page gets
	// when it connects.
	helloEvents = 200
	// eventBatch bounds the events of one "events" message.
	eventBatch = 256
)

// stream serves GET /ui/api/stream until the client goes away or the
// Server closes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	events, changes, stop := s.src.Subscribe()
	defer stop()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	var buf bytes.Buffer
	// put adds one message to buf; flush writes buf out.
	put := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil { // cannot happen: plain values
			return
		}
		buf.WriteString("event: ")
		buf.WriteString(name)
		buf.WriteString("\ndata: ")
		buf.Write(b)
		buf.WriteString("\n\n")
	}
	flush := func() bool {
		if buf.Len() == 0 {
			return true
		}
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		fl.Flush()
		return err == nil
	}
	var last []byte
	// snapshot adds a snapshot when it differs from the last one sent.
	snapshot := func() {
		b, err := json.Marshal(s.src.Snapshot())
		if err != nil || bytes.Equal(b, last) {
			return
		}
		last = b
		buf.WriteString("event: snapshot\ndata: ")
		buf.Write(b)
		buf.WriteString("\n\n")
	}

	recent := s.src.Recent(helloEvents)
	if recent == nil {
		recent = []localapi.Event{}
	}
	put("hello", map[string]any{"events": recent, "samples": s.history()})
	snapshot()
	if !flush() {
		return
	}
	tick := time.NewTicker(s.opt.Tick)
	defer tick.Stop()
	var soon <-chan time.Time // armed while a snapshot is due
	due := func() {
		if soon == nil {
			soon = time.After(s.opt.Coalesce)
		}
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			batch := []localapi.Event{e}
			for len(batch) < eventBatch && len(events) > 0 {
				batch = append(batch, <-events)
			}
			put("events", batch)
			due()
		case <-changes:
			due()
			continue // nothing to write yet
		case <-soon:
			soon = nil
			snapshot()
		case now := <-tick.C:
			put("sample", s.sample(now))
			snapshot()
		}
		if !flush() {
			return
		}
	}
}

// sample records the node's counters at now in the history (at most one
// sample per tick, however many pages are open) and returns the latest.
func (s *Server) sample(now time.Time) Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := len(s.samples); k > 0 && now.UnixMilli()-s.samples[k-1].TimeMs < s.opt.Tick.Milliseconds()*9/10 {
		return s.samples[k-1]
	}
	m := s.src.Metrics()
	sm := Sample{TimeMs: now.UnixMilli(), Sent: m.TotalMessagesSent, Received: m.TotalMessagesReceived,
		Errors: m.ErrorCount, Security: m.SecurityEvents, AvgLatencyMs: m.AverageRoutingLatencyMs}
	if len(s.samples) == historyLen {
		s.samples = append(s.samples[:0], s.samples[1:]...)
	}
	s.samples = append(s.samples, sm)
	return sm
}

// history is the metrics samples kept, oldest first.
func (s *Server) history() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample{}, s.samples...)
}
