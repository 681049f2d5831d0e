package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node/localapi"
)

// TestStopEndsFollowers: stopping `nova-node run` (what SIGINT or SIGTERM
// does: its context ends) while `events --follow` clients are attached ends
// their streams at once: the node stops cleanly (exit 0, no wait for the
// followers), and each follower prints that the node stopped and exits 0.
func TestStopEndsFollowers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n")
	env := []string{"HOME=" + t.TempDir(), "NOVA_MDNS=false", "NOVA_METRICS_LISTEN=127.0.0.1:0", "NOVA_LOG_LEVEL=error"}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var out, errOut syncBuffer
	ran := make(chan int, 1)
	go func() {
		ran <- run(ctx, []string{"run", "--json", "--data-dir", dir, "--agent", "alice", "--listen", "/ip4/127.0.0.1/tcp/0"}, env, nil, &out, &errOut)
	}()
	waitfor.Eventually(t, testnetWait, func() error {
		var info localapi.IDInfo
		if err := json.Unmarshal([]byte(out.String()), &info); err != nil || info.PeerID == "" {
			return fmt.Errorf("run printed %q, %q", out.String(), errOut.String())
		}
		return nil
	})

	follow := func(o *syncBuffer, done chan<- int, json bool) {
		args := []string{"events", "--data-dir", dir, "--follow", "--limit", "0"}
		if json {
			args = append(args, "--json")
		}
		done <- run(t.Context(), args, env, nil, o, &bytes.Buffer{})
	}
	var text, js syncBuffer
	textDone, jsDone := make(chan int, 1), make(chan int, 1)
	go follow(&text, textDone, false)
	go follow(&js, jsDone, true)
	waitfor.Eventually(t, testnetWait, func() error { // both attached
		runCLI(t, "send", "--data-dir", dir, "--to", "alice", "--type", "notification", "--payload", `"hi"`)
		if !strings.Contains(text.String(), "message-received") || !strings.Contains(js.String(), `"type":"message-received"`) {
			return fmt.Errorf("followers printed %q and %q", text.String(), js.String())
		}
		return nil
	})

	start := time.Now()
	stop()
	if code := <-ran; code != 0 {
		t.Fatalf("run exit %d after %s with followers attached, want 0:\n%s", code, time.Since(start), errOut.String())
	}
	t.Logf("stopped in %s", time.Since(start))
	if !strings.Contains(errOut.String(), "stopped cleanly") {
		t.Errorf("run's stderr:\n%s", errOut.String())
	}
	for _, f := range []struct {
		name string
		done chan int
		out  *syncBuffer
		last func(string) bool
	}{
		{"events --follow", textDone, &text, func(l string) bool { return strings.HasSuffix(l, " node stopped") }},
		{"events --follow --json", jsDone, &js, func(l string) bool {
			var e map[string]any
			return json.Unmarshal([]byte(l), &e) == nil && e["type"] == localapi.EvtNodeStopped
		}},
	} {
		select {
		case code := <-f.done:
			lines := strings.Split(strings.TrimSpace(f.out.String()), "\n")
			if code != 0 || !f.last(lines[len(lines)-1]) {
				t.Errorf("%s: exit %d, last line %q; want 0 and the node's stop", f.name, code, lines[len(lines)-1])
			}
		case <-time.After(testnetWait):
			t.Errorf("%s still running after the node stopped", f.name)
		}
	}
}
