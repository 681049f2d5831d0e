package testnet_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// grantedNet starts three nodes of one authority that enforce sandboxes:
// node 0 hosts "boxb" in sandbox b and "sun" (L0), granted both; node 1
// hosts "member" (L3), which claims sandbox b and is granted it; node 2
// hosts "intruder" (L3), which claims sandbox b and holds no grant (a
// member of the swarm, not of the sandbox). grants[i] is node i's signed grant.
func grantedNet(t *testing.T) (net *testnet.Net, grants map[int]authority.Grant) {
	t.Helper()
	l0 := tiers.L0
	grants = map[int]authority.Grant{}
	net = testnet.New(t, 3, testnet.WithoutGrants(), testnet.WithConfig(func(i int, c *node.Config) {
		c.Sandbox.Enforced = true
		echo := []node.CapabilityConfig{{ID: "echo"}}
		switch i {
		case 0:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "boxb", Sandbox: "b", Capabilities: echo},
				node.AgentConfig{Name: "sun", Tier: &l0, Capabilities: echo})
		case 1:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "member", Sandbox: "b", Capabilities: echo})
		case 2:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "intruder", Sandbox: "b", Capabilities: echo})
		}
	}))
	for i, g := range map[int]authority.Grant{
		0: {Peer: net.Nodes[0].ID(), MaxTier: tiers.L0, Sandboxes: []string{"b"}},
		1: {Peer: net.Nodes[1].ID(), MaxTier: tiers.L1, Sandboxes: []string{"b"}},
	} {
		signed := net.Grant(g)
		opened, err := authority.OpenGrant(signed)
		if err != nil {
			t.Fatal(err)
		}
		grants[i] = opened
		// The granted node learns its grant, presents it, and every node
		// it greets holds it.
		if _, err := net.Nodes[i].AddAuthorityRecord(signed); err != nil {
			t.Fatal(err)
		}
	}
	net.FullMesh()
	net.WaitForCards()
	// Every node holds node 0's and node 1's agents at their claims.
	for j, nd := range net.Nodes {
		for _, addr := range []string{"boxb@" + net.Nodes[0].ID().String(), "member@" + net.Nodes[1].ID().String()} {
			if j == 0 && addr[0] == 'b' || j == 1 && addr[0] == 'm' {
				continue
			}
			waitfor.Eventually(t, 10*time.Second, func() error {
				c, ok := nd.Registry().Get(addr)
				if !ok || c.SandboxID != "b" {
					return fmt.Errorf("node %d holds %s in sandbox %q (%+v)", j, addr, c.SandboxID, c.Standing())
				}
				return nil
			})
		}
	}
	return net, grants
}

// TestAuthorityGrantsSandboxMembership: a member granted sandbox b reaches
// b's agents; a member whose card claims b without a grant is held outside
// every sandbox by every other node, so b's node refuses its messages and
// its writes to b's documents with SANDBOX_VIOLATION, whatever it claims.
func TestAuthorityGrantsSandboxMembership(t *testing.T) {
	net, _ := grantedNet(t)
	n0, n1, n2 := net.Nodes[0], net.Nodes[1], net.Nodes[2]
	if _, _, err := request(t, n1, "member", "boxb", "hi"); err != nil {
		t.Fatalf("granted member -> boxb: %v", err)
	}
	intruder := "intruder@" + n2.ID().String()
	held, ok := n0.Registry().Get(intruder)
	if !ok {
		t.Fatalf("node 0 has no card for %s", intruder)
	}
	if st := held.Standing(); held.SandboxID != "" || held.Tier != tiers.L3 || st.Basis != agentcard.BasisNone || st.ClaimedSandbox != "b" || st.ClaimedTier != tiers.L3 {
		t.Fatalf("node 0 holds the intruder at %s sandbox %q, standing %+v; want L3, no sandbox, basis none, claims L3 in b", held.Tier, held.SandboxID, st)
	}
	// Node 2 holds boxb in b (granted), so it lets its own intruder
	// (sandbox b by its own config) send: node 0 must refuse it itself.
	_, _, err := request(t, n2, "intruder", "boxb@"+n0.ID().String(), "let me in")
	if !errors.Is(err, sandbox.ErrSandboxViolation) {
		t.Fatalf("ungranted claim of sandbox b -> boxb: %v, want SANDBOX_VIOLATION from node 0", err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		for _, ev := range n0.Observer().Recent(0) {
			if ev.Type == protocol.EvtSecurityRaised && ev.Code == authority.CodeClaimNotGranted && ev.Sender == intruder {
				return nil
			}
		}
		return errors.New("node 0 audited no CLAIM_NOT_GRANTED for the intruder")
	})

	// Documents of sandbox b: the granted member's node writes them and
	// node 0 takes its update; node 2's own config puts the intruder in
	// b, so its write leaves node 2, and node 0 refuses it.
	ctx := context.Background()
	for _, nd := range net.Nodes {
		nd.ReadDoc(ctx, "b.plan", "")
	}
	if _, err := n1.ApplyDocOp(ctx, "b.plan", localapi.DocOp{Op: "set", Path: "/by", Value: json.RawMessage(`"member"`), Agent: "member"}); err != nil {
		t.Fatalf("granted member writing b.plan: %v", err)
	}
	if _, err := n2.ApplyDocOp(ctx, "b.plan", localapi.DocOp{Op: "set", Path: "/intruder", Value: json.RawMessage(`true`), Agent: "intruder"}); err != nil {
		t.Fatalf("node 2's own write (its config puts intruder in b): %v", err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		v, _ := n0.ReadDoc(ctx, "b.plan", "/by")
		if string(v.Value) != `"member"` {
			return fmt.Errorf("node 0 sees /by = %s", v.Value)
		}
		return nil
	})
	// The member's write arrived; the intruder's, sent before it by a
	// connected node, would have arrived by now too.
	waitfor.Eventually(t, 5*time.Second, func() error {
		v, _ := n1.ReadDoc(ctx, "b.plan", "/by")
		if string(v.Value) != `"member"` {
			return errors.New("node 1 lost its own write")
		}
		return nil
	})
	if v, _ := n0.ReadDoc(ctx, "b.plan", "/intruder"); v.Value != nil && string(v.Value) != "null" {
		t.Fatalf("node 0 took the ungranted write to b.plan: /intruder = %s", v.Value)
	}
}

