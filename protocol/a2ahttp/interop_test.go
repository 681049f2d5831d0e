package a2ahttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nova-node/nova-node/protocol/a2ahttp"
)

// TestInteropA2AJS runs independent A2A implementations from npm against
// the gateway, and the gateway's outbound client against one: the
// @a2a-js/sdk 1.3.0 client in its default (v1.0) mode and with
// legacyCompat (v0.3), the @a2a-js/sdk 0.3.14 client, and @a2a-js/sdk
// servers (1.3.0 with legacyCompat, 0.3.14) called by a2ahttp.Client. The
// scripts are in interop/ (see interop/README.md); run `npm ci` there first.
func TestInteropA2AJS(t *testing.T) {
	dir, err := filepath.Abs("interop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		if os.Getenv("NOVA_INTEROP") == "1" {
			t.Fatal("NOVA_INTEROP=1 but protocol/a2ahttp/interop/node_modules is missing: run npm ci --prefix protocol/a2ahttp/interop")
		}
		t.Skip("interop: protocol/a2ahttp/interop/node_modules is missing; run `npm ci` in protocol/a2ahttp/interop to run this test")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("NOVA_INTEROP") == "1" {
			t.Fatal("NOVA_INTEROP=1 but node is not on PATH")
		}
		t.Skip("interop: node is not on PATH")
	}

	const token = "static" // jwtEnv's static token
	is := newIssuer(t)
	e := jwtEnv(t, is, func(c *a2ahttp.JWTConfig) {
		c.Scopes = []a2ahttp.ScopeRule{{Scope: "a2a:echo", Agents: []string{"echo"}, Methods: []string{"SendMessage"}}}
	})
	jwtEnvVars := []string{
		"A2A_JWT_ECHO=" + is.token(t, claims{Scope: "a2a:echo"}),
		"A2A_JWT_EXPIRED=" + is.token(t, claims{Scope: "a2a:echo", Expiry: time.Now().Add(-time.Hour)}),
	}
	for _, mode := range []string{"v1", "legacy", "v03", "rest"} {
		t.Run("client-"+mode, func(t *testing.T) {
			scenarios := interopScenarios(mode)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "client.mjs", mode)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), append(jwtEnvVars, "GATEWAY_URL="+e.srv.URL, "A2A_TOKEN="+token)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, runErr := cmd.Output()
			got := map[string]bool{}
			for line := range strings.Lines(string(out)) {
				var r struct {
					Scenario string `json:"scenario"`
					OK       bool   `json:"ok"`
					Detail   string `json:"detail"`
					Done     bool   `json:"done"`
				}
				if json.Unmarshal([]byte(line), &r) != nil || r.Done {
					continue
				}
				got[r.Scenario] = r.OK
				if !r.OK {
					t.Errorf("%s: %s", r.Scenario, r.Detail)
				} else if testing.Verbose() {
					t.Logf("%s: ok (%s)", r.Scenario, r.Detail)
				}
			}
			for _, s := range scenarios {
				if _, ok := got[s]; !ok {
					t.Errorf("scenario %s did not run", s)
				}
			}
			if runErr != nil && !t.Failed() {
				t.Errorf("node client.mjs %s: %v\nstdout:\n%s\nstderr:\n%s", mode, runErr, out, stderr.String())
			}
		})
	}

	t.Run("server", func(t *testing.T) {
		urls, stop := startJSServer(t, node, dir)
		defer stop()
		names := make([]string, 0, len(urls))
		for n := range urls {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			base := urls[name]
			wantVersion := a2ahttp.Version10
			if name == "v03" {
				wantVersion = a2ahttp.Version03
			}
			for _, streaming := range []bool{true, false} {
				c := a2ahttp.NewClient(a2ahttp.WithStreaming(streaming), a2ahttp.WithPollInterval(50*time.Millisecond), a2ahttp.WithTimeout(30*time.Second))
				label := fmt.Sprintf("%s stream=%v", name, streaming)
				card, err := c.Card(t.Context(), base+"/echo")
				if err != nil || card.ProtocolVersion != wantVersion || !card.Streaming {
					t.Fatalf("%s card: %+v %v", label, card, err)
				}
				r := c.Send(t.Context(), base+"/echo", a2ahttp.Message{Text: "ping", Parts: []a2ahttp.Part{{Kind: "data", Data: map[string]any{"n": 1.0}}}})
				if !r.Success || r.ResponseText != "js echo: ping" || r.Version != wantVersion || r.State != "completed" ||
					len(r.Parts) != 2 || r.Parts[1].Kind != "data" {
					t.Errorf("%s echo: %+v", label, r)
				} else if testing.Verbose() {
					t.Logf("%s echo: %s via %s, task %s", label, r.ResponseText, r.Version, r.TaskID)
				}
				r = c.Send(t.Context(), base+"/direct", a2ahttp.Message{Text: "hi"})
				if !r.Success || r.ResponseText != "js direct: hi" || r.TaskID != "" {
					t.Errorf("%s direct: %+v", label, r)
				}
				r = c.Send(t.Context(), base+"/ask", a2ahttp.Message{Text: "hi"})
				if r.Code != a2ahttp.CodeInputRequired || r.Error != "Your name?" {
					t.Errorf("%s ask: %+v", label, r)
				} else {
					r = c.Send(t.Context(), base+"/ask", a2ahttp.Message{Text: "Ada", TaskID: r.TaskID, ContextID: r.ContextID})
					if !r.Success || r.ResponseText != "Hi Ada" {
						t.Errorf("%s ask again: %+v", label, r)
					}
				}
				r = c.Send(t.Context(), base+"/fail", a2ahttp.Message{Text: "x"})
				if r.Code != a2ahttp.CodeTaskFailed || r.State != "failed" {
					t.Errorf("%s fail: %+v", label, r)
				}
				task, err := c.GetTask(t.Context(), base+"/echo", "no-such-task")
				var ie *a2ahttp.InvokeError
				if err == nil || !asInvoke(err, &ie) || ie.RPCCode != -32001 {
					t.Errorf("%s unknown task: %+v %v", label, task, err)
				}
			}
			// A JS agent brought into the mesh through RemoteAgent.
			ra, err := a2ahttp.NewRemoteAgent(t.Context(), a2ahttp.NewClient(), "", base+"/echo")
			if err != nil {
				t.Fatalf("%s remote agent: %v", name, err)
			}
			if c := ra.Card(); c.Validate() != nil || len(c.Capabilities) != 1 {
				t.Errorf("%s remote card: %+v %v", name, c, c.Validate())
			}
		}
	})
}

