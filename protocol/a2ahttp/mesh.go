package a2ahttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/nova-node/nova-node/agentcard"
)

// Mesh is everything the gateway needs from the node. node/ implements it on
// top of its registry and router; tests use a fake. All methods must be safe
// for concurrent use.
type Mesh interface {
	// Agents lists the agents the gateway exposes (for the node's aggregate
	// card). It should return quickly; it is called on every card request.
	Agents(ctx context.Context) []agentcard.Card
	// Resolve finds one agent by the name used in the URL ("alice" or
	// "alice@<peerID>"). Errors should carry a Code() such as
	// AGENT_NOT_FOUND or AMBIGUOUS_AGENT.
	Resolve(ctx context.Context, agent string) (agentcard.Card, error)
	// Call sends a request envelope whose payload is payload (a [Request]
	// in JSON) to the agent and returns the payload of its response (read
	// as an [Answer]). It must return when ctx ends. Errors should carry a
	// Code() (TIER_VIOLATION, SANDBOX_VIOLATION, DELIVERY_FAILED, ...).
	Call(ctx context.Context, agent string, payload json.RawMessage) (json.RawMessage, error)
	// Ready reports whether the mesh can serve requests (/healthz).
	Ready() bool
}

// Request is the payload of the request envelope the gateway sends to a mesh
// agent for one A2A message (see docs/a2a.md, "Payload convention").
type Request struct {
	// Text is every text part of the message, joined with "\n".
	Text string `json:"text"`
	// Parts is every part of the message, in order.
	Parts []Part `json:"parts,omitempty"`
	// TaskID and ContextID identify the A2A task and conversation. A
	// message that continues a task (after input-required) carries the same
	// TaskID; every task of one conversation shares ContextID.
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId"`
	// MessageID is the client's message id.
	MessageID string `json:"messageId,omitempty"`
	// Skill is metadata["skill"] of the message when it is a string: the
	// skill (capability or MCP tool) the client asks for, if it said.
	Skill string `json:"skill,omitempty"`
	// Metadata is the message's metadata, verbatim.
	Metadata map[string]any `json:"metadata,omitempty"`
	// History is the earlier turns of this task (text only, oldest first,
	// at most [maxHistoryTurns]), for agents that keep no state.
	History []Turn `json:"history,omitempty"`
}

// Turn is one earlier message of a task.
type Turn struct {
	Role string `json:"role"` // "user" or "agent"
	Text string `json:"text"`
}

