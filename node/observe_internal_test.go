package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
)

// auditObserver returns an Observer auditing to a file in a temporary
// directory, and the file's path. It is closed by t.Cleanup. A test that
// runs the Observer in a synctest bubble makes it outside the bubble: the
// audit log's lumberjack.Logger starts a goroutine that never exits, which
// a bubble would report as deadlocked.
func auditObserver(t *testing.T) (*Observer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), AuditFile)
	o, err := newObserver(path, 1000, DefaultConfig().Audit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.close() })
	return o, path
}

// readAudit returns the audit log's lines, each decoded as a JSON object.
func readAudit(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not JSON: %v", err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func testPeer(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkCut reports what is wrong with got, the value a field of orig became.
func checkCut(orig, got string) error {
	if len(orig) <= MaxEventFieldLen {
		if got != orig {
			return fmt.Errorf("a %d-byte value was changed", len(orig))
		}
		return nil
	}
	if len(got) > MaxEventFieldLen {
		return fmt.Errorf("%d bytes, over the bound of %d", len(got), MaxEventFieldLen)
	}
	i := strings.LastIndex(got, "…(+")
	if i < 0 || !strings.HasSuffix(got, " bytes)") {
		return fmt.Errorf("no cut marker in %q", got)
	}
	n, err := strconv.Atoi(got[i+len("…(+") : len(got)-len(" bytes)")])
	if err != nil || got[:i] != orig[:i] || i+n != len(orig) {
		return fmt.Errorf("%q does not say what was cut from a %d-byte value", got, len(orig))
	}
	if utf8.ValidString(orig) && !utf8.ValidString(got) {
		return fmt.Errorf("%q: cut inside a UTF-8 sequence", got)
	}
	return nil
}

// TestEmitCapsEveryStringField: every string field of an event (found by
// reflection, so that a field added to localapi.Event is covered) is cut to
// MaxEventFieldLen bytes, with a marker, in the ring, for subscribers and in
// the audit log; the reviewer's 40 events with 1 MiB fields make a small
// audit log.
func TestEmitCapsEveryStringField(t *testing.T) {
	o, path := auditObserver(t)
	sub := o.Subscribe(1000)
	defer sub.Close()
	p := testPeer(t)
	long := "x" + strings.Repeat("aé€", 1<<20/6) // 1 MiB of 1-, 2- and 3-byte runes, odd offsets
	typ := reflect.TypeFor[localapi.Event]()
	var fields []int
	for i := range typ.NumField() {
		if typ.Field(i).Type.Kind() == reflect.String {
			fields = append(fields, i)
		}
	}
	if len(fields) < 8 {
		t.Fatalf("only %d string fields found in localapi.Event", len(fields))
	}
	audited := 0
	for round := range 40 {
		f := typ.Field(fields[round%len(fields)])
		ev := localapi.Event{Type: protocol.EvtSecurityRaised, Code: protocol.CodeProtocolError, Peer: p, SourceTier: -1, TargetTier: -1}
		reflect.ValueOf(&ev).Elem().FieldByIndex(f.Index).SetString(long)
		o.Record(ev)
		if ev.Type == protocol.EvtSecurityRaised {
			audited++
		}
		got := []localapi.Event{o.Recent(1)[0], <-sub.C}
		for _, g := range got {
			gv := reflect.ValueOf(g)
			for _, i := range fields {
				orig := reflect.ValueOf(ev).Field(i).String()
				if err := checkCut(orig, gv.Field(i).String()); err != nil {
					t.Fatalf("%s (event with a long %s): %v", typ.Field(i).Name, f.Name, err)
				}
			}
		}
	}
	if m := o.Metrics(); m.SecurityEvents != uint64(audited) {
		t.Fatalf("%d security events counted, want %d", m.SecurityEvents, audited)
	}
	lines := readAudit(t, path)
	if len(lines) != audited {
		t.Fatalf("%d audit lines, want %d", len(lines), audited)
	}
	for _, l := range lines {
		for k, v := range l {
			if s, ok := v.(string); ok && k != "peer" && k != "time" && len(s) > MaxEventFieldLen {
				t.Fatalf("audit line's %s has %d bytes", k, len(s))
			}
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > int64(audited)*4096 {
		t.Fatalf("audit log of %d bytes for %d events", st.Size(), audited)
	}
}

// TestPropertyEventFieldCut: cutting keeps a value under the bound as it
// is (the same string, no copy), and cuts a longer one to at most the bound,
// on a UTF-8 boundary, with a marker giving the bytes cut.
func TestPropertyEventFieldCut(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := rapid.OneOf(rapid.String(), rapid.StringN(MaxEventFieldLen-8, MaxEventFieldLen+40, -1),
			rapid.StringOfN(rapid.RuneFrom([]rune{'a', 'é', '€', '𝄞'}), 50, 400, -1),
			rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 600), func(b []byte) string { return string(b) })).Draw(rt, "s")
		got := capField(s)
		if err := checkCut(s, got); err != nil {
			rt.Fatal(err)
		}
		if len(s) <= MaxEventFieldLen && len(s) > 0 && unsafe.StringData(got) != unsafe.StringData(s) {
			rt.Fatal("a value under the bound was copied")
		}
	})
}

