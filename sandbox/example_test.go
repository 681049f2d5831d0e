package sandbox_test

import (
	"fmt"

	"github.com/nova-node/nova-node/sandbox"
)

func ExamplePolicy_CheckReach() {
	p := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"sun"}}
	io := sandbox.Agent{ID: "io@12D3KooWPeerA", Sandbox: "lab"}
	mimas := sandbox.Agent{ID: "mimas@12D3KooWPeerA", Sandbox: "lab"}
	atlas := sandbox.Agent{ID: "atlas@12D3KooWPeerB"} // not sandboxed
	sun := sandbox.Agent{ID: "sun@12D3KooWPeerB"}

	fmt.Println(p.CheckReach(io, mimas).Allowed) // same sandbox
	fmt.Println(p.CheckReach(io, sun).Allowed)   // sun is allowlisted

	d := p.CheckReach(io, atlas)
	fmt.Println(d.Allowed, d.Err)
	if d.Event != nil {
		// The caller emits the event: security log, metrics, audit.
		fmt.Println(d.Event.Kind, d.Event.Code, d.Event.Action)
	}
	// Output:
	// true
	// true
	// false sandbox: sandbox violation: "io@12D3KooWPeerA" (sandbox "lab") may not reach "atlas@12D3KooWPeerB" (unsandboxed): different sandboxes and not on the cross-sandbox allow list
	// sandbox-violation SANDBOX_VIOLATION reach
}

func ExampleFilter() {
	type card struct{ id, sandboxID string }
	cards := []card{{"io", "lab"}, {"atlas", ""}, {"mimas", "lab"}, {"sun", ""}, {"titan", "prod"}}
	p := sandbox.Policy{Enforced: true, CrossSandboxAllowList: []string{"sun"}}
	viewer := sandbox.Agent{ID: "io", Sandbox: "lab"}

	for _, c := range sandbox.Filter(p, viewer, cards, func(c card) sandbox.Agent {
		return sandbox.Agent{ID: c.id, Sandbox: c.sandboxID}
	}) {
		fmt.Println(c.id)
	}
	// Output:
	// io
	// mimas
	// sun
}
