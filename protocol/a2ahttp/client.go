package a2ahttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
)

// Codes of the outbound client's failures (seed 003's error table).
const (
	// CodeExternalService: the agent card could not be fetched (network
	// error or non-2xx answer).
	CodeExternalService = "EXTERNAL_SERVICE_ERROR"
	// CodeValidation: the agent card is not a card (bad JSON, no name or
	// version, no JSON-RPC interface).
	CodeValidation = "VALIDATION_ERROR"
	// CodeSubmitFailed: the message could not be sent (HTTP error or
	// JSON-RPC error).
	CodeSubmitFailed = "SUBMIT_FAILED"
	// CodeTimeout: no terminal state before the timeout.
	CodeTimeout = "TIMEOUT"
	// CodeTaskFailed: the remote task failed, was rejected or canceled.
	CodeTaskFailed = "TASK_FAILED"
	// CodeInputRequired and CodeAuthRequired: the remote task waits for
	// the caller's next message (continue with the result's TaskID).
	CodeInputRequired = "INPUT_REQUIRED"
	CodeAuthRequired  = "AUTH_REQUIRED"
)

// InvokeError is a failure of the outbound client.
type InvokeError struct {
	C       string // one of the Code constants
	Status  int    // HTTP status, when there was one
	RPCCode int    // JSON-RPC error code, when there was one
	Msg     string
	Err     error
}

func (e *InvokeError) Error() string { return e.Msg }

// Code returns the error's code.
func (e *InvokeError) Code() string { return e.C }

func (e *InvokeError) Unwrap() error { return e.Err }

// RemoteCard is an external agent's card, as either version describes it.
type RemoteCard struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version"`
	// Endpoint is the JSON-RPC URL the client uses, and ProtocolVersion
	// the wire version it speaks there (Version03 or Version10).
	Endpoint          string        `json:"endpoint"`
	ProtocolVersion   string        `json:"protocolVersion"`
	Tenant            string        `json:"tenant,omitempty"`
	Streaming         bool          `json:"streaming"`
	PushNotifications bool          `json:"pushNotifications"`
	Skills            []RemoteSkill `json:"skills"`
	// CardURL is where the card was fetched; Raw is the card itself.
	CardURL string          `json:"cardUrl"`
	Raw     json.RawMessage `json:"-"`
}

// RemoteSkill is one skill of a remote card.
type RemoteSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags,omitempty"`
}

// Message is what the client sends: text and parts, and, to continue a
// conversation or task, their ids.
type Message struct {
	Text      string
	Parts     []Part
	ContextID string
	TaskID    string
	Metadata  map[string]any
}

// Result is the structured outcome of [Client.Send]: it never needs an
// error alongside it.
type Result struct {
	Success      bool   `json:"success"`
	State        string `json:"state,omitempty"` // completed, input-required, failed, ... ("" for a direct message)
	TaskID       string `json:"taskId,omitempty"`
	ContextID    string `json:"contextId,omitempty"`
	ResponseText string `json:"responseText,omitempty"`
	Parts        []Part `json:"parts,omitempty"`
	Error        string `json:"error,omitempty"`
	Code         string `json:"code,omitempty"`
	Agent        string `json:"agent,omitempty"`   // the card's name
	Version      string `json:"version,omitempty"` // wire version used
	// HTTPStatus is the HTTP status of a failed card fetch or send, when
	// there was one (404: no agent at that URL).
	HTTPStatus int `json:"httpStatus,omitempty"`
}

// Client is the outbound A2A client. It fetches cards (agent-card.json,
// then agent.json), caches them, and sends messages over either wire
// version. It is safe for concurrent use. Its HTTP client has no overall
// timeout, so streams are not cut (a2a-go's client cuts them at 3 min):
// every call is bounded by its context and the client's timeout instead.
type Client struct {
	hc        *http.Client
	token     string
	ttl       time.Duration
	pollEvery time.Duration
	timeout   time.Duration
	stream    bool
	now       func() time.Time
	mu        sync.Mutex
	cards     map[string]cachedCard
	inflight  map[string]*cardFetch
}

type cachedCard struct {
	card    *RemoteCard
	fetched time.Time
}

type cardFetch struct {
	done chan struct{}
	card *RemoteCard
	err  error
}

