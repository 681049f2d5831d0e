package sandbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/sandbox"
)

const peerA, peerB = "12D3KooWPeerA", "12D3KooWPeerB"

func TestAllowlisted(t *testing.T) {
	p := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{
		"europa",      // a bare name: every peer's europa
		"io@" + peerA, // an address: only peerA's io
		"",            // ignored
		"a@b",         // a name containing '@', as an address
		"Atlas",       // case matters
	}}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"europa", true},
		{"europa@" + peerA, true},
		{"europa@" + peerB, true},
		{"io@" + peerA, true},
		{"io@" + peerB, false},
		{"io", false}, // the address entry cannot match an id without a peer
		{"", false},   // the empty entry matches nothing
		{"@" + peerA, false},
		{"a@b", true},
		{"a@b@" + peerA, true}, // bare name is the part before the last '@'
		{"a@" + peerA, false},
		{"atlas", false},
		{"Atlas@" + peerB, true},
		{"europa2", false},
		{"europa@", true}, // bare name "europa"
	} {
		if got := p.Allowlisted(sandbox.Agent{ID: tc.id}); got != tc.want {
			t.Errorf("Allowlisted(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
	if (sandbox.Policy{}).Allowlisted(sandbox.Agent{ID: "europa"}) {
		t.Error("empty allow list matched")
	}
}

func TestCheckReach(t *testing.T) {
	enforced := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"gateway", "io@" + peerB}}
	off := sandbox.Policy{Enforced: false, CrossSandboxAllowList: nil}
	a := func(id, sb string) sandbox.Agent { return sandbox.Agent{ID: id, Sandbox: sb} }
	for _, tc := range []struct {
		name     string
		p        sandbox.Policy
		from, to sandbox.Agent
		want     bool
	}{
		{"not enforced, different sandboxes", off, a("x", "s1"), a("y", "s2"), true},
		{"not enforced, sandboxed to unsandboxed", off, a("x", "s1"), a("y", ""), true},
		{"same sandbox", enforced, a("x", "s1"), a("y@"+peerA, "s1"), true},
		{"both unsandboxed", enforced, a("x", ""), a("y", ""), true},
		{"different sandboxes", enforced, a("x", "s1"), a("y", "s2"), false},
		{"sandboxed to unsandboxed", enforced, a("x", "s1"), a("y", ""), false},
		{"unsandboxed to sandboxed", enforced, a("x", ""), a("y", "s1"), false},
		{"target allowlisted by name", enforced, a("x", "s1"), a("gateway@"+peerA, "s2"), true},
		{"target allowlisted by address", enforced, a("x", "s1"), a("io@"+peerB, ""), true},
		{"target's name on another peer", enforced, a("x", "s1"), a("io@"+peerA, ""), false},
		{"sender allowlisted is not enough", enforced, a("gateway", "s1"), a("y", "s2"), false},
		{"sandbox ids are case-sensitive", enforced, a("x", "S1"), a("y", "s1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.p.CheckReach(tc.from, tc.to)
			if d.Allowed != tc.want {
				t.Fatalf("CheckReach(%v, %v).Allowed = %v, want %v", tc.from, tc.to, d.Allowed, tc.want)
			}
			if d.Allowed {
				if d.Err != nil || d.Event != nil {
					t.Fatalf("allowed decision carries %v / %+v", d.Err, d.Event)
				}
				return
			}
			checkViolation(t, d.Err, sandbox.ActionReach, tc.from, tc.to)
			want := &sandbox.SecurityEvent{
				Kind: "sandbox-violation", Code: "SANDBOX_VIOLATION", Action: "reach",
				From: tc.from, To: tc.to, Reason: d.Event.Reason,
			}
			if !reflect.DeepEqual(d.Event, want) {
				t.Errorf("Event = %+v, want %+v", d.Event, want)
			}
			for _, s := range []string{fmt.Sprintf("%q", tc.from.ID), fmt.Sprintf("%q", tc.to.ID), "reach"} {
				if !strings.Contains(d.Event.Reason, s) {
					t.Errorf("Reason %q does not mention %s", d.Event.Reason, s)
				}
			}
		})
	}
}