// TestAuditRateLimitPerPeer: a peer's flood of security events reaches the
// audit log at most at the bucket's burst and rate, with one summary line
// for what was left out; another peer is not affected; every event is still
// counted and kept.
func TestAuditRateLimitPerPeer(t *testing.T) {
	o, path := auditObserver(t)
	synctest.Test(t, func(t *testing.T) {
		flooder, quiet := testPeer(t), testPeer(t)
		sec := func(p peer.ID, i int) {
			o.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Code: protocol.CodeProtocolError, Peer: p,
				Detail: fmt.Sprintf("frame %d", i), SourceTier: -1, TargetTier: -1})
		}
		count := func(lines []map[string]any, typ string, p peer.ID) int {
			n := 0
			for _, l := range lines {
				if l["type"] == typ && l["peer"] == p.String() {
					n++
				}
			}
			return n
		}
		for i := range 1000 {
			sec(flooder, i)
		}
		for i := range 10 {
			sec(quiet, i)
		}
		lines := readAudit(t, path)
		if n := count(lines, protocol.EvtSecurityRaised, flooder); n != auditBurst {
			t.Fatalf("%d of the flooder's 1000 events audited at once, want the burst %d", n, auditBurst)
		}
		if n := count(lines, protocol.EvtSecurityRaised, quiet); n != 10 {
			t.Fatalf("%d of the quiet peer's 10 events audited, want 10", n)
		}
		m := o.Metrics()
		if m.SecurityEvents != 1010 || m.AuditSuppressed != 800 {
			t.Fatalf("metrics count %d security events, %d suppressed; want 1010 and 800", m.SecurityEvents, m.AuditSuppressed)
		}
		if r := o.Recent(1000); len(r) != 1000 || r[len(r)-1].Detail != "frame 9" {
			t.Fatalf("the ring does not hold the latest events")
		}

		time.Sleep(time.Second) // the bucket refills by auditRate
		sec(flooder, 1000)
		lines = readAudit(t, path)
		want := fmt.Sprintf("800 security events from peer %s suppressed", flooder)
		last := lines[len(lines)-2:]
		if last[0]["type"] != EvtAuditSuppressed || !strings.HasPrefix(last[0]["detail"].(string), want) ||
			last[1]["detail"] != "frame 1000" {
			t.Fatalf("after a refill, the audit log ends with %v; want the summary %q, then the event", last, want)
		}

		// A sustained flood: per second, about auditRate lines and one summary.
		before := count(readAudit(t, path), protocol.EvtSecurityRaised, flooder)
		for range 10 {
			for i := range 1000 {
				sec(flooder, i)
				time.Sleep(time.Millisecond)
			}
		}
		lines = readAudit(t, path)
		got, sums := count(lines, protocol.EvtSecurityRaised, flooder), count(lines, EvtAuditSuppressed, flooder)
		if flood := got - before; flood > auditBurst+10*auditRate || flood < 10*auditRate || sums < 9 || sums > 12 {
			t.Fatalf("10 s of 1,000 events/s: %d lines and %d summaries audited in all, want at most %d lines and about 11 summaries",
				flood, sums, auditBurst+10*auditRate)
		}
		m = o.Metrics()
		if m.SecurityEvents != 1010+1+10000 || m.SecurityEvents-m.AuditSuppressed != uint64(got+10) {
			t.Fatalf("metrics: %d security events, %d suppressed, for %d audited", m.SecurityEvents, m.AuditSuppressed, got+10)
		}

		// What is still pending is written when the Observer closes.
		pending := o.buckets[flooder].kind[auditSecurity].suppressed
		if pending == 0 {
			t.Fatal("nothing pending after a flood")
		}
		if err := o.close(); err != nil {
			t.Fatal(err)
		}
		lines = readAudit(t, path)
		want = fmt.Sprintf("%d security events from peer %s suppressed", pending, flooder)
		if l := lines[len(lines)-1]; l["type"] != EvtAuditSuppressed || !strings.HasPrefix(l["detail"].(string), want) {
			t.Fatalf("after close the audit log ends with %v, want %q", l, want)
		}
	})
}

