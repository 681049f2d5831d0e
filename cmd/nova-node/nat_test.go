package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/mcpbridge/mcptest"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
)

// natBinary is nova-node built with -tags nattest (nattest_hook.go), which
// counts the namespace internet's 198.18.0.0/15 as public, built once per
// test process beside the plain binary.
var natBinary = sync.OnceValues(func() (string, error) {
	if _, err := builtBinary(); err != nil { // makes binDir, removed by TestMain
		return "", err
	}
	bin := filepath.Join(binDir, "nova-node-nattest")
	if out, err := exec.Command("go", "build", "-tags", "nattest", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: out}
	}
	return bin, nil
})

// natKind is how a home router translates: endpoint-independent (plain
// masquerade: a home's socket keeps its port towards every destination, so
// hole punching works) or symmetric (random,fully-random: each destination
// sees another port, so what one peer observed is useless to another).
type natKind string

const (
	natEIM       natKind = "masquerade"
	natSymmetric natKind = "masquerade random,fully-random"
)

// natNet is an internet in network namespaces: a bridge in its own
// namespace is the internet (198.18.0.0/15), with one public node at
// 198.18.0.2 and home routers at 198.18.k.1; each router is a namespace
// that forwards for a home bridge (10.77.k.0/24) and masquerades it with
// nftables, dropping what comes in unasked; each laptop is a namespace on
// a home bridge whose default route is its router. Everything the fixture
// makes lives in its namespaces (veths, bridges, nft tables, forwarding
// sysctls), so deleting them, which the fixture does even when the test
// fails, removes it all; the host's own network is not touched. The nodes
// it starts it stops, by PID.
type natNet struct {
	t     *testing.T
	tag   string
	home  string // HOME of every node process
	bin   string
	ns    map[string]string // node name -> namespace
	dirs  map[string]string // node name -> data dir
	logs  map[string]*syncBuffer
	stops map[string]func()
	done  []func()
	// agents replaces the agents of a node's config.yaml (a YAML list,
	// indented as under agents:) after join; such a node runs with its
	// config's agents rather than --agent.
	agents map[string]string
}

const natPublicAddr = "198.18.0.2"

// newNATNet builds the internet, the public node's namespace, and one home
// per kinds[k] (router 198.18.<k+1>.1, home 10.77.<k+1>.0/24) holding the
// laptops homes[k] names.
func newNATNet(t *testing.T, kinds []natKind, homes [][]string) *natNet {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (iproute2, nftables) to build a namespace internet with NAT routers", tool)
		}
	}
	n := &natNet{t: t, tag: fmt.Sprintf("nt%d%d", os.Getpid()%100000, lans.Add(1)%10), home: t.TempDir(),
		ns: map[string]string{}, dirs: map[string]string{}, logs: map[string]*syncBuffer{}, stops: map[string]func(){}, agents: map[string]string{}}
	t.Cleanup(func() {
		for i := len(n.done) - 1; i >= 0; i-- {
			n.done[i]()
		}
	})
	inet := n.netns("inet")
	n.must("-n", inet, "link", "add", "name", "net0", "type", "bridge")
	n.must("-n", inet, "link", "set", "net0", "up")
	pub := n.netns("pub")
	n.ns["pub"], n.dirs["pub"] = pub, filepath.Join(n.home, "pub")
	n.uplink(inet, pub, "p0", natPublicAddr)
	for k, kind := range kinds {
		r := n.netns(fmt.Sprintf("r%d", k+1))
		n.uplink(inet, r, fmt.Sprintf("r%d", k+1), fmt.Sprintf("198.18.%d.1", k+1))
		n.must("-n", r, "link", "add", "name", "home", "type", "bridge")
		n.must("-n", r, "addr", "add", fmt.Sprintf("10.77.%d.1/24", k+1), "dev", "home")
		n.must("-n", r, "link", "set", "home", "up")
		if out, err := exec.Command("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
			t.Fatalf("forwarding in %s: %v: %s", r, err, out)
		}
		rules := fmt.Sprintf(`table ip nova_nat {
	chain postrouting { type nat hook postrouting priority srcnat; policy accept; oifname "wan" %s; }
	chain forward { type filter hook forward priority filter; policy drop; ct state established,related accept; iifname "home" accept; }
	chain input { type filter hook input priority filter; policy accept; iifname "wan" ct state new drop; }
}
`, kind)
		cmd := exec.Command("ip", "netns", "exec", r, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("nftables cannot NAT here: %v: %s", err, out)
		}
		for j, name := range homes[k] {
			l := n.netns(name)
			n.ns[name], n.dirs[name] = l, filepath.Join(n.home, name)
			veth := fmt.Sprintf("l%d", j)
			n.must("-n", r, "link", "add", "name", veth, "type", "veth", "peer", "name", "e0", "netns", l)
			n.must("-n", r, "link", "set", veth, "master", "home", "up")
			n.must("-n", l, "addr", "add", fmt.Sprintf("10.77.%d.%d/24", k+1, j+2), "dev", "e0")
			n.must("-n", l, "link", "set", "e0", "up")
			n.must("-n", l, "link", "set", "lo", "up")
			n.must("-n", l, "route", "add", "default", "via", fmt.Sprintf("10.77.%d.1", k+1))
		}
	}
	bin, err := natBinary()
	if err != nil {
		t.Fatal(err)
	}
	n.bin = bin
	return n
}

