package a2ahttp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/protocol/a2ahttp"
)

// restStatus is google.rpc.Status, the REST binding's error body.
type restStatus struct {
	Error struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
		Details []struct {
			Type   string `json:"@type"`
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		} `json:"details"`
	} `json:"error"`
}

func (s restStatus) reason() string {
	for _, d := range s.Error.Details {
		if d.Type == "type.googleapis.com/google.rpc.ErrorInfo" && d.Domain == "a2a-protocol.org" {
			return d.Reason
		}
	}
	return ""
}

type restCall struct {
	base, token, version string // base: the REST interface URL
}

func (c restCall) do(t *testing.T, method, path string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, c.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.version != "" {
		req.Header.Set("A2A-Version", c.version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// ok calls a route that must answer 200 and decodes the body into v.
func (c restCall) ok(t *testing.T, method, path string, body, v any) {
	t.Helper()
	resp, raw := c.do(t, method, path, body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s %s: %d %q %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s %s: %s: %v", method, path, raw, err)
		}
	}
}

// fails calls a route that must fail with status and A2A reason ("" for
// none).
func (c restCall) fails(t *testing.T, method, path string, body any, status int, reason string) restStatus {
	t.Helper()
	resp, raw := c.do(t, method, path, body)
	var st restStatus
	if err := json.Unmarshal(raw, &st); err != nil || resp.StatusCode != status || st.Error.Code != status || st.reason() != reason {
		t.Fatalf("%s %s: got %d %s, want %d %s", method, path, resp.StatusCode, raw, status, reason)
	}
	return st
}

// stream calls a streaming route and returns its events' data.
func (c restCall) stream(t *testing.T, method, path string, body any) (events []stream10, errEvent *restStatus) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, c.base+path, rd)
	req.Header.Set("Accept", "text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %q %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	isErr := false
	for sc.Scan() {
		if sc.Text() == "event: error" {
			isErr = true
			continue
		}
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if isErr {
			var st restStatus
			if err := json.Unmarshal([]byte(line), &st); err != nil {
				t.Fatalf("error event %q: %v", line, err)
			}
			return events, &st
		}
		var ev stream10
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return events, nil
}

func rest(e *env, agent string) restCall {
	if agent == "" {
		return restCall{base: e.srv.URL + "/v1"}
	}
	return restCall{base: e.srv.URL + "/a2a/" + agent + "/v1"}
}

// The REST binding runs the v1.0 methods: send (task and message), get,
// list, cancel, push configs, and the spec's errors with their HTTP
// statuses and ErrorInfo reasons.
func TestRESTMethods(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, nil)
	c := rest(e, "echo")
	var res stream10
	c.ok(t, http.MethodPost, "/message:send", send10(user10(text10("hi")), false), &res)
	if res.Task == nil || res.Task.Status.State != "TASK_STATE_COMPLETED" || statusText10(res.Task) != "echo: hi" {
		t.Fatalf("message:send = %+v", res)
	}
	var got task10
	c.ok(t, http.MethodGet, "/tasks/"+res.Task.ID+"?historyLength=0", nil, &got)
	if got.ID != res.Task.ID || got.Status.State != "TASK_STATE_COMPLETED" || len(got.History) != 0 || len(got.Artifacts) != 1 {
		t.Fatalf("GET task = %+v", got)
	}
	var direct stream10
	rest(e, "direct").ok(t, http.MethodPost, "/message:send", send10(user10(text10("hi")), false), &direct)
	if direct.Message == nil || *direct.Message.Parts[0].Text != "hello from direct" {
		t.Fatalf("direct = %+v", direct)
	}

	c.fails(t, http.MethodGet, "/tasks/no-such-task", nil, http.StatusNotFound, "TASK_NOT_FOUND")
	c.fails(t, http.MethodPost, "/tasks/"+res.Task.ID+":cancel", nil, http.StatusBadRequest, "TASK_NOT_CANCELABLE")
	c.fails(t, http.MethodGet, "/tasks/"+res.Task.ID+":subscribe", nil, http.StatusBadRequest, "UNSUPPORTED_OPERATION")
	c.fails(t, http.MethodPost, "/message:send", map[string]any{"message": map[string]any{"role": "ROLE_USER"}}, http.StatusBadRequest, "INVALID_PARAMS")
	c.fails(t, http.MethodGet, "/tasks?pageSize=x", nil, http.StatusBadRequest, "INVALID_PARAMS")
	c.fails(t, http.MethodGet, "/message:send", nil, http.StatusMethodNotAllowed, "")
	c.fails(t, http.MethodGet, "/tenant/tasks/x/y", nil, http.StatusNotFound, "")
	rest(e, "nobody").fails(t, http.MethodGet, "/tasks/x", nil, http.StatusNotFound, "")
	// A task of echo is not found at direct.
	rest(e, "direct").fails(t, http.MethodGet, "/tasks/"+res.Task.ID, nil, http.StatusNotFound, "TASK_NOT_FOUND")
	v03 := c
	v03.version = "0.3"
	v03.fails(t, http.MethodGet, "/tasks/"+res.Task.ID, nil, http.StatusBadRequest, "VERSION_NOT_SUPPORTED")

	// Cancel of a running task.
	var run stream10
	rest(e, "wait").ok(t, http.MethodPost, "/message:send", send10(user10(text10("forever")), true), &run)
	var canceled task10
	rest(e, "wait").ok(t, http.MethodPost, "/tasks/"+run.Task.ID+":cancel", nil, &canceled)
	if canceled.Status.State != "TASK_STATE_CANCELED" {
		t.Fatalf("cancel = %+v", canceled)
	}

	// Push configs: create, get, list, delete.
	var cfg struct{ ID, TaskID, URL string }
	c.ok(t, http.MethodPost, "/tasks/"+res.Task.ID+"/pushNotificationConfigs", map[string]any{"url": "http://127.0.0.1:9/h", "token": "tok"}, &cfg)
	if cfg.ID == "" || cfg.TaskID != res.Task.ID {
		t.Fatalf("create push config = %+v", cfg)
	}
	c.ok(t, http.MethodGet, "/tasks/"+res.Task.ID+"/pushNotificationConfigs/"+cfg.ID, nil, &cfg)
	var list struct{ Configs []json.RawMessage }
	c.ok(t, http.MethodGet, "/tasks/"+res.Task.ID+"/pushNotificationConfigs", nil, &list)
	if len(list.Configs) != 1 {
		t.Fatalf("list push configs = %+v", list)
	}
	c.ok(t, http.MethodDelete, "/tasks/"+res.Task.ID+"/pushNotificationConfigs/"+cfg.ID, nil, nil)
	c.fails(t, http.MethodGet, "/tasks/"+res.Task.ID+"/pushNotificationConfigs/"+cfg.ID, nil, http.StatusNotFound, "TASK_NOT_FOUND")

	var tasks struct {
		Tasks     []task10 `json:"tasks"`
		TotalSize int      `json:"totalSize"`
	}
	c.ok(t, http.MethodGet, "/tasks?status=TASK_STATE_COMPLETED&includeArtifacts=true", nil, &tasks)
	if tasks.TotalSize != 1 || tasks.Tasks[0].ID != res.Task.ID || len(tasks.Tasks[0].Artifacts) != 1 {
		t.Fatalf("list tasks = %+v", tasks)
	}
	// The node's REST interface lists every agent's tasks and routes a new
	// message by metadata.agent.
	rest(e, "").ok(t, http.MethodGet, "/tasks", nil, &tasks)
	if tasks.TotalSize != 2 { // echo and wait (direct answered with a message)
		t.Fatalf("node list tasks: %d, want 2", tasks.TotalSize)
	}
	m := user10(text10("via node"))
	m.Metadata = map[string]any{"agent": "echo"}
	rest(e, "").ok(t, http.MethodPost, "/message:send", send10(m, false), &res)
	if res.Task == nil || statusText10(res.Task) != "echo: via node" {
		t.Fatalf("node message:send = %+v", res)
	}
}

// message:stream sends the spec's order of bare StreamResponse events;
// a subscription follows a running task to its end.
func TestRESTStreamAndSubscribe(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, nil)
	evs, errEv := rest(e, "echo").stream(t, http.MethodPost, "/message:stream", send10(user10(text10("s")), false))
	var order []string
	for _, ev := range evs {
		switch {
		case ev.Task != nil:
			order = append(order, "task:"+ev.Task.Status.State)
		case ev.StatusUpdate != nil:
			order = append(order, "status:"+ev.StatusUpdate.Status.State)
		case ev.ArtifactUpdate != nil:
			order = append(order, "artifact")
		}
	}
	want := "task:TASK_STATE_SUBMITTED status:TASK_STATE_WORKING artifact status:TASK_STATE_COMPLETED"
	if errEv != nil || strings.Join(order, " ") != want {
		t.Fatalf("events %q (error %+v), want %q", order, errEv, want)
	}

	var run stream10
	rest(e, "slow").ok(t, http.MethodPost, "/message:send", send10(user10(text10("later")), true), &run)
	evs, errEv = rest(e, "slow").stream(t, http.MethodPost, "/tasks/"+run.Task.ID+":subscribe", nil)
	if errEv != nil || len(evs) < 2 || evs[0].Task == nil {
		t.Fatalf("subscribe: %+v %+v", evs, errEv)
	}
	last := evs[len(evs)-1]
	if last.StatusUpdate == nil || last.StatusUpdate.Status.State != "TASK_STATE_COMPLETED" {
		if last.Task == nil || last.Task.Status.State != "TASK_STATE_COMPLETED" {
			t.Fatalf("subscribe ended with %+v", last)
		}
	}
}