// TestAuditPeersBounded: the rate limit tracks at most auditPeers peers; the
// one evicted is the idlest, and its pending count is written then.
func TestAuditPeersBounded(t *testing.T) {
	o, path := auditObserver(t)
	synctest.Test(t, func(t *testing.T) {
		first := testPeer(t)
		for range auditBurst + 5 {
			o.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Peer: first, SourceTier: -1, TargetTier: -1})
		}
		for i := range auditPeers {
			time.Sleep(time.Millisecond)
			// Cheap distinct peer IDs: identity multihashes of the index.
			p := peer.ID(fmt.Sprintf("\x00\x08peer%04d", i))
			o.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Peer: p, SourceTier: -1, TargetTier: -1})
			if len(o.buckets) > auditPeers {
				t.Fatalf("%d peers tracked, want at most %d", len(o.buckets), auditPeers)
			}
		}
		if _, ok := o.buckets[first]; ok {
			t.Fatal("the idlest peer was not evicted")
		}
		want := fmt.Sprintf("5 security events from peer %s suppressed", first)
		found := false
		for _, l := range readAudit(t, path) {
			found = found || (l["type"] == EvtAuditSuppressed && strings.HasPrefix(l["detail"].(string), want))
		}
		if !found {
			t.Fatalf("no summary %q on eviction", want)
		}
	})
}