// addPublic adds a second public host on the internet segment, at addr,
// for node name (started later with run, like a laptop).
func (n *natNet) addPublic(name, addr string) {
	ns := n.netns(name)
	n.ns[name], n.dirs[name] = ns, filepath.Join(n.home, name)
	n.uplink(n.tag+"-inet", ns, "p"+strings.TrimPrefix(addr, "198.18.0."), addr)
}

// netns creates namespace <tag>-<name>, deleted (with all in it) at cleanup.
func (n *natNet) netns(name string) string {
	ns := n.tag + "-" + name
	if err := (&lan{}).ip("netns", "add", ns); err != nil {
		n.t.Skipf("cannot create network namespaces here: %v", err)
	}
	n.done = append(n.done, func() { _ = (&lan{}).ip("netns", "del", ns) })
	n.must("-n", ns, "link", "set", "lo", "up")
	return ns
}

// uplink joins ns to the internet bridge as "wan" with addr.
func (n *natNet) uplink(inet, ns, port, addr string) {
	n.must("-n", inet, "link", "add", "name", port, "type", "veth", "peer", "name", "wan", "netns", ns)
	n.must("-n", inet, "link", "set", port, "master", "net0", "up")
	n.must("-n", ns, "addr", "add", addr+"/15", "dev", "wan")
	n.must("-n", ns, "link", "set", "wan", "up")
}

func (n *natNet) must(args ...string) {
	n.t.Helper()
	if err := (&lan{}).ip(args...); err != nil {
		n.t.Fatal(err)
	}
}

// natDebugLogs are the subsystems a node of the NAT tests logs at debug
// (GOLOG_LOG_LEVEL, unless the test's environment sets it), printed when
// a test fails: go-libp2p's AutoNAT v2 and the host's reachability
// tracker (what a public node knows of its reach besides the direct
// connections it received), relay client, relay service, circuits and hole punching (a
// relay's refusal of a reservation, with its reason, is a debug line), the router (its DHT lookups after a failed dial) and
// discovery (publishes, roster exchanges). A few hundred lines a node.
const natDebugLogs = "autonatv2=debug,basichost=debug,autorelay=debug,relay=debug,p2p-circuit=debug,p2p-holepunch=debug,nova/protocol=debug,nova/discovery=debug"

// run starts `nova-node run` for node name in its namespace, hosting the
// agent of the same name; the fixture stops it (SIGINT, then SIGKILL).
func (n *natNet) run(name string, args ...string) {
	args = append([]string{"netns", "exec", n.ns[name], n.bin, "run", "--data-dir", n.dirs[name]}, args...)
	if _, ok := n.agents[name]; !ok {
		args = append(args, "--agent", name)
	}
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(), "HOME="+n.home)
	if os.Getenv("GOLOG_LOG_LEVEL") == "" {
		cmd.Env = append(cmd.Env, "GOLOG_LOG_LEVEL="+natDebugLogs)
	}
	stderr := &syncBuffer{}
	n.logs[name] = stderr
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	p := cmd.Process
	stop := sync.OnceFunc(func() {
		_ = p.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _, _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Kill()
			<-done
		}
		if n.t.Failed() || os.Getenv("NOVA_NAT_LOGS") != "" {
			n.t.Logf("%s stderr:\n%s", name, stderr.String())
		}
	})
	n.stops[name] = stop
	n.done = append(n.done, stop)
}

// stop stops node name's process (started by run).
func (n *natNet) stop(name string) { n.stops[name]() }

