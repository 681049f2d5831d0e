// Package a2ahttptest provides a fake [a2ahttp.Mesh] with deterministic
// agents, for tests of the gateway and of code built on it (node, the
// interop suite). It uses no network.
package a2ahttptest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/tiers"
)

// HandlerFunc answers one request; its result is marshaled as the answer
// payload (a json.RawMessage is used as is).
type HandlerFunc func(ctx context.Context, req *a2ahttp.Request) (any, error)

// CodedError is a mesh error with a seed error code.
type CodedError struct{ C, Msg string }

func (e *CodedError) Error() string { return e.Msg }

// Code returns the error code (AGENT_NOT_FOUND, DELIVERY_FAILED, ...).
func (e *CodedError) Code() string { return e.C }

// Mesh is a fake mesh: a set of agents with in-process handlers.
type Mesh struct {
	mu     sync.Mutex
	agents map[string]entry
	ready  atomic.Bool
	calls  atomic.Int64
}

type entry struct {
	card agentcard.Card
	h    HandlerFunc
}

var _ a2ahttp.Mesh = (*Mesh)(nil)

// NewMesh returns an empty mesh that is ready.
func NewMesh() *Mesh {
	m := &Mesh{agents: map[string]entry{}}
	m.ready.Store(true)
	return m
}

// Add adds or replaces an agent.
func (m *Mesh) Add(c agentcard.Card, h HandlerFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.agents[c.ID] = entry{card: c, h: h}
}

// Remove removes an agent.
func (m *Mesh) Remove(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.agents, id)
}

// SetReady sets what Ready reports.
func (m *Mesh) SetReady(ok bool) { m.ready.Store(ok) }

// Calls returns the number of Call invocations so far.
func (m *Mesh) Calls() int64 { return m.calls.Load() }

// Agents implements a2ahttp.Mesh, sorted by id.
func (m *Mesh) Agents(ctx context.Context) []agentcard.Card {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]agentcard.Card, 0, len(m.agents))
	for _, e := range m.agents {
		out = append(out, e.card.Clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Resolve implements a2ahttp.Mesh: by id or by address.
func (m *Mesh) Resolve(ctx context.Context, name string) (agentcard.Card, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, _, _ := strings.Cut(name, "@")
	if e, ok := m.agents[id]; ok && (name == id || name == e.card.Address()) {
		return e.card.Clone(), nil
	}
	return agentcard.Card{}, &CodedError{C: "AGENT_NOT_FOUND", Msg: fmt.Sprintf("no agent %q", name)}
}

// Call implements a2ahttp.Mesh.
func (m *Mesh) Call(ctx context.Context, agent string, payload json.RawMessage) (json.RawMessage, error) {
	m.calls.Add(1)
	c, err := m.Resolve(ctx, agent)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	h := m.agents[c.ID].h
	m.mu.Unlock()
	var req a2ahttp.Request
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, &CodedError{C: "DELIVERY_FAILED", Msg: "bad payload: " + err.Error()}
	}
	res, err := h(ctx, &req)
	if err != nil {
		return nil, err
	}
	if raw, ok := res.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(res)
}

// Ready implements a2ahttp.Mesh.
func (m *Mesh) Ready() bool { return m.ready.Load() }

// Card returns a valid mesh card for a test agent.
func Card(id, description string, caps ...string) agentcard.Card {
	c := agentcard.Card{
		ID: id, Name: id, Version: "1.0.0", Description: description, Tier: tiers.Tier(2),
		Protocols: []string{"/nova/a2a/1.0.0"}, Capabilities: []agentcard.Capability{},
	}
	for _, cp := range caps {
		c.Capabilities = append(c.Capabilities, agentcard.Capability{ID: cp, Name: cp, Description: "capability " + cp})
	}
	return c
}

// DemoMesh returns a mesh with the deterministic agents the gateway tests
// and the interop suite use:
//
//   - echo: completes with "echo: <text>" and returns every file and data
//     part it got;
//   - direct: answers with a direct Message (reply "message"): "hello from direct";
//   - slow: completes with "done: <text>" after delay (default 300 ms);
//   - wait: never answers; it ends only when canceled (or timed out);
//   - ask: multi-turn: asks "What is your name?" (input-required), then
//     completes with "Hello, <answer>!";
//   - fail: fails with DELIVERY_FAILED;
//   - guarded: refuses with TIER_VIOLATION (the task is rejected);
//   - tools: an agent whose capabilities include MCP tools ("tools.search").
func DemoMesh(delay time.Duration) *Mesh {
	if delay <= 0 {
		delay = 300 * time.Millisecond
	}
	m := NewMesh()
	m.Add(Card("echo", "Echoes text, files and data.", "echo"), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		var parts []a2ahttp.Part
		for _, p := range r.Parts {
			if p.Kind != "text" {
				parts = append(parts, p)
			}
		}
		return &a2ahttp.Answer{Text: "echo: " + r.Text, Parts: parts}, nil
	})
	m.Add(Card("direct", "Answers with a direct message."), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		return &a2ahttp.Answer{Reply: "message", Text: "hello from direct"}, nil
	})
	m.Add(Card("slow", "Answers after a delay."), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		return &a2ahttp.Answer{Text: "done: " + r.Text}, nil
	})
	m.Add(Card("wait", "Never answers."), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	m.Add(Card("ask", "Asks for your name."), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		if len(r.History) == 0 {
			return &a2ahttp.Answer{State: a2ahttp.StateInputRequired, Text: "What is your name?"}, nil
		}
		return &a2ahttp.Answer{Text: "Hello, " + r.Text + "!"}, nil
	})
	m.Add(Card("fail", "Always fails."), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		return nil, &CodedError{C: "DELIVERY_FAILED", Msg: "the agent's node is unreachable"}
	})
	m.Add(Card("guarded", "Refuses gateway traffic."), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		return nil, &CodedError{C: "TIER_VIOLATION", Msg: "L3 may not reach L0 without justification"}
	})
	m.Add(Card("tools", "Has MCP tools.", "tools.search", "tools.fetch", "summarize"), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		return &a2ahttp.Answer{Text: "skill=" + r.Skill}, nil
	})
	return m
}

// Entries returns every agent's card and handler, sorted by id, so a test
// can host the same agents on real nodes.
func (m *Mesh) Entries() ([]agentcard.Card, []HandlerFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.agents))
	for id := range m.agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	cards := make([]agentcard.Card, 0, len(ids))
	hs := make([]HandlerFunc, 0, len(ids))
	for _, id := range ids {
		cards = append(cards, m.agents[id].card)
		hs = append(hs, m.agents[id].h)
	}
	return cards, hs
}
