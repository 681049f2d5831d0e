package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
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

// TestProperty17_RoutingEventEmission: every message routed, locally, to
// the other node or broadcast, yields on its sender's node one
// routing-decision event with its id, source, target, type, path, a
// latency within the call's (the result's) and its outcome; a delivered message yields a
// message-sent there and a message-received (with its path) on the node of
// each agent it reached and nowhere else; a refused one (tier violation,
// unknown sender) yields an error event with its code, and neither.
func TestProperty17_RoutingEventEmission(t *testing.T) {
	net := tierPair(t)
	var subs [2]*node.Subscription
	for i, n := range net.Nodes {
		subs[i] = n.Observer().Subscribe(1<<16, protocol.EvtRouteDecided, protocol.EvtMessageSent,
			protocol.EvtMessageReceived, protocol.EvtErrorRaised)
		defer subs[i].Close()
	}
	rapid.Check(t, func(rt *rapid.T) {
		ops := rapid.SliceOfN(sendOpGen(), 1, 4).Draw(rt, "ops")
		byID := map[string]sendOp{}
		took := map[string]time.Duration{}
		results := map[string]protocol.RoutingResult{}
		want := map[evKey]int{}
		reach := map[evKey][]string{} // of a message-received key: the agents reached
		for _, op := range ops {
			env, res, d, err := op.send(rt, net, nil)
			byID[env.ID], took[env.ID], results[env.ID] = op, d, res
			if err != nil {
				// A refused send to a known agent names the path it was
				// routed to; one from an unknown agent took none, and its
				// path is not checked.
				path := ""
				if op.kind == opDirect {
					path = op.path()
				}
				want[evKey{op.node, protocol.EvtRouteDecided, env.ID, path}]++
				want[evKey{op.node, protocol.EvtErrorRaised, env.ID, path}]++
				continue
			}
			want[evKey{op.node, protocol.EvtRouteDecided, env.ID, op.path()}]++
			want[evKey{op.node, protocol.EvtMessageSent, env.ID, op.path()}]++
			for i, rs := range op.receivers(net) {
				if len(rs) > 0 {
					k := evKey{i, protocol.EvtMessageReceived, env.ID, op.path()}
					want[k], reach[k] = len(rs), slices.Sorted(slices.Values(rs))
				}
			}
		}
		got := collectEvents(rt, subs, want, func(i int, e localapi.Event) evKey {
			if !e.Success && byID[e.EnvelopeID].kind != opDirect {
				e.Path = ""
			}
			return evKey{i, e.Type, e.EnvelopeID, e.Path}
		})
		for k, n := range want {
			if len(got[k]) != n {
				rt.Fatalf("%v: %d %s events on node %d with path %q, want %d; all: %v", byID[k.id], len(got[k]), k.typ, k.node, k.path, n, got)
			}
		}
		for k, evs := range got {
			op := byID[k.id]
			if want[k] == 0 {
				rt.Fatalf("%v: unexpected %s events on node %d with path %q: %+v", op, k.typ, k.node, k.path, evs)
			}
			code := op.wantCode()
			var reached []string
			for _, e := range evs {
				bad := e.MessageType != op.typ || e.Sender != op.sender(net)
				switch e.Type {
				case protocol.EvtRouteDecided:
					// The result's latency is the event's, cut to the microsecond.
					bad = bad || e.Recipient != op.recipient(net) || e.Success != (code == "") || e.Code != code ||
						e.Latency < 0 || e.Latency > took[k.id] || float64(e.Latency.Microseconds())/1000 != results[k.id].LatencyMs
				case protocol.EvtMessageSent:
					bad = bad || e.Recipient != op.recipient(net) || !e.Success
				case protocol.EvtErrorRaised:
					bad = bad || e.Recipient != op.recipient(net) || e.Success || e.Code != code
				case protocol.EvtMessageReceived:
					reached = append(reached, e.Recipient)
					bad = bad || !e.Success || e.Peer != net.Nodes[op.node].ID()
				}
				if bad {
					rt.Fatalf("%v (sent in %v): node %d event %+v", op, took[k.id], k.node, e)
				}
			}
			if k.typ == protocol.EvtMessageReceived {
				if slices.Sort(reached); !slices.Equal(reached, reach[k]) {
					rt.Fatalf("%v: node %d delivered to %v, want %v", op, k.node, reached, reach[k])
				}
			}
		}
	})
}