// ClientOption configures a [Client].
type ClientOption func(*Client)

// WithHTTPClient sets the HTTP client (default: one without an overall
// timeout, with a 60 s response header timeout).
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *Client) { c.hc = hc } }

// WithBearerToken sends "Authorization: Bearer token" with every request.
func WithBearerToken(token string) ClientOption { return func(c *Client) { c.token = token } }

// WithCardTTL sets how long a fetched card is reused (default 5 min).
func WithCardTTL(d time.Duration) ClientOption { return func(c *Client) { c.ttl = d } }

// WithPollInterval sets the interval of tasks/get polling (default 3 s).
func WithPollInterval(d time.Duration) ClientOption { return func(c *Client) { c.pollEvery = d } }

// WithTimeout bounds one Send (default 5 min).
func WithTimeout(d time.Duration) ClientOption { return func(c *Client) { c.timeout = d } }

// WithStreaming(false) makes Send poll even when the agent streams.
func WithStreaming(on bool) ClientOption { return func(c *Client) { c.stream = on } }

// WithClientClock sets the clock of the card cache.
func WithClientClock(now func() time.Time) ClientOption { return func(c *Client) { c.now = now } }

// NewClient returns a client with the defaults: card TTL 5 min, poll every
// 3 s, timeout 5 min, streaming when the agent offers it.
func NewClient(opts ...ClientOption) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 60 * time.Second
	c := &Client{
		hc:        &http.Client{Transport: tr},
		ttl:       5 * time.Minute,
		pollEvery: 3 * time.Second,
		timeout:   5 * time.Minute,
		stream:    true,
		now:       time.Now,
		cards:     map[string]cachedCard{},
		inflight:  map[string]*cardFetch{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ClearCardCache forgets every cached card.
func (c *Client) ClearCardCache() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cards = map[string]cachedCard{}
}

const maxCardSize = 1 << 20

// Card returns the agent card at baseURL, from the cache when it is fresher
// than the TTL. baseURL is the agent's URL (the card is at
// .well-known/agent-card.json under it, or .well-known/agent.json) or the
// card's own URL (ending in .json). Errors are *InvokeError with
// CodeExternalService or CodeValidation.
func (c *Client) Card(ctx context.Context, baseURL string) (*RemoteCard, error) {
	key := strings.TrimSuffix(baseURL, "/")
	now := c.now()
	c.mu.Lock()
	for k, e := range c.cards { // prune stale entries
		if now.Sub(e.fetched) >= c.ttl {
			delete(c.cards, k)
		}
	}
	if e, ok := c.cards[key]; ok {
		c.mu.Unlock()
		return e.card, nil
	}
	if f, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.card, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &cardFetch{done: make(chan struct{})}
	c.inflight[key] = f
	c.mu.Unlock()

	f.card, f.err = c.fetchCard(ctx, baseURL)
	c.mu.Lock()
	delete(c.inflight, key)
	if f.err == nil {
		c.cards[key] = cachedCard{card: f.card, fetched: c.now()}
	}
	c.mu.Unlock()
	close(f.done)
	return f.card, f.err
}

// Discover is Card that returns nil instead of an error.
func (c *Client) Discover(ctx context.Context, baseURL string) *RemoteCard {
	card, err := c.Card(ctx, baseURL)
	if err != nil {
		return nil
	}
	return card
}

func (c *Client) fetchCard(ctx context.Context, baseURL string) (*RemoteCard, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &InvokeError{C: CodeValidation, Msg: fmt.Sprintf("agent URL %q is not an http(s) URL", baseURL)}
	}
	var urls []string
	if strings.HasSuffix(u.Path, ".json") {
		urls = []string{u.String()}
	} else {
		base := strings.TrimSuffix(u.String(), "/")
		urls = []string{base + "/.well-known/agent-card.json", base + "/.well-known/agent.json"}
	}
	var last error
	for i, cu := range urls {
		body, status, err := c.get(ctx, cu)
		if err != nil {
			return nil, &InvokeError{C: CodeExternalService, Msg: fmt.Sprintf("agent card fetch from %s failed: %v", cu, err), Err: err}
		}
		if status == http.StatusNotFound && i+1 < len(urls) {
			last = &InvokeError{C: CodeExternalService, Status: status, Msg: fmt.Sprintf("agent card fetch from %s failed: HTTP %d", cu, status)}
			continue
		}
		if status == http.StatusNotFound && i > 0 {
			// Neither location has a card: say so about the agent's URL,
			// with the server's word for it when it gave one.
			msg := fmt.Sprintf("no agent card at %s (HTTP 404 for .well-known/agent-card.json and .well-known/agent.json)", strings.TrimSuffix(u.String(), "/"))
			if why := errorBodyText(body); why != "" {
				msg += ": " + why
			}
			return nil, &InvokeError{C: CodeExternalService, Status: status, Msg: msg}
		}
		if status < 200 || status > 299 {
			return nil, &InvokeError{C: CodeExternalService, Status: status, Msg: fmt.Sprintf("agent card fetch from %s failed: HTTP %d", cu, status)}
		}
		return parseCard(body, cu)
	}
	return nil, last
}

