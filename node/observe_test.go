package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// tierNode starts a node hosting echo agents t0..t3 with tiers L0..L3.
func tierNode(t *testing.T) *node.Node {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.MDNS = false
	cfg.Agents = nil
	for i := 0; i < 4; i++ {
		tr := tiers.Tier(i)
		cfg.Agents = append(cfg.Agents, node.AgentConfig{Name: fmt.Sprintf("t%d", i), Tier: &tr, Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

var oneWayTypes = []envelope.Type{envelope.TypeNotification, envelope.TypeTaskAccept, envelope.TypeTaskReject,
	envelope.TypeStreamStart, envelope.TypeStreamData, envelope.TypeStreamEnd}

// TestProperty17_RoutingEventEmission: every routed message yields a
// routing-decision event with its id, source, target, path and latency.
func TestProperty17_RoutingEventEmission(t *testing.T) {
	n := tierNode(t)
	sub := n.Observer().Subscribe(100000)
	defer sub.Close()
	rapid.Check(t, func(rt *rapid.T) {
		from := rapid.IntRange(0, 3).Draw(rt, "from")
		to := rapid.IntRange(0, 3).Draw(rt, "to")
		typ := rapid.SampledFrom(oneWayTypes).Draw(rt, "type")
		env, _ := n.NewEnvelope(fmt.Sprintf("t%d", from), fmt.Sprintf("t%d", to), typ, nil)
		res, err := n.Send(context.Background(), env)
		for {
			e := <-sub.C
			if e.Type != protocol.EventRoutingDecision || e.EnvelopeID != env.ID {
				continue
			}
			if e.Sender != fmt.Sprintf("t%d@%s", from, n.ID()) || e.Recipient != fmt.Sprintf("t%d@%s", to, n.ID()) ||
				e.Path != protocol.PathLocal || e.Latency <= 0 || e.Success != (err == nil) || e.Success != res.Delivered {
				rt.Fatalf("routing event %+v for %+v (err %v)", e, res, err)
			}
			return
		}
	})
}

// TestProperty32_MessageMetricsAccuracy: after K sends and J deliveries the
// metrics say K and J, with per-type counts matching.
func TestProperty32_MessageMetricsAccuracy(t *testing.T) {
	n := tierNode(t)
	rapid.Check(t, func(rt *rapid.T) {
		n.Observer().Reset()
		k := rapid.IntRange(0, 30).Draw(rt, "k")
		want := map[envelope.Type]uint64{}
		var sent, received uint64
		for i := 0; i < k; i++ {
			typ := rapid.SampledFrom(oneWayTypes).Draw(rt, "type")
			from, to := rapid.IntRange(0, 3).Draw(rt, "from"), rapid.IntRange(0, 3).Draw(rt, "to")
			env, _ := n.NewEnvelope(fmt.Sprintf("t%d", from), fmt.Sprintf("t%d", to), typ, i)
			if _, err := n.Send(context.Background(), env); err == nil {
				sent++
				received++ // local: delivered to the agent
				want[typ]++
			}
		}
		m := n.Observer().Metrics()
		if m.TotalMessagesSent != sent || m.TotalMessagesReceived != received {
			rt.Fatalf("metrics %d sent %d received, want %d and %d", m.TotalMessagesSent, m.TotalMessagesReceived, sent, received)
		}
		for typ, c := range want {
			if m.MessagesByType[typ] != c {
				rt.Fatalf("%s: %d, want %d", typ, m.MessagesByType[typ], c)
			}
		}
		var total uint64
		for _, c := range m.MessagesByType {
			total += c
		}
		if total != sent {
			rt.Fatalf("by-type total %d, want %d", total, sent)
		}
	})
}

// TestProperty31_CrossTierAuditLog: every cross-tier message is in the
// audit log with its source tier, target tier and type; same-tier ones are not.
func TestProperty31_CrossTierAuditLog(t *testing.T) {
	n := tierNode(t)
	auditPath := filepath.Join(n.Config().DataDir, node.AuditFile)
	rapid.Check(t, func(rt *rapid.T) {
		from, to := rapid.IntRange(0, 3).Draw(rt, "from"), rapid.IntRange(0, 3).Draw(rt, "to")
		typ := rapid.SampledFrom(oneWayTypes).Draw(rt, "type")
		env, _ := n.NewEnvelope(fmt.Sprintf("t%d", from), fmt.Sprintf("t%d", to), typ, nil)
		if _, err := n.Send(context.Background(), env); err != nil {
			return // refused by tier rules: a security event, covered elsewhere
		}
		lines := auditLines(rt, auditPath, env.ID)
		if from == to {
			if len(lines) != 0 {
				rt.Fatalf("same-tier message audited: %v", lines)
			}
			return
		}
		if len(lines) == 0 {
			rt.Fatalf("cross-tier L%d -> L%d %s not audited", from, to, typ)
		}
		for _, e := range lines {
			if e.SourceTier != from || e.TargetTier != to || e.MessageType != typ {
				rt.Fatalf("audit line %+v, want L%d -> L%d %s", e, from, to, typ)
			}
		}
	})
}

func auditLines(t *rapid.T, path, id string) []protocol.Event {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []protocol.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e protocol.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log line is not JSON: %v", err)
		}
		if e.EnvelopeID == id {
			out = append(out, e)
		}
	}
	return out
}

func TestPrometheusMetrics(t *testing.T) {
	n := tierNode(t)
	env, _ := n.NewEnvelope("t0", "t3", envelope.TypeNotification, nil)
	if _, err := n.Send(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	url := n.MetricsURL()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("metrics URL %q is not loopback", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, want := range []string{`nova_messages_sent_total{type="notification"} 1`, `nova_messages_received_total{path="local",type="notification"} 1`,
		"nova_routing_latency_seconds_count", "nova_channel_pending_envelopes", "libp2p_"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestSubscriptionDropsInsteadOfBlocking(t *testing.T) {
	n := tierNode(t)
	sub := n.Observer().Subscribe(1)
	defer sub.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			env, _ := n.NewEnvelope("t0", "t0", envelope.TypeNotification, i)
			n.Send(context.Background(), env)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a slow subscriber blocked the router")
	}
	if sub.Dropped() == 0 {
		t.Fatal("no drops counted")
	}
}

// TestSubscribeFiltersByType: a subscriber that names cards-received gets
// those events and nothing else, neither sent nor counted as dropped; one
// that names nothing still gets every event.
func TestSubscribeFiltersByType(t *testing.T) {
	n := tierNode(t)
	all := n.Observer().Subscribe(1000)
	defer all.Close()
	cards := n.Observer().Subscribe(1, protocol.EventCardsReceived)
	defer cards.Close()
	for i := 0; i < 5; i++ { // more events than cards' buffer holds
		env, _ := n.NewEnvelope("t0", "t1", envelope.TypeNotification, i)
		if _, err := n.Send(context.Background(), env); err != nil {
			t.Fatal(err)
		}
	}
	n.Observer().Emit(protocol.Event{Type: protocol.EventCardsReceived, Peer: n.ID(), Detail: "marker", SourceTier: -1, TargetTier: -1})

	seen := map[string]int{}
	for timeout := time.After(10 * time.Second); seen[protocol.EventCardsReceived] == 0; {
		select {
		case e := <-all.C:
			seen[e.Type]++
		case <-timeout:
			t.Fatalf("unfiltered subscriber saw %v, no cards-received", seen)
		}
	}
	for _, typ := range []string{protocol.EventRoutingDecision, protocol.EventMessageSent, protocol.EventMessageReceived} {
		if seen[typ] < 5 {
			t.Errorf("unfiltered subscriber saw %d %s events, want at least 5 (%v)", seen[typ], typ, seen)
		}
	}
	select {
	case e := <-cards.C:
		if e.Type != protocol.EventCardsReceived || e.Detail != "marker" {
			t.Fatalf("filtered subscriber got %+v, want the cards-received marker", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("filtered subscriber got no cards-received event")
	}
	if d := cards.Dropped(); d != 0 {
		t.Fatalf("filtered subscriber dropped %d events it did not ask for", d)
	}
	select {
	case e := <-cards.C:
		t.Fatalf("filtered subscriber got a second event %+v", e)
	default:
	}
}

// TestPrometheusCodeLabelsBounded: error and security codes can come from
// peers (a nack's code, an agent's error payload), so past a bound new
// codes share one series instead of adding a series each; known codes keep
// theirs, and counts are as before.
func TestPrometheusCodeLabelsBounded(t *testing.T) {
	n := tierNode(t)
	emit := func(typ, code string) {
		n.Observer().Emit(protocol.Event{Type: typ, Code: code, SourceTier: -1, TargetTier: -1})
	}
	emit(protocol.EventError, "APP_SPECIFIC")
	for i := 0; i < 500; i++ {
		emit(protocol.EventError, fmt.Sprintf("PEER_CODE_%d", i))
	}
	emit(protocol.EventError, tiers.CodeTierViolation)
	emit(protocol.EventError, tiers.CodeTierViolation)
	emit(protocol.EventError, "APP_SPECIFIC")
	emit(protocol.EventSecurity, "bad\xffutf8")
	emit(protocol.EventSecurity, protocol.CodeUnauthorizedSender)

	resp, err := http.Get(n.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, want := range []string{`nova_errors_total{code="TIER_VIOLATION"} 2`, `nova_errors_total{code="APP_SPECIFIC"} 2`,
		`nova_security_events_total{code="UNAUTHORIZED_SENDER"} 1`, `nova_security_events_total{code="OTHER"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	series := strings.Count(body, "\nnova_errors_total{")
	if series > 80 {
		t.Errorf("%d nova_errors_total series after 500 distinct peer codes", series)
	}
	if !strings.Contains(body, `nova_errors_total{code="OTHER"}`) {
		t.Error("codes past the bound are not counted as OTHER")
	}
}

// TestFailedSendCountedOnce: a send that fails once (the peer is gone, the
// channel gives up) is one error event and one count, as the node's API
// reports them (status metrics, events, Prometheus), though the router
// reports it both from the channel and from Send.
func TestFailedSendCountedOnce(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithTransport(testnet.TCP))
	net.FullMesh()
	net.WaitForCards()
	a := net.Nodes[0]
	net.Kill(1)
	cl := node.NewClient(a.Config().APISocketPath())
	if _, err := cl.ResetMetrics(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Send(t.Context(), node.SendRequest{To: "a1", Type: envelope.TypeNotification, Payload: json.RawMessage(`"gone"`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Code != protocol.CodeDeliveryFailed {
		t.Fatalf("send to a stopped node: %+v, want DELIVERY_FAILED", res.Error)
	}
	st, err := cl.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Metrics.ErrorCount != 1 {
		t.Errorf("errorCount %d after one failed send, want 1", st.Metrics.ErrorCount)
	}
	// A second failure is counted: only a repeated report of one is not.
	if res2, err := cl.Send(t.Context(), node.SendRequest{To: "a1", Type: envelope.TypeNotification}); err != nil || res2.Error == nil {
		t.Fatalf("second send: %v %+v", err, res2.Error)
	}
	if st, err := cl.Status(t.Context()); err != nil || st.Metrics.ErrorCount != 2 {
		t.Errorf("errorCount %d after two failed sends, want 2 (%v)", st.Metrics.ErrorCount, err)
	}
	var errs []protocol.Event
	err = cl.Events(t.Context(), 0, false, func(e protocol.Event) error {
		if e.Type == protocol.EventError && e.EnvelopeID == res.Sent.ID {
			errs = append(errs, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 {
		t.Errorf("%d error events for the failed envelope, want 1: %+v", len(errs), errs)
	}
	resp, err := http.Get(a.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want := `nova_errors_total{code="DELIVERY_FAILED"} 2` + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

// TestEscalationRefusalAudited: the node that refuses an L2/L3 -> L0/L1
// task proposal without a justification (ESCALATION_REQUIRED) writes it to
// its audit log, once, with both tiers; the same proposal with a
// justification is audited as the cross-tier message it is.
func TestEscalationRefusalAudited(t *testing.T) {
	n := tierNode(t)
	refused, _ := n.NewEnvelope("t3", "t0", envelope.TypeTaskProposal, map[string]string{"task": "review"})
	if _, err := n.Send(t.Context(), refused); !errors.Is(err, tiers.ErrEscalationRequired) {
		t.Fatalf("send: %v, want ESCALATION_REQUIRED", err)
	}
	lines := auditOf(t, filepath.Join(n.Config().DataDir, node.AuditFile), refused.ID)
	if len(lines) != 1 {
		t.Fatalf("%d audit lines for the refused proposal, want 1: %+v", len(lines), lines)
	}
	if e := lines[0]; e.Type != protocol.EventError || e.Code != tiers.CodeEscalationRequired || e.MessageType != envelope.TypeTaskProposal || e.SourceTier != 3 || e.TargetTier != 0 {
		t.Errorf("audit line %+v", e)
	}
	if m := n.Observer().Metrics(); m.SecurityEvents != 0 {
		t.Errorf("an escalation refusal counted as %d security events; it is a refusal, not an attack", m.SecurityEvents)
	}
}

// auditOf returns the audit log's lines about envelope id.
func auditOf(t *testing.T, path, id string) []protocol.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.Event
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var e protocol.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		if e.EnvelopeID == id {
			out = append(out, e)
		}
	}
	return out
}
