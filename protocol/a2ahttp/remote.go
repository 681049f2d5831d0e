package a2ahttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/tiers"
)

// RemoteAgent presents an external A2A agent, declared by URL in the node's
// config, to the mesh: a mesh card built from its A2A card and a handler
// that forwards mesh requests to it with the outbound [Client].
//
// The handler reads a request payload as a [Request] (a JSON string is the
// text, any other JSON value one data part) and answers with an [Answer],
// so that the gateway in front of another node maps it back to A2A
// unchanged. Multi-turn works across the mesh: when the remote task asks
// for input, the next request with the same taskId (or, without one, in the
// same envelope thread) continues the remote task.
type RemoteAgent struct {
	client *Client
	url    string
	id     string
	tier   tiers.Tier
	now    func() time.Time

	mu    sync.Mutex
	card  *RemoteCard
	turns map[string]turnRef // our task id or thread -> remote task waiting for input
}

type turnRef struct {
	taskID, contextID string
	expires           time.Time
}

const (
	maxTurns = 1024
	turnTTL  = time.Hour
)

// RemoteOption configures a [RemoteAgent].
type RemoteOption func(*RemoteAgent)

// WithRemoteTier sets the tier of the mesh card (default L3, the least
// trusted).
func WithRemoteTier(t tiers.Tier) RemoteOption { return func(r *RemoteAgent) { r.tier = t } }

// NewRemoteAgent fetches the card of the A2A agent at url. id is the mesh
// agent id to publish it as; if empty, one is made from the card's name.
func NewRemoteAgent(ctx context.Context, c *Client, id, url string, opts ...RemoteOption) (*RemoteAgent, error) {
	if c == nil {
		c = NewClient()
	}
	r := &RemoteAgent{client: c, url: url, id: id, tier: tiers.Tier(3), now: time.Now, turns: map[string]turnRef{}}
	for _, o := range opts {
		o(r)
	}
	if _, err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	if r.id == "" {
		r.id = sanitizeID(r.card.Name, `[^A-Za-z0-9_.-]+`, 64)
	}
	if !agentcard.ValidID(r.id) {
		return nil, fmt.Errorf("a2ahttp: remote agent id %q is not a valid agent id", r.id)
	}
	if err := r.Card().Validate(); err != nil {
		return nil, fmt.Errorf("a2ahttp: card of remote agent %s: %w", url, err)
	}
	return r, nil
}

// Refresh fetches the remote card again (past the client's cache TTL) and
// reports whether it changed, so that node can republish it.
func (r *RemoteAgent) Refresh(ctx context.Context) (changed bool, err error) {
	card, err := r.client.Card(ctx, r.url)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changed = r.card == nil || !bytes.Equal(r.card.Raw, card.Raw)
	r.card = card
	return changed, nil
}

// URL returns the agent's URL as configured.
func (r *RemoteAgent) URL() string { return r.url }

// Card returns the mesh card: id, name, description and version from the
// A2A card (the version made semantic: "1.2" becomes "1.2.0"), one
// capability per skill, and the tier. Endpoints, Host and Revision are the
// node's to set.
func (r *RemoteAgent) Card() agentcard.Card {
	r.mu.Lock()
	rc := r.card
	r.mu.Unlock()
	c := agentcard.Card{
		ID:           r.id,
		Name:         truncateRunes(firstNonEmpty(rc.Name, r.id), agentcard.MaxNameLen),
		Version:      semver(rc.Version),
		Description:  truncateRunes(rc.Description, agentcard.MaxDescriptionLen),
		Tier:         r.tier,
		Protocols:    []string{"a2a/" + rc.ProtocolVersion},
		Capabilities: []agentcard.Capability{},
	}
	seen := map[string]bool{}
	for _, s := range rc.Skills {
		id := sanitizeID(s.ID, `[^A-Za-z0-9_.:/-]+`, 128)
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		c.Capabilities = append(c.Capabilities, agentcard.Capability{
			ID:          id,
			Name:        truncateRunes(s.Name, agentcard.MaxNameLen),
			Description: truncateRunes(s.Description, agentcard.MaxDescriptionLen),
		})
	}
	return c
}

// Handler returns the mesh handler of the agent, for node to register
// (protocol.Handler has this signature).
func (r *RemoteAgent) Handler() func(ctx context.Context, env *envelope.Envelope) (any, error) {
	return r.Handle
}