// errorBodyText is the message of a short error body (JSON {"error": ...}
// or {"message": ...}, or one line of text), or "". The text is a remote
// server's and ends up on a terminal, so it is made inert: line breaks and
// tabs become spaces, and other control characters (ESC and the rest of
// C0, DEL, C1) and the bidirectional overrides are written as escapes
// (\x1b, \u202e), visible and harmless. At most 200 bytes are shown, as
// escaped; a longer message is left out.
func errorBodyText(b []byte) string {
	var v struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
	}
	text := ""
	if json.Unmarshal(b, &v) == nil {
		switch e := v.Error.(type) {
		case string:
			text = e
		case map[string]any:
			text, _ = e["message"].(string)
		}
		if text == "" {
			text = v.Message
		}
	} else if t := strings.TrimSpace(string(b)); !strings.ContainsAny(t, "\n<") {
		text = t
	}
	if len(text) > 200 || !utf8.ValidString(text) {
		return ""
	}
	text = inertText(text)
	if len(text) > 200 {
		return ""
	}
	return text
}

// inertText is s with nothing in it that a terminal acts on: \n, \r and
// \t are spaces, other control characters and the bidirectional
// embedding, override and isolate characters are escaped as Go would
// quote them.
func inertText(s string) string {
	clean := true
	for _, r := range s {
		if unicode.IsControl(r) || isBidiControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isBidiControl: U+202A to U+202E and U+2066 to U+2069, which reorder the
// text around them on a terminal that honours them.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

func (c *Client) get(ctx context.Context, u string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(VersionHeader, Version10)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCardSize+1))
	if err != nil {
		return nil, 0, err
	}
	if len(body) > maxCardSize {
		return nil, 0, fmt.Errorf("card over %d bytes", maxCardSize)
	}
	return body, resp.StatusCode, nil
}

// anyCard reads the fields of both card versions that the client needs.
type anyCard struct {
	Name                 string `json:"name"`
	Description          string `json:"description"`
	Version              string `json:"version"`
	URL                  string `json:"url"`
	PreferredTransport   string `json:"preferredTransport"`
	ProtocolVersion      string `json:"protocolVersion"`
	AdditionalInterfaces []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
		Tenant          string `json:"tenant"`
	} `json:"supportedInterfaces"`
	Capabilities struct {
		Streaming         bool `json:"streaming"`
		PushNotifications bool `json:"pushNotifications"`
	} `json:"capabilities"`
	Skills []RemoteSkill `json:"skills"`
}

