package testnet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/multiformats/go-multiaddr"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// The crash sink: with crashSinkDir set, this test binary runs one node
// hosting the agent "sink" (see TestMain) until it is killed. The sink's
// handler appends each payload (an integer) to <dir>/seen with one write,
// which the kernel keeps when the process is killed, so the file is what
// the agent saw, across SIGKILLs and restarts.
const (
	crashSinkDir    = "NOVA_CRASHSINK_DIR"
	crashSinkListen = "NOVA_CRASHSINK_LISTEN"
)

func maybeCrashSink() {
	dir := os.Getenv(crashSinkDir)
	if dir == "" {
		return
	}
	run := runCrashSink
	if os.Getenv(crashSender) != "" {
		run = runCrashSender
	}
	if err := run(dir, os.Getenv(crashSinkListen)); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// crashSender, set with crashSinkDir, makes the child a sending node
// instead, hosting agent "a0" and driven by lines on its stdin (see
// runCrashSender).
const crashSender = "NOVA_CRASHSENDER"

// crashConfig is the child's node config on dir, listening on listen.
func crashConfig(dir, listen string) node.Config {
	cfg := node.DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Listen = []string{listen}
	cfg.Agents = nil
	cfg.APISocket = filepath.Join(dir, "api.sock")
	cfg.MDNS = false // the network rule: no mDNS outside a namespace
	return cfg
}

// runCrashSender runs a node hosting "a0" and answers, one line each:
//
//	connect <peer> <addr>  dial a node and wait for its agent "sink"
//	post <from> <to>       post the integers from..to-1 to "sink"
//	stored <n>             wait until n envelopes are pending and written
//	                       to the outbox (ChannelInfo.Stored)
//
// with "ok" or "error: ...".
func runCrashSender(dir, listen string) error {
	cfg := crashConfig(dir, listen)
	cfg.Agents = []node.AgentConfig{node.DefaultAgent("a0")}
	cfg.RetryDelay = 2 * time.Second // 2+4+8 s of retries: time for both restarts
	nd, err := node.New(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := nd.Start(ctx); err != nil {
		return err
	}
	fmt.Printf("ready %s %s\n", nd.ID(), nd.Host().Addrs()[0])
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		err := func() error {
			switch {
			case len(f) == 3 && f[0] == "connect":
				id, err := peer.Decode(f[1])
				if err != nil {
					return err
				}
				a, err := multiaddr.NewMultiaddr(f[2])
				if err != nil {
					return err
				}
				if err := nd.Host().Connect(ctx, peer.AddrInfo{ID: id, Addrs: []multiaddr.Multiaddr{a}}); err != nil {
					return err
				}
				return waitfor.Within(10*time.Second, func() error {
					if _, ok := nd.Registry().Get("sink@" + id.String()); !ok {
						return errors.New("the sink's card has not arrived")
					}
					return nil
				})
			case len(f) == 3 && f[0] == "post":
				from, _ := strconv.Atoi(f[1])
				to, _ := strconv.Atoi(f[2])
				for i := from; i < to; i++ {
					env, err := nd.NewEnvelope("a0", "sink", envelope.TypeNotification, i)
					if err != nil {
						return err
					}
					if _, err := nd.Router().Post(ctx, env); err != nil {
						return err
					}
				}
				return nil
			case len(f) == 2 && f[0] == "stored":
				n, _ := strconv.Atoi(f[1])
				return waitfor.Within(10*time.Second, func() error {
					pending, stored := 0, 0
					for _, c := range nd.Router().Channels() {
						pending, stored = pending+c.Pending, stored+c.Stored
					}
					if pending < n || stored != pending {
						return fmt.Errorf("%d envelopes pending, %d stored, want %d both", pending, stored, n)
					}
					return nil
				})
			}
			return fmt.Errorf("unknown command %q", in.Text())
		}()
		if err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println("ok")
		}
	}
	select {} // until killed
}

func runCrashSink(dir, listen string) error {
	nd, err := node.New(crashConfig(dir, listen))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "seen"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	card := node.AgentConfig{Name: "sink", Capabilities: []node.CapabilityConfig{{ID: "sink"}}}.Card()
	_, err = nd.RegisterAgent(card, func(_ context.Context, env *envelope.Envelope) (any, error) {
		time.Sleep(500 * time.Microsecond) // the agent's own work
		var v int
		if err := json.Unmarshal(env.Payload, &v); err != nil {
			return nil, err
		}
		_, err := f.Write([]byte(strconv.Itoa(v) + "\n")) // one write(2): kept by the kernel at SIGKILL
		return nil, err
	})
	if err != nil {
		return err
	}
	if err := nd.Start(context.Background()); err != nil {
		return err
	}
	fmt.Printf("ready %s %s\n", nd.ID(), nd.Host().Addrs()[0])
	select {} // until killed: the test never closes this node
}

