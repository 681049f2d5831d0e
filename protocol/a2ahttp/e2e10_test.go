package a2ahttp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
)

// v1.0 wire shapes, decoded loosely.

type part10 struct {
	Text      *string        `json:"text,omitempty"`
	Raw       string         `json:"raw,omitempty"`
	URL       string         `json:"url,omitempty"`
	Data      any            `json:"data,omitempty"`
	Filename  string         `json:"filename,omitempty"`
	MediaType string         `json:"mediaType,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type msg10 struct {
	MessageID string         `json:"messageId"`
	Role      string         `json:"role"`
	Parts     []part10       `json:"parts"`
	TaskID    string         `json:"taskId,omitempty"`
	ContextID string         `json:"contextId,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type task10 struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string `json:"state"`
		Message *msg10 `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		ArtifactID string   `json:"artifactId"`
		Name       string   `json:"name"`
		Parts      []part10 `json:"parts"`
	} `json:"artifacts"`
	History  []msg10        `json:"history"`
	Metadata map[string]any `json:"metadata"`
}

type stream10 struct {
	Task           *task10 `json:"task"`
	Message        *msg10  `json:"message"`
	StatusUpdate   *task10 `json:"statusUpdate"`
	ArtifactUpdate *struct {
		Artifact struct{ Name string } `json:"artifact"`
	} `json:"artifactUpdate"`
}

func ptr[T any](v T) *T { return &v }

func user10(parts ...part10) msg10 {
	msgN++
	return msg10{MessageID: fmt.Sprintf("v1m%d", msgN), Role: "ROLE_USER", Parts: parts}
}

func text10(s string) part10 { return part10{Text: ptr(s)} }

func send10(m msg10, returnImmediately bool) map[string]any {
	p := map[string]any{"message": m}
	if returnImmediately {
		p["configuration"] = map[string]any{"returnImmediately": true}
	}
	return p
}

func statusText10(t *task10) string {
	if t.Status.Message == nil || len(t.Status.Message.Parts) == 0 || t.Status.Message.Parts[0].Text == nil {
		return ""
	}
	return *t.Status.Message.Parts[0].Text
}

func v1(e *env, agent string) call {
	return call{url: e.srv.URL + "/a2a/" + agent + "/", version: "1.0"}
}

func TestV10SendTaskAndMessage(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, nil)
	var res stream10
	v1(e, "echo").ok(t, "SendMessage", send10(user10(text10("hi")), false), &res)
	if res.Task == nil || res.Task.Status.State != "TASK_STATE_COMPLETED" || statusText10(res.Task) != "echo: hi" {
		t.Fatalf("SendMessage = %+v", res)
	}
	if res.Task.History[0].Role != "ROLE_USER" {
		t.Fatalf("history %+v", res.Task.History)
	}
	var got task10
	v1(e, "echo").ok(t, "GetTask", map[string]any{"id": res.Task.ID}, &got)
	if got.Status.State != "TASK_STATE_COMPLETED" || len(got.Artifacts) != 1 {
		t.Fatalf("GetTask = %+v", got)
	}
	var direct stream10
	v1(e, "direct").ok(t, "SendMessage", send10(user10(text10("hi")), false), &direct)
	if direct.Message == nil || direct.Message.Role != "ROLE_AGENT" || *direct.Message.Parts[0].Text != "hello from direct" {
		t.Fatalf("direct = %+v", direct)
	}
}

func TestV10StreamOrder(t *testing.T) {
	e := newEnv(t, nil)
	evs, rerr := v1(e, "echo").stream(t, "SendStreamingMessage", send10(user10(text10("hi")), false))
	if rerr != nil {
		t.Fatalf("stream: %+v", rerr)
	}
	var kinds []string
	for _, raw := range evs {
		var ev stream10
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Task != nil:
			kinds = append(kinds, "task:"+ev.Task.Status.State)
		case ev.StatusUpdate != nil:
			kinds = append(kinds, "status:"+ev.StatusUpdate.Status.State)
		case ev.ArtifactUpdate != nil:
			kinds = append(kinds, "artifact:"+ev.ArtifactUpdate.Artifact.Name)
		case ev.Message != nil:
			kinds = append(kinds, "message")
		}
	}
	want := "task:TASK_STATE_SUBMITTED status:TASK_STATE_WORKING artifact:response status:TASK_STATE_COMPLETED"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestV10ReturnImmediatelyThenPoll(t *testing.T) {
	e := newEnv(t, nil)
	c := v1(e, "slow")
	var res stream10
	c.ok(t, "SendMessage", send10(user10(text10("x")), true), &res)
	if res.Task == nil || (res.Task.Status.State != "TASK_STATE_SUBMITTED" && res.Task.Status.State != "TASK_STATE_WORKING") {
		t.Fatalf("returnImmediately = %+v", res)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		var got task10
		c.ok(t, "GetTask", map[string]any{"id": res.Task.ID}, &got)
		if got.Status.State != "TASK_STATE_COMPLETED" {
			return fmt.Errorf("state %s", got.Status.State)
		}
		return nil
	})
}

func TestV10CancelAndErrors(t *testing.T) {
	e := newEnv(t, nil)
	c := v1(e, "wait")
	var res stream10
	c.ok(t, "SendMessage", send10(user10(text10("x")), true), &res)
	var canceled task10
	c.ok(t, "CancelTask", map[string]any{"id": res.Task.ID}, &canceled)
	if canceled.Status.State != "TASK_STATE_CANCELED" {
		t.Fatalf("cancel = %+v", canceled)
	}
	var done stream10
	v1(e, "echo").ok(t, "SendMessage", send10(user10(text10("x")), false), &done)
	re := v1(e, "echo").fails(t, "CancelTask", map[string]any{"id": done.Task.ID}, -32002)
	if !strings.Contains(string(re.Data), "TASK_NOT_CANCELABLE") || !strings.Contains(string(re.Data), "google.rpc.ErrorInfo") {
		t.Fatalf("error data %s", re.Data)
	}
	c.fails(t, "GetTask", map[string]any{"id": "nope"}, -32001)
	c.fails(t, "GetTask", map[string]any{}, -32602)
	c.fails(t, "message/send", map[string]any{}, -32601)
	c.fails(t, "GetExtendedAgentCard", map[string]any{}, -32004)
	// Subscribing to a terminal task is UnsupportedOperation on v1.0.
	_, rerr := v1(e, "echo").stream(t, "SubscribeToTask", map[string]any{"id": done.Task.ID})
	if rerr == nil || rerr.Code != -32004 {
		t.Fatalf("subscribe terminal: %+v", rerr)
	}
}

func TestV10MultiTurnFilesAndData(t *testing.T) {
	e := newEnv(t, nil)
	c := v1(e, "ask")
	var res stream10
	c.ok(t, "SendMessage", send10(user10(text10("hi")), false), &res)
	if res.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("first turn %+v", res.Task)
	}
	m := user10(text10("Grace"))
	m.TaskID, m.ContextID = res.Task.ID, res.Task.ContextID
	var done stream10
	c.ok(t, "SendMessage", send10(m, false), &done)
	if done.Task.Status.State != "TASK_STATE_COMPLETED" || statusText10(done.Task) != "Hello, Grace!" {
		t.Fatalf("second turn %+v", done.Task)
	}

	raw := part10{Raw: "aGVsbG8=", Filename: "a.txt", MediaType: "text/plain"}
	url := part10{URL: "https://example.com/x.png", MediaType: "image/png"}
	data := part10{Data: map[string]any{"k": "v"}}
	list := part10{Data: []any{1.0, 2.0}} // not an object: wrapped for v0.3, unwrapped again here
	var echoed stream10
	v1(e, "echo").ok(t, "SendMessage", send10(user10(text10("p"), raw, url, data, list), false), &echoed)
	ps := echoed.Task.Artifacts[0].Parts
	if len(ps) != 5 || ps[1].Raw != "aGVsbG8=" || ps[1].Filename != "a.txt" || ps[2].URL != "https://example.com/x.png" ||
		fmt.Sprint(ps[3].Data) != "map[k:v]" || fmt.Sprint(ps[4].Data) != "[1 2]" || ps[4].Metadata != nil {
		t.Fatalf("parts %+v", ps)
	}
}

func TestV10PushConfigAndListTasks(t *testing.T) {
	e := newEnv(t, nil)
	c := v1(e, "echo")
	var res stream10
	c.ok(t, "SendMessage", send10(user10(text10("x")), false), &res)
	var cfg struct {
		ID, TaskID, URL string
	}
	c.ok(t, "CreateTaskPushNotificationConfig", map[string]any{"taskId": res.Task.ID, "url": "http://127.0.0.1:9/h", "token": "tok"}, &cfg)
	if cfg.ID == "" || cfg.TaskID != res.Task.ID {
		t.Fatalf("create = %+v", cfg)
	}
	c.ok(t, "GetTaskPushNotificationConfig", map[string]any{"taskId": res.Task.ID, "id": cfg.ID}, &cfg)
	var list struct {
		Configs       []json.RawMessage `json:"configs"`
		NextPageToken *string           `json:"nextPageToken"`
	}
	c.ok(t, "ListTaskPushNotificationConfigs", map[string]any{"taskId": res.Task.ID}, &list)
	if len(list.Configs) != 1 || list.NextPageToken == nil {
		t.Fatalf("list = %+v", list)
	}
	r := c.rpc(t, "DeleteTaskPushNotificationConfig", map[string]any{"taskId": res.Task.ID, "id": cfg.ID})
	if r.Error != nil || string(r.Result) != "null" {
		t.Fatalf("delete = %+v %s", r.Error, r.Result)
	}
	c.fails(t, "GetTaskPushNotificationConfig", map[string]any{"taskId": res.Task.ID, "id": cfg.ID}, -32001)

	var tasks struct {
		Tasks     []task10 `json:"tasks"`
		TotalSize int      `json:"totalSize"`
	}
	c.ok(t, "ListTasks", map[string]any{"status": "TASK_STATE_COMPLETED"}, &tasks)
	if tasks.TotalSize != 1 || tasks.Tasks[0].ID != res.Task.ID || tasks.Tasks[0].Artifacts != nil {
		t.Fatalf("ListTasks = %+v", tasks)
	}
}

func TestVersionNegotiation(t *testing.T) {
	e := newEnv(t, nil)
	for _, v := range []string{"2.0", "0.2", "banana"} {
		c := call{url: e.srv.URL + "/a2a/echo/", version: v}
		re := c.fails(t, "GetTask", map[string]any{"id": "x"}, -32009)
		if !strings.Contains(string(re.Data), "VERSION_NOT_SUPPORTED") {
			t.Fatalf("%s: data %s", v, re.Data)
		}
	}
	// 0.3.0 and 1.0.0 spellings work.
	call{url: e.srv.URL + "/a2a/echo/", version: "0.3.0"}.fails(t, "tasks/get", map[string]any{"id": "x"}, -32001)
	call{url: e.srv.URL + "/a2a/echo/", version: "1.0.0"}.fails(t, "GetTask", map[string]any{"id": "x"}, -32001)
	// A task made over one version is visible over the other.
	var task task03
	call{url: e.srv.URL + "/a2a/echo/"}.ok(t, "message/send", send03(user03(text03("x")), true), &task)
	var got task10
	v1(e, "echo").ok(t, "GetTask", map[string]any{"id": task.ID}, &got)
	if got.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("cross-version get %+v", got)
	}
}