func asInvoke(err error, target **a2ahttp.InvokeError) bool {
	ie, ok := err.(*a2ahttp.InvokeError)
	if ok {
		*target = ie
	}
	return ok
}

// startJSServer starts interop/server.mjs and returns the base URLs it
// prints ({"v1": ..., "v03": ...}; agents live under them) and a stop
// function that ends it and waits.
func startJSServer(t *testing.T, node, dir string) (map[string]string, func()) {
	t.Helper()
	cmd := exec.Command(node, "server.mjs")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Two goroutines, both waited for by stop: one reads the first line
	// (then drains stdout), one waits for the process.
	var wg sync.WaitGroup
	lines := make(chan string, 1)
	wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() {
		}
	})
	exited := make(chan struct{})
	wg.Go(func() { _ = cmd.Wait(); close(exited) })
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		wg.Wait()
	}
	select {
	case line, ok := <-lines:
		var urls map[string]string
		if !ok || json.Unmarshal([]byte(line), &urls) != nil || len(urls) == 0 {
			stop()
			t.Fatalf("server.mjs did not print its URLs (got %q); stderr:\n%s", line, stderr.String())
		}
		return urls, stop
	case <-time.After(30 * time.Second):
		stop()
		t.Fatalf("server.mjs did not start in 30 s; stderr:\n%s", stderr.String())
	}
	return nil, nil
}

// interopScenarios are the scenarios client.mjs runs in mode: the common
// ones, plus the v1.0 surface of the 1.3.0 client in v1 and rest modes
// (the extended card, listTasks, push configs, resubscribe, JWT scopes).
func interopScenarios(mode string) []string {
	s := []string{
		"card", "send-task", "send-message", "stream-order", "nonblocking-poll", "cancel-running",
		"cancel-completed", "unknown-task", "multi-turn", "file-data-parts", "unauthorized",
	}
	if mode == "v1" || mode == "rest" {
		s = append(s, "extended-card", "list-tasks", "push-config", "subscribe", "jwt")
	}
	return s
}
