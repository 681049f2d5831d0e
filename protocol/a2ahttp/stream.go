package a2ahttp

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"time"
)

// streamWriter wraps the ResponseWriter of a streaming (SSE) response. Every
// write gets a deadline, so a client that stops reading is cut off instead
// of stalling the task's event processing, and an idle stream gets an SSE
// comment every keep-alive interval, written only between events.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	now     func() time.Time

	mu       sync.Mutex
	started  bool // headers written
	boundary bool // the last write ended an event
	last     time.Time
	failed   bool
}

func newStreamWriter(w http.ResponseWriter, timeout time.Duration) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), timeout: timeout, now: time.Now, boundary: true}
}

func (s *streamWriter) Header() http.Header { return s.w.Header() }

func (s *streamWriter) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
	s.last = s.now()
	s.w.WriteHeader(code)
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return 0, http.ErrHandlerTimeout
	}
	s.started = true
	_ = s.rc.SetWriteDeadline(s.now().Add(s.timeout))
	n, err := s.w.Write(p)
	if err != nil {
		s.failed = true
	}
	s.boundary = bytes.HasSuffix(p, []byte("\n\n"))
	s.last = s.now()
	return n, err
}

func (s *streamWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	_ = s.rc.SetWriteDeadline(s.now().Add(s.timeout))
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.w }

// keepAlive writes ": keep-alive" comments on an idle SSE stream until done
// is closed.
func (s *streamWriter) keepAlive(done <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		sse := strings.HasPrefix(s.w.Header().Get("Content-Type"), "text/event-stream")
		if s.started && sse && s.boundary && !s.failed && s.now().Sub(s.last) >= every {
			_ = s.rc.SetWriteDeadline(s.now().Add(s.timeout))
			if _, err := s.w.Write([]byte(": keep-alive\n\n")); err != nil {
				s.failed = true
			} else if err := s.rc.Flush(); err != nil {
				s.failed = true
			}
			s.last = s.now()
		}
		s.mu.Unlock()
	}
}

// jsonWriter wraps the ResponseWriter of a2a-go's non-streaming JSON-RPC
// responses: it sets the Content-Type a2a-go leaves out and records whether
// a2a-go wrote anything.
type jsonWriter struct {
	w     http.ResponseWriter
	wrote bool
}

func (j *jsonWriter) Header() http.Header { return j.w.Header() }

func (j *jsonWriter) WriteHeader(code int) {
	j.fix()
	j.w.WriteHeader(code)
}

func (j *jsonWriter) Write(p []byte) (int, error) {
	j.fix()
	if len(p) > 0 {
		j.wrote = true
	}
	return j.w.Write(p)
}

func (j *jsonWriter) fix() {
	if j.w.Header().Get("Content-Type") == "" {
		j.w.Header().Set("Content-Type", "application/json")
	}
}

func (j *jsonWriter) Unwrap() http.ResponseWriter { return j.w }

// sseEvent formats one SSE event carrying data.
func sseEvent(data []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(data) + 8)
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

func setSSEHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
}
