package a2ahttp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// The A2A v1.0 JSON data model (ProtoJSON of the spec's a2a.proto, as
// @a2a-js/sdk 1.x speaks it), and conversions to and from a2a-go's v0.3
// model, which is what the executor, the task store and a2a-go work on.

// v1Enum is a proto enum on the wire: its name, or (leniently) its number.
type v1Enum string

func (e *v1Enum) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*e = v1Enum(s)
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		*e = ""
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("enum: %w", err)
	}
	*e = v1Enum("#" + strconv.Itoa(n))
	return nil
}

var v1States = []struct {
	name  string
	num   string
	state a2a.TaskState
}{
	{"TASK_STATE_SUBMITTED", "#1", a2a.TaskStateSubmitted},
	{"TASK_STATE_WORKING", "#2", a2a.TaskStateWorking},
	{"TASK_STATE_COMPLETED", "#3", a2a.TaskStateCompleted},
	{"TASK_STATE_FAILED", "#4", a2a.TaskStateFailed},
	{"TASK_STATE_CANCELED", "#5", a2a.TaskStateCanceled},
	{"TASK_STATE_INPUT_REQUIRED", "#6", a2a.TaskStateInputRequired},
	{"TASK_STATE_REJECTED", "#7", a2a.TaskStateRejected},
	{"TASK_STATE_AUTH_REQUIRED", "#8", a2a.TaskStateAuthRequired},
}

func stateToV1(s a2a.TaskState) v1Enum {
	for _, x := range v1States {
		if x.state == s {
			return v1Enum(x.name)
		}
	}
	return "TASK_STATE_UNSPECIFIED"
}

func stateFromV1(e v1Enum) a2a.TaskState {
	for _, x := range v1States {
		if string(e) == x.name || string(e) == x.num {
			return x.state
		}
	}
	if st, ok := normalizeState(string(e)); ok && e != "" {
		return a2a.TaskState(st)
	}
	switch e {
	case "submitted", "working":
		return a2a.TaskState(e)
	}
	return a2a.TaskStateUnknown
}

func roleToV1(r a2a.MessageRole) v1Enum {
	switch r {
	case a2a.MessageRoleUser:
		return "ROLE_USER"
	case a2a.MessageRoleAgent:
		return "ROLE_AGENT"
	}
	return "ROLE_UNSPECIFIED"
}

func roleFromV1(e v1Enum) (a2a.MessageRole, error) {
	switch e {
	case "ROLE_USER", "#1", "user":
		return a2a.MessageRoleUser, nil
	case "ROLE_AGENT", "#2", "agent":
		return a2a.MessageRoleAgent, nil
	}
	return "", fmt.Errorf("unknown role %q", string(e))
}

type v1Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       *string         `json:"raw,omitempty"`
	URL       *string         `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

type v1Message struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             v1Enum         `json:"role"`
	Parts            []v1Part       `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

type v1TaskStatus struct {
	State     v1Enum     `json:"state"`
	Message   *v1Message `json:"message,omitempty"`
	Timestamp string     `json:"timestamp,omitempty"`
}

type v1Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []v1Part       `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

type v1Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    v1TaskStatus   `json:"status"`
	Artifacts []v1Artifact   `json:"artifacts,omitempty"`
	History   []v1Message    `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type v1StatusUpdate struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    v1TaskStatus   `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type v1ArtifactUpdate struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  v1Artifact     `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// v1StreamResponse is one event of a stream, and (task or message only) the
// result of SendMessage.
type v1StreamResponse struct {
	Task           *v1Task           `json:"task,omitempty"`
	Message        *v1Message        `json:"message,omitempty"`
	StatusUpdate   *v1StatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *v1ArtifactUpdate `json:"artifactUpdate,omitempty"`
}

type v1AuthInfo struct {
	Scheme      string `json:"scheme,omitempty"`
	Credentials string `json:"credentials,omitempty"`
}

type v1PushConfig struct {
	Tenant         string      `json:"tenant,omitempty"`
	ID             string      `json:"id,omitempty"`
	TaskID         string      `json:"taskId,omitempty"`
	URL            string      `json:"url,omitempty"`
	Token          string      `json:"token,omitempty"`
	Authentication *v1AuthInfo `json:"authentication,omitempty"`
}

