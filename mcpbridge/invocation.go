package mcpbridge

import (
	"encoding/json"
	"maps"
	"sync"
)

// InvocationRecord describes one tool call (requirements 12.2, 13.4). It
// round-trips through encoding/json (property 34): Arguments and Result are
// kept as raw JSON (re-encoded compactly), DurationMs must be finite.
type InvocationRecord struct {
	// Tool is the canonical name "agent.tool".
	Tool string `json:"tool"`
	// Agent is the source agent that served the call.
	Agent string `json:"agent"`
	// Arguments are the call's arguments (a JSON object).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Result is the handler's result content, also when IsError. It
	// shares the bytes of the result the call returned (a result can be
	// megabytes): read it, do not modify it.
	Result json.RawMessage `json:"result,omitempty"`
	// DurationMs is the handler's run time in milliseconds.
	DurationMs float64 `json:"durationMs"`
	// Success is false when the call ended in an isError result.
	Success bool `json:"success"`
	// Error is "CODE: message" of a failed call, empty otherwise.
	Error string `json:"error,omitempty"`
	// Time is when the call started, in Unix milliseconds.
	Time int64 `json:"time"`
}

// InvocationHook receives a record after each tool call. It runs on the
// calling goroutine, after the call and outside the registry's lock, so it
// must not block: hand the record to a buffered channel with a
// non-blocking send, or log it, and return. It may be called concurrently.
type InvocationHook func(InvocationRecord)

// MetricsSnapshot is a copy of the aggregate metrics (requirement 12.5);
// the JSON names are the seed's A2AMetrics tool fields.
type MetricsSnapshot struct {
	TotalToolInvocations  int64            `json:"totalToolInvocations"`
	ToolInvocationsByTool map[string]int64 `json:"toolInvocationsByTool"`
	AverageToolDurationMs float64          `json:"averageToolDurationMs"`
	ErrorCount            int64            `json:"errorCount"`
}

// Metrics aggregates invocation records. The zero value is ready; it is safe
// for concurrent use.
type Metrics struct {
	mu     sync.Mutex
	total  int64
	byTool map[string]int64
	sumMs  float64
	errors int64
}

// Record adds one invocation.
func (m *Metrics) Record(rec InvocationRecord) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byTool == nil {
		m.byTool = map[string]int64{}
	}
	m.total++
	m.byTool[rec.Tool]++
	m.sumMs += rec.DurationMs
	if !rec.Success {
		m.errors++
	}
}

// Snapshot returns a copy of the current metrics.
func (m *Metrics) Snapshot() MetricsSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := MetricsSnapshot{
		TotalToolInvocations:  m.total,
		ToolInvocationsByTool: maps.Clone(m.byTool),
		ErrorCount:            m.errors,
	}
	if s.ToolInvocationsByTool == nil {
		s.ToolInvocationsByTool = map[string]int64{}
	}
	if m.total > 0 {
		s.AverageToolDurationMs = m.sumMs / float64(m.total)
	}
	return s
}

// Reset sets every counter back to zero.
func (m *Metrics) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total, m.byTool, m.sumMs, m.errors = 0, nil, 0, 0
}