// parseCard reads a v0.3 or v1.0 card fetched from cardURL. It picks the
// JSON-RPC interface, preferring v1.0. A v0.3 card without
// preferredTransport is JSON-RPC (a2a-go's client rejects such cards).
func parseCard(body []byte, cardURL string) (*RemoteCard, error) {
	var ac anyCard
	if err := json.Unmarshal(body, &ac); err != nil {
		return nil, &InvokeError{C: CodeValidation, Msg: "agent card is not valid JSON: " + err.Error(), Err: err}
	}
	var missing []string
	if ac.Name == "" {
		missing = append(missing, "name")
	}
	if ac.Version == "" {
		missing = append(missing, "version")
	}
	if len(missing) > 0 {
		return nil, &InvokeError{C: CodeValidation, Msg: "agent card is missing " + strings.Join(missing, " and ")}
	}
	rc := &RemoteCard{
		Name: ac.Name, Description: ac.Description, Version: ac.Version,
		Streaming: ac.Capabilities.Streaming, PushNotifications: ac.Capabilities.PushNotifications,
		Skills: ac.Skills, CardURL: cardURL, Raw: append(json.RawMessage(nil), body...),
	}
	best := -1
	for i, si := range ac.SupportedInterfaces {
		if !strings.EqualFold(si.ProtocolBinding, "JSONRPC") || si.URL == "" {
			continue
		}
		v, ok := wireVersion(si.ProtocolVersion)
		if !ok {
			continue
		}
		if best < 0 || (v == Version10 && rc.ProtocolVersion != Version10) {
			best, rc.ProtocolVersion, rc.Endpoint, rc.Tenant = i, v, si.URL, si.Tenant
		}
	}
	if best < 0 {
		switch {
		case ac.URL != "" && (ac.PreferredTransport == "" || strings.EqualFold(ac.PreferredTransport, "JSONRPC")):
			rc.Endpoint = ac.URL
		default:
			for _, ai := range ac.AdditionalInterfaces {
				if strings.EqualFold(ai.Transport, "JSONRPC") && ai.URL != "" {
					rc.Endpoint = ai.URL
					break
				}
			}
		}
		rc.ProtocolVersion = Version03
	}
	if rc.Endpoint == "" {
		return nil, &InvokeError{C: CodeValidation, Msg: "agent card offers no JSON-RPC interface"}
	}
	ep, err := url.Parse(cardURL)
	if err == nil {
		if ref, err := ep.Parse(rc.Endpoint); err == nil {
			rc.Endpoint = ref.String()
		}
	}
	if u, err := url.Parse(rc.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &InvokeError{C: CodeValidation, Msg: fmt.Sprintf("agent card endpoint %q is not an http(s) URL", rc.Endpoint)}
	}
	return rc, nil
}

