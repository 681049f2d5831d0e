package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// tierPair starts two connected nodes; node i hosts echo agents n<i>t0 ..
// n<i>t3 with tiers L0..L3, and each knows the other's cards and sees it on
// the broadcast topic.
func tierPair(t *testing.T) *testnet.Net {
	t.Helper()
	net := testnet.New(t, 2, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		c.Agents = nil
		for tr := tiers.L0; tr <= tiers.L3; tr++ {
			c.Agents = append(c.Agents, node.AgentConfig{Name: tierAgent(i, tr), Tier: &tr, Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	return net
}

func tierAgent(node int, tr tiers.Tier) string { return fmt.Sprintf("n%dt%d", node, tr) }

// tierAddr is the full address of agent tr of node i.
func tierAddr(net *testnet.Net, i int, tr tiers.Tier) string {
	return tierAgent(i, tr) + "@" + net.Nodes[i].ID().String()
}

// ghostAgent is a sender that no node hosts.
const ghostAgent = "ghost"

type opKind int

const (
	opDirect    opKind = iota // to one agent, on the sender's node or the other
	opBroadcast               // to "*"
	opGhost                   // from an agent no node hosts: AGENT_NOT_FOUND
)

// sendOp is one send of a test: from agent from of node, to agent to of
// toNode (direct, ghost) or to every agent (broadcast).
type sendOp struct {
	kind     opKind
	node     int
	from, to tiers.Tier
	toNode   int
	typ      envelope.Type
}

func (op sendOp) String() string {
	switch op.kind {
	case opBroadcast:
		return fmt.Sprintf("%s %s -> *", op.typ, tierAgent(op.node, op.from))
	case opGhost:
		return fmt.Sprintf("%s ghost@n%d -> %s", op.typ, op.node, tierAgent(op.toNode, op.to))
	}
	return fmt.Sprintf("%s %s -> %s", op.typ, tierAgent(op.node, op.from), tierAgent(op.toNode, op.to))
}

// sendOpGen draws sends of every kind from either node: direct ones (local
// or remote, some refused by the tier rules), broadcasts, and sends from an
// unknown agent.
func sendOpGen() *rapid.Generator[sendOp] {
	return rapid.Custom(func(t *rapid.T) sendOp {
		tier := rapid.Custom(func(t *rapid.T) tiers.Tier { return tiers.Tier(rapid.IntRange(0, 3).Draw(t, "tier")) })
		return sendOp{
			kind:   rapid.SampledFrom([]opKind{opDirect, opDirect, opDirect, opBroadcast, opGhost}).Draw(t, "kind"),
			node:   rapid.IntRange(0, 1).Draw(t, "node"),
			from:   tier.Draw(t, "from"),
			to:     tier.Draw(t, "to"),
			toNode: rapid.IntRange(0, 1).Draw(t, "toNode"),
			typ:    rapid.SampledFrom(oneWayTypes).Draw(t, "type"),
		}
	})
}

// envelope builds op's envelope on its node. A remote recipient, and every
// recipient of a ghost, is named by its full address, a local one by name.
func (op sendOp) envelope(t *rapid.T, net *testnet.Net, payload any) *envelope.Envelope {
	n := net.Nodes[op.node]
	from, to := tierAgent(op.node, op.from), tierAgent(op.toNode, op.to)
	switch {
	case op.kind == opBroadcast:
		to = envelope.Broadcast
	case op.kind == opGhost:
		from, to = ghostAgent, tierAddr(net, op.toNode, op.to)
	case op.toNode != op.node:
		to = tierAddr(net, op.toNode, op.to)
	}
	env, err := n.NewEnvelope(from, to, op.typ, payload)
	if err != nil {
		t.Fatalf("%v: %v", op, err)
	}
	return env
}

// wantCode is the code of the error op's send must fail with, or "".
func (op sendOp) wantCode() string {
	switch {
	case op.kind == opGhost:
		return agentcard.CodeAgentNotFound
	case op.kind == opDirect && !tiers.DefaultRules().Allowed(op.from, op.to):
		return tiers.CodeTierViolation
	}
	return ""
}

// path is the routing path of op's send, when it succeeds.
func (op sendOp) path() string {
	switch {
	case op.kind == opBroadcast:
		return protocol.PathBroadcast
	case op.toNode != op.node:
		return protocol.PathRemote
	}
	return protocol.PathLocal
}

// sender and recipient are the addresses op's events name.
func (op sendOp) sender(net *testnet.Net) string {
	if op.kind == opGhost {
		return ghostAgent
	}
	return tierAddr(net, op.node, op.from)
}

func (op sendOp) recipient(net *testnet.Net) string {
	if op.kind == opBroadcast {
		return envelope.Broadcast
	}
	return tierAddr(net, op.toNode, op.to)
}

// receivers are, per node, the addresses of the agents that op's send, if
// it succeeds, is delivered to: its recipient, or for a broadcast every
// agent but the sender that the tier rules (broadcast flag: an L0 directive
// reaches every tier) let it reach.
func (op sendOp) receivers(net *testnet.Net) [2][]string {
	var rs [2][]string
	if op.wantCode() != "" {
		return rs
	}
	if op.kind == opDirect {
		rs[op.toNode] = []string{tierAddr(net, op.toNode, op.to)}
		return rs
	}
	for i := range rs {
		for tr := tiers.L0; tr <= tiers.L3; tr++ {
			if i == op.node && tr == op.from {
				continue
			}
			if tiers.DefaultRules().Check(tiers.Message{Source: op.from, Target: tr, Type: string(op.typ), Broadcast: true}) == nil {
				rs[i] = append(rs[i], tierAddr(net, i, tr))
			}
		}
	}
	return rs
}

// checkOutcome fails t unless err is what op's send should return.
func (op sendOp) checkOutcome(t *rapid.T, res protocol.RoutingResult, err error) {
	switch code := op.wantCode(); {
	case code == "" && err != nil:
		t.Fatalf("%v: %v, want delivered", op, err)
	case code == "" && !res.Delivered:
		t.Fatalf("%v: not delivered: %+v", op, res)
	case code == tiers.CodeTierViolation && !errors.Is(err, tiers.ErrTierViolation),
		code != "" && protocol.CodeOf(err) != code:
		t.Fatalf("%v: %v, want %s", op, err, code)
	}
}

// send sends op's envelope from its node, checks the outcome, and returns
// the envelope, the result, how long the call took and its error.
func (op sendOp) send(t *rapid.T, net *testnet.Net, payload any) (*envelope.Envelope, protocol.RoutingResult, time.Duration, error) {
	env := op.envelope(t, net, payload)
	start := time.Now()
	res, err := net.Nodes[op.node].Send(context.Background(), env)
	took := time.Since(start)
	op.checkOutcome(t, res, err)
	return env, res, took, err
}

// evKey is what an event is about: node, type, envelope and path.
type evKey struct {
	node          int
	typ, id, path string
}

// collectEvents reads subs[i], node i's events, until the events of the
// envelopes that want names number, per type and envelope, as many as want
// says; then it takes what else has arrived and returns those envelopes'
// events by keyOf. Events of other envelopes (earlier cases) are skipped.
// It waits for the counts by type and envelope alone, so that an event on
// the wrong node or with the wrong path fails the caller's comparison at
// once rather than after a timeout.
func collectEvents(t *rapid.T, subs [2]*node.Subscription, want map[evKey]int, keyOf func(int, localapi.Event) evKey) map[evKey][]localapi.Event {
	type typeID struct{ typ, id string }
	missing := map[typeID]int{}
	ids := map[string]bool{}
	for k, n := range want {
		missing[typeID{k.typ, k.id}] += n
		ids[k.id] = true
	}
	left := len(missing)
	got := map[evKey][]localapi.Event{}
	take := func(i int, e localapi.Event) {
		if !ids[e.EnvelopeID] {
			return
		}
		got[keyOf(i, e)] = append(got[keyOf(i, e)], e)
		if ti := (typeID{e.Type, e.EnvelopeID}); missing[ti] > 0 {
			if missing[ti]--; missing[ti] == 0 {
				left--
			}
		}
	}
	timeout := time.After(5 * time.Second)
	for left > 0 {
		select {
		case e := <-subs[0].C:
			take(0, e)
		case e := <-subs[1].C:
			take(1, e)
		case <-timeout:
			t.Fatalf("events still missing after 5 s: %v; got %v", missing, got)
		}
	}
	for i, s := range subs {
		for drained := false; !drained; {
			select {
			case e := <-s.C:
				take(i, e)
			default:
				drained = true
			}
		}
	}
	return got
}