// TestAuthorityUngrantedL0NeedsJustification: a card that claims L0 with
// no grant is held at L3, so its proposal to an L0 agent needs a
// justification at the receiving node; an L1 grant holds an L0 claim at L1.
func TestAuthorityUngrantedL0NeedsJustification(t *testing.T) {
	l0 := tiers.L0
	net := testnet.New(t, 3, testnet.WithoutGrants(), testnet.WithConfig(func(i int, c *node.Config) {
		switch i {
		case 0:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "sun", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		case 1:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "fake", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		case 2:
			c.Agents = append(c.Agents, node.AgentConfig{Name: "capped", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		}
	}))
	for _, i := range []int{0, 2} {
		max := tiers.L0
		if i == 2 {
			max = tiers.L1 // an invite with --max-tier L1
		}
		if _, err := net.Nodes[i].AddAuthorityRecord(net.Grant(authority.Grant{Peer: net.Nodes[i].ID(), MaxTier: max})); err != nil {
			t.Fatal(err)
		}
	}
	net.FullMesh()
	net.WaitForCards()
	capped := "capped@" + net.Nodes[2].ID().String()
	for j := range 2 {
		waitfor.Eventually(t, 10*time.Second, func() error {
			c, ok := net.Nodes[j].Registry().Get(capped)
			if !ok || c.Tier != tiers.L1 {
				return fmt.Errorf("node %d holds %s at %v (%+v), want L1", j, capped, c.Tier, c.Standing())
			}
			return nil
		})
	}
	env, err := net.Nodes[1].NewEnvelope("fake", "sun@"+net.Nodes[0].ID().String(), envelope.TypeTaskProposal, map[string]string{"task": "x"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Node 1 does not know what node 0 makes of its agent: the sending
	// node lets it go, the receiving node holds "fake" at L3.
	if _, err := net.Nodes[1].Send(ctx, env); !errors.Is(err, tiers.ErrEscalationRequired) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("ungranted L0 claim -> sun, task-proposal without justification: %v, want ESCALATION_REQUIRED", err)
	}
}

// TestAuthorityRevocationSpreads: a revocation signed by the admin and
// given to one node reaches every node within seconds, each drops the
// grant at once (the revoked node's agents fall to least privilege) and
// audits it; a restart keeps it.
func TestAuthorityRevocationSpreads(t *testing.T) {
	net, grants := grantedNet(t)
	member := "member@" + net.Nodes[1].ID().String()
	rev := net.Revoke(grants[1].Serial, net.Nodes[1].ID(), "laptop lost")
	if _, err := net.Nodes[2].AddAuthorityRecord(rev); err != nil {
		t.Fatal(err)
	}
	for j, nd := range net.Nodes {
		if j == 1 {
			continue
		}
		waitfor.Eventually(t, 5*time.Second, func() error {
			c, ok := nd.Registry().Get(member)
			if !ok || c.SandboxID != "" || c.Tier != tiers.L3 {
				return fmt.Errorf("node %d holds %s at %s sandbox %q after the revocation", j, member, c.Tier, c.SandboxID)
			}
			return nil
		})
		waitfor.Eventually(t, 5*time.Second, func() error {
			if securityEvents(nd, authority.CodeGrantRevoked) > 0 {
				return nil
			}
			return fmt.Errorf("node %d audited no GRANT_REVOKED", j)
		})
	}
	if _, _, err := request(t, net.Nodes[1], "member", "boxb@"+net.Nodes[0].ID().String(), "still here?"); !errors.Is(err, sandbox.ErrSandboxViolation) {
		t.Fatalf("revoked member -> boxb: %v, want SANDBOX_VIOLATION", err)
	}
	// The revoked node itself holds the revocation and no longer presents
	// the grant; a restart of node 0 forgets neither.
	waitfor.Eventually(t, 5*time.Second, func() error {
		if len(net.Nodes[1].Authority().Presentable(net.Nodes[1].ID())) != 0 {
			return errors.New("node 1 still presents its revoked grant")
		}
		return nil
	})
	n0 := net.Restart(0, nil)
	if _, _, _, err := authorityHas(n0, grants[1].Serial); err != nil {
		t.Fatal(err)
	}
}

// authorityHas reports whether n holds a revocation of serial.
func authorityHas(n *node.Node, serial uint64) (authority.Revocation, peer.ID, bool, error) {
	for _, b := range n.Authority().Revocations() {
		r, err := authority.OpenRevocation(b)
		if err == nil && r.Serial == serial {
			return r, r.Peer, true, nil
		}
	}
	return authority.Revocation{}, "", false, fmt.Errorf("no revocation of serial %d held after a restart", serial)
}

// TestAuthorityForgedGrantsRefused: a peer that presents grants for
// itself signed by its own key, or by the right admin for another swarm,
// or tampered, gets an INVALID_GRANT security event naming it, and its
// claims stay unhonoured.
func TestAuthorityForgedGrantsRefused(t *testing.T) {
	net := testnet.New(t, 1)
	target := net.Nodes[0]
	m := newMallory(t, target)
	self, err := authority.SealGrant(authority.Grant{Authority: net.AdminID(), Serial: 99, Peer: m.id(), MaxTier: tiers.L0, Sandboxes: []string{"lab"}}, m.key)
	if err != nil {
		t.Fatal(err)
	}
	otherAdmin, _, err := crypto.GenerateEd25519Key(rand.Reader) // another swarm's founder
	if err != nil {
		t.Fatal(err)
	}
	otherID, _ := peer.IDFromPrivateKey(otherAdmin)
	foreign, err := authority.SealGrant(authority.Grant{Authority: otherID, Serial: 1, Peer: m.id(), MaxTier: tiers.L0, Sandboxes: []string{"lab"}}, otherAdmin)
	if err != nil {
		t.Fatal(err)
	}
	tampered := net.Grant(authority.Grant{Peer: m.id(), MaxTier: tiers.L2})
	tampered[len(tampered)-1] ^= 1
	s := m.stream(target)
	writeMsg(t, s, rawMsg{Kind: 1, Auth: [][]byte{self, foreign, tampered}})
	writeMsg(t, s, rawMsg{Kind: 1, Cards: [][]byte{m.sealed(m.card("boss", tiers.L0, "lab"), m.key)}})
	boss := "boss@" + m.id().String()
	waitfor.Eventually(t, 5*time.Second, func() error {
		if _, ok := target.Registry().Get(boss); !ok {
			return errors.New("mallory's card not held yet")
		}
		return nil
	})
	held, _ := target.Registry().Get(boss)
	if held.Tier != tiers.L3 || held.SandboxID != "" || held.Standing().Basis != agentcard.BasisNone {
		t.Fatalf("forged grants honoured: %s held at %s sandbox %q (%+v)", boss, held.Tier, held.SandboxID, held.Standing())
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		for _, ev := range target.Observer().Recent(0) {
			if ev.Type == protocol.EvtSecurityRaised && ev.Code == authority.CodeInvalidGrant && ev.Peer == m.id() && strings.Contains(ev.Detail, "3 authority records") {
				return nil
			}
		}
		return errors.New("no INVALID_GRANT security event naming mallory for its 3 records")
	})
	if n := len(target.Authority().Grants(m.id())); n != 0 {
		t.Fatalf("the node holds %d of mallory's forged grants", n)
	}
}