// Part is one piece of content, in a form independent of the A2A version.
// Kind is "text" (Text), "file" (Bytes, base64, or URI, with Name and
// MimeType) or "data" (Data, any JSON value).
type Part struct {
	Kind     string         `json:"kind"`
	Text     string         `json:"text,omitempty"`
	Name     string         `json:"name,omitempty"`
	MimeType string         `json:"mimeType,omitempty"`
	Bytes    string         `json:"bytes,omitempty"`
	URI      string         `json:"uri,omitempty"`
	Data     any            `json:"data,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Answer is the payload a mesh agent returns. Every field is optional; see
// [DecodeAnswer] for how other JSON values are read.
type Answer struct {
	// State is how the turn ends: "completed" (the default),
	// "input-required" or "auth-required" (the task waits for the client's
	// next message), "failed" or "rejected".
	State string `json:"state,omitempty"`
	// Text is the agent's reply or, for input-required, its question.
	Text string `json:"text,omitempty"`
	// Parts is further content (files, data) of the reply.
	Parts []Part `json:"parts,omitempty"`
	// Data is shorthand for one data part.
	Data any `json:"data,omitempty"`
	// Artifacts are named outputs; without any, Text and Parts form one
	// artifact named "response".
	Artifacts []AnswerArtifact `json:"artifacts,omitempty"`
	// Reply "message" asks for a direct A2A Message instead of a task when
	// the client waits for the answer (blocking message/send on a new
	// conversation turn); otherwise a completed task is returned.
	Reply string `json:"reply,omitempty"`
	// Metadata is copied to the task's metadata.
	Metadata map[string]any `json:"metadata,omitempty"`
	// TaskID and ContextID name the task on the other side when the agent
	// is itself a remote A2A agent (see [RemoteAgent]); informational.
	TaskID    string `json:"taskId,omitempty"`
	ContextID string `json:"contextId,omitempty"`
}

// AnswerArtifact is one named output of an [Answer].
type AnswerArtifact struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Parts       []Part `json:"parts"`
}

// Answer states, normalized.
const (
	StateCompleted     = "completed"
	StateInputRequired = "input-required"
	StateAuthRequired  = "auth-required"
	StateFailed        = "failed"
	StateRejected      = "rejected"
	StateCanceled      = "canceled"
)

const (
	maxHistoryTurns = 20
	maxParts        = 256
)

var answerKeys = []string{"state", "text", "parts", "data", "artifacts", "reply"}

// DecodeAnswer reads a mesh agent's response payload. An object with at
// least one of the keys state, text, parts, data, artifacts or reply is an
// [Answer]; any other object, array, number or boolean is the data of one
// data part; a string is the text; null or empty is an empty completed
// answer. The state is normalized ("INPUT_REQUIRED" and
// "TASK_STATE_INPUT_REQUIRED" read as "input-required"); an unknown state,
// or more than 256 parts, is an error.
func DecodeAnswer(raw json.RawMessage) (*Answer, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return &Answer{State: StateCompleted}, nil
	}
	var a Answer
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &a.Text); err != nil {
			return nil, fmt.Errorf("a2ahttp: answer: %w", err)
		}
	case '{':
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, fmt.Errorf("a2ahttp: answer: %w", err)
		}
		known := false
		for _, k := range answerKeys {
			if _, ok := keys[k]; ok {
				known = true
			}
		}
		if !known {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, fmt.Errorf("a2ahttp: answer: %w", err)
			}
			a.Data = v
			break
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("a2ahttp: answer: %w", err)
		}
	default:
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("a2ahttp: answer: %w", err)
		}
		a.Data = v
	}
	st, ok := normalizeState(a.State)
	if !ok {
		return nil, fmt.Errorf("a2ahttp: answer: unknown state %q", a.State)
	}
	a.State = st
	n := len(a.Parts)
	for _, art := range a.Artifacts {
		n += len(art.Parts)
	}
	if n > maxParts {
		return nil, fmt.Errorf("a2ahttp: answer: %d parts, at most %d", n, maxParts)
	}
	for _, p := range a.Parts {
		if err := p.check(); err != nil {
			return nil, err
		}
	}
	for _, art := range a.Artifacts {
		for _, p := range art.Parts {
			if err := p.check(); err != nil {
				return nil, err
			}
		}
	}
	return &a, nil
}

// normalizeState maps the spellings of the two protocol versions and of
// hand-written agents to the v0.3 names. Empty is completed.
func normalizeState(s string) (string, bool) {
	if s == "" {
		return StateCompleted, true
	}
	n := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "_", "-"))
	n = strings.TrimPrefix(n, "task-state-")
	switch n {
	case "completed", "input-required", "auth-required", "failed", "rejected", "canceled":
		return n, true
	case "cancelled":
		return StateCanceled, true
	}
	return "", false
}

func (p Part) check() error {
	switch p.Kind {
	case "text", "data":
		return nil
	case "file":
		if (p.Bytes == "") == (p.URI == "") {
			return errors.New("a2ahttp: file part needs exactly one of bytes and uri")
		}
		return nil
	}
	return fmt.Errorf("a2ahttp: unknown part kind %q", p.Kind)
}

// contentParts returns the answer's text, parts and data as one list.
func (a *Answer) contentParts() []Part {
	var ps []Part
	if a.Text != "" && a.Text != partsText(a.Parts) {
		// An answer shaped like a Request (an echo) has its text in
		// Parts too: one copy is enough.
		ps = append(ps, Part{Kind: "text", Text: a.Text})
	}
	ps = append(ps, a.Parts...)
	if a.Data != nil {
		ps = append(ps, Part{Kind: "data", Data: a.Data})
	}
	return ps
}

// partsText is the text parts of ps joined with "\n", as Request.Text.
func partsText(ps []Part) string {
	var texts []string
	for _, p := range ps {
		if p.Kind == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// dataCompatFlag marks, in a v0.3 data part's metadata, data that is not an
// object and was wrapped as {"value": data}; the spelling is @a2a-js/sdk's.
const dataCompatFlag = "data_part_compat"

// toA2A converts a part to a2a-go's v0.3 model.
func (p Part) toA2A() a2a.Part {
	switch p.Kind {
	case "file":
		meta := a2a.FileMeta{MimeType: p.MimeType, Name: p.Name}
		if p.Bytes != "" {
			return a2a.FilePart{File: a2a.FileBytes{FileMeta: meta, Bytes: p.Bytes}, Metadata: p.Metadata}
		}
		return a2a.FilePart{File: a2a.FileURI{FileMeta: meta, URI: p.URI}, Metadata: p.Metadata}
	case "data":
		if m, ok := p.Data.(map[string]any); ok {
			return a2a.DataPart{Data: m, Metadata: p.Metadata}
		}
		meta := make(map[string]any, len(p.Metadata)+1)
		for k, v := range p.Metadata {
			meta[k] = v
		}
		meta[dataCompatFlag] = true
		return a2a.DataPart{Data: map[string]any{"value": p.Data}, Metadata: meta}
	default:
		return a2a.TextPart{Text: p.Text, Metadata: p.Metadata}
	}
}

// partFromA2A converts an a2a-go part; ok is false for an unknown type.
func partFromA2A(ap a2a.Part) (Part, bool) {
	switch v := ap.(type) {
	case a2a.TextPart:
		return Part{Kind: "text", Text: v.Text, Metadata: v.Metadata}, true
	case *a2a.TextPart:
		return partFromA2A(*v)
	case a2a.DataPart:
		if flag, _ := v.Metadata[dataCompatFlag].(bool); flag {
			meta := make(map[string]any, len(v.Metadata))
			for k, x := range v.Metadata {
				if k != dataCompatFlag {
					meta[k] = x
				}
			}
			if len(meta) == 0 {
				meta = nil
			}
			return Part{Kind: "data", Data: v.Data["value"], Metadata: meta}, true
		}
		return Part{Kind: "data", Data: v.Data, Metadata: v.Metadata}, true
	case *a2a.DataPart:
		return partFromA2A(*v)
	case a2a.FilePart:
		switch f := v.File.(type) {
		case a2a.FileBytes:
			return Part{Kind: "file", Name: f.Name, MimeType: f.MimeType, Bytes: f.Bytes, Metadata: v.Metadata}, true
		case a2a.FileURI:
			return Part{Kind: "file", Name: f.Name, MimeType: f.MimeType, URI: f.URI, Metadata: v.Metadata}, true
		}
	case *a2a.FilePart:
		return partFromA2A(*v)
	}
	return Part{}, false
}

func partsToA2A(ps []Part) a2a.ContentParts {
	out := make(a2a.ContentParts, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.toA2A())
	}
	return out
}

func partsFromA2A(ps a2a.ContentParts) []Part {
	out := make([]Part, 0, len(ps))
	for _, ap := range ps {
		if p, ok := partFromA2A(ap); ok {
			out = append(out, p)
		}
	}
	return out
}

// textOf joins the text parts of ps with "\n".
func textOf(ps []Part) string {
	var b strings.Builder
	for _, p := range ps {
		if p.Kind != "text" || p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// newRequest builds the mesh payload for message msg of a task.
func newRequest(msg *a2a.Message, taskID a2a.TaskID, contextID string, history []*a2a.Message) *Request {
	parts := partsFromA2A(msg.Parts)
	r := &Request{
		Text:      textOf(parts),
		Parts:     parts,
		TaskID:    string(taskID),
		ContextID: contextID,
		MessageID: msg.ID,
		Metadata:  msg.Metadata,
	}
	if s, ok := msg.Metadata["skill"].(string); ok {
		r.Skill = s
	}
	for _, h := range history {
		if h == nil || h.ID == msg.ID {
			continue
		}
		r.History = append(r.History, Turn{Role: string(h.Role), Text: textOf(partsFromA2A(h.Parts))})
	}
	if len(r.History) > maxHistoryTurns {
		r.History = r.History[len(r.History)-maxHistoryTurns:]
	}
	return r
}

// codeOf returns the Code() of the first error in err's chain that has one.
func codeOf(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code()
	}
	return ""
}