// crashSink is a running child node process (a sink, or a sender).
type crashSink struct {
	cmd   *exec.Cmd
	id    peer.ID
	addr  multiaddr.Multiaddr
	stdin io.WriteCloser
	lines chan string // the child's stdout, line by line
}

// startCrashSink starts this test binary as a sink node on dir, listening
// on listen, and waits until it is ready.
func startCrashSink(t *testing.T, dir, listen string) *crashSink {
	return startCrashChild(t, dir, listen)
}

// startCrashChild starts this test binary as a child node with env added,
// and waits until it is ready.
func startCrashChild(t *testing.T, dir, listen string, env ...string) *crashSink {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(append(os.Environ(), crashSinkDir+"="+dir, crashSinkListen+"="+listen), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &crashSink{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	t.Cleanup(s.kill) // only the process this test started, by its PID
	go func() {       // ends when the process does (its stdout closes)
		defer close(s.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	line := s.next(t, 20*time.Second)
	var id, addr string
	if _, err := fmt.Sscanf(line, "ready %s %s", &id, &addr); err != nil {
		t.Fatalf("crash sink said %q: %v", line, err)
	}
	if s.id, err = peer.Decode(id); err != nil {
		t.Fatal(err)
	}
	if s.addr, err = multiaddr.NewMultiaddr(addr); err != nil {
		t.Fatal(err)
	}
	return s
}

// next returns the child's next line of output.
func (s *crashSink) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			t.Fatal("the child process ended")
		}
		return line
	case <-time.After(timeout):
		t.Fatalf("no word from the child process within %s", timeout)
	}
	return ""
}

// do sends a command to a crash sender and waits for its "ok".
func (s *crashSink) do(t *testing.T, format string, a ...any) {
	t.Helper()
	cmd := fmt.Sprintf(format, a...)
	if _, err := fmt.Fprintln(s.stdin, cmd); err != nil {
		t.Fatal(err)
	}
	if got := s.next(t, 30*time.Second); got != "ok" {
		t.Fatalf("%s: the sender said %q", cmd, got)
	}
}

// kill sends SIGKILL and reaps the process (idempotent).
// Its output reader ends once the process is gone: lines are drained until
// it closes them, then the process is reaped (os/exec: Wait only after the
// reads from its pipes are done).
func (s *crashSink) kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	for range s.lines {
	}
	_ = s.cmd.Wait()
}

// seenLines reads what the sink's agent saw, in order.
func seenLines(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "seen"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		v, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("seen file line %q: %v", l, err)
		}
		out = append(out, v)
	}
	return out
}

