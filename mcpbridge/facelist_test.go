package mcpbridge_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

func newHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func card(id, sb string) agentcard.Card {
	return agentcard.Card{ID: id, Name: id, Version: "1.0.0", Tier: tiers.L0, SandboxID: sb, Capabilities: []agentcard.Capability{}}
}

// labBridge starts a bridge whose node hosts labtools (sandbox lab, with a
// tool, a resource and a prompt), home (no sandbox, with a tool) and the
// callers outsider (no sandbox), insider (lab) and auditor (no sandbox, on
// the allow list, so it may discover every sandbox but reach only its
// own). The face runs as *as.
func labBridge(t *testing.T, h host.Host, as *atomic.Value) (*mcpbridge.Bridge, *agentcard.Registry) {
	t.Helper()
	b, cards, _ := labBridgeRegistry(t, h, as)
	return b, cards
}

// labBridgeRegistry is labBridge with its registry.
func labBridgeRegistry(t *testing.T, h host.Host, as *atomic.Value) (*mcpbridge.Bridge, *agentcard.Registry, *mcpbridge.Registry) {
	t.Helper()
	cards := agentcard.NewRegistry(h.ID())
	for _, c := range []agentcard.Card{card("labtools", "lab"), card("home", ""), card("outsider", ""), card("insider", "lab"), card("auditor", "")} {
		if _, err := cards.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	reg := mcpbridge.NewRegistry()
	say := func(_ context.Context, args json.RawMessage) (mcpbridge.Result, error) {
		return mcpbridge.Result{Content: json.RawMessage(`"said"`)}, nil
	}
	for _, agent := range []string{"labtools", "home"} {
		if err := reg.RegisterTool(mcpbridge.Tool{Agent: agent, Name: "say"}, say); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.RegisterResource(mcpbridge.Resource{Agent: "labtools", URI: "lab://notes", Name: "notes"},
		func(context.Context) ([]byte, error) { return []byte("n"), nil }); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterPrompt(mcpbridge.Prompt{Agent: "labtools", Name: "greet", Template: "hello"}); err != nil {
		t.Fatal(err)
	}
	pol := &mcpbridge.Policy{Cards: cards, Tiers: tiers.DefaultRules(),
		Sandbox: sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"auditor"}}}
	b, err := mcpbridge.New(mcpbridge.Config{Host: h, Registry: reg, Policy: pol, As: func() string { return as.Load().(string) }})
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	t.Cleanup(func() { b.Close() })
	return b, cards, reg
}

// listed is what a session lists: tool canonical names (their titles),
// resource URIs and prompt canonical names (their titles).
func listed(t *testing.T, cs *mcp.ClientSession, meta mcp.Meta) []string {
	t.Helper()
	ctx := t.Context()
	var out []string
	for x, err := range cs.Tools(ctx, &mcp.ListToolsParams{Meta: meta}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "tool "+x.Title)
	}
	for x, err := range cs.Resources(ctx, &mcp.ListResourcesParams{Meta: meta}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "resource "+x.URI)
	}
	for x, err := range cs.Prompts(ctx, &mcp.ListPromptsParams{Meta: meta}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "prompt "+x.Title)
	}
	slices.Sort(out)
	return out
}

var (
	homeOnly = []string{"tool home.say"}
	labOnly  = []string{"prompt labtools.greet", "resource lab://notes", "tool labtools.say"}
	// The face lists greet twice, as labtools_greet and under its bare
	// name: no other prompt of the swarm is called greet (say is not
	// unique: home has one too).
	labOnlyFace = []string{"prompt labtools.greet", "prompt labtools.greet", "resource lab://notes", "tool labtools.say"}
)

// The aggregated face lists only what its agent may call: an agent in
// sandbox lab sees and calls lab's items (and nothing outside lab); an
// agent outside it (even one allowed to discover every sandbox) sees none
// of them, and calling one by name is still refused with SANDBOX_VIOLATION.
func TestFaceListsOnlyWhatItsAgentMayCall(t *testing.T) {
	h := newHost(t)
	var as atomic.Value
	b, _ := labBridge(t, h, &as)
	srv := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		as   string
		want []string
		call string // code of calling labtools.say; "" for success
	}{
		{"outsider", homeOnly, sandbox.CodeSandboxViolation},
		{"auditor", homeOnly, sandbox.CodeSandboxViolation},
		{"insider", labOnlyFace, ""},
	} {
		t.Run(tc.as, func(t *testing.T) {
			as.Store(tc.as + "@" + h.ID().String())
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := listed(t, cs, nil); !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
			tpl, err := cs.ListResourceTemplates(t.Context(), nil)
			if err != nil || len(tpl.ResourceTemplates) != 0 {
				t.Errorf("resource templates: %v %d, want none", err, len(tpl.ResourceTemplates))
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "labtools.say", Arguments: map[string]any{}})
			switch {
			case tc.call == "" && (err != nil || res.IsError):
				t.Errorf("call labtools.say: %v %+v, want success", err, res)
			case tc.call != "" && mcpbridge.CodeOf(err) != tc.call:
				t.Errorf("call labtools.say: %v, want %s", err, tc.call)
			}
		})
	}
}

// A peer's session on /nova/mcp/1.0.0 lists only what its claimed caller
// may call, by the same rule.
func TestPeerListsOnlyWhatTheCallerMayCall(t *testing.T) {
	hb, ha := newHost(t), newHost(t)
	var as atomic.Value
	as.Store("")
	_, cards := labBridge(t, hb, &as)
	for _, c := range []agentcard.Card{card("outsider", ""), card("insider", "lab"), card("auditor", "")} {
		c.Host, c.Origin, c.Revision = ha.ID().String(), agentcard.OriginRemote, 1
		if _, err := cards.MergeRemote(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := ha.Connect(t.Context(), peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := ha.NewStream(t.Context(), hb.ID(), mcpbridge.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: s, Writer: s}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		caller string
		want   []string
	}{
		{"outsider", homeOnly},
		{"auditor", homeOnly},
		{"insider", labOnly},
	} {
		got := listed(t, cs, mcp.Meta{mcpbridge.MetaCaller: tc.caller + "@" + ha.ID().String()})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %q, want %q", tc.caller, got, tc.want)
		}
	}
}

// A tool or prompt whose name no other item of the swarm has is on the face
// under that bare name too, beside its prefixed name; a name two agents
// share (say) is only under the prefixed names.
func TestFaceBareNames(t *testing.T) {
	h := newHost(t)
	var as atomic.Value
	as.Store("insider@" + h.ID().String())
	b, _ := labBridge(t, h, &as)
	srv := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(srv.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var prompts []string
	for p, err := range cs.Prompts(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p.Name+"="+p.Title)
	}
	slices.Sort(prompts)
	if want := []string{"greet=labtools.greet", "labtools_greet=labtools.greet"}; !slices.Equal(prompts, want) {
		t.Errorf("prompts %q, want %q", prompts, want)
	}
	if r, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet"}); err != nil || len(r.Messages) != 1 {
		t.Errorf("get greet: %v %v", r, err)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "say", Arguments: map[string]any{}}); err == nil {
		t.Error("call of the shared bare name say succeeded, want TOOL_NOT_FOUND")
	}
	if r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "labtools_say", Arguments: map[string]any{}}); err != nil || r.IsError {
		t.Errorf("call labtools_say: %v %v", r, err)
	}
	for _, e := range b.Entries(t.Context()) {
		if e.AliasOf != "" {
			t.Errorf("Entries lists the bare name %s of %s", e.Name, e.AliasOf)
		}
	}
}