type v1SendConfig struct {
	AcceptedOutputModes        []string      `json:"acceptedOutputModes,omitempty"`
	TaskPushNotificationConfig *v1PushConfig `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength              *int          `json:"historyLength,omitempty"`
	ReturnImmediately          bool          `json:"returnImmediately,omitempty"`
}

type v1SendRequest struct {
	Tenant        string         `json:"tenant,omitempty"`
	Message       *v1Message     `json:"message"`
	Configuration *v1SendConfig  `json:"configuration,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

type v1TaskRequest struct { // GetTask, CancelTask, SubscribeToTask
	Tenant        string         `json:"tenant,omitempty"`
	ID            string         `json:"id"`
	HistoryLength *int           `json:"historyLength,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

type v1PushRequest struct { // Get/Delete/ListTaskPushNotificationConfig(s)
	Tenant    string `json:"tenant,omitempty"`
	TaskID    string `json:"taskId"`
	ID        string `json:"id,omitempty"`
	PageSize  int    `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
}

type v1ListPushResponse struct {
	Configs       []v1PushConfig `json:"configs"`
	NextPageToken string         `json:"nextPageToken"`
}

type v1ListTasksRequest struct {
	Tenant           string `json:"tenant,omitempty"`
	ContextID        string `json:"contextId,omitempty"`
	Status           v1Enum `json:"status,omitempty"`
	PageSize         *int   `json:"pageSize,omitempty"`
	PageToken        string `json:"pageToken,omitempty"`
	HistoryLength    *int   `json:"historyLength,omitempty"`
	IncludeArtifacts bool   `json:"includeArtifacts,omitempty"`
}

type v1ListTasksResponse struct {
	Tasks         []v1Task `json:"tasks"`
	NextPageToken string   `json:"nextPageToken"`
	PageSize      int      `json:"pageSize"`
	TotalSize     int      `json:"totalSize"`
}

// Conversions from v1.0 into the v0.3 model.

func (p *v1Part) toPart() (Part, error) {
	data := p.Data
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		data = nil
	}
	switch {
	case p.Text != nil:
		return Part{Kind: "text", Text: *p.Text, Metadata: p.Metadata}, nil
	case p.Raw != nil:
		if *p.Raw == "" {
			return Part{}, errors.New("part raw is empty")
		}
		if _, err := base64.StdEncoding.DecodeString(*p.Raw); err != nil {
			return Part{}, fmt.Errorf("part raw is not base64: %w", err)
		}
		return Part{Kind: "file", Bytes: *p.Raw, Name: p.Filename, MimeType: p.MediaType, Metadata: p.Metadata}, nil
	case p.URL != nil:
		if *p.URL == "" {
			return Part{}, errors.New("part url is empty")
		}
		return Part{Kind: "file", URI: *p.URL, Name: p.Filename, MimeType: p.MediaType, Metadata: p.Metadata}, nil
	case data != nil:
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return Part{}, fmt.Errorf("part data: %w", err)
		}
		return Part{Kind: "data", Data: v, Metadata: p.Metadata}, nil
	}
	return Part{}, errors.New("part has no content (text, raw, url or data)")
}

func partToV1(p Part) v1Part {
	out := v1Part{Metadata: p.Metadata}
	switch p.Kind {
	case "file":
		out.Filename, out.MediaType = p.Name, p.MimeType
		if p.Bytes != "" {
			b := p.Bytes
			out.Raw = &b
		} else {
			u := p.URI
			out.URL = &u
		}
	case "data":
		d, err := json.Marshal(p.Data)
		if err != nil || bytes.Equal(d, []byte("null")) {
			d = []byte("{}")
		}
		out.Data = d
	default:
		t := p.Text
		out.Text = &t
	}
	return out
}

func (m *v1Message) toA2A() (*a2a.Message, error) {
	role, err := roleFromV1(m.Role)
	if err != nil {
		return nil, err
	}
	parts := make(a2a.ContentParts, 0, len(m.Parts))
	for i := range m.Parts {
		p, err := m.Parts[i].toPart()
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		parts = append(parts, p.toA2A())
	}
	out := &a2a.Message{
		ID:         m.MessageID,
		ContextID:  m.ContextID,
		TaskID:     a2a.TaskID(m.TaskID),
		Role:       role,
		Parts:      parts,
		Metadata:   m.Metadata,
		Extensions: m.Extensions,
	}
	for _, id := range m.ReferenceTaskIDs {
		out.ReferenceTasks = append(out.ReferenceTasks, a2a.TaskID(id))
	}
	return out, nil
}