func TestCheckDiscover(t *testing.T) {
	enforced := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"auditor", "gateway"}}
	a := func(id, sb string) sandbox.Agent { return sandbox.Agent{ID: id, Sandbox: sb} }
	for _, tc := range []struct {
		name           string
		p              sandbox.Policy
		viewer, target sandbox.Agent
		want           bool
	}{
		{"not enforced", sandbox.Policy{}, a("x", "s1"), a("y", "s2"), true},
		{"same sandbox", enforced, a("x", "s1"), a("y", "s1"), true},
		{"both unsandboxed", enforced, a("x", ""), a("y", ""), true},
		{"different sandboxes", enforced, a("x", "s1"), a("y", "s2"), false},
		{"sandboxed viewer, unsandboxed target", enforced, a("x", "s1"), a("y", ""), false},
		{"unsandboxed viewer, sandboxed target", enforced, a("x", ""), a("y", "s1"), false},
		{"viewer granted", enforced, a("auditor@"+peerA, "s1"), a("y", "s2"), true},
		{"target allowlisted", enforced, a("x", "s1"), a("gateway", ""), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.p.CheckDiscover(tc.viewer, tc.target)
			if d.Allowed != tc.want {
				t.Fatalf("CheckDiscover(%v, %v).Allowed = %v, want %v", tc.viewer, tc.target, d.Allowed, tc.want)
			}
			if d.Event != nil {
				t.Errorf("discovery decision carries an event: %+v", d.Event)
			}
			if d.Allowed {
				if d.Err != nil {
					t.Errorf("allowed decision carries %v", d.Err)
				}
				return
			}
			checkViolation(t, d.Err, sandbox.ActionDiscover, tc.viewer, tc.target)
		})
	}
}

func checkViolation(t *testing.T, err error, action string, from, to sandbox.Agent) {
	t.Helper()
	if !errors.Is(err, sandbox.ErrSandboxViolation) {
		t.Fatalf("Err = %v, does not match ErrSandboxViolation", err)
	}
	if !errors.Is(fmt.Errorf("deliver: %w", err), sandbox.ErrSandboxViolation) {
		t.Error("wrapped error does not match ErrSandboxViolation")
	}
	var v *sandbox.ViolationError
	if !errors.As(err, &v) {
		t.Fatalf("Err = %T, want *ViolationError", err)
	}
	if v.Action != action || v.From != from || v.To != to {
		t.Errorf("ViolationError = %+v, want action %s from %v to %v", *v, action, from, to)
	}
	if v.Code() != "SANDBOX_VIOLATION" {
		t.Errorf("Code() = %q", v.Code())
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "sandbox: sandbox violation: ") {
		t.Errorf("message %q lacks the prefix", msg)
	}
	for _, s := range []string{fmt.Sprintf("%q", from.ID), fmt.Sprintf("%q", to.ID), action} {
		if !strings.Contains(msg, s) {
			t.Errorf("message %q does not mention %s", msg, s)
		}
	}
	for _, ag := range []sandbox.Agent{from, to} {
		want := "unsandboxed"
		if ag.Sandbox != "" {
			want = fmt.Sprintf("sandbox %q", ag.Sandbox)
		}
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not mention %s", msg, want)
		}
	}
}

func TestAgentString(t *testing.T) {
	if got := (sandbox.Agent{ID: "io@" + peerA, Sandbox: "lab"}).String(); got != `"io@12D3KooWPeerA" (sandbox "lab")` {
		t.Errorf("String() = %s", got)
	}
	if got := (sandbox.Agent{ID: "sun"}).String(); got != `"sun" (unsandboxed)` {
		t.Errorf("String() = %s", got)
	}
}