// Auth, the body cap and the concurrency cap are the JSON-RPC binding's.
func TestRESTLimitsAndAuth(t *testing.T) {
	e := newEnv(t, func(c *a2ahttp.Config) {
		c.TokenHashes = []string{a2ahttp.HashToken("s3cret")}
		c.MaxBodyBytes = 256
	})
	c := rest(e, "echo")
	resp, _ := c.do(t, http.MethodGet, "/tasks/x", nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	c.token = "s3cret"
	c.fails(t, http.MethodGet, "/tasks/x", nil, http.StatusNotFound, "TASK_NOT_FOUND")
	big := send10(user10(text10(strings.Repeat("x", 300))), false)
	c.fails(t, http.MethodPost, "/message:send", big, http.StatusRequestEntityTooLarge, "")
	// application/a2a+json is the binding's media type.
	b, _ := json.Marshal(send10(user10(text10("typed")), false))
	req, _ := http.NewRequest(http.MethodPost, c.base+"/message:send", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/a2a+json")
	req.Header.Set("Authorization", "Bearer s3cret")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusOK {
		t.Fatalf("application/a2a+json: %d", r2.StatusCode)
	}
}

// The cards advertise the REST interface after the JSON-RPC ones.
func TestRESTInCards(t *testing.T) {
	e := newEnv(t, nil)
	for _, v := range []string{"", "1.0"} {
		card := getJSON(t, e.srv.URL+"/a2a/echo/.well-known/agent-card.json", v)
		ifs, _ := card["supportedInterfaces"].([]any)
		if len(ifs) != 3 {
			t.Fatalf("version %q: interfaces %v", v, ifs)
		}
		last := ifs[2].(map[string]any)
		if last["protocolBinding"] != "HTTP+JSON" || last["url"] != e.srv.URL+"/a2a/echo/v1" || last["protocolVersion"] != "1.0" {
			t.Fatalf("version %q: REST interface %v", v, last)
		}
	}
	node := getJSON(t, e.srv.URL+"/.well-known/agent-card.json", "1.0")
	ifs, _ := node["supportedInterfaces"].([]any)
	if len(ifs) != 3 || ifs[2].(map[string]any)["url"] != e.srv.URL+"/v1" {
		t.Fatalf("node interfaces %v", ifs)
	}
	// What the card names works.
	var res stream10
	restCall{base: e.srv.URL + "/a2a/echo/v1"}.ok(t, http.MethodPost, "/message:send", send10(user10(text10("x")), false), &res)
	if res.Task == nil {
		t.Fatalf("send to the card's REST URL = %+v", res)
	}
}
