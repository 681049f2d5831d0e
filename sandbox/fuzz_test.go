package sandbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/sandbox"
)

// FuzzCheckReach feeds arbitrary ids, sandboxes and allow-list entries (all
// of which arrive from peers or configuration) to the decision functions.
// Nothing may panic, and the rules hold for any strings: the same sandbox is
// always reachable, a listed id is always allowlisted, a decision is
// consistent, and a denied reach always carries its event.
func FuzzCheckReach(f *testing.F) {
	f.Add("io@12D3KooWPeerA", "lab", "atlas", "", "atlas")
	f.Add("a@b@c", "s", "x@y", "t", "x")
	f.Add("", "", "@", "s", "")
	f.Add("io", "lab", "io@", "prod", "io")
	f.Fuzz(func(t *testing.T, fromID, fromSB, toID, toSB, entry string) {
		p := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{entry}}
		from := sandbox.Agent{ID: fromID, Sandbox: fromSB}
		to := sandbox.Agent{ID: toID, Sandbox: toSB}

		listed := p.Allowlisted(to)
		if entry != "" && (entry == toID || strings.HasPrefix(toID, entry+"@") && !strings.Contains(toID[len(entry)+1:], "@")) && !listed {
			t.Fatalf("Allowlisted(%q) = false with entry %q", toID, entry)
		}
		if entry == "" && listed {
			t.Fatalf("the empty entry matched %q", toID)
		}

		r := p.CheckReach(from, to)
		if want := fromSB == toSB || listed; r.Allowed != want {
			t.Fatalf("CheckReach(%v, %v).Allowed = %v, want %v", from, to, r.Allowed, want)
		}
		if r.Allowed != (r.Err == nil) || r.Allowed != (r.Event == nil) {
			t.Fatalf("inconsistent reach decision %+v", r)
		}
		if !r.Allowed {
			if !errors.Is(r.Err, sandbox.ErrSandboxViolation) || r.Event.From != from || r.Event.To != to ||
				r.Event.Reason == "" || r.Err.Error() == "" {
				t.Fatalf("denied reach %+v / %+v", r, *r.Event)
			}
		}

		d := p.CheckDiscover(from, to)
		if want := fromSB == toSB || listed || p.Allowlisted(from); d.Allowed != want {
			t.Fatalf("CheckDiscover(%v, %v).Allowed = %v, want %v", from, to, d.Allowed, want)
		}
		if d.Event != nil || d.Allowed != (d.Err == nil) {
			t.Fatalf("inconsistent discover decision %+v", d)
		}

		if off := (sandbox.Policy{CrossSandboxAllowList: []string{entry}}); !off.CheckReach(from, to).Allowed ||
			!off.CheckDiscover(from, to).Allowed {
			t.Fatal("a policy that is not enforced denied something")
		}
	})
}