// cli runs a nova-node command against node name.
func (n *natNet) cli(name string, args ...string) (string, error) {
	args = append(args[:1:1], append([]string{"--data-dir", n.dirs[name]}, args[1:]...)...)
	cmd := exec.Command(n.bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+n.home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cliJSON runs a command with --json into v.
func (n *natNet) cliJSON(name string, v any, args ...string) error {
	out, err := n.cli(name, append(args, "--json")...)
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// ping pings agent to from node from.
func (n *natNet) ping(from, to string) (localapi.PingResult, error) {
	var res localapi.PingResult
	err := n.cliJSON(from, &res, "ping", to, "--count", "5")
	return res, err
}

// startPublic runs the public node and returns its `id` addresses.
func (n *natNet) startPublic() []string {
	n.run("pub")
	var info localapi.IDInfo
	natEventually(n.t, 20*time.Second, func() error {
		if err := n.cliJSON("pub", &info, "id"); err != nil {
			return err
		}
		if len(info.Addrs) == 0 {
			return fmt.Errorf("the public node is not listening yet")
		}
		return nil
	})
	return info.Addrs
}

// join runs `join token` for node name (its data dir is created).
func (n *natNet) join(name, token string) {
	if out, err := n.cli(name, "join", token); err != nil {
		n.t.Fatalf("%s: join: %v\n%s", name, err, out)
	}
	agents, ok := n.agents[name]
	if !ok {
		return
	}
	path := filepath.Join(n.dirs[name], "config.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		n.t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(b), "\nagents:\n")
	_, after, ok2 := strings.Cut(rest, "\nsandbox:")
	if !ok1 || !ok2 {
		n.t.Fatalf("%s: no agents: section followed by sandbox: in config.yaml:\n%s", name, b)
	}
	if err := os.WriteFile(path, []byte(before+"\nagents:\n"+agents+"\nsandbox:"+after), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// natSwarm follows the README's "Across the internet" on a namespace
// internet: the public node runs and invites with itself as relay
// (`invite --relay`), each laptop joins with the token and runs. It returns
// when every laptop holds a reservation on the relay (a /p2p-circuit
// address in `id`), and how long after `run` that took.
func natSwarm(t *testing.T, n *natNet, laptops ...string) time.Duration {
	return natSwarmWith(t, n, nil, laptops...)
}

// natSwarmWith is natSwarm with more invite flags; with --new-secret the
// public node is restarted after the invite, as the README says.
func natSwarmWith(t *testing.T, n *natNet, flags []string, laptops ...string) time.Duration {
	addrs := n.startPublic()
	var relays []string
	if i := slices.Index(flags, "--no-relay"); i >= 0 { // the token's bootstrap peer relays all the same
		flags, addrs = slices.Delete(slices.Clone(flags), i, i+1), nil
	}
	for _, a := range addrs {
		if strings.Contains(a, natPublicAddr) && (strings.Contains(a, "/tcp/4710/p2p/") || strings.Contains(a, "/quic-v1/p2p/")) {
			relays = append(relays, "--relay", a)
		}
	}
	var inv struct {
		Token     string   `json:"token"`
		Bootstrap []string `json:"bootstrap"`
	}
	if err := n.cliJSON("pub", &inv, append(append([]string{"invite", "--no-qr"}, flags...), relays...)...); err != nil {
		t.Fatalf("invite: %v", err)
	}
	if slices.Contains(flags, "--new-secret") {
		n.stop("pub")
		n.startPublic()
	}
	// What a joiner gets: the public node's every listen address, its
	// loopback ones included (useless on another device, harmless).
	t.Logf("token bootstrap: %v", inv.Bootstrap)
	for _, l := range laptops {
		n.join(l, inv.Token)
	}
	start := time.Now()
	for _, l := range laptops {
		n.run(l)
	}
	for _, l := range laptops {
		// A reservation comes once the public node relays (from the first
		// laptop's direct connection on) and has the laptop's cards: the
		// second ask, 3 s after the first, as a rule; under a loaded test
		// run (the whole suite on one CPU beside a busy loop) past 30 s once.
		natEventually(t, 60*time.Second, func() error {
			var info localapi.IDInfo
			if err := n.cliJSON(l, &info, "id"); err != nil {
				return err
			}
			for _, a := range info.Addrs {
				if strings.Contains(a, "/p2p-circuit/") {
					return nil
				}
			}
			return fmt.Errorf("%s holds no reservation on the relay: %v", l, info.Addrs)
		})
	}
	took := time.Since(start)
	t.Logf("every laptop holds a reservation on the relay %s after run", took.Round(time.Millisecond))
	return took
}

// natEventually is waitfor.Eventually that also logs, with the time since
// the wait began, every error f returns that differs from the one before
// (up to natErrLog of them): a wait that times out then shows what stood
// in the way first and when that changed, not only f's last error.
func natEventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	start, last, logged := time.Now(), "", 0
	waitfor.Eventually(t, timeout, func() error {
		err := f()
		if err != nil && err.Error() != last && logged < natErrLog {
			last = err.Error()
			logged++
			t.Logf("after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(last))
		}
		return err
	})
}

// natErrLog bounds the errors natEventually logs per wait.
const natErrLog = 20

// peerID is node name's peer ID.
func (n *natNet) peerID(name string) string {
	var info localapi.IDInfo
	if err := n.cliJSON(name, &info, "id"); err != nil {
		n.t.Fatal(err)
	}
	return info.PeerID
}

// TestNATInternet runs the README's "Across the internet" on a namespace
// internet with three homes: a1 and a2 behind one endpoint-independent NAT,
// b1 behind another, c1 behind a symmetric one.
//
//   - Every laptop takes a reservation on the public node's relay, which
//     it offers once a laptop's direct connection or AutoNAT v2 proved it
//     reachable; no laptop
//     advertises its router's address, which no peer confirmed.
//   - a1 and a2 talk directly over their home LAN.
//   - a1 sends to b1's agent by name, which it finds through the DHT
//     (it has no other way to know it): the laptops meet through the
//     relay, the first message may go relayed, DCUtR punches through both
//     NATs, and status and ping then report the path direct.
//   - a1 reaches c1 (symmetric NAT: the hole punch cannot work) only
//     through the relay: it finds c1's agent by name, sends to it and
//     hears back, calls a tool of its MCP server, negotiates a task with
//     it, and ping and status say
//     relayed and name the relay.
//   - A broadcast and a document reach b1 and c1.
func TestNATInternet(t *testing.T) {
	n := newNATNet(t, []natKind{natEIM, natEIM, natSymmetric}, [][]string{{"a1", "a2"}, {"b1"}, {"c1"}})
	// c1 hosts an MCP server too (this test binary, as mcptest's server).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	n.agents["c1"] = fmt.Sprintf(`  - name: c1
    capabilities: [echo]
  - name: toolsmith
    capabilities: [tools]
    mcpServers:
      test:
        command: %q
        env: {%s: "1"}
`, exe, mcptest.EnvServe)
	reserved := natSwarm(t, n, "a1", "a2", "b1", "c1")
	pub := n.peerID("pub")
	for _, l := range []string{"a1", "a2", "b1", "c1"} {
		var info localapi.IDInfo
		if err := n.cliJSON(l, &info, "id"); err != nil {
			t.Fatal(err)
		}
		for _, a := range info.Addrs {
			if strings.Contains(a, "/ip4/198.18.") && !strings.Contains(a, "/p2p-circuit") {
				t.Errorf("%s advertises %s, an address of its router no peer confirmed reachable", l, a)
			}
		}
	}

	// The public node known reachable (AutoNAT v2 confirmed it, or a
	// laptop's direct connection proved it), and relaying; the laptops
	// with nothing confirmed, reachable through the relay.
	var st localapi.Status
	if err := n.cliJSON("pub", &st, "status"); err != nil {
		t.Fatal(err)
	}
	if proof := append(st.Reach.Reachable, st.Reach.ReachedAt...); !st.Reach.Relaying || !strings.Contains(strings.Join(proof, " "), natPublicAddr) {
		t.Errorf("the public node's reach: want %s confirmed or reached, and relaying: %+v", natPublicAddr, st.Reach)
	}
	out, _ := n.cli("pub", "status")
	t.Logf("pub status: %s", lineStarting(out, "reach"))
	for _, l := range []string{"a1", "b1", "c1"} {
		st = localapi.Status{} // decode afresh: members left out would keep the last node's
		if err := n.cliJSON(l, &st, "status"); err != nil {
			t.Fatal(err)
		}
		if st.Reach.Relaying || len(st.Reach.Reachable) > 0 || len(st.Reach.ReachedAt) > 0 || len(st.Reach.RelayAddrs) == 0 {
			t.Errorf("%s's reach: want nothing confirmed, not relaying, relay addresses: %+v", l, st.Reach)
		}
		out, _ := n.cli(l, "status")
		if line := lineStarting(out, "reach"); !strings.Contains(line, "behind NAT: through relay "+pub) {
			t.Errorf("%s status: %q", l, line)
		} else {
			t.Logf("%s status: %s (unreachable: %v)", l, line, st.Reach.Unreachable)
		}
	}

	t.Run("same home", func(t *testing.T) {
		natEventually(t, 20*time.Second, func() error {
			var res localapi.SendResult
			return n.cliJSON("a1", &res, "send", "--to", "a2", "--payload", `"same home"`)
		})
		p, err := n.ping("a1", "a2")
		if err != nil || p.Path != "direct" || !strings.Contains(p.Addr, "/ip4/10.77.1.") {
			t.Fatalf("a1 -> a2 ping: want direct over the home LAN: %+v %v", p, err)
		}
		t.Logf("a1 -> a2 ping %s %s: avg %.3f ms", p.Path, p.Addr, p.Average)
	})

	t.Run("hole punch", func(t *testing.T) {
		start := time.Now()
		var found []map[string]any
		natEventually(t, 20*time.Second, func() error {
			if err := n.cliJSON("a1", &found, "agents", "find", "--name", "b1"); err != nil || len(found) == 0 {
				return fmt.Errorf("a1 does not find b1 by name: %v %v", found, err)
			}
			return nil
		})
		t.Logf("a1 found b1 by name through the DHT %s after the reservations", time.Since(start).Round(time.Millisecond))
		natEventually(t, 20*time.Second, func() error {
			var res localapi.SendResult
			return n.cliJSON("a1", &res, "send", "--to", "b1", "--payload", `"through two NATs"`)
		})
		t.Logf("a1 -> b1 delivered %s after the reservations (%s after run)", time.Since(start).Round(time.Millisecond), (reserved + time.Since(start)).Round(time.Millisecond))
		// The first message may go through the relay while DCUtR punches;
		// the connection then turns direct.
		var p localapi.PingResult
		natEventually(t, 20*time.Second, func() error {
			var err error
			if p, err = n.ping("a1", "b1"); err != nil || p.Path != "direct" || !strings.Contains(p.Addr, "/ip4/198.18.2.1/") {
				return fmt.Errorf("a1 -> b1 ping: want direct to b1's router (hole punched): %+v %v", p, err)
			}
			return nil
		})
		t.Logf("a1 -> b1 direct %s after the reservations; ping %s %s: %v ms, avg %.3f ms", time.Since(start).Round(time.Millisecond), p.Path, p.Addr, p.RTTs, p.Average)
		var st localapi.Status
		if err := n.cliJSON("a1", &st, "status"); err != nil {
			t.Fatal(err)
		}
		b1 := n.peerID("b1")
		for _, ps := range st.PeerList {
			if ps.PeerID == b1 && ps.Relayed {
				t.Errorf("a1's status lists b1 relayed after the hole punch: %+v", ps)
			}
		}
	})

	// Behind the symmetric NAT the hole punch cannot work: c1 stays
	// relayed, and everything still runs, through the relay, whose
	// circuits carry no limit for swarm members.
	t.Run("symmetric NAT", func(t *testing.T) {
		start := time.Now()
		var found []map[string]any
		natEventually(t, 20*time.Second, func() error {
			if err := n.cliJSON("a1", &found, "agents", "find", "--name", "c1"); err != nil || len(found) == 0 {
				return fmt.Errorf("a1 does not find c1 by name: %v %v", found, err)
			}
			return nil
		})
		t.Logf("a1 found c1 by name %s after asking", time.Since(start).Round(time.Millisecond))
		var res localapi.SendResult
		if err := n.cliJSON("a1", &res, "send", "--to", "c1", "--payload", `"through the relay"`); err != nil {
			t.Fatalf("a1 -> c1 send: %v", err)
		}
		var back localapi.SendResult
		if err := n.cliJSON("c1", &back, "send", "--to", "a1", "--payload", `"back through the relay"`); err != nil {
			t.Fatalf("c1 -> a1 send: %v", err)
		}
		// A tool of c1's MCP server, called from a1 through the relay.
		natEventually(t, 20*time.Second, func() error {
			out, err := n.cli("a1", "tools", "call", "toolsmith.say", "--args", `{"text":"tool through the relay"}`)
			if err != nil || !strings.Contains(out, "tool through the relay") {
				return fmt.Errorf("a1 calls c1's tool: %v %s", err, out)
			}
			return nil
		})
		// A task negotiation, proposal and answer, through the relay.
		var prop negotiation.Record
		if err := n.cliJSON("a1", &prop, "tasks", "propose", "--to", "c1", "--task", "index the photos"); err != nil {
			t.Fatalf("a1 proposes a task to c1: %v", err)
		}
		natEventually(t, 15*time.Second, func() error {
			out, err := n.cli("c1", "tasks", "accept", prop.ProposalID)
			if err != nil {
				return fmt.Errorf("c1 accepts %s: %v %s", prop.ProposalID, err, out)
			}
			return nil
		})
		natEventually(t, 15*time.Second, func() error {
			var rec negotiation.Record
			if err := n.cliJSON("a1", &rec, "tasks", "show", prop.ProposalID); err != nil || rec.Status != negotiation.StatusAccepted {
				return fmt.Errorf("a1 does not see its proposal accepted: %+v %v", rec.Status, err)
			}
			return nil
		})
		c1 := n.peerID("c1")
		p, err := n.ping("a1", c1)
		if err != nil || p.Path != "relayed" || !strings.Contains(p.Addr, "/p2p/"+pub+"/p2p-circuit") {
			t.Fatalf("a1 -> c1 ping: want relayed through the public node: %+v %v", p, err)
		}
		t.Logf("a1 -> c1 ping %s %s: %v ms, avg %.3f ms", p.Path, p.Addr, p.RTTs, p.Average)
		var st localapi.Status
		if err := n.cliJSON("a1", &st, "status"); err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(st.PeerList, func(ps localapi.PeerStatus) bool { return ps.PeerID == c1 }); i < 0 || !st.PeerList[i].Relayed {
			t.Errorf("a1's status does not list c1 relayed: %+v", st.PeerList)
		}
	})

	// Broadcasts and documents travel by GossipSub: they reach b1, now
	// directly connected to a1, and c1, whose only paths are its
	// connection to the public node and relayed circuits through it.
	t.Run("broadcast and documents", func(t *testing.T) {
		var res localapi.SendResult
		if err := n.cliJSON("a1", &res, "broadcast", "--payload", `"to every home"`); err != nil || res.Sent == nil {
			t.Fatalf("broadcast: %+v %v", res, err)
		}
		if out, err := n.cli("a1", "crdt", "set", "plan", "/goal", `"across NATs"`); err != nil {
			t.Fatalf("crdt set: %v\n%s", err, out)
		}
		for _, l := range []string{"b1", "c1"} {
			natEventually(t, 15*time.Second, func() error {
				out, err := n.cli(l, "events", "--limit", "1000", "--json")
				if err != nil || !strings.Contains(out, res.Sent.ID) {
					return fmt.Errorf("%s has not received broadcast %s: %v", l, res.Sent.ID, err)
				}
				return nil
			})
			natEventually(t, 15*time.Second, func() error {
				out, err := n.cli(l, "crdt", "get", "plan")
				if err != nil || !strings.Contains(out, "across NATs") {
					return fmt.Errorf("%s: document not replicated: %v %s", l, err, out)
				}
				return nil
			})
		}
	})
}

// The README's private swarm, exactly as the README says: `invite
// --new-secret` (no --relay), restart, `join`, `run`. The laptops take
// their reservations on the token's bootstrap peer, the public node, which
// relays as it is reachable. Private swarms run on TCP only, so the hole
// punch is a TCP simultaneous open through both NATs.
func TestNATPrivateSwarmHolePunch(t *testing.T) {
	n := newNATNet(t, []natKind{natEIM, natEIM}, [][]string{{"a1"}, {"b1"}})
	natSwarmWith(t, n, []string{"--new-secret", "--no-relay"}, "a1", "b1")
	start := time.Now()
	natEventually(t, 30*time.Second, func() error {
		var res localapi.SendResult
		return n.cliJSON("a1", &res, "send", "--to", "b1", "--payload", `"private, through two NATs"`)
	})
	t.Logf("a1 -> b1 delivered %s after the reservations", time.Since(start).Round(time.Millisecond))
	var p localapi.PingResult
	natEventually(t, 20*time.Second, func() error {
		var err error
		if p, err = n.ping("a1", "b1"); err != nil || p.Path != "direct" || !strings.Contains(p.Addr, "/tcp/") {
			return fmt.Errorf("want direct over TCP: %+v %v", p, err)
		}
		return nil
	})
	t.Logf("a1 -> b1 direct %s after the reservations; ping %s %s avg %.3f ms", time.Since(start).Round(time.Millisecond), p.Path, p.Addr, p.Average)
}

// lineStarting is the first line of out that starts with prefix.
func lineStarting(out, prefix string) string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