// Send sends msg to the agent at baseURL and follows the task to a terminal
// state (or input-required), by stream when the agent streams, else by a
// non-blocking send and tasks/get polling, within the client's timeout.
// Failures are results with a Code; a remote task that timed out, or whose
// caller's ctx was canceled, is canceled.
func (c *Client) Send(ctx context.Context, baseURL string, msg Message) *Result {
	card, err := c.Card(ctx, baseURL)
	if err != nil {
		return failure(err, "")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := c.now()
	am := &a2a.Message{
		ID: uuid.NewString(), Role: a2a.MessageRoleUser, ContextID: msg.ContextID,
		TaskID: a2a.TaskID(msg.TaskID), Metadata: msg.Metadata,
	}
	if msg.Text != "" {
		am.Parts = append(am.Parts, a2a.TextPart{Text: msg.Text})
	}
	am.Parts = append(am.Parts, partsToA2A(msg.Parts)...)
	if len(am.Parts) == 0 {
		am.Parts = a2a.ContentParts{a2a.TextPart{Text: ""}}
	}

	tr := &tracker{}
	if card.Streaming && c.stream {
		err = c.sendStream(ctx, card, am, tr)
	} else {
		err = c.sendPoll(ctx, card, am, tr)
	}
	if err == nil && !tr.done() && tr.task != nil {
		err = c.poll(ctx, card, tr)
	}
	res := tr.result(card)
	switch {
	case err == nil:
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		code, text := CodeTimeout, "Timed out"
		if errors.Is(ctx.Err(), context.Canceled) {
			// The caller stopped waiting (a canceled A2A task, a request
			// whose requester gave up): the remote task is canceled too.
			code, text = CodeTaskFailed, "Canceled by the caller"
		}
		res = &Result{
			Code: code, Error: fmt.Sprintf("%s after %dms", text, c.now().Sub(start).Milliseconds()),
			TaskID: res.TaskID, ContextID: res.ContextID, State: res.State, Agent: card.Name, Version: card.ProtocolVersion,
		}
		if res.TaskID != "" {
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = c.rpc(cctx, card, "cancel", a2a.TaskID(res.TaskID), nil)
			ccancel()
		}
	default:
		r := failure(err, CodeSubmitFailed)
		r.TaskID, r.ContextID, r.State, r.Agent, r.Version = res.TaskID, res.ContextID, res.State, card.Name, card.ProtocolVersion
		res = r
	}
	return res
}

// GetTask reads a remote task.
func (c *Client) GetTask(ctx context.Context, baseURL, taskID string) (*a2a.Task, error) {
	card, err := c.Card(ctx, baseURL)
	if err != nil {
		return nil, err
	}
	var t *a2a.Task
	err = c.rpc(ctx, card, "get", a2a.TaskID(taskID), &t)
	return t, err
}

// CancelTask cancels a remote task and returns it.
func (c *Client) CancelTask(ctx context.Context, baseURL, taskID string) (*a2a.Task, error) {
	card, err := c.Card(ctx, baseURL)
	if err != nil {
		return nil, err
	}
	var t *a2a.Task
	err = c.rpc(ctx, card, "cancel", a2a.TaskID(taskID), &t)
	return t, err
}

func failure(err error, code string) *Result {
	var ie *InvokeError
	if errors.As(err, &ie) {
		return &Result{Code: ie.C, Error: ie.Msg, HTTPStatus: ie.Status}
	}
	return &Result{Code: code, Error: err.Error()}
}

// tracker follows one task (or a direct message) through events.
type tracker struct {
	task *a2a.Task
	msg  *a2a.Message
}

func (t *tracker) done() bool {
	return t.msg != nil || (t.task != nil && endsTurn(t.task.Status.State))
}

func (t *tracker) apply(ev a2a.Event) {
	switch v := ev.(type) {
	case *a2a.Message:
		if t.task == nil {
			t.msg = v
		}
	case *a2a.Task:
		t.task = v
	case *a2a.TaskStatusUpdateEvent:
		if t.task == nil {
			t.task = &a2a.Task{ID: v.TaskID, ContextID: v.ContextID}
		}
		if t.task.Status.Message != nil {
			t.task.History = append(t.task.History, t.task.Status.Message)
		}
		t.task.Status = v.Status
	case *a2a.TaskArtifactUpdateEvent:
		if t.task == nil {
			t.task = &a2a.Task{ID: v.TaskID, ContextID: v.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		}
		if v.Artifact == nil {
			return
		}
		for _, a := range t.task.Artifacts {
			if a.ID == v.Artifact.ID {
				if v.Append {
					a.Parts = append(a.Parts, v.Artifact.Parts...)
				} else {
					*a = *v.Artifact
				}
				return
			}
		}
		art := *v.Artifact
		t.task.Artifacts = append(t.task.Artifacts, &art)
	}
}

// result maps the tracked outcome to a Result.
func (t *tracker) result(card *RemoteCard) *Result {
	r := &Result{Agent: card.Name, Version: card.ProtocolVersion}
	if t.msg != nil {
		ps := partsFromA2A(t.msg.Parts)
		r.Success, r.ContextID, r.Parts, r.ResponseText = true, t.msg.ContextID, ps, textOf(ps)
		return r
	}
	if t.task == nil {
		r.Code, r.Error = CodeSubmitFailed, "Submit failed: no task or message in the answer"
		return r
	}
	task := t.task
	r.TaskID, r.ContextID, r.State = string(task.ID), task.ContextID, string(task.Status.State)
	var arts []Part
	for _, a := range task.Artifacts {
		if a != nil {
			arts = append(arts, partsFromA2A(a.Parts)...)
		}
	}
	// The response text is the last agent message's (the final status
	// message, or the last agent message of the history), else the
	// artifacts' text.
	var text string
	var msgParts []Part
	if m := task.Status.Message; m != nil && m.Role != a2a.MessageRoleUser {
		msgParts = partsFromA2A(m.Parts)
	} else {
		for i := len(task.History) - 1; i >= 0; i-- {
			if m := task.History[i]; m != nil && m.Role == a2a.MessageRoleAgent {
				msgParts = partsFromA2A(m.Parts)
				break
			}
		}
	}
	text = textOf(msgParts)
	if text == "" {
		text = textOf(arts)
	}
	r.ResponseText = text
	r.Parts = arts
	if len(r.Parts) == 0 {
		r.Parts = msgParts
	}
	switch task.Status.State {
	case a2a.TaskStateCompleted:
		r.Success = true
	case a2a.TaskStateInputRequired:
		r.Code, r.Error = CodeInputRequired, firstNonEmpty(text, "Input required")
		r.Parts = msgParts
	case a2a.TaskStateAuthRequired:
		r.Code, r.Error = CodeAuthRequired, firstNonEmpty(text, "Authentication required")
		r.Parts = msgParts
	case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateCanceled:
		r.Code, r.Error = CodeTaskFailed, firstNonEmpty(text, "Task "+string(task.Status.State))
	}
	return r
}

// sendStream sends with message/stream (SendStreamingMessage) and applies
// the events until the turn ends or the stream does.
func (c *Client) sendStream(ctx context.Context, card *RemoteCard, m *a2a.Message, tr *tracker) error {
	events, err := c.openStream(ctx, card, &a2a.MessageSendParams{Message: m})
	if err != nil {
		return err
	}
	for ev, err := range events {
		if err != nil {
			if tr.task != nil && ctx.Err() == nil {
				return nil // the stream broke: poll the task
			}
			return err
		}
		tr.apply(ev)
		if tr.done() {
			return nil
		}
	}
	return nil
}

// sendPoll sends without blocking and polls tasks/get until the turn ends.
func (c *Client) sendPoll(ctx context.Context, card *RemoteCard, m *a2a.Message, tr *tracker) error {
	f := false
	var res a2a.Event
	if err := c.rpc(ctx, card, "send", &a2a.MessageSendParams{Message: m, Config: &a2a.MessageSendConfig{Blocking: &f}}, &res); err != nil {
		return err
	}
	tr.apply(res)
	if tr.done() || tr.task == nil {
		return nil
	}
	return c.poll(ctx, card, tr)
}

func (c *Client) poll(ctx context.Context, card *RemoteCard, tr *tracker) error {
	t := time.NewTicker(c.pollEvery)
	defer t.Stop()
	for !tr.done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		var task *a2a.Task
		if err := c.rpc(ctx, card, "get", tr.task.ID, &task); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // transient: try again at the next tick
		}
		tr.task = task
	}
	return nil
}

