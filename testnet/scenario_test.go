package testnet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

func request(t *testing.T, n *node.Node, from, to string, payload any) (*envelope.Envelope, protocol.RoutingResult, error) {
	t.Helper()
	env, err := n.NewEnvelope(from, to, envelope.TypeRequest, payload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return n.Request(ctx, env)
}

func TestTwoNodeRequestResponse(t *testing.T) {
	for _, tr := range []testnet.Transport{testnet.TCP, testnet.QUIC} {
		t.Run(string(tr), func(t *testing.T) {
			net := testnet.New(t, 2, testnet.WithTransport(tr))
			net.Connect(0, 1)
			net.WaitForCards()
			resp, res, err := request(t, net.Nodes[0], "a0", "a1", map[string]string{"text": "hi"})
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			if !res.Delivered || res.Path != protocol.PathRemote {
				t.Fatalf("routing result %+v, want delivered remotely", res)
			}
			wantTarget := "a1@" + net.Nodes[1].ID().String()
			if res.TargetAgentID != wantTarget {
				t.Fatalf("target %q, want %q", res.TargetAgentID, wantTarget)
			}
			if resp.Type != envelope.TypeResponse || string(resp.Payload) != `{"text":"hi"}` {
				t.Fatalf("response %s %s", resp.Type, resp.Payload)
			}
			if resp.Sender != wantTarget || resp.Recipient != "a0@"+net.Nodes[0].ID().String() {
				t.Fatalf("response from %q to %q", resp.Sender, resp.Recipient)
			}
			// Both directions, and the thread holds request and response.
			if _, _, err := request(t, net.Nodes[1], "a1", "a0", 7); err != nil {
				t.Fatalf("reverse request: %v", err)
			}
			th := net.Nodes[0].Router().Thread(resp.CorrelationID)
			if len(th) != 2 || th[0].Type != envelope.TypeRequest || th[1].Type != envelope.TypeResponse {
				t.Fatalf("thread %v", th)
			}
			// QUIC test really used QUIC, TCP test TCP.
			conns := net.Nodes[0].Host().Network().ConnsToPeer(net.Nodes[1].ID())
			if len(conns) == 0 {
				t.Fatal("no connection")
			}
			ma := conns[0].RemoteMultiaddr().String()
			if tr == testnet.QUIC && !contains(ma, "quic-v1") || tr == testnet.TCP && !contains(ma, "/tcp/") {
				t.Fatalf("connection over %s, want %s", ma, tr)
			}
		})
	}
}

func contains(s, sub string) bool {
	return len(s) >= len(sub) && (s == sub || len(sub) == 0 || indexOf(s, sub) >= 0)
}
func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestFiveNodeRequestResponse(t *testing.T) {
	net := testnet.New(t, 5)
	net.FullMesh()
	net.WaitForCards()
	var wg sync.WaitGroup
	errs := make(chan error, 25)
	for i := range net.Nodes {
		for j := range net.Nodes {
			if i == j {
				continue
			}
			wg.Go(func() {
				resp, _, err := request(t, net.Nodes[i], fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", j), map[string]int{"from": i, "to": j})
				if err != nil {
					errs <- fmt.Errorf("a%d -> a%d: %w", i, j, err)
					return
				}
				var got map[string]int
				if err := json.Unmarshal(resp.Payload, &got); err != nil || got["from"] != i || got["to"] != j {
					errs <- fmt.Errorf("a%d -> a%d: echoed %s", i, j, resp.Payload)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Each node sent 4 requests and 4 responses, and received as many. A
	// responder counts its response once the requester acknowledged it,
	// which can be just after the requester saw it: poll.
	waitfor.Eventually(t, 5*time.Second, func() error {
		for i, n := range net.Nodes {
			m := n.Observer().Metrics()
			if m.TotalMessagesSent != 8 || m.TotalMessagesReceived != 8 ||
				m.MessagesByType[envelope.TypeRequest] != 4 || m.MessagesByType[envelope.TypeResponse] != 4 {
				return fmt.Errorf("node %d metrics %+v, want 8 sent and 8 received", i, m)
			}
		}
		return nil
	})
}

func TestLeafFindsLeafThroughDiscovery(t *testing.T) {
	// In a star, a leaf has only the hub's cards from direct contact; the
	// router asks discovery (the DHT through the hub) before answering
	// AGENT_NOT_FOUND, then dials the other leaf (requirement 4.4).
	net := testnet.New(t, 3)
	net.Star(0)
	net.WaitForCards()
	if _, _, err := request(t, net.Nodes[1], "a1", "a0", "x"); err != nil {
		t.Fatalf("leaf -> hub: %v", err)
	}
	waitfor.Eventually(t, 20*time.Second, func() error {
		_, _, err := request(t, net.Nodes[1], "a1", "a2", "x")
		return err
	})
	_, _, err := request(t, net.Nodes[1], "a1", "nobody", "x")
	var nf *agentcard.NotFoundError
	if !errors.Is(err, agentcard.ErrAgentNotFound) || !errors.As(err, &nf) || nf.Query != "nobody" || nf.Where == "" {
		t.Fatalf("unknown agent: %v; want AGENT_NOT_FOUND naming what and where", err)
	}
}

func TestLocalDelivery(t *testing.T) {
	net := testnet.New(t, 1, testnet.WithConfig(func(i int, c *node.Config) {
		c.Agents = append(c.Agents, node.DefaultAgent("b"))
	}))
	resp, res, err := request(t, net.Nodes[0], "a0", "b", []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != protocol.PathLocal || string(resp.Payload) != "[1,2]" {
		t.Fatalf("%+v %s", res, resp.Payload)
	}
}

func TestCustomHandlerAndNotification(t *testing.T) {
	net := testnet.New(t, 2)
	var got atomic.Int32
	received := make(chan *envelope.Envelope, 1)
	card := node.AgentConfig{Name: "counter", Capabilities: []node.CapabilityConfig{{ID: "count"}}}.Card()
	_, err := net.Nodes[1].RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
		got.Add(1)
		if env.Type == envelope.TypeNotification {
			received <- env
			return nil, nil
		}
		return map[string]int32{"count": got.Load()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	net.Connect(0, 1)
	net.WaitForCards()
	env, _ := net.Nodes[0].NewEnvelope("a0", "counter", envelope.TypeNotification, "ping")
	res, err := net.Nodes[0].Send(t.Context(), env)
	if err != nil || !res.Delivered {
		t.Fatalf("notification: %+v %v", res, err)
	}
	select {
	case e := <-received:
		if e.ID != env.ID || e.Sender != "a0@"+net.Nodes[0].ID().String() {
			t.Fatalf("received %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("notification not delivered")
	}
	resp, _, err := request(t, net.Nodes[0], "a0", "counter", nil)
	if err != nil || string(resp.Payload) != `{"count":2}` {
		t.Fatalf("request: %v %s", err, resp.Payload)
	}
	// By capability.
	env, _ = net.Nodes[0].NewEnvelope("a0", "count", envelope.TypeRequest, nil)
	env.Metadata = &envelope.Metadata{RoutingHint: envelope.RoutingHintCapability}
	resp, res, err = net.Nodes[0].Request(t.Context(), env)
	if err != nil || res.TargetAgentID != "counter@"+net.Nodes[1].ID().String() {
		t.Fatalf("by capability: %+v %v", res, err)
	}
	_ = resp
}

func TestHandlerErrorAndPanicBecomeErrorEnvelopes(t *testing.T) {
	net := testnet.New(t, 2)
	card := node.AgentConfig{Name: "grumpy", Capabilities: []node.CapabilityConfig{{ID: "x"}}}.Card()
	_, err := net.Nodes[1].RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
		if string(env.Payload) == `"panic"` {
			panic("boom")
		}
		return nil, errors.New("not today")
	})
	if err != nil {
		t.Fatal(err)
	}
	net.Connect(0, 1)
	net.WaitForCards()
	for _, p := range []string{"please", "panic"} {
		resp, _, err := request(t, net.Nodes[0], "a0", "grumpy", p)
		var re *protocol.RemoteError
		if !errors.As(err, &re) || resp == nil || resp.Type != envelope.TypeError {
			t.Fatalf("%s: %v %v", p, resp, err)
		}
	}
	// The node survived the panic and still answers.
	if _, _, err := request(t, net.Nodes[0], "a0", "a1", 1); err != nil {
		t.Fatal(err)
	}
}

func TestAmbiguousBareName(t *testing.T) {
	net := testnet.New(t, 3, testnet.WithConfig(func(i int, c *node.Config) {
		if i > 0 {
			c.Agents = append(c.Agents, node.DefaultAgent("echo"))
		}
	}))
	net.FullMesh()
	net.WaitForCards()
	_, _, err := request(t, net.Nodes[0], "a0", "echo", 1)
	var amb *agentcard.AmbiguousError
	if !errors.As(err, &amb) || len(amb.Candidates) != 2 || !errors.Is(err, agentcard.ErrAmbiguousAgent) {
		t.Fatalf("got %v, want an ambiguity listing 2 candidates", err)
	}
	// The full address disambiguates.
	if _, _, err := request(t, net.Nodes[0], "a0", amb.Candidates[1], 1); err != nil {
		t.Fatal(err)
	}
}

func TestRestartKeepsIdentityAndRevision(t *testing.T) {
	cfg := testnet.Config(t, 0, testnet.TCP)
	n1, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n1.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	id := n1.ID()
	c1, _ := n1.Registry().Get("a0")
	if err := n1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n1.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	// Same config: same revision. Changed card: revision + 1.
	n2, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := n2.Registry().Get("a0")
	n2.Close()
	cfg.Agents[0].Description = "changed"
	n3, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n3.Close()
	c3, _ := n3.Registry().Get("a0")
	if n3.ID() != id {
		t.Fatalf("identity changed across restart: %s -> %s", id, n3.ID())
	}
	if c2.Revision != c1.Revision || c3.Revision != c1.Revision+1 {
		t.Fatalf("revisions %d, %d, %d; want r, r, r+1", c1.Revision, c2.Revision, c3.Revision)
	}
	testnet.CheckLeaks(t)
}

func TestSendAfterCloseIsChannelClosed(t *testing.T) {
	net := testnet.New(t, 1)
	n := net.Nodes[0]
	env, _ := n.NewEnvelope("a0", "a0", envelope.TypeNotification, nil)
	n.Close()
	_, err := n.Send(t.Context(), env)
	if !errors.Is(err, protocol.ErrChannelClosed) || protocol.CodeOf(err) != protocol.CodeChannelClosed {
		t.Fatalf("got %v, want CHANNEL_CLOSED", err)
	}
}

// TestDeliveryFailedWhenPeerGone: a request to a peer that went away fails
// with DELIVERY_FAILED once the channel's dial and redials are exhausted:
// up to 10 s for the first dial (a QUIC handshake to a gone host waits 5 s
// here), then 0.1 + 0.2 + 0.4 s of delays with at most 1 s per redial, so
// the request's own timeout is set well past that.
func TestDeliveryFailedWhenPeerGone(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) { c.RequestTimeout = 30 * time.Second }))
	net.Connect(0, 1)
	net.WaitForCards()
	net.Nodes[1].Close()
	env, err := net.Nodes[0].NewEnvelope("a0", "a1", envelope.TypeRequest, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, res, err := net.Nodes[0].Request(ctx, env)
	if !errors.Is(err, protocol.ErrDeliveryFailed) || res.Delivered || res.Error == "" {
		t.Fatalf("got %+v %v, want DELIVERY_FAILED", res, err)
	}
}

func TestNoHandlerIsDeliveryFailedAcrossTheWire(t *testing.T) {
	net := testnet.New(t, 2)
	card := node.AgentConfig{Name: "mute", Capabilities: []node.CapabilityConfig{}}.Card()
	if _, err := net.Nodes[1].RegisterAgent(card, nil); err != nil {
		t.Fatal(err)
	}
	net.Connect(0, 1)
	net.WaitForCards()
	_, _, err := request(t, net.Nodes[0], "a0", "mute", 1)
	var re *protocol.RemoteError
	if !errors.As(err, &re) || re.Code() != protocol.CodeDeliveryFailed || !errors.Is(err, protocol.ErrDeliveryFailed) {
		t.Fatalf("got %v, want a remote DELIVERY_FAILED", err)
	}
}

func TestCapabilityNotFound(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	env, _ := net.Nodes[0].NewEnvelope("a0", "translate.klingon", envelope.TypeRequest, nil)
	env.Metadata = &envelope.Metadata{RoutingHint: envelope.RoutingHintCapability}
	_, res, err := net.Nodes[0].Request(t.Context(), env)
	var cnf *agentcard.CapabilityNotFoundError
	if !errors.Is(err, agentcard.ErrCapabilityNotFound) || !errors.As(err, &cnf) || cnf.Capability != "translate.klingon" || res.Delivered {
		t.Fatalf("got %v (%+v), want CAPABILITY_NOT_FOUND naming the capability", err, res)
	}
	// The echo capability exists remotely: found and delivered.
	env, _ = net.Nodes[0].NewEnvelope("a0", "echo", envelope.TypeRequest, 5)
	env.Metadata = &envelope.Metadata{RoutingHint: envelope.RoutingHintCapability}
	if _, res, err := net.Nodes[0].Request(t.Context(), env); err != nil || res.TargetAgentID != "a1@"+net.Nodes[1].ID().String() {
		t.Fatalf("by capability: %+v %v", res, err)
	}
}

func TestOpenChannelProtectsItsPeer(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	if _, _, err := request(t, net.Nodes[0], "a0", "a1", 1); err != nil {
		t.Fatal(err)
	}
	cm := net.Nodes[0].Host().ConnManager()
	chans := net.Nodes[0].Router().Channels()
	if len(chans) != 1 || !cm.IsProtected(net.Nodes[1].ID(), "nova/channel/"+chans[0].ID) {
		t.Fatalf("peer with an open channel is not protected from trimming: %+v", chans)
	}
}

// TestSandboxDiscoveryFilterInRouting: a bare name and a capability are
// resolved among the agents the sender may discover (requirement 10.4,
// property 30); an exact address outside the sandbox is refused with
// SANDBOX_VIOLATION and a security event (property 29).
func TestSandboxDiscoveryFilterInRouting(t *testing.T) {
	net := testnet.New(t, 3, testnet.WithConfig(func(i int, c *node.Config) {
		switch i {
		case 0:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "boxed", Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		case 1:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "helper", Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		case 2:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "helper", Capabilities: []node.CapabilityConfig{{ID: "echo"}, {ID: "assist"}}})
		}
	}))
	net.FullMesh()
	net.WaitForCards()
	n0 := net.Nodes[0]
	labHelper := "helper@" + net.Nodes[1].ID().String()
	openHelper := "helper@" + net.Nodes[2].ID().String()
	// The sandboxed agent sees only the lab's helper: the bare name resolves.
	_, res, err := request(t, n0, "boxed", "helper", 1)
	if err != nil || res.TargetAgentID != labHelper {
		t.Fatalf("boxed -> helper: %+v %v, want %s", res, err, labHelper)
	}
	// The unsandboxed agent sees only the unsandboxed helper.
	_, res, err = request(t, n0, "a0", "helper", 1)
	if err != nil || res.TargetAgentID != openHelper {
		t.Fatalf("a0 -> helper: %+v %v, want %s", res, err, openHelper)
	}
	// A capability only an agent outside the sandbox has is not found for it.
	env, _ := n0.NewEnvelope("boxed", "assist", envelope.TypeRequest, nil)
	env.Metadata = &envelope.Metadata{RoutingHint: envelope.RoutingHintCapability}
	if _, _, err := n0.Request(t.Context(), env); !errors.Is(err, agentcard.ErrCapabilityNotFound) {
		t.Fatalf("boxed by capability outside its sandbox: %v, want CAPABILITY_NOT_FOUND", err)
	}
	// The exact address outside the sandbox: refused, with a security event.
	before := securityEvents(n0, sandbox.CodeSandboxViolation)
	if _, _, err := request(t, n0, "boxed", openHelper, 1); !errors.Is(err, sandbox.ErrSandboxViolation) {
		t.Fatalf("boxed -> %s: %v, want SANDBOX_VIOLATION", openHelper, err)
	}
	if securityEvents(n0, sandbox.CodeSandboxViolation) <= before {
		t.Fatal("no security event for the sandbox violation")
	}
}

// TestRoutesFollowCardChanges: a sender resolves a pair that talks once
// and keeps the result while no card changes; when the target's card
// changes, the next envelope is resolved anew under the new card.
func TestRoutesFollowCardChanges(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	n0, n1 := net.Nodes[0], net.Nodes[1]
	helper := node.AgentConfig{Name: "helper", Capabilities: []node.CapabilityConfig{{ID: "echo"}}}
	if _, err := n1.RegisterAgent(helper.Card(), node.Echo); err != nil {
		t.Fatal(err)
	}
	at := "helper@" + n1.ID().String()
	waitfor.Eventually(t, 10*time.Second, func() error {
		_, _, err := n0.Registry().ResolveShared(at)
		return err
	})
	for range 2 { // the second one goes by the cached route
		if _, res, err := request(t, n0, "a0", "helper", 1); err != nil || res.TargetAgentID != at {
			t.Fatalf("a0 -> helper: %+v %v", res, err)
		}
	}
	// helper moves into a sandbox a0 may not discover: resolved anew, the
	// bare name is not found on the sending node (a stale route would have
	// reached n1 and been refused there with SANDBOX_VIOLATION).
	helper.Sandbox = "lab"
	moved, err := n1.RegisterAgent(helper.Card(), node.Echo)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		if c, _, err := n0.Registry().ResolveShared(at); err != nil || c.Revision != moved.Revision {
			return fmt.Errorf("n0 holds helper at revision %d (%v), want %d", c.Revision, err, moved.Revision)
		}
		return nil
	})
	if _, _, err := request(t, n0, "a0", "helper", 1); !errors.Is(err, agentcard.ErrAgentNotFound) {
		t.Fatalf("a0 -> helper in another sandbox: %v, want AGENT_NOT_FOUND from the sending node", err)
	}
}

// TestAnswersInAThreadPassTierRules: every envelope of a task shares the
// proposal's thread (property 24), and an answer in that thread passes both
// nodes' tier rules as a reply even where the answering tier could not start
// a conversation (L1 -> L2), while the same envelope outside a thread it was
// asked in is a tier violation.
func TestAnswersInAThreadPassTierRules(t *testing.T) {
	l1, l2 := tiers.L1, tiers.L2
	net := testnet.New(t, 2)
	got := make(chan *envelope.Envelope, 8)
	record := func(_ context.Context, env *envelope.Envelope) (any, error) {
		got <- env
		return nil, nil
	}
	planner := node.AgentConfig{Name: "planner", Tier: &l2, Capabilities: []node.CapabilityConfig{{ID: "plan"}}}.Card()
	strat := node.AgentConfig{Name: "strat", Tier: &l1, Capabilities: []node.CapabilityConfig{{ID: "strategy"}}}.Card()
	if _, err := net.Nodes[0].RegisterAgent(planner, record); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Nodes[1].RegisterAgent(strat, record); err != nil {
		t.Fatal(err)
	}
	net.Connect(0, 1)
	net.WaitForCards()
	a, b := net.Nodes[0], net.Nodes[1]
	next := func(want envelope.Type) *envelope.Envelope {
		t.Helper()
		select {
		case e := <-got:
			if e.Type != want {
				t.Fatalf("received %s, want %s: %+v", e.Type, want, e)
			}
			return e
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s delivered", want)
		}
		return nil
	}
	post := func(n *node.Node, env *envelope.Envelope) error {
		_, err := n.Router().Post(t.Context(), env)
		return err
	}

	prop, _ := a.NewEnvelope("planner", "strat", envelope.TypeTaskProposal, map[string]string{"taskDescription": "plan"})
	prop.Metadata = &envelope.Metadata{EscalationJustification: "needs a strategist"}
	if err := post(a, prop); err != nil {
		t.Fatal(err)
	}
	in := next(envelope.TypeTaskProposal)
	accept, _ := envelope.NewFactory().ReplyAs("strat", in, envelope.TypeTaskAccept, map[string]string{"acceptedBy": "strat"})
	if err := post(b, accept); err != nil {
		t.Fatalf("accept in the proposal's thread: %v", err)
	}
	if e := next(envelope.TypeTaskAccept); e.CorrelationID != prop.ID {
		t.Fatalf("accept thread %q, want %q", e.CorrelationID, prop.ID)
	}
	// A later request of the task, in the same thread, and its answer.
	sub, _ := a.NewEnvelope("planner", "strat", envelope.TypeRequest, "step 1")
	sub.CorrelationID = prop.ID
	if err := post(a, sub); err != nil {
		t.Fatal(err)
	}
	in = next(envelope.TypeRequest)
	resp, _ := envelope.NewFactory().ReplyAs("strat", in, envelope.TypeResponse, "done")
	if err := post(b, resp); err != nil {
		t.Fatalf("response in the thread: %v", err)
	}
	if e := next(envelope.TypeResponse); e.CorrelationID != prop.ID {
		t.Fatalf("response thread %q, want %q", e.CorrelationID, prop.ID)
	}
	// Not an answer: a thread strat was never asked in.
	stray, _ := b.NewEnvelope("strat", "planner", envelope.TypeTaskAccept, nil)
	stray.CorrelationID = "never-asked"
	if err := post(b, stray); !errors.Is(err, tiers.ErrTierViolation) {
		t.Fatalf("unsolicited accept: %v, want a tier violation", err)
	}
}

// A request whose answer does not come within the node's requestTimeout
// fails with a deadline error (the timeout is the router's own timer, not
// a context per request), and a later request is answered normally.
func TestRequestTimesOutAfterRequestTimeout(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		c.RequestTimeout = 300 * time.Millisecond
	}))
	release := make(chan struct{})
	card := node.AgentConfig{Name: "slow", Capabilities: []node.CapabilityConfig{{ID: "slow"}}}.Card()
	// The handler outlives its own 300 ms context on purpose: were it to
	// answer when that ends, the answer and the asker's timer would race.
	_, err := net.Nodes[1].RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		return "late", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	net.Connect(0, 1)
	net.WaitForCards()
	env, _ := net.Nodes[0].NewEnvelope("a0", "slow", envelope.TypeRequest, nil)
	start := time.Now()
	_, _, err = net.Nodes[0].Request(t.Context(), env)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("after %v: %v, want a deadline error after the 300 ms request timeout", took, err)
	}
	close(release)
	resp, _, err := request(t, net.Nodes[0], "a0", "a1", "hi")
	if err != nil || string(resp.Payload) != `"hi"` {
		t.Fatalf("next request: %v", err)
	}
}
