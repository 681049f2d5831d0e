package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
)

// runInProcess starts `nova-node run --json args...` on dir and waits until
// it printed its identity; stop ends it and returns its stderr.
func runInProcess(t *testing.T, dir string, args ...string) (info localapi.IDInfo, stop func() string) {
	t.Helper()
	env := []string{"HOME=" + t.TempDir(), "NOVA_MDNS=false", "NOVA_METRICS_LISTEN=127.0.0.1:0", "NOVA_LOG_LEVEL=error"}
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut syncBuffer
	ran := make(chan int, 1)
	go func() {
		ran <- run(ctx, append([]string{"run", "--json", "--data-dir", dir}, args...), env, nil, &out, &errOut)
	}()
	waitfor.Eventually(t, testnetWait, func() error {
		if err := json.Unmarshal([]byte(out.String()), &info); err != nil || info.PeerID == "" {
			return fmt.Errorf("run printed %q, %q", out.String(), errOut.String())
		}
		return nil
	})
	stopped := false
	stop = func() string {
		if !stopped {
			stopped = true
			cancel()
			if code := <-ran; code != 0 {
				t.Errorf("run exit %d: %s", code, errOut.String())
			}
		}
		return errOut.String()
	}
	t.Cleanup(func() { stop() })
	return info, stop
}

// TestRunKeepsPeerFlag: the first run writes --peer into config.yaml with
// --agent and --listen, so a plain run connects to the same peer; a later
// run's flags, which config.yaml does not take, are named at start.
func TestRunKeepsPeerFlag(t *testing.T) {
	b := startNode(t, 1, t.TempDir(), node.DefaultAgent("bob"))
	peerAddr := b.Addrs()[0].String()
	dir := filepath.Join(t.TempDir(), "a")
	_, stop := runInProcess(t, dir, "--agent", "alice", "--listen", "/ip4/127.0.0.1/tcp/0", "--peer", peerAddr)
	if errOut := stop(); strings.Contains(errOut, "to this run only") {
		t.Errorf("first run's flags are kept, yet it says they are not:\n%s", errOut)
	}
	cfg, err := node.LoadConfig(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.Peers, peerAddr) || len(cfg.Agents) != 1 || cfg.Agents[0].Name != "alice" {
		t.Fatalf("config.yaml keeps peers %v, agents %v; want %s and alice", cfg.Peers, cfg.Agents, peerAddr)
	}

	_, stop = runInProcess(t, dir)
	waitfor.Eventually(t, testnetWait, func() error {
		out, _, _ := runCLI(t, "agents", "--data-dir", dir)
		if !strings.Contains(out, "bob") {
			return fmt.Errorf("a plain run does not reach the saved peer: %s", out)
		}
		return nil
	})
	if errOut := stop(); strings.Contains(errOut, "to this run only") {
		t.Errorf("a plain run names flags:\n%s", errOut)
	}

	_, stop = runInProcess(t, dir, "--swarm", "default", "--peer", peerAddr)
	if errOut := stop(); !strings.Contains(errOut, "--peer, --swarm apply to this run only") {
		t.Errorf("a later run's flags are not named as not kept:\n%s", errOut)
	}
}

// TestFailedRunSavesNoConfig: a first run that cannot listen leaves no
// config.yaml behind, so the next plain run does not fail the same way.
func TestFailedRunSavesNoConfig(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := filepath.Join(t.TempDir(), "n")
	taken := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", l.Addr().(*net.TCPAddr).Port)
	out, _, code := runCLIEnv(t, []string{"NOVA_MDNS=false"}, "run", "--json", "--data-dir", dir, "--listen", taken)
	if code != 1 || jsonError(t, out).Code != codeListenFailed {
		t.Fatalf("run on a taken port: exit %d %s", code, out)
	}
	if _, err := os.Stat(node.ConfigPath(dir)); !os.IsNotExist(err) {
		b, _ := os.ReadFile(node.ConfigPath(dir))
		t.Fatalf("a run that did not start saved its config (%v):\n%s", err, b)
	}
}