// TestRepeatedErrorKeptOnce: a second report of one failure (same envelope,
// sender and code) is dropped; a different code, sender or envelope is
// not; what is remembered stays bounded, and a failure forgotten past the
// bound counts again.
func TestRepeatedErrorKeptOnce(t *testing.T) {
	o, _ := auditObserver(t)
	fail := func(id, sender, code string) {
		o.Emit(protocol.Event{Type: protocol.EvtErrorRaised, EnvelopeID: id, Sender: sender, Code: code, SourceTier: -1, TargetTier: -1})
	}
	fail("e1", "a@p", protocol.CodeDeliveryFailed)
	fail("e1", "a@p", protocol.CodeDeliveryFailed) // the same failure, reported again
	fail("e1", "a@p", protocol.CodeChannelClosed)
	fail("e1", "b@p", protocol.CodeDeliveryFailed)
	fail("e2", "a@p", protocol.CodeDeliveryFailed)
	fail("", "a@p", protocol.CodeDeliveryFailed) // no envelope: never taken for a repeat
	fail("", "a@p", protocol.CodeDeliveryFailed)
	if m := o.Metrics(); m.ErrorCount != 6 {
		t.Fatalf("errorCount %d, want 6", m.ErrorCount)
	}
	if n := len(o.Recent(0)); n != 6 {
		t.Fatalf("%d events kept, want 6", n)
	}
	for i := range 3 * errorsRemembered {
		fail(strconv.Itoa(i), "a@p", protocol.CodeDeliveryFailed)
	}
	if len(o.errs.set) != errorsRemembered || len(o.errs.ring) != errorsRemembered {
		t.Fatalf("remembers %d (ring %d), want %d", len(o.errs.set), len(o.errs.ring), errorsRemembered)
	}
	before := o.Metrics().ErrorCount
	fail("e1", "a@p", protocol.CodeDeliveryFailed) // forgotten by now
	if got := o.Metrics().ErrorCount; got != before+1 {
		t.Fatalf("errorCount %d, want %d", got, before+1)
	}
}

// TestEscalationRefusalFromPeerAudited: an escalation refusal that a peer
// reported (its nack's code) is audited like a local one, and is not a
// security event, so the security rate limit does not apply.
func TestEscalationRefusalFromPeerAudited(t *testing.T) {
	o, path := auditObserver(t)
	p := testPeer(t)
	for i := range 3 * auditBurst {
		o.Emit(protocol.Event{Type: protocol.EvtErrorRaised, EnvelopeID: strconv.Itoa(i), Sender: "callisto@x", Recipient: "sun@y",
			MessageType: envelope.TypeTaskProposal, Code: "ESCALATION_REQUIRED", Peer: p, SourceTier: -1, TargetTier: -1})
	}
	o.Emit(protocol.Event{Type: protocol.EvtErrorRaised, EnvelopeID: "other", Code: protocol.CodeDeliveryFailed, SourceTier: -1, TargetTier: -1})
	lines := readAudit(t, path)
	if len(lines) != 3*auditBurst {
		t.Fatalf("%d audit lines, want %d (each escalation refusal, no other error)", len(lines), 3*auditBurst)
	}
	if l := lines[0]; l["type"] != protocol.EvtErrorRaised || l["code"] != "ESCALATION_REQUIRED" || l["peer"] != p.String() {
		t.Fatalf("audit line %v", l)
	}
}

// The average routing latency is of the messages routed: a failure (here a
// lookup that waited a second and found nothing) is an error, and does
// not swamp the average.
func TestAverageRoutingLatencyOfRoutedMessages(t *testing.T) {
	o, _ := auditObserver(t)
	decision := func(ok bool, d time.Duration) {
		o.Emit(protocol.Event{Type: protocol.EvtRouteDecided, Time: time.Now(), EnvelopeID: "e", Sender: "a@p", Recipient: "b@p",
			MessageType: envelope.TypeRequest, Success: ok, Latency: d, SourceTier: -1, TargetTier: -1})
	}
	decision(true, time.Millisecond)
	decision(true, 3*time.Millisecond)
	decision(false, time.Second)
	if got := o.Metrics().AverageRoutingLatencyMs; got != 2 {
		t.Fatalf("average routing latency %v ms, want 2 (the failed decision left out)", got)
	}
}

