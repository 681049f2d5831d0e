package a2ahttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/protocol/a2ahttp/a2ahttptest"
)

// holdAgent is a mesh agent whose calls block until their context ends; it
// reports each call's task id when the call starts and when its context
// ends.
type holdAgent struct {
	started, ended chan string
}

func addHoldAgent(m *a2ahttptest.Mesh, n int) *holdAgent {
	h := &holdAgent{started: make(chan string, n), ended: make(chan string, n)}
	m.Add(a2ahttptest.Card("hold", "Holds every call until it is canceled."), func(ctx context.Context, r *a2ahttp.Request) (any, error) {
		h.started <- r.TaskID
		<-ctx.Done()
		h.ended <- r.TaskID
		return nil, ctx.Err()
	})
	return h
}

// collect receives n task ids from ch, failing t if they do not arrive.
func collect(t *testing.T, ch <-chan string, n int, what string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for len(got) < n {
		select {
		case id := <-ch:
			got[id] = true
		case <-timeout.C:
			t.Fatalf("%s: %d of %d calls", what, len(got), n)
		}
	}
	return got
}

// openStream starts a streaming send on its own connection and returns the
// task id of its first event and a func that abandons the stream (cancels
// the request, as a client that goes away does). It runs on goroutines
// of its own, so it returns its failure.
func openStream(ctx context.Context, client *http.Client, c call, method string, params any) (string, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.version != "" {
		req.Header.Set("A2A-Version", c.version)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return "", nil, fmt.Errorf("%s: %v", method, err)
	}
	abandon := func() { cancel(); resp.Body.Close() }
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Result struct {
				ID   string `json:"id"` // v0.3: the task
				Task struct {
					ID string `json:"id"`
				} `json:"task"` // v1.0: a StreamResponse
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			abandon()
			return "", nil, fmt.Errorf("%s: event %q: %v", method, line, err)
		}
		id := ev.Result.ID + ev.Result.Task.ID
		if id == "" {
			abandon()
			return "", nil, fmt.Errorf("%s: first event %q is not a task", method, line)
		}
		return id, abandon, nil
	}
	abandon()
	return "", nil, fmt.Errorf("%s: stream ended before its first event: %v", method, sc.Err())
}

// A client that opens streams and goes away does not hold the gateway:
// each task's mesh call is canceled, the task ends canceled, its
// goroutines end, and the gateway's capacity serves the next request.
func TestAbandonedStreamsCancelTheirTasks(t *testing.T) {
	for _, tc := range []struct {
		name, version, method string
		params                func() any
	}{
		{"v0.3", "", "message/stream", func() any { return send03(user03(text03("x")), true) }},
		{"v1.0", "1.0", "SendStreamingMessage", func() any { return send10(user10(text10("x")), false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			const n = 64
			e := newEnv(t, func(c *a2ahttp.Config) {
				c.StreamGrace = time.Millisecond
				c.MaxConcurrentRequests = n
				c.MaxConcurrentCalls = n
			})
			hold := addHoldAgent(e.mesh, n)
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			base := runtime.NumGoroutine()

			c := call{url: e.srv.URL + "/a2a/hold/", version: tc.version}
			ids := make([]string, n)
			abandons := make([]func(), n)
			errs := make([]error, n)
			params := make([]any, n)
			for i := range n {
				params[i] = tc.params()
			}
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { ids[i], abandons[i], errs[i] = openStream(t.Context(), client, c, tc.method, params[i]) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				for _, a := range abandons {
					if a != nil {
						a()
					}
				}
				t.Fatal(err)
			}
			collect(t, hold.started, n, "started")
			for _, a := range abandons {
				a()
			}
			ended := collect(t, hold.ended, n, "canceled")
			for _, id := range ids {
				if !ended[id] {
					t.Errorf("task %s: its mesh call was not canceled", id)
				}
			}

			get := call{url: e.srv.URL + "/a2a/hold/"}
			for _, id := range ids {
				waitfor.Eventually(t, 5*time.Second, func() error {
					var task task03
					get.ok(t, "tasks/get", map[string]any{"id": id}, &task)
					if task.Status.State != "canceled" {
						return fmt.Errorf("task %s is %s (%q), want canceled", id, task.Status.State, statusText(&task))
					}
					return nil
				})
			}
			if st := e.gw.Stats(); st.Running != 0 {
				t.Errorf("running executions: %d", st.Running)
			}
			client.CloseIdleConnections()
			http.DefaultClient.CloseIdleConnections()
			waitfor.Eventually(t, 5*time.Second, func() error {
				if g := runtime.NumGoroutine(); g > base {
					return fmt.Errorf("%d goroutines, %d before the streams", g, base)
				}
				return nil
			})

			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": send03(user03(text03("hi")), true)})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/a2a/echo/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("message/send after the abandoned streams: %v", err)
			}
			defer resp.Body.Close()
			var out struct {
				Result task03 `json:"result"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Result.Status.State != "completed" {
				t.Fatalf("message/send after the abandoned streams: %d %+v %v", resp.StatusCode, out.Result, err)
			}
		})
	}
}
