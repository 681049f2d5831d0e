package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node/localapi"
)

const testnetWait = 10 * time.Second

// TestBinarySmoke builds the real binary and runs the README walkthrough:
// two nodes on loopback, a send from a third process, Ctrl-C stops both
// cleanly.
func TestBinarySmoke(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("signals differ on windows")
	}
	bin := novaBinary(t)
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "NOVA_MDNS=false", "NOVA_METRICS_LISTEN=127.0.0.1:0")
	start := func(dir, agent string, extra ...string) (*exec.Cmd, localapi.IDInfo, *strings.Builder) {
		args := append([]string{"run", "--json", "--data-dir", dir, "--agent", agent, "--listen", "/ip4/127.0.0.1/tcp/0"}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		var info localapi.IDInfo
		if err := json.NewDecoder(bufio.NewReader(out)).Decode(&info); err != nil {
			t.Fatalf("run did not print its identity: %v\n%s", err, stderr.String())
		}
		return cmd, info, &stderr
	}
	dirA, dirB := filepath.Join(home, "a"), filepath.Join(home, "b")
	a, infoA, errA := start(dirA, "alice")
	b, _, errB := start(dirB, "bob", "--peer", infoA.Addrs[0])

	var out []byte
	waitfor.Eventually(t, testnetWait, func() error {
		cmd := exec.Command(bin, "send", "--data-dir", dirB, "--to", "alice", "--payload", `{"text":"hi"}`)
		cmd.Env = env
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("send: %v\n%s", err, out)
		}
		return nil
	})
	if !strings.Contains(string(out), "delivered to alice@"+infoA.PeerID) || !strings.Contains(string(out), `"text": "hi"`) {
		t.Fatalf("send output:\n%s", out)
	}
	for _, p := range []struct {
		cmd    *exec.Cmd
		stderr *strings.Builder
	}{{a, errA}, {b, errB}} {
		p.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after Ctrl-C: %v\n%s", err, p.stderr.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("node did not stop within 10s of Ctrl-C")
		}
		if !strings.Contains(p.stderr.String(), "stopped cleanly") {
			t.Fatalf("stderr:\n%s", p.stderr.String())
		}
	}
	// The socket is gone after a clean stop.
	if _, err := os.Stat(filepath.Join(dirA, "nova.sock")); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}
