package sandbox_test

import (
	"testing"

	"github.com/nova-node/nova-node/sandbox"
)

// TestAllowlistedUnvouched: a bare name on the allow list is a name, which
// the host of an unvouched agent chose, so it does not match that agent;
// an address entry names the host too, and still does.
func TestAllowlistedUnvouched(t *testing.T) {
	p := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"gateway", "io@" + peerA}}
	for _, tc := range []struct {
		a    sandbox.Agent
		want bool
	}{
		{sandbox.Agent{ID: "gateway@" + peerB}, true},
		{sandbox.Agent{ID: "gateway@" + peerB, Unvouched: true}, false},
		{sandbox.Agent{ID: "io@" + peerA, Unvouched: true}, true},
		{sandbox.Agent{ID: "io@" + peerB, Unvouched: true}, false},
	} {
		if got := p.Allowlisted(tc.a); got != tc.want {
			t.Errorf("Allowlisted(%+v) = %v, want %v", tc.a, got, tc.want)
		}
	}

	// The decisions follow: an unvouched "gateway" in another sandbox is
	// not reachable through the bare entry, and does not see across.
	from := sandbox.Agent{ID: "europa@" + peerA, Sandbox: "lab"}
	gw := sandbox.Agent{ID: "gateway@" + peerB, Sandbox: "prod"}
	if d := p.CheckReach(from, gw); !d.Allowed {
		t.Fatalf("CheckReach to a vouched gateway denied: %v", d.Err)
	}
	gw.Unvouched = true
	if d := p.CheckReach(from, gw); d.Allowed || d.Event == nil {
		t.Fatalf("CheckReach to an unvouched gateway = %+v, want denied with an event", d)
	}
	if d := p.CheckDiscover(gw, from); d.Allowed {
		t.Fatal("an unvouched gateway discovers across sandboxes")
	}
	io := sandbox.Agent{ID: "io@" + peerA, Sandbox: "prod", Unvouched: true}
	if d := p.CheckReach(from, io); !d.Allowed {
		t.Fatalf("CheckReach to an address entry, unvouched, denied: %v", d.Err)
	}
}