// rpc runs one non-streaming operation ("send", "get", "cancel") in the
// card's wire version and decodes its result into out (*a2a.Event or
// **a2a.Task).
func (c *Client) rpc(ctx context.Context, card *RemoteCard, op string, arg any, out any) error {
	v1 := card.ProtocolVersion == Version10
	var method string
	var params any
	switch op {
	case "send":
		p := arg.(*a2a.MessageSendParams)
		method, params = "message/send", p
		if v1 {
			r := sendRequestToV1(p)
			r.Tenant = card.Tenant
			method, params = "SendMessage", r
		}
	case "get", "cancel":
		id := arg.(a2a.TaskID)
		method, params = "tasks/"+op, &a2a.TaskIDParams{ID: id}
		if v1 {
			method = map[string]string{"get": "GetTask", "cancel": "CancelTask"}[op]
			params = &v1TaskRequest{Tenant: card.Tenant, ID: string(id)}
		}
	}
	body, err := c.post(ctx, card, method, params, false)
	if err != nil {
		return err
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, maxSSEEvent))
	if err != nil {
		return &InvokeError{C: CodeSubmitFailed, Msg: "Submit failed: " + err.Error(), Err: err}
	}
	var resp rpcResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return &InvokeError{C: CodeSubmitFailed, Msg: "Submit failed: the answer is not JSON-RPC", Err: err}
	}
	if resp.Error != nil {
		return rpcFailure(method, resp.Error)
	}
	switch o := out.(type) {
	case *a2a.Event:
		ev, err := decodeResult(resp.Result, v1)
		if err != nil {
			return &InvokeError{C: CodeSubmitFailed, Msg: "Submit failed: " + err.Error(), Err: err}
		}
		*o = ev
	case **a2a.Task:
		t, err := decodeTask(resp.Result, v1)
		if err != nil {
			return &InvokeError{C: CodeSubmitFailed, Msg: "Submit failed: " + err.Error(), Err: err}
		}
		*o = t
	}
	return nil
}

func rpcFailure(method string, e *rpcError) *InvokeError {
	return &InvokeError{
		C: CodeSubmitFailed, RPCCode: e.Code,
		Msg: fmt.Sprintf("Submit failed: %s: JSON-RPC error %d: %s", method, e.Code, e.Message),
	}
}

