package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nova-node/nova-node/agentcard"
)

// TestLANDiscoveryInNamespaces runs three nodes with the default config in
// three network namespaces joined by a bridge (three "laptops" on a LAN):
// they find each other by mDNS with zero configuration and exchange a
// request/response. The test creates and deletes its own namespaces,
// veths and bridge, and skips when it cannot (not root, no `ip`).
// Nothing but the namespaces' own 10.x addresses is used.
func TestLANDiscoveryInNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to create network namespaces")
	}
	tag := fmt.Sprintf("nv%d", os.Getpid()%100000)
	bridge := "br" + tag
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	var cleanups []func()
	t.Cleanup(func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	})
	if err := run("link", "add", bridge, "type", "bridge"); err != nil {
		t.Skipf("cannot create a bridge here: %v", err)
	}
	cleanups = append(cleanups, func() { _ = run("link", "del", bridge) })
	if err := run("link", "set", bridge, "up"); err != nil {
		t.Fatal(err)
	}
	const n = 3
	ns := make([]string, n)
	for i := range ns {
		ns[i] = fmt.Sprintf("%s-%d", tag, i)
		veth := fmt.Sprintf("v%s%d", tag, i)
		if err := run("netns", "add", ns[i]); err != nil {
			t.Skipf("cannot create network namespaces here: %v", err)
		}
		name := ns[i]
		cleanups = append(cleanups, func() { _ = run("netns", "del", name) })
		steps := [][]string{
			{"link", "add", veth, "type", "veth", "peer", "name", "e0", "netns", ns[i]},
			{"link", "set", veth, "master", bridge, "up"},
			{"-n", ns[i], "addr", "add", fmt.Sprintf("10.199.%d.%d/24", os.Getpid()%200, i+1), "dev", "e0"},
			{"-n", ns[i], "link", "set", "e0", "up"},
			{"-n", ns[i], "link", "set", "lo", "up"},
			{"-n", ns[i], "route", "add", "default", "dev", "e0"},
		}
		v := veth
		cleanups = append(cleanups, func() { _ = run("link", "del", v) })
		for _, s := range steps {
			if err := run(s...); err != nil {
				t.Fatal(err)
			}
		}
	}

	bin := filepath.Join(t.TempDir(), "nova-node")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	home := t.TempDir()
	dirs := make([]string, n)
	for i := range ns {
		dirs[i] = filepath.Join(home, fmt.Sprintf("laptop%d", i))
		// The default config: only the data dir and the agent's name differ.
		cmd := exec.Command("ip", "netns", "exec", ns[i], bin, "run", "--data-dir", dirs[i], "--agent", fmt.Sprintf("laptop%d", i))
		cmd.Env = append(os.Environ(), "HOME="+home)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := cmd.Process
		cleanups = append(cleanups, func() {
			_ = p.Signal(syscall.SIGINT)
			done := make(chan struct{})
			go func() { _, _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = p.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("laptop stderr:\n%s", stderr.String())
			}
		})
	}
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	start := time.Now()
	deadline := start.Add(45 * time.Second)
	for {
		out, err := cli("agents", "--data-dir", dirs[0], "--json")
		var cards []agentcard.Card
		if err == nil && json.Unmarshal([]byte(out), &cards) == nil && len(cards) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("laptop0 did not discover the others by mDNS: %v %s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("all agents resolvable on laptop0 %s after the nodes started", time.Since(start).Round(time.Millisecond))
	out, err := cli("send", "--data-dir", dirs[0], "--to", "laptop2", "--payload", `{"over":"the LAN"}`)
	if err != nil || !strings.Contains(out, `"over": "the LAN"`) {
		t.Fatalf("request/response across the LAN: %v\n%s", err, out)
	}
	if !strings.Contains(out, "10.199.") && !strings.Contains(out, "remote") {
		t.Fatalf("not delivered remotely: %s", out)
	}
}