// TestReceiverKilledMidStream is TestReceiverRestartMidStream with a real
// crash: the receiving node runs in its own process, is killed with
// SIGKILL (no Close, nothing flushed) in the middle of 1,000 envelopes, and
// started again from the same data dir. The sender's channel goes
// reconnecting -> open; no envelope is lost, none is reordered, and the
// only repeat is what docs/architecture.md promises for a crash: the
// envelope whose handler was running when the process died, delivered again
// after the restart (at-least-once for that one; exactly once for the
// rest).
func TestReceiverKilledMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	const total = 1000
	net := testnet.New(t, 1, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(_ int, c *node.Config) {
		c.RetryDelay = time.Second // 1+2+4 s of retries: time for a process to restart
	}))
	sender := net.Nodes[0]
	dir := t.TempDir()
	sink := startCrashSink(t, dir, "/ip4/127.0.0.1/tcp/0")
	connect := func(s *crashSink) {
		t.Helper()
		if sw, ok := sender.Host().Network().(*swarm.Swarm); ok {
			sw.Backoff().Clear(s.id) // the redials made while it was down
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := sender.Host().Connect(ctx, peer.AddrInfo{ID: s.id, Addrs: []multiaddr.Multiaddr{s.addr}}); err != nil {
			t.Fatalf("connect to the sink: %v", err)
		}
	}
	connect(sink)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if _, ok := sender.Registry().Get("sink@" + sink.id.String()); !ok {
			return fmt.Errorf("the sender does not know the sink's card yet")
		}
		return nil
	})
	sub := sender.Observer().Subscribe(100000)
	defer sub.Close()
	for i := range total {
		env, err := sender.NewEnvelope("a0", "sink", envelope.TypeNotification, i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sender.Router().Post(t.Context(), env); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	waitfor.Eventually(t, 20*time.Second, func() error {
		if n := len(seenLines(t, dir)); n < 300 {
			return fmt.Errorf("%d received", n)
		}
		return nil
	})
	sink.kill()
	before := seenLines(t, dir)
	if len(before) >= total-100 {
		t.Fatalf("the receiver had already taken %d envelopes: not a mid-stream kill", len(before))
	}

	sink = startCrashSink(t, dir, sink.addr.String())
	connect(sink)
	var got []int
	waitfor.Eventually(t, 30*time.Second, func() error {
		got = seenLines(t, dir)
		if len(got) == 0 || got[len(got)-1] != total-1 {
			return fmt.Errorf("%d lines after the restart, last %v", len(got), got[len(got)-1:])
		}
		for _, c := range sender.Router().Channels() {
			if c.Pending > 0 {
				return fmt.Errorf("%d envelopes not yet acknowledged", c.Pending)
			}
		}
		return nil
	})

	// What the agent saw must be 0..k-1 before the kill, then j..total-1
	// after it, with j <= k: nothing lost (j > k), nothing out of order,
	// and k-j repeats at most.
	k := len(before)
	if !slices.Equal(got[:k], before) {
		t.Fatal("the seen file changed under the dead process")
	}
	for i, v := range before {
		if v != i {
			t.Fatalf("before the kill, the agent saw %d at position %d", v, i)
		}
	}
	after := got[k:]
	j := after[0]
	for i, v := range after {
		if v != j+i {
			t.Fatalf("after the restart, the agent saw %d at position %d (from %d): lost or out of order", v, i, j)
		}
	}
	if j > k {
		t.Fatalf("envelopes %d..%d were lost in the crash", k, j-1)
	}
	// The receiver journals the watermark as each handler returns: only
	// the envelope whose handler ran at the kill can come again.
	if repeats := k - j; repeats > 1 {
		t.Fatalf("%d envelopes delivered again after the crash; at most the one being handled may be", repeats)
	}
	t.Logf("killed after %d delivered; %d delivered again after the restart (its handler ran at the kill)", k, k-j)

	var transitions []string
	failed := 0
	for {
		select {
		case e := <-sub.C:
			switch {
			case e.Type == protocol.EvtChannelChanged:
				transitions = append(transitions, e.Detail)
			case e.Type == protocol.EvtErrorRaised && e.Code == protocol.CodeDeliveryFailed:
				failed++
			}
			continue
		default:
		}
		break
	}
	if !slices.Contains(transitions, "open -> reconnecting") || !slices.Contains(transitions, "reconnecting -> open") {
		t.Fatalf("channel transitions: %v", transitions)
	}
	if failed > 0 {
		t.Fatalf("%d DELIVERY_FAILED events: the sender gave up during the restart", failed)
	}
}

// TestSenderKilledKeepsOutbox: envelopes posted to a receiver that is down
// are written to the sender's outbox (ChannelInfo.Stored), so a sender
// killed with SIGKILL, restarted from the same data dir, delivers them when
// the receiver is back: each exactly once, in order, after those delivered
// before. (TestSenderRestartKeepsOutbox does this with a Close, which
// writes everything; this one depends on what the persister wrote on its
// own.)
func TestSenderKilledKeepsOutbox(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	rec, net, cfg, recvAddr, dir, sender := crashSenderAndSink(t, 100)

	net.Kill(0) // the receiver goes away
	sender.do(t, "post 100 200")
	sender.do(t, "stored 100") // on disk: the channel is down
	sender.kill()

	sender = startCrashChild(t, dir, sender.addr.String(), crashSender+"=1")
	net.Start(0, cfg, rec.register(t))
	sender.do(t, "connect %s %s", net.Nodes[0].ID(), recvAddr())
	waitfor.Eventually(t, 20*time.Second, func() error {
		if rec.len() < 200 {
			return fmt.Errorf("%d of 200 received after both restarts", rec.len())
		}
		return nil
	})
	rec.exactlyOnceInOrder(t, 200)
}

// crashSenderAndSink starts a sink node in this process (rec's "sink"
// agent; cfg starts it again on the same ports) and a sender node process
// on dir connected to it, and has the sender post 0..n-1, all received.
func crashSenderAndSink(t *testing.T, n int) (rec *recorder, net *testnet.Net, cfg node.Config, recvAddr func() string, dir string, sender *crashSink) {
	t.Helper()
	rec = &recorder{}
	net = testnet.New(t, 1, testnet.WithTransport(testnet.TCP))
	rec.register(t)(net.Nodes[0])
	cfg = net.ConfigOf(0)
	recvAddr = func() string { return net.Nodes[0].Host().Addrs()[0].String() }
	dir = t.TempDir()
	sender = startCrashChild(t, dir, "/ip4/127.0.0.1/tcp/0", crashSender+"=1")
	sender.do(t, "connect %s %s", net.Nodes[0].ID(), recvAddr())
	sender.do(t, "post 0 %d", n)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if rec.len() < n {
			return fmt.Errorf("%d of %d received", rec.len(), n)
		}
		return nil
	})
	return rec, net, cfg, recvAddr, dir, sender
}