// Handle forwards one mesh request to the remote agent. Remote task
// outcomes (completed, input-required, failed, ...) are answers; failures
// to reach the agent are errors whose Code() is the client's.
func (r *RemoteAgent) Handle(ctx context.Context, env *envelope.Envelope) (any, error) {
	req, err := readRequest(env.Payload)
	if err != nil {
		return nil, &InvokeError{C: CodeValidation, Msg: "a2ahttp: request payload: " + err.Error()}
	}
	key := req.TaskID
	if key == "" {
		key = "thread:" + env.ThreadID()
	}
	msg := Message{Text: req.Text, ContextID: req.ContextID, Metadata: req.Metadata}
	for _, p := range req.Parts {
		if p.Kind != "text" || req.Text == "" {
			msg.Parts = append(msg.Parts, p)
		}
	}
	if ref, ok := r.turn(key, req.TaskID); ok {
		msg.TaskID, msg.ContextID = ref.taskID, ref.contextID
	}
	res := r.client.Send(ctx, r.url, msg)
	switch res.Code {
	case "", CodeInputRequired, CodeAuthRequired, CodeTaskFailed:
	default:
		return nil, &InvokeError{C: res.Code, Msg: res.Error}
	}
	ans := &Answer{TaskID: res.TaskID, ContextID: res.ContextID, Text: res.ResponseText}
	for _, p := range res.Parts {
		if p.Kind != "text" {
			ans.Parts = append(ans.Parts, p)
		}
	}
	switch res.Code {
	case "":
		ans.State = StateCompleted
	case CodeInputRequired, CodeAuthRequired:
		ans.State = res.State
		r.remember(key, turnRef{taskID: res.TaskID, contextID: res.ContextID})
	default:
		ans.State = res.State
		if st, ok := normalizeState(res.State); !ok || st == StateCompleted {
			ans.State = StateFailed
		}
		ans.Text = firstNonEmpty(res.ResponseText, res.Error)
	}
	return ans, nil
}

func (r *RemoteAgent) turn(key, taskID string) (turnRef, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if ref, ok := r.turns[key]; ok && now.Before(ref.expires) {
		delete(r.turns, key)
		return ref, true
	}
	// A mesh caller may also continue with the remote task id it got.
	for k, ref := range r.turns {
		if taskID != "" && ref.taskID == taskID && now.Before(ref.expires) {
			delete(r.turns, k)
			return ref, true
		}
	}
	return turnRef{}, false
}

func (r *RemoteAgent) remember(key string, ref turnRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for k, v := range r.turns {
		if !now.Before(v.expires) {
			delete(r.turns, k)
		}
	}
	if len(r.turns) >= maxTurns {
		var oldest string
		for k, v := range r.turns {
			if oldest == "" || v.expires.Before(r.turns[oldest].expires) {
				oldest = k
			}
		}
		delete(r.turns, oldest)
	}
	ref.expires = now.Add(turnTTL)
	r.turns[key] = ref
}

// readRequest reads a mesh payload as a Request.
func readRequest(raw json.RawMessage) (*Request, error) {
	raw = bytes.TrimSpace(raw)
	var req Request
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &req.Text); err != nil {
			return nil, err
		}
	case raw[0] == '{':
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, err
		}
		_, hasText := keys["text"]
		_, hasParts := keys["parts"]
		if hasText || hasParts {
			if err := json.Unmarshal(raw, &req); err != nil {
				return nil, err
			}
			for _, p := range req.Parts {
				if err := p.check(); err != nil {
					return nil, err
				}
			}
			break
		}
		fallthrough
	default:
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		req.Parts = []Part{{Kind: "data", Data: v}}
	}
	if len(req.Parts) > maxParts {
		return nil, fmt.Errorf("%d parts, at most %d", len(req.Parts), maxParts)
	}
	return &req, nil
}

var semverCore = regexp.MustCompile(`^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?`)

// semver makes a mesh card version from an A2A card version.
func semver(v string) string {
	m := semverCore.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return "0.0.0"
	}
	part := func(s string) string {
		s = strings.TrimLeft(s, "0")
		if s == "" {
			return "0"
		}
		if len(s) > 9 {
			s = s[:9]
		}
		return s
	}
	return part(m[1]) + "." + part(m[2]) + "." + part(m[3])
}

// sanitizeID turns s into an id matching the mesh's id rules: runs of
// characters outside the allowed set (re) become "-", leading characters
// that are not letters or digits are dropped, and the id is cut to max.
func sanitizeID(s, re string, max int) string {
	s = regexp.MustCompile(re).ReplaceAllString(s, "-")
	s = strings.TrimLeftFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	if len(s) > max {
		s = s[:max]
	}
	return strings.TrimRight(s, "-")
}

func truncateRunes(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max])
}