// TestProperty32_MessageMetricsAccuracy: after any mix of sends between the
// agents of two nodes (local, remote both ways, broadcasts, and sends
// refused by the tier rules or from an unknown agent), each node's metrics,
// reset before, count exactly the messages it sent (by type) and those its
// agents received, one error per refused send, and as average routing
// latency the mean of its delivered sends' latencies.
func TestProperty32_MessageMetricsAccuracy(t *testing.T) {
	net := tierPair(t)
	rapid.Check(t, func(rt *rapid.T) {
		for i, n := range net.Nodes {
			n.Observer().Reset()
			if m := n.Observer().Metrics(); m.TotalMessagesSent|m.TotalMessagesReceived|m.ErrorCount != 0 ||
				len(m.MessagesByType) != 0 || m.AverageRoutingLatencyMs != 0 {
				rt.Fatalf("node %d after reset: %+v", i, m)
			}
		}
		ops := rapid.SliceOfN(sendOpGen(), 0, 12).Draw(rt, "ops")
		var want [2]localapi.Metrics
		var latency [2][]float64 // ms, of the delivered sends
		var total uint64         // messages sent and received, both nodes
		for i := range want {
			want[i].MessagesByType = map[envelope.Type]uint64{}
		}
		for i, op := range ops {
			_, res, _, err := op.send(rt, net, i)
			w := &want[op.node]
			if err != nil {
				w.ErrorCount++
				continue
			}
			w.TotalMessagesSent++
			w.MessagesByType[op.typ]++
			latency[op.node] = append(latency[op.node], res.LatencyMs)
			total++
			for j, rs := range op.receivers(net) {
				want[j].TotalMessagesReceived += uint64(len(rs))
				total += uint64(len(rs))
			}
		}
		// Remote and broadcast deliveries are counted when they arrive.
		// Wait for the sum, not each count, so that a count on the wrong
		// side fails the comparison at once.
		var m [2]localapi.Metrics
		_ = waitfor.Within(5*time.Second, func() error {
			m[0], m[1] = net.Nodes[0].Observer().Metrics(), net.Nodes[1].Observer().Metrics()
			if sum := m[0].TotalMessagesSent + m[0].TotalMessagesReceived + m[1].TotalMessagesSent + m[1].TotalMessagesReceived; sum < total {
				return fmt.Errorf("%d messages counted, want %d", sum, total)
			}
			return nil
		})
		for i := range m {
			got, w := m[i], want[i]
			if got.TotalMessagesSent != w.TotalMessagesSent || got.TotalMessagesReceived != w.TotalMessagesReceived ||
				got.ErrorCount != w.ErrorCount || !maps.Equal(got.MessagesByType, w.MessagesByType) {
				rt.Fatalf("node %d: %d sent, %d received, %d errors, by type %v; want %d, %d, %d, %v",
					i, got.TotalMessagesSent, got.TotalMessagesReceived, got.ErrorCount, got.MessagesByType,
					w.TotalMessagesSent, w.TotalMessagesReceived, w.ErrorCount, w.MessagesByType)
			}
			// The results' latencies are cut to the microsecond.
			mean := 0.0
			for _, l := range latency[i] {
				mean += l / float64(len(latency[i]))
			}
			if avg := got.AverageRoutingLatencyMs; len(latency[i]) > 0 && (avg <= 0 || math.Abs(avg-mean) > 0.001+1e-9) ||
				len(latency[i]) == 0 && avg != 0 {
				rt.Fatalf("node %d: average routing latency %v ms, want the mean %v ms of %v", i, avg, mean, latency[i])
			}
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

func auditLines(t *rapid.T, path, id string) []localapi.Event {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []localapi.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e localapi.Event
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
	resp := getLocal(t, n, url)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, want := range []string{`nova_messages_sent_total{type="notification"} 1`, `nova_messages_received_total{path="local",type="notification"} 1`,
		"nova_routing_latency_seconds_count", "nova_channel_pending_envelopes", "libp2p_",
		// the stores peers fill and their refusals at a bound
		"nova_dht_records ", "nova_dht_record_bytes ", "nova_dht_records_refused_total 0", "nova_dht_providers ",
		"nova_dht_providers_refused_total 0", "nova_dht_cards_refused_total 0", "nova_discovery_rejoins_total 0", "nova_crdt_updates_refused_total 0", "nova_peers_forgotten_total 0"} {
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
	cards := n.Observer().Subscribe(1, protocol.EvtCardsReceived)
	defer cards.Close()
	for i := 0; i < 5; i++ { // more events than cards' buffer holds
		env, _ := n.NewEnvelope("t0", "t1", envelope.TypeNotification, i)
		if _, err := n.Send(context.Background(), env); err != nil {
			t.Fatal(err)
		}
	}
	n.Observer().Emit(protocol.Event{Type: protocol.EvtCardsReceived, Peer: n.ID(), Detail: "marker", SourceTier: -1, TargetTier: -1})

	seen := map[string]int{}
	for timeout := time.After(10 * time.Second); seen[protocol.EvtCardsReceived] == 0; {
		select {
		case e := <-all.C:
			seen[e.Type]++
		case <-timeout:
			t.Fatalf("unfiltered subscriber saw %v, no cards-received", seen)
		}
	}
	for _, typ := range []string{protocol.EvtRouteDecided, protocol.EvtMessageSent, protocol.EvtMessageReceived} {
		if seen[typ] < 5 {
			t.Errorf("unfiltered subscriber saw %d %s events, want at least 5 (%v)", seen[typ], typ, seen)
		}
	}
	select {
	case e := <-cards.C:
		if e.Type != protocol.EvtCardsReceived || e.Detail != "marker" {
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
	emit(protocol.EvtErrorRaised, "APP_SPECIFIC")
	for i := 0; i < 500; i++ {
		emit(protocol.EvtErrorRaised, fmt.Sprintf("PEER_CODE_%d", i))
	}
	emit(protocol.EvtErrorRaised, tiers.CodeTierViolation)
	emit(protocol.EvtErrorRaised, tiers.CodeTierViolation)
	emit(protocol.EvtErrorRaised, "APP_SPECIFIC")
	emit(protocol.EvtSecurityRaised, "bad\xffutf8")
	emit(protocol.EvtSecurityRaised, protocol.CodeUnauthorizedSender)

	resp := getLocal(t, n, n.MetricsURL())
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
	cl := localapi.NewClient(a.Config().APISocketPath())
	if _, err := cl.ResetMetrics(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Send(t.Context(), localapi.SendRequest{To: "a1", Type: envelope.TypeNotification, Payload: json.RawMessage(`"gone"`)})
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
	if res2, err := cl.Send(t.Context(), localapi.SendRequest{To: "a1", Type: envelope.TypeNotification}); err != nil || res2.Error == nil {
		t.Fatalf("second send: %v %+v", err, res2.Error)
	}
	if st, err := cl.Status(t.Context()); err != nil || st.Metrics.ErrorCount != 2 {
		t.Errorf("errorCount %d after two failed sends, want 2 (%v)", st.Metrics.ErrorCount, err)
	}
	var errs []localapi.Event
	err = cl.Events(t.Context(), 0, false, func(e localapi.Event) error {
		if e.Type == protocol.EvtErrorRaised && e.EnvelopeID == res.Sent.ID {
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
	resp := getLocal(t, a, a.MetricsURL())
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
	if e := lines[0]; e.Type != protocol.EvtErrorRaised || e.Code != tiers.CodeEscalationRequired || e.MessageType != envelope.TypeTaskProposal || e.SourceTier != 3 || e.TargetTier != 0 {
		t.Errorf("audit line %+v", e)
	}
	if m := n.Observer().Metrics(); m.SecurityEvents != 0 {
		t.Errorf("an escalation refusal counted as %d security events; it is a refusal, not an attack", m.SecurityEvents)
	}
}

// auditOf returns the audit log's lines about envelope id.
func auditOf(t *testing.T, path, id string) []localapi.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []localapi.Event
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var e localapi.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		if e.EnvelopeID == id {
			out = append(out, e)
		}
	}
	return out
}