func parseTimestamp(s string) *time.Time {
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return &t
}

func (s *v1TaskStatus) toA2A() (a2a.TaskStatus, error) {
	out := a2a.TaskStatus{State: stateFromV1(s.State), Timestamp: parseTimestamp(s.Timestamp)}
	if s.Message != nil {
		m, err := s.Message.toA2A()
		if err != nil {
			return out, fmt.Errorf("status.message: %w", err)
		}
		out.Message = m
	}
	return out, nil
}

func (a *v1Artifact) toA2A() (*a2a.Artifact, error) {
	out := &a2a.Artifact{
		ID:          a2a.ArtifactID(a.ArtifactID),
		Name:        a.Name,
		Description: a.Description,
		Metadata:    a.Metadata,
		Extensions:  a.Extensions,
		Parts:       make(a2a.ContentParts, 0, len(a.Parts)),
	}
	for i := range a.Parts {
		p, err := a.Parts[i].toPart()
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, p.toA2A())
	}
	return out, nil
}

func (t *v1Task) toA2A() (*a2a.Task, error) {
	st, err := t.Status.toA2A()
	if err != nil {
		return nil, err
	}
	out := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: st, Metadata: t.Metadata}
	for i := range t.Artifacts {
		a, err := t.Artifacts[i].toA2A()
		if err != nil {
			return nil, fmt.Errorf("artifacts[%d]: %w", i, err)
		}
		out.Artifacts = append(out.Artifacts, a)
	}
	for i := range t.History {
		m, err := t.History[i].toA2A()
		if err != nil {
			return nil, fmt.Errorf("history[%d]: %w", i, err)
		}
		out.History = append(out.History, m)
	}
	return out, nil
}

// toA2A converts one stream event; a status update is final when its state
// ends the turn (terminal, input-required or auth-required).
func (r *v1StreamResponse) toA2A() (a2a.Event, error) {
	switch {
	case r.Task != nil:
		return r.Task.toA2A()
	case r.Message != nil:
		return r.Message.toA2A()
	case r.StatusUpdate != nil:
		st, err := r.StatusUpdate.Status.toA2A()
		if err != nil {
			return nil, err
		}
		return &a2a.TaskStatusUpdateEvent{
			TaskID: a2a.TaskID(r.StatusUpdate.TaskID), ContextID: r.StatusUpdate.ContextID,
			Status: st, Metadata: r.StatusUpdate.Metadata, Final: endsTurn(st.State),
		}, nil
	case r.ArtifactUpdate != nil:
		a, err := r.ArtifactUpdate.Artifact.toA2A()
		if err != nil {
			return nil, err
		}
		return &a2a.TaskArtifactUpdateEvent{
			TaskID: a2a.TaskID(r.ArtifactUpdate.TaskID), ContextID: r.ArtifactUpdate.ContextID,
			Artifact: a, Append: r.ArtifactUpdate.Append, LastChunk: r.ArtifactUpdate.LastChunk,
			Metadata: r.ArtifactUpdate.Metadata,
		}, nil
	}
	return nil, errors.New("empty stream response")
}