// openStream starts message/stream (SendStreamingMessage).
func (c *Client) openStream(ctx context.Context, card *RemoteCard, p *a2a.MessageSendParams) (iter.Seq2[a2a.Event, error], error) {
	v1 := card.ProtocolVersion == Version10
	method, params := "message/stream", any(p)
	if v1 {
		r := sendRequestToV1(p)
		r.Tenant = card.Tenant
		method, params = "SendStreamingMessage", r
	}
	body, err := c.post(ctx, card, method, params, true)
	if err != nil {
		return nil, err
	}
	return func(yield func(a2a.Event, error) bool) {
		defer body.Close()
		for data, err := range readSSE(body) {
			if err != nil {
				yield(nil, err)
				return
			}
			var resp rpcResponse
			if err := json.Unmarshal(data, &resp); err != nil {
				yield(nil, &InvokeError{C: CodeSubmitFailed, Msg: "stream event is not JSON-RPC", Err: err})
				return
			}
			if resp.Error != nil {
				yield(nil, rpcFailure(method, resp.Error))
				return
			}
			ev, err := decodeResult(resp.Result, v1)
			if err != nil {
				yield(nil, &InvokeError{C: CodeSubmitFailed, Msg: "stream event: " + err.Error(), Err: err})
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}, nil
}

// post sends one JSON-RPC request and returns the body of a successful
// answer: JSON, or for streams an event stream (a JSON answer to a stream
// request is read as a JSON-RPC error).
func (c *Client) post(ctx context.Context, card *RemoteCard, method string, params any, stream bool) (io.ReadCloser, error) {
	payload, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": uuid.NewString(), "method": method, "params": params})
	if err != nil {
		return nil, &InvokeError{C: CodeSubmitFailed, Msg: "Submit failed: " + err.Error(), Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, card.Endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, &InvokeError{C: CodeSubmitFailed, Msg: "Submit failed: " + err.Error(), Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set(VersionHeader, card.ProtocolVersion)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &InvokeError{C: CodeSubmitFailed, Msg: "Submit failed: " + err.Error(), Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		ie := &InvokeError{C: CodeSubmitFailed, Status: resp.StatusCode, Msg: fmt.Sprintf("Submit failed: HTTP %d", resp.StatusCode)}
		var r rpcResponse
		if json.Unmarshal(raw, &r) == nil && r.Error != nil {
			ie.RPCCode = r.Error.Code
			ie.Msg += ": " + r.Error.Message
		}
		return nil, ie
	}
	if stream && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxSSEEvent))
		resp.Body.Close()
		var r rpcResponse
		if json.Unmarshal(raw, &r) == nil && r.Error != nil {
			return nil, rpcFailure(method, r.Error)
		}
		return nil, &InvokeError{C: CodeSubmitFailed, Msg: "Submit failed: the answer to " + method + " is not an event stream"}
	}
	return resp.Body, nil
}

// decodeResult reads a send result or stream event of either version.
func decodeResult(raw json.RawMessage, v1 bool) (a2a.Event, error) {
	if v1 {
		var sr v1StreamResponse
		if err := json.Unmarshal(raw, &sr); err != nil {
			return nil, err
		}
		return sr.toA2A()
	}
	return decodeEvent03(raw)
}

// decodeEvent03 reads a v0.3 event by its kind, or by its shape when a
// server leaves kind out.
func decodeEvent03(raw json.RawMessage) (a2a.Event, error) {
	var probe struct {
		Kind     string          `json:"kind"`
		Status   json.RawMessage `json:"status"`
		Role     string          `json:"role"`
		Artifact json.RawMessage `json:"artifact"`
		TaskID   string          `json:"taskId"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, err
	}
	if probe.Kind == "" {
		var kind string
		switch {
		case probe.Artifact != nil:
			kind = "artifact-update"
		case probe.Status != nil && probe.TaskID != "":
			kind = "status-update"
		case probe.Status != nil:
			kind = "task"
		case probe.Role != "":
			kind = "message"
		default:
			return nil, errors.New("result is neither a task, a message nor an update")
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		m["kind"], _ = json.Marshal(kind)
		raw, _ = json.Marshal(m)
	}
	return a2a.UnmarshalEventJSON(raw)
}

func decodeTask(raw json.RawMessage, v1 bool) (*a2a.Task, error) {
	if v1 {
		var t v1Task
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, err
		}
		return t.toA2A()
	}
	var t a2a.Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
