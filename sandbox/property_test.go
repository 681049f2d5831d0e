package sandbox_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/sandbox"
)

// world is a generated sandbox configuration with its own model of the allow
// list: names and addresses as a set, independent of Policy.Allowlisted's
// string handling.
type world struct {
	policy sandbox.Policy
	listed map[string]bool // allow-list entries
}

type genAgent struct {
	name, peer, sandbox string
}

func (g genAgent) agent() sandbox.Agent {
	id := g.name
	if g.peer != "" {
		id += "@" + g.peer
	}
	return sandbox.Agent{ID: id, Sandbox: g.sandbox}
}

// allowlisted is the model: the bare name is listed, or the full address is.
func (w world) allowlisted(g genAgent) bool {
	return w.listed[g.name] || (g.peer != "" && w.listed[g.name+"@"+g.peer])
}

var (
	names     = []string{"europa", "io", "atlas", "mimas", "titan"}
	peers     = []string{"", "12D3KooWPeerA", "12D3KooWPeerB"}
	sandboxes = []string{"", "lab", "prod", "tenant-7"}
)

func drawAgent(t *rapid.T, label string) genAgent {
	return genAgent{
		name:    rapid.SampledFrom(names).Draw(t, label+".name"),
		peer:    rapid.SampledFrom(peers).Draw(t, label+".peer"),
		sandbox: rapid.SampledFrom(sandboxes).Draw(t, label+".sandbox"),
	}
}

func drawWorld(t *rapid.T) world {
	entry := rapid.OneOf(
		rapid.SampledFrom(names),
		rapid.Custom(func(t *rapid.T) string {
			return rapid.SampledFrom(names).Draw(t, "n") + "@" + rapid.SampledFrom(peers[1:]).Draw(t, "p")
		}),
		rapid.Just(""),
		rapid.Just("someone-else"),
	)
	list := rapid.SliceOfN(entry, 0, 5).Draw(t, "allowList")
	w := world{
		policy: sandbox.Policy{
			Enforced:              rapid.Float64Range(0, 1).Draw(t, "enforcedDraw") < 0.85,
			CrossSandboxAllowList: list,
		},
		listed: map[string]bool{},
	}
	for _, e := range list {
		if e != "" {
			w.listed[e] = true
		}
	}
	return w
}

// TestProperty29_SandboxRoutingEnforcement: for any sandbox configuration,
// delivery succeeds iff the target is in the sender's sandbox or on the allow
// list; every rejection carries a security event naming both agents.
func TestProperty29_SandboxRoutingEnforcement(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		fromG, toG := drawAgent(t, "from"), drawAgent(t, "to")
		from, to := fromG.agent(), toG.agent()

		d := w.policy.CheckReach(from, to)
		want := !w.policy.Enforced || fromG.sandbox == toG.sandbox || w.allowlisted(toG)
		if d.Allowed != want {
			t.Fatalf("CheckReach(%v, %v) with %+v: Allowed = %v, want %v", from, to, w.policy, d.Allowed, want)
		}
		if d.Allowed {
			if d.Err != nil || d.Event != nil {
				t.Fatalf("allowed reach carries %v / %+v", d.Err, d.Event)
			}
			return
		}
		var v *sandbox.ViolationError
		if !errors.Is(d.Err, sandbox.ErrSandboxViolation) || !errors.As(d.Err, &v) ||
			v.Action != sandbox.ActionReach || v.From != from || v.To != to {
			t.Fatalf("denied reach: Err = %#v", d.Err)
		}
		e := d.Event
		if e == nil {
			t.Fatal("denied reach without a security event")
		}
		if e.Kind != "sandbox-violation" || e.Code != "SANDBOX_VIOLATION" || e.Action != "reach" ||
			e.From != from || e.To != to {
			t.Fatalf("security event = %+v", *e)
		}
		for _, s := range []string{fmt.Sprintf("%q", from.ID), fmt.Sprintf("%q", to.ID)} {
			if !strings.Contains(e.Reason, s) {
				t.Fatalf("event reason %q does not name %s", e.Reason, s)
			}
		}
	})
}

// TestProperty30_SandboxDiscoveryFilter: a viewer's discovery results contain
// exactly the agents in its own sandbox, unless it is granted cross-sandbox
// access, plus allowlisted agents; the order of the results is preserved.
func TestProperty30_SandboxDiscoveryFilter(t *testing.T) {
	type item struct {
		idx int
		g   genAgent
	}
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		viewer := drawAgent(t, "viewer")
		n := rapid.IntRange(0, 12).Draw(t, "n")
		items := make([]item, n)
		for i := range items {
			items[i] = item{idx: i, g: drawAgent(t, fmt.Sprintf("item%d", i))}
		}
		orig := slices.Clone(items)

		got := sandbox.Filter(w.policy, viewer.agent(), items, func(it item) sandbox.Agent { return it.g.agent() })

		want := []item{}
		for _, it := range items {
			if !w.policy.Enforced || w.allowlisted(viewer) || it.g.sandbox == viewer.sandbox || w.allowlisted(it.g) {
				want = append(want, it)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Filter(%+v, viewer %v) = %v, want %v", w.policy, viewer.agent(), got, want)
		}
		if !slices.Equal(items, orig) {
			t.Fatal("Filter modified its input")
		}
		// The same answer one agent at a time.
		for _, it := range items {
			d := w.policy.CheckDiscover(viewer.agent(), it.g.agent())
			if d.Allowed != slices.Contains(want, it) || d.Event != nil || (d.Err == nil) != d.Allowed {
				t.Fatalf("CheckDiscover(%v, %v) = %+v", viewer.agent(), it.g.agent(), d)
			}
		}
	})
}