// endsTurn reports whether a task in state s waits for nothing more from
// the agent in this turn.
func endsTurn(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

func (r *v1SendRequest) toA2A() (*a2a.MessageSendParams, error) {
	if r.Message == nil {
		return nil, errors.New("message is required")
	}
	m, err := r.Message.toA2A()
	if err != nil {
		return nil, fmt.Errorf("message: %w", err)
	}
	out := &a2a.MessageSendParams{Message: m, Metadata: r.Metadata}
	if c := r.Configuration; c != nil {
		blocking := !c.ReturnImmediately
		out.Config = &a2a.MessageSendConfig{
			AcceptedOutputModes: c.AcceptedOutputModes,
			Blocking:            &blocking,
			HistoryLength:       c.HistoryLength,
		}
		if c.TaskPushNotificationConfig != nil {
			pc := c.TaskPushNotificationConfig.toA2A().Config
			out.Config.PushConfig = &pc
		}
	}
	return out, nil
}

func (c *v1PushConfig) toA2A() *a2a.TaskPushConfig {
	out := &a2a.TaskPushConfig{
		TaskID: a2a.TaskID(c.TaskID),
		Config: a2a.PushConfig{ID: c.ID, URL: c.URL, Token: c.Token},
	}
	if c.Authentication != nil && c.Authentication.Scheme != "" {
		out.Config.Auth = &a2a.PushAuthInfo{Schemes: []string{c.Authentication.Scheme}, Credentials: c.Authentication.Credentials}
	}
	return out
}

// Conversions from the v0.3 model to v1.0.

func messageToV1(m *a2a.Message) *v1Message {
	if m == nil {
		return nil
	}
	out := &v1Message{
		MessageID: m.ID, ContextID: m.ContextID, TaskID: string(m.TaskID),
		Role: roleToV1(m.Role), Metadata: m.Metadata, Extensions: m.Extensions,
		Parts: make([]v1Part, 0, len(m.Parts)),
	}
	for _, p := range partsFromA2A(m.Parts) {
		out.Parts = append(out.Parts, partToV1(p))
	}
	for _, id := range m.ReferenceTasks {
		out.ReferenceTaskIDs = append(out.ReferenceTaskIDs, string(id))
	}
	return out
}

func statusToV1(s a2a.TaskStatus) v1TaskStatus {
	out := v1TaskStatus{State: stateToV1(s.State), Message: messageToV1(s.Message)}
	if s.Timestamp != nil {
		out.Timestamp = s.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return out
}

func artifactToV1(a *a2a.Artifact) v1Artifact {
	out := v1Artifact{
		ArtifactID: string(a.ID), Name: a.Name, Description: a.Description,
		Metadata: a.Metadata, Extensions: a.Extensions, Parts: make([]v1Part, 0, len(a.Parts)),
	}
	for _, p := range partsFromA2A(a.Parts) {
		out.Parts = append(out.Parts, partToV1(p))
	}
	return out
}

func taskToV1(t *a2a.Task) *v1Task {
	out := &v1Task{ID: string(t.ID), ContextID: t.ContextID, Status: statusToV1(t.Status), Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		if a != nil {
			out.Artifacts = append(out.Artifacts, artifactToV1(a))
		}
	}
	for _, m := range t.History {
		if m != nil {
			out.History = append(out.History, *messageToV1(m))
		}
	}
	return out
}

func eventToV1(ev a2a.Event) (*v1StreamResponse, error) {
	switch v := ev.(type) {
	case *a2a.Task:
		return &v1StreamResponse{Task: taskToV1(v)}, nil
	case *a2a.Message:
		return &v1StreamResponse{Message: messageToV1(v)}, nil
	case *a2a.TaskStatusUpdateEvent:
		return &v1StreamResponse{StatusUpdate: &v1StatusUpdate{
			TaskID: string(v.TaskID), ContextID: v.ContextID, Status: statusToV1(v.Status), Metadata: v.Metadata,
		}}, nil
	case *a2a.TaskArtifactUpdateEvent:
		if v.Artifact == nil {
			return nil, errors.New("artifact update without artifact")
		}
		return &v1StreamResponse{ArtifactUpdate: &v1ArtifactUpdate{
			TaskID: string(v.TaskID), ContextID: v.ContextID, Artifact: artifactToV1(v.Artifact),
			Append: v.Append, LastChunk: v.LastChunk, Metadata: v.Metadata,
		}}, nil
	}
	return nil, fmt.Errorf("unknown event %T", ev)
}

func pushConfigToV1(c *a2a.TaskPushConfig) v1PushConfig {
	out := v1PushConfig{ID: c.Config.ID, TaskID: string(c.TaskID), URL: c.Config.URL, Token: c.Config.Token}
	if a := c.Config.Auth; a != nil && len(a.Schemes) > 0 {
		out.Authentication = &v1AuthInfo{Scheme: a.Schemes[0], Credentials: a.Credentials}
	}
	return out
}

func sendRequestToV1(p *a2a.MessageSendParams) *v1SendRequest {
	out := &v1SendRequest{Message: messageToV1(p.Message), Metadata: p.Metadata}
	if c := p.Config; c != nil {
		out.Configuration = &v1SendConfig{
			AcceptedOutputModes: c.AcceptedOutputModes,
			HistoryLength:       c.HistoryLength,
			ReturnImmediately:   c.Blocking != nil && !*c.Blocking,
		}
		if c.PushConfig != nil {
			pc := pushConfigToV1(&a2a.TaskPushConfig{Config: *c.PushConfig})
			out.Configuration.TaskPushNotificationConfig = &pc
		}
	}
	return out
}
