package a2ahttp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// v0.3 wire shapes, decoded loosely.

type part03 struct {
	Kind     string         `json:"kind"`
	Text     string         `json:"text,omitempty"`
	File     map[string]any `json:"file,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

type msg03 struct {
	Kind      string         `json:"kind"`
	MessageID string         `json:"messageId"`
	Role      string         `json:"role"`
	Parts     []part03       `json:"parts"`
	TaskID    string         `json:"taskId,omitempty"`
	ContextID string         `json:"contextId,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type task03 struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string `json:"state"`
		Message *msg03 `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		Name  string   `json:"name"`
		Parts []part03 `json:"parts"`
	} `json:"artifacts"`
	History  []msg03        `json:"history"`
	Metadata map[string]any `json:"metadata"`
	// events
	TaskID string `json:"taskId"`
	Final  bool   `json:"final"`
}

func text03(s string) part03 { return part03{Kind: "text", Text: s} }

var msgN int

func user03(parts ...part03) msg03 {
	msgN++
	return msg03{Kind: "message", MessageID: fmt.Sprintf("m%d", msgN), Role: "user", Parts: parts}
}

func send03(m msg03, blocking bool) map[string]any {
	p := map[string]any{"message": m}
	if !blocking {
		p["configuration"] = map[string]any{"blocking": false}
	}
	return p
}

func statusText(t *task03) string {
	if t.Status.Message == nil || len(t.Status.Message.Parts) == 0 {
		return ""
	}
	return t.Status.Message.Parts[0].Text
}

func TestV03SendCompletesTask(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/echo/"}
	var task task03
	c.ok(t, "message/send", send03(user03(text03("hi")), true), &task)
	if task.Kind != "task" || task.Status.State != "completed" || statusText(&task) != "echo: hi" {
		t.Fatalf("task = %+v", task)
	}
	if len(task.Artifacts) != 1 || task.Artifacts[0].Name != "response" || task.Artifacts[0].Parts[0].Text != "echo: hi" {
		t.Fatalf("artifacts = %+v", task.Artifacts)
	}
	var got task03
	c.ok(t, "tasks/get", map[string]any{"id": task.ID}, &got)
	if got.Status.State != "completed" || len(got.History) != 1 {
		t.Fatalf("tasks/get = %+v", got)
	}
	var trimmed task03
	c.ok(t, "tasks/get", map[string]any{"id": task.ID, "historyLength": 0}, &trimmed)
	if len(trimmed.History) != 0 {
		t.Fatalf("historyLength 0 kept %d messages", len(trimmed.History))
	}
}

func TestV03SendReturnsMessage(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/direct/"}
	var m msg03
	c.ok(t, "message/send", send03(user03(text03("hello?")), true), &m)
	if m.Kind != "message" || m.Role != "agent" || m.Parts[0].Text != "hello from direct" || m.TaskID != "" {
		t.Fatalf("message = %+v", m)
	}
}

func TestV03StreamOrder(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/echo/"}
	evs, rerr := c.stream(t, "message/stream", send03(user03(text03("hi")), true))
	if rerr != nil {
		t.Fatalf("stream error %+v", rerr)
	}
	var kinds []string
	for _, raw := range evs {
		var ev task03
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		k := ev.Kind
		if ev.Status.State != "" {
			k += ":" + ev.Status.State
		}
		kinds = append(kinds, k)
	}
	want := "task:submitted status-update:working artifact-update status-update:completed"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	var last task03
	_ = json.Unmarshal(evs[len(evs)-1], &last)
	if !last.Final {
		t.Fatal("last event is not final")
	}
}

func TestV03NonBlockingThenPoll(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/slow/"}
	var task task03
	c.ok(t, "message/send", send03(user03(text03("x")), false), &task)
	if task.Status.State != "submitted" && task.Status.State != "working" {
		t.Fatalf("non-blocking send returned state %q", task.Status.State)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		var got task03
		c.ok(t, "tasks/get", map[string]any{"id": task.ID}, &got)
		if got.Status.State != "completed" {
			return fmt.Errorf("state %s", got.Status.State)
		}
		if statusText(&got) != "done: x" {
			return fmt.Errorf("text %q", statusText(&got))
		}
		return nil
	})
}

func TestV03Cancel(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/wait/"}
	var task task03
	c.ok(t, "message/send", send03(user03(text03("x")), false), &task)
	var canceled task03
	c.ok(t, "tasks/cancel", map[string]any{"id": task.ID}, &canceled)
	if canceled.Status.State != "canceled" {
		t.Fatalf("cancel returned %+v", canceled)
	}
	var got task03
	c.ok(t, "tasks/get", map[string]any{"id": task.ID}, &got)
	if got.Status.State != "canceled" {
		t.Fatalf("after cancel: %s", got.Status.State)
	}
	// Canceling again is idempotent.
	c.ok(t, "tasks/cancel", map[string]any{"id": task.ID}, &canceled)

	// A completed task cannot be canceled.
	echo := call{url: e.srv.URL + "/a2a/echo/"}
	var done task03
	echo.ok(t, "message/send", send03(user03(text03("x")), true), &done)
	echo.fails(t, "tasks/cancel", map[string]any{"id": done.ID}, -32002)
}

func TestV03UnknownTask(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/echo/"}
	c.fails(t, "tasks/get", map[string]any{"id": "no-such-task"}, -32001)
	c.fails(t, "tasks/cancel", map[string]any{"id": "no-such-task"}, -32001)
	_, rerr := c.stream(t, "tasks/resubscribe", map[string]any{"id": "no-such-task"})
	if rerr == nil || rerr.Code != -32001 {
		t.Fatalf("resubscribe unknown: %+v", rerr)
	}
	// A task of one agent is not visible at another agent's endpoint.
	var task task03
	c.ok(t, "message/send", send03(user03(text03("x")), true), &task)
	other := call{url: e.srv.URL + "/a2a/slow/"}
	other.fails(t, "tasks/get", map[string]any{"id": task.ID}, -32001)
}

func TestV03MultiTurn(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/ask/"}
	var task task03
	c.ok(t, "message/send", send03(user03(text03("hi")), true), &task)
	if task.Status.State != "input-required" || statusText(&task) != "What is your name?" {
		t.Fatalf("first turn: %+v", task)
	}
	m := user03(text03("Ada"))
	m.TaskID, m.ContextID = task.ID, task.ContextID
	var done task03
	c.ok(t, "message/send", send03(m, true), &done)
	if done.ID != task.ID || done.Status.State != "completed" || statusText(&done) != "Hello, Ada!" {
		t.Fatalf("second turn: %+v", done)
	}
	var texts []string
	for _, h := range done.History {
		texts = append(texts, h.Role+":"+h.Parts[0].Text)
	}
	if got := strings.Join(texts, "|"); got != "user:hi|agent:What is your name?|user:Ada" {
		t.Fatalf("history %q", got)
	}
	// A terminal task takes no more messages.
	m2 := user03(text03("again"))
	m2.TaskID = task.ID
	c.fails(t, "message/send", send03(m2, true), -32602)
}

func TestV03FileAndDataParts(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/echo/"}
	file := part03{Kind: "file", File: map[string]any{"name": "a.txt", "mimeType": "text/plain", "bytes": "aGVsbG8="}}
	uri := part03{Kind: "file", File: map[string]any{"uri": "https://example.com/x.png", "mimeType": "image/png"}}
	data := part03{Kind: "data", Data: map[string]any{"n": 1.0, "list": []any{"a"}}}
	var task task03
	c.ok(t, "message/send", send03(user03(text03("parts"), file, uri, data), true), &task)
	ps := task.Artifacts[0].Parts
	if len(ps) != 4 || ps[1].Kind != "file" || ps[1].File["bytes"] != "aGVsbG8=" || ps[1].File["name"] != "a.txt" ||
		ps[2].File["uri"] != "https://example.com/x.png" || ps[3].Kind != "data" || ps[3].Data["n"] != 1.0 {
		t.Fatalf("parts = %+v", ps)
	}
}

func TestV03FailuresBecomeTaskStates(t *testing.T) {
	e := newEnv(t, nil)
	var task task03
	call{url: e.srv.URL + "/a2a/fail/"}.ok(t, "message/send", send03(user03(text03("x")), true), &task)
	if task.Status.State != "failed" || task.Metadata["nova.errorCode"] != "DELIVERY_FAILED" {
		t.Fatalf("fail: %+v", task)
	}
	call{url: e.srv.URL + "/a2a/guarded/"}.ok(t, "message/send", send03(user03(text03("x")), true), &task)
	if task.Status.State != "rejected" || !strings.HasPrefix(statusText(&task), "TIER_VIOLATION") {
		t.Fatalf("guarded: %+v", task)
	}
}

func TestV03Resubscribe(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/slow/"}
	var task task03
	c.ok(t, "message/send", send03(user03(text03("x")), false), &task)
	evs, rerr := c.stream(t, "tasks/resubscribe", map[string]any{"id": task.ID})
	if rerr != nil || len(evs) == 0 {
		t.Fatalf("resubscribe: %v %+v", len(evs), rerr)
	}
	var first, last task03
	_ = json.Unmarshal(evs[0], &first)
	_ = json.Unmarshal(evs[len(evs)-1], &last)
	if first.Kind != "task" || last.Status.State != "completed" {
		t.Fatalf("first %+v last %+v", first, last)
	}
	// On a terminal task: one event, the task.
	evs, rerr = c.stream(t, "tasks/resubscribe", map[string]any{"id": task.ID})
	if rerr != nil || len(evs) != 1 {
		t.Fatalf("resubscribe terminal: %d %+v", len(evs), rerr)
	}
}

func TestV03PushConfigMethods(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/echo/"}
	var task task03
	c.ok(t, "message/send", send03(user03(text03("x")), true), &task)
	hook := "http://127.0.0.1:9/hook"
	var set struct {
		TaskID string `json:"taskId"`
		Config struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"pushNotificationConfig"`
	}
	c.ok(t, "tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"url": hook, "token": "t"}}, &set)
	if set.Config.ID == "" || set.Config.URL != hook || set.TaskID != task.ID {
		t.Fatalf("set = %+v", set)
	}
	var got struct {
		Config struct{ URL string } `json:"pushNotificationConfig"`
	}
	c.ok(t, "tasks/pushNotificationConfig/get", map[string]any{"id": task.ID, "pushNotificationConfigId": set.Config.ID}, &got)
	if got.Config.URL != hook {
		t.Fatalf("get = %+v", got)
	}
	var list []json.RawMessage
	c.ok(t, "tasks/pushNotificationConfig/list", map[string]any{"id": task.ID}, &list)
	if len(list) != 1 {
		t.Fatalf("list = %d", len(list))
	}
	// a2a-go answers delete with an empty body; the gateway answers
	// {"result": null} with a JSON content type.
	r := c.rpc(t, "tasks/pushNotificationConfig/delete", map[string]any{"id": task.ID, "pushNotificationConfigId": set.Config.ID})
	if r.Error != nil || string(r.Result) != "null" {
		t.Fatalf("delete = %+v %s", r.Error, r.Result)
	}
	c.ok(t, "tasks/pushNotificationConfig/list", map[string]any{"id": task.ID}, &list)
	if len(list) != 0 {
		t.Fatalf("list after delete = %d", len(list))
	}
	c.fails(t, "tasks/pushNotificationConfig/get", map[string]any{"id": task.ID, "pushNotificationConfigId": set.Config.ID}, -32001)
	// Unknown task; private address not allowlisted.
	c.fails(t, "tasks/pushNotificationConfig/set", map[string]any{"taskId": "nope", "pushNotificationConfig": map[string]any{"url": hook}}, -32001)
	c.fails(t, "tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"url": "http://10.1.2.3/hook"}}, -32602)
	c.fails(t, "tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"url": "http://169.254.169.254/latest"}}, -32602)
}

// The a2a-go workarounds: bad params get -32602 (a2a-go says -32700), and
// every JSON answer has a Content-Type (checked by call.rpc).
func TestV03BadParams(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/echo/"}
	c.fails(t, "tasks/get", map[string]any{"id": 42}, -32602)
	c.fails(t, "tasks/get", "not an object", -32602)
	c.fails(t, "message/send", map[string]any{"message": map[string]any{"parts": []any{map[string]any{"kind": "nope"}}}}, -32602)
	c.fails(t, "message/send", map[string]any{"message": map[string]any{"role": "user", "parts": []any{}}}, -32602)
	c.fails(t, "tasks/nope", map[string]any{}, -32601)
	// Broken JSON is a parse error.
	resp, err := http.Post(c.url, "application/json", strings.NewReader(`{"jsonrpc":`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), "-32700") || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("parse error: %s %q", raw, resp.Header.Get("Content-Type"))
	}
}

func TestNodeEndpointRoutesByMetadata(t *testing.T) {
	e := newEnv(t, nil)
	c := call{url: e.srv.URL + "/a2a/"}
	m := user03(text03("hi"))
	m.Metadata = map[string]any{"agent": "echo"}
	var task task03
	c.ok(t, "message/send", send03(m, true), &task)
	if statusText(&task) != "echo: hi" {
		t.Fatalf("task %+v", task)
	}
	c.ok(t, "tasks/get", map[string]any{"id": task.ID}, &task)
	c.fails(t, "message/send", send03(user03(text03("hi")), true), -32602)
}

func TestSkillReachesTheAgent(t *testing.T) {
	e := newEnv(t, nil)
	m := user03(text03("q"))
	m.Metadata = map[string]any{"skill": "tools.search"}
	var task task03
	call{url: e.srv.URL + "/a2a/tools/"}.ok(t, "message/send", send03(m, true), &task)
	if statusText(&task) != "skill=tools.search" {
		t.Fatalf("task %+v", task)
	}
}