// TestProperty34_InvocationEventsRoundTrip follows invocation records the
// way a node keeps and serves them: a tool call through the node's MCP face
// makes a record, the node's invocation hook turns it into an
// mcp-invocation event (tool, serving agent, outcome, error code, start,
// duration), and the local API serves that event as JSON. The event must
// describe the call the test made (its tool, agent, outcome and code, a
// start and a duration within the call's), and the event read back through
// the API must equal the one the node emitted. The record's arguments and
// result are not part of the event: a node does not keep them.
func TestProperty34_InvocationEventsRoundTrip(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.MDNS = false
	cfg.Agents = []AgentConfig{{Name: "tools", Capabilities: []CapabilityConfig{{ID: "tools"}}}}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}

	var outcome, message string // the next call's, set before the call
	const nTools = 3
	for k := range nTools {
		h := func(context.Context, json.RawMessage) (mcpbridge.Result, error) {
			switch outcome {
			case "error":
				return mcpbridge.Result{}, errors.New(message)
			case "isError":
				return mcpbridge.Result{Content: json.RawMessage(`"no"`), IsError: true}, nil
			}
			return mcpbridge.Result{Content: json.RawMessage(`"ok"`)}, nil
		}
		if err := n.mcp.reg.RegisterTool(mcpbridge.Tool{Agent: "tools", Name: fmt.Sprintf("t%d", k)}, h); err != nil {
			t.Fatal(err)
		}
	}
	sub := n.obs.Subscribe(16, localapi.EvtMCPInvoked)
	defer sub.Close()
	client := localapi.NewClient(cfg.APISocketPath())

	rapid.Check(t, func(rt *rapid.T) {
		tool := fmt.Sprintf("tools.t%d", rapid.IntRange(0, nTools-1).Draw(rt, "tool"))
		outcome = rapid.SampledFrom([]string{"ok", "error", "isError"}).Draw(rt, "outcome")
		message = rapid.StringMatching(`[a-z ]{1,40}`).Draw(rt, "message")
		args := json.RawMessage(fmt.Sprintf(`{"n":%d}`, rapid.IntRange(0, 1000).Draw(rt, "arg")))

		before := time.Now()
		res, err := n.MCP().CallTool(rt.Context(), tool, args)
		after := time.Now()
		if err != nil || res.IsError != (outcome != "ok") {
			rt.Fatalf("call %s (%s): %+v, %v", tool, outcome, res, err)
		}
		var ev localapi.Event
		select {
		case ev = <-sub.C:
		default:
			rt.Fatalf("call %s: no %s event", tool, localapi.EvtMCPInvoked)
		}

		// The event describes the call the test made.
		wantCode, wantDetail := "", tool
		switch outcome {
		case "error":
			wantCode, wantDetail = mcpbridge.CodeToolFailed, tool+": "+mcpbridge.CodeToolFailed+": "+message
		case "isError":
			wantCode, wantDetail = mcpbridge.CodeToolFailed, tool+": "+mcpbridge.CodeToolFailed+": tool reported an error"
		}
		if ev.Type != localapi.EvtMCPInvoked || ev.Sender != "tools" || ev.Success != (outcome == "ok") || ev.Code != wantCode || ev.Detail != wantDetail {
			rt.Fatalf("call %s (%s): event %+v, want sender tools, code %q, detail %q", tool, outcome, ev, wantCode, wantDetail)
		}
		if ev.Time.Before(before.Truncate(time.Millisecond)) || ev.Time.After(after) {
			rt.Fatalf("event time %v outside the call [%v, %v]", ev.Time, before, after)
		}
		if ev.Latency < 0 || ev.Latency > after.Sub(before) {
			rt.Fatalf("event duration %v, the call took %v", ev.Latency, after.Sub(before))
		}

		// The same event, as the local API serves it.
		var served []localapi.Event
		if err := client.Events(rt.Context(), 4, false, func(e localapi.Event) error {
			if e.Type == localapi.EvtMCPInvoked {
				served = append(served, e)
			}
			return nil
		}); err != nil {
			rt.Fatal(err)
		}
		if len(served) == 0 {
			rt.Fatalf("the API serves no %s event", localapi.EvtMCPInvoked)
		}
		got := served[len(served)-1]
		if !got.Time.Equal(ev.Time) {
			rt.Fatalf("served time %v, emitted %v", got.Time, ev.Time)
		}
		got.Time = ev.Time
		if !reflect.DeepEqual(got, ev) {
			rt.Fatalf("served\n%+v\nemitted\n%+v", got, ev)
		}
	})
}