func TestFilter(t *testing.T) {
	type card struct {
		id, sandbox string
	}
	agentOf := func(c card) sandbox.Agent { return sandbox.Agent{ID: c.id, Sandbox: c.sandbox} }
	cards := []card{
		{"a", "s1"}, {"b", "s2"}, {"c", ""}, {"d", "s1"}, {"gateway@" + peerA, "s3"}, {"e", "s2"}, {"f", "s1"},
	}
	orig := append([]card(nil), cards...)
	p := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"gateway", "auditor"}}

	for _, tc := range []struct {
		name   string
		p      sandbox.Policy
		viewer sandbox.Agent
		want   []string
	}{
		{"sandboxed viewer", p, sandbox.Agent{ID: "x", Sandbox: "s1"}, []string{"a", "d", "gateway@" + peerA, "f"}},
		{"unsandboxed viewer", p, sandbox.Agent{ID: "x"}, []string{"c", "gateway@" + peerA}},
		{"granted viewer", p, sandbox.Agent{ID: "auditor@" + peerB, Sandbox: "s9"},
			[]string{"a", "b", "c", "d", "gateway@" + peerA, "e", "f"}},
		{"not enforced", sandbox.Policy{}, sandbox.Agent{ID: "x", Sandbox: "s9"},
			[]string{"a", "b", "c", "d", "gateway@" + peerA, "e", "f"}},
		{"lonely viewer", sandbox.Policy{Enforced: true}, sandbox.Agent{ID: "x", Sandbox: "s9"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sandbox.Filter(tc.p, tc.viewer, cards, agentOf)
			ids := []string{}
			for _, c := range got {
				ids = append(ids, c.id)
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("Filter = %v, want %v", ids, tc.want)
			}
			if !reflect.DeepEqual(cards, orig) {
				t.Errorf("Filter modified its input: %v", cards)
			}
			if len(got) > 0 && &got[0] == &cards[0] {
				t.Error("Filter returned its input slice")
			}
		})
	}
	if got := sandbox.Filter(p, sandbox.Agent{}, []card(nil), agentOf); len(got) != 0 {
		t.Errorf("Filter(nil) = %v", got)
	}
}

func TestPolicyJSON(t *testing.T) {
	// SandboxRoutingConfig's field names, from seed 000.
	const in = `{"enforced":true,"crossSandboxAllowList":["europa","io@12D3KooWPeerA"]}`
	var p sandbox.Policy
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	want := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"europa", "io@12D3KooWPeerA"}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Unmarshal = %+v, want %+v", p, want)
	}
	out, err := json.Marshal(p)
	if err != nil || string(out) != in {
		t.Errorf("Marshal = %s, %v; want %s", out, err, in)
	}
	if sandbox.CodeSandboxViolation != "SANDBOX_VIOLATION" {
		t.Error("error code differs from the seed's")
	}
}

func TestCheckWrite(t *testing.T) {
	lab := sandbox.Agent{ID: "io@p", Sandbox: "lab"}
	open := sandbox.Agent{ID: "sun@p"}
	granted := sandbox.Agent{ID: "atlas@p"}
	on := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"atlas"}}
	cases := []struct {
		name   string
		p      sandbox.Policy
		a      sandbox.Agent
		doc    string
		allow  bool
		docBox string
	}{
		{"sandboxed agent, own sandbox's document", on, lab, "lab.plan", true, "lab"},
		{"sandboxed agent, shared document", on, lab, "plan", false, ""},
		{"sandboxed agent, another sandbox's document", on, lab, "ops.plan", false, "ops"},
		{"unsandboxed agent, shared document", on, open, "plan", true, ""},
		{"unsandboxed agent, a sandbox's document", on, open, "lab.plan", false, "lab"},
		{"allowlisted agent, a sandbox's document", on, granted, "lab.plan", true, "lab"},
		{"not enforced", sandbox.Policy{}, lab, "plan", true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sandbox.DocumentSandbox(tc.doc); got != tc.docBox {
				t.Fatalf("DocumentSandbox(%q) = %q, want %q", tc.doc, got, tc.docBox)
			}
			d := tc.p.CheckWrite(tc.a, tc.doc)
			if d.Allowed != tc.allow {
				t.Fatalf("allowed = %v, want %v", d.Allowed, tc.allow)
			}
			if !d.Allowed && (!errors.Is(d.Err, sandbox.ErrSandboxViolation) || d.Event == nil || d.Event.Action != sandbox.ActionWrite) {
				t.Fatalf("denial without a typed error and a write security event: %+v", d)
			}
		})
	}
}