// The audit line appendAuditJSON writes is byte for byte the line
// encoding/json's Marshal writes for the same event, for every field set or
// empty, strings that need escaping (quotes, control characters, HTML
// characters, U+2028 and U+2029, invalid UTF-8), times in any zone, and a
// peer repeated or changed between lines (its cached text); and a time
// RFC 3339 cannot express is left to encoding/json.
func TestPropertyAuditLineAsEncodingJSON(t *testing.T) {
	peers := []peer.ID{testPeer(t), testPeer(t), testPeer(t)}
	str := func(rt *rapid.T, name string) string {
		return rapid.OneOf(rapid.Just(""), rapid.String(),
			rapid.StringOfN(rapid.RuneFrom([]rune{'a', '"', '\\', '<', '>', '&', '\b', '\f', '\n', '\r', '\t', 0, 0x1f, 0x7f, 'é', '\u2028', '\u2029', '𝄞', utf8.RuneError}), 0, 40, -1),
			rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 40), func(b []byte) string { return string(b) })).Draw(rt, name)
	}
	var last peerText
	rapid.Check(t, func(rt *rapid.T) {
		zone := time.FixedZone("z", rapid.IntRange(-30*3600, 30*3600).Draw(rt, "offset"))
		at := time.Unix(rapid.Int64Range(-70e9, 300e9).Draw(rt, "sec"), rapid.Int64Range(0, 999999999).Draw(rt, "nsec"))
		if rapid.Bool().Draw(rt, "utc") {
			at = at.UTC()
		} else {
			at = at.In(zone)
		}
		ev := localapi.Event{
			Type: str(rt, "type"), Time: at, EnvelopeID: str(rt, "id"), Sender: str(rt, "sender"),
			Recipient: str(rt, "recipient"), MessageType: envelope.Type(str(rt, "messageType")), Path: str(rt, "path"),
			Latency: time.Duration(rapid.OneOf(rapid.Just(int64(0)), rapid.Int64()).Draw(rt, "latency")),
			Success: rapid.Bool().Draw(rt, "success"), Code: str(rt, "code"), Detail: str(rt, "detail"),
			Peer:       rapid.SampledFrom(append([]peer.ID{""}, peers...)).Draw(rt, "peer"),
			SourceTier: rapid.IntRange(-1, 3).Draw(rt, "source"), TargetTier: rapid.Int().Draw(rt, "target"),
		}
		want, werr := json.Marshal(ev)
		got, ok := appendAuditJSON(nil, &ev, &last)
		if !ok {
			if werr == nil {
				rt.Fatalf("left to encoding/json, which encodes it: %s", want)
			}
			return
		}
		if werr != nil {
			rt.Fatalf("encoded %s; encoding/json: %v", got, werr)
		}
		if string(got) != string(want) {
			rt.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}

// The Observer's audit log holds, for a cross-tier message, the line
// encoding/json writes, ended by a newline.
func TestAuditLineOnDisk(t *testing.T) {
	o, path := auditObserver(t)
	p := testPeer(t)
	ev := localapi.Event{Type: protocol.EvtMessageReceived, Time: time.Date(2026, 11, 27, 22, 3, 7, 120, time.UTC), EnvelopeID: "e<1>",
		Sender: "a@x", Recipient: "b\u2028@y", MessageType: envelope.TypeNotification, Path: "broadcast", Success: true,
		Detail: "tab\there \"q\" \xff", Peer: p, SourceTier: 0, TargetTier: 2}
	o.Record(ev)
	o.Record(ev)
	want, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if w := string(want) + "\n" + string(want) + "\n"; string(got) != w {
		t.Fatalf("audit log:\n%s\nwant:\n%s", got, w)
	}
}
