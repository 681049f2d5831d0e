package testnet_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// rawMsg mirrors the wire frame body of /nova/a2a/1.0.0 (docs/wire-protocol.md),
// written independently of the protocol package.
type rawMsg struct {
	Kind  uint8              `cbor:"k"`
	Seq   uint64             `cbor:"s,omitempty"`
	Ch    string             `cbor:"h,omitempty"`
	From  string             `cbor:"f,omitempty"`
	To    string             `cbor:"t,omitempty"`
	W     uint64             `cbor:"w,omitempty"`
	Env   *envelope.Envelope `cbor:"e,omitempty"`
	Cards [][]byte           `cbor:"c,omitempty"`
	Code  string             `cbor:"x,omitempty"`
	Msg   string             `cbor:"m,omitempty"`
	Auth  [][]byte           `cbor:"g,omitempty"`
}

// mallory is a raw libp2p host that speaks the a2a protocol by hand.
type mallory struct {
	t   *testing.T
	h   host.Host
	key crypto.PrivKey
}

func newMallory(t *testing.T, target *node.Node) *mallory {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.Connect(t.Context(), peer.AddrInfo{ID: target.ID(), Addrs: target.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	return &mallory{t: t, h: h, key: key}
}

func (m *mallory) id() peer.ID { return m.h.ID() }

func (m *mallory) stream(target *node.Node) network.Stream {
	m.t.Helper()
	s, err := m.h.NewStream(m.t.Context(), target.ID(), protocol.IDA2A)
	if err != nil {
		m.t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	return s
}

func (m *mallory) card(id string, tier tiers.Tier, sb string) agentcard.Card {
	return agentcard.Card{ID: id, Name: id, Version: "1.0.0", Tier: tier, Protocols: []string{"a2a/1.0"},
		Capabilities: []agentcard.Capability{}, SandboxID: sb, Host: m.id().String()}
}

func (m *mallory) sealed(c agentcard.Card, key crypto.PrivKey) []byte {
	b, err := agentcard.Seal(c, key)
	if err != nil {
		m.t.Fatal(err)
	}
	return b
}

func writeMsg(t *testing.T, s network.Stream, msg rawMsg) {
	t.Helper()
	b, err := envelope.EncMode().Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := frame.Write(s, b); err != nil {
		t.Fatal(err)
	}
}

func readMsg(t *testing.T, s network.Stream) rawMsg {
	t.Helper()
	b, err := frame.NewReader(bufio.NewReader(s), 0).Next()
	if err != nil {
		t.Fatalf("reading the node's answer: %v", err)
	}
	var m rawMsg
	if err := envelope.DecMode().Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// expectReset asserts that the node reset the stream.
func expectReset(t *testing.T, s network.Stream) {
	t.Helper()
	buf := make([]byte, 1)
	_, err := s.Read(buf)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline") {
		t.Fatalf("stream not reset: read returned %v", err)
	}
	if !errors.Is(err, network.ErrReset) {
		t.Fatalf("stream ended with %v, want a reset", err)
	}
}

func securityEvents(n *node.Node, code string) int {
	c := 0
	for _, e := range n.Observer().Recent(0) {
		if e.Type == protocol.EvtSecurityRaised && e.Code == code {
			c++
		}
	}
	return c
}

// stillServes proves the node keeps serving other peers after a bad stream.
func stillServes(t *testing.T, net *testnet.Net) {
	t.Helper()
	if _, _, err := request(t, net.Nodes[1], "a1", "a0", "still there?"); err != nil {
		t.Fatalf("node stopped serving other peers: %v", err)
	}
}

func TestBadFramesResetOnlyThatStream(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	target := net.Nodes[0]
	m := newMallory(t, target)

	cases := map[string][]byte{
		"malformed varint":    {0x80, 0x00, 0x01},
		"oversized frame":     binary.AppendUvarint(nil, 2<<20),
		"garbage CBOR":        frame.Append(nil, []byte{0xff, 0x00, 0x13, 0x37, 0xde, 0xad}),
		"unknown kind":        mustFrame(t, rawMsg{Kind: 99}),
		"ack on inbound":      mustFrame(t, rawMsg{Kind: 3, Ch: "c", Seq: 1}),
		"opened on inbound":   mustFrame(t, rawMsg{Kind: 6, Ch: "c"}),
		"envelope missing":    mustFrame(t, rawMsg{Kind: 2, Ch: "c", Seq: 1}),
		"no channel":          mustFrame(t, rawMsg{Kind: 2, Seq: 1, Env: rawEnvelope(t, "x@y", "a0", envelope.TypeNotification, nil)}),
		"open without agents": mustFrame(t, rawMsg{Kind: 5, Ch: "c"}),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			before := securityEvents(target, protocol.CodeProtocolError)
			s := m.stream(target)
			if _, err := s.Write(in); err != nil {
				t.Fatal(err)
			}
			expectReset(t, s)
			waitfor.Eventually(t, 5*time.Second, func() error {
				if securityEvents(target, protocol.CodeProtocolError) <= before {
					return errors.New("no security event for the bad frame")
				}
				return nil
			})
			stillServes(t, net)
		})
	}
	// The peer itself is not banned: a well-formed stream still works.
	s := m.stream(target)
	writeMsg(t, s, rawMsg{Kind: 1, Cards: [][]byte{m.sealed(m.card("m", tiers.L3, ""), m.key)}})
	env := rawEnvelope(t, "m@"+m.id().String(), "a0", envelope.TypeNotification, &envelope.Metadata{Tier: 3})
	writeMsg(t, s, rawMsg{Kind: 5, Ch: "c1", From: env.Sender, To: "a0"})
	if got := readMsg(t, s); got.Kind != 6 || got.Ch != "c1" || got.W != 0 {
		t.Fatalf("want opened c1 at watermark 0, got %+v", got)
	}
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "c1", Seq: 1, Env: env})
	if got := readMsg(t, s); got.Kind != 3 || got.Seq != 1 || got.Ch != "c1" {
		t.Fatalf("want ack 1, got %+v", got)
	}
}

func mustFrame(t *testing.T, msg rawMsg) []byte {
	b, err := envelope.EncMode().Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return frame.Append(nil, b)
}

func rawEnvelope(t *testing.T, from, to string, typ envelope.Type, md *envelope.Metadata) *envelope.Envelope {
	t.Helper()
	e, err := envelope.NewFactory().New(from, to, typ, map[string]string{"x": "y"})
	if err != nil {
		t.Fatal(err)
	}
	e.Metadata = md
	return e
}

func TestForgedCardsAreRefused(t *testing.T) {
	net := testnet.New(t, 1)
	target := net.Nodes[0]
	m := newMallory(t, target)
	otherKey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	otherID, _ := peer.IDFromPrivateKey(otherKey)

	t.Run("card of another peer, relayed", func(t *testing.T) {
		c := m.card("sun", tiers.L0, "")
		c.Host = otherID.String()
		s := m.stream(target)
		writeMsg(t, s, rawMsg{Kind: 1, Cards: [][]byte{m.sealed(c, otherKey)}})
		expectReset(t, s)
		if _, ok := target.Registry().Get("sun@" + otherID.String()); ok {
			t.Fatal("relayed card accepted")
		}
	})
	t.Run("tampered signature", func(t *testing.T) {
		b := m.sealed(m.card("sun", tiers.L0, ""), m.key)
		b[len(b)-3] ^= 0xff
		s := m.stream(target)
		writeMsg(t, s, rawMsg{Kind: 1, Cards: [][]byte{b}})
		expectReset(t, s)
	})
	if _, ok := target.Registry().Get("sun@" + m.id().String()); ok {
		t.Fatal("forged card entered the registry")
	}
	if securityEvents(target, protocol.CodeUnauthorizedSender)+securityEvents(target, agentcard.CodeInvalidCard)+securityEvents(target, protocol.CodeProtocolError) < 2 {
		t.Fatalf("forged cards raised no security events: %+v", target.Observer().Recent(0))
	}
}

// TestReceiverEnforces sends, from a hand-written peer, envelopes that a
// well-behaved node would never send, and checks that the receiving node
// refuses each with the right code, crossing the real stream.
func TestReceiverEnforces(t *testing.T) {
	net := testnet.New(t, 1, testnet.WithConfig(func(i int, c *node.Config) {
		l0 := tiers.L0
		c.Agents = append(c.Agents,
			node.AgentConfig{Name: "sun", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "echo"}}},
			node.AgentConfig{Name: "boxed", Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "echo"}}},
		)
	}))
	target := net.Nodes[0]
	m := newMallory(t, target)
	// Mallory is a member granted L1: the rules below are the receiver's
	// own checks of what a granted peer sends, not of its claims.
	if _, err := target.AddAuthorityRecord(net.Grant(authority.Grant{Peer: m.id(), MaxTier: tiers.L1})); err != nil {
		t.Fatal(err)
	}
	mine := func(id string) string { return id + "@" + m.id().String() }
	s := m.stream(target)
	writeMsg(t, s, rawMsg{Kind: 1, Cards: [][]byte{
		m.sealed(m.card("l1", tiers.L1, ""), m.key),
		m.sealed(m.card("l3", tiers.L3, ""), m.key),
	}})
	nch := 0
	// deliver opens a channel for the envelope's agent pair and sends it as
	// sequence 1; it returns the open refusal or the envelope's answer.
	deliver := func(env *envelope.Envelope) rawMsg {
		nch++
		ch := fmt.Sprintf("ch%d", nch)
		writeMsg(t, s, rawMsg{Kind: 5, Ch: ch, From: env.Sender, To: env.Recipient})
		got := readMsg(t, s)
		if got.Ch != ch {
			t.Fatalf("answer for channel %q, want %q", got.Ch, ch)
		}
		if got.Kind == 4 {
			return got // the open itself was refused
		}
		if got.Kind != 6 {
			t.Fatalf("open answered with kind %d", got.Kind)
		}
		writeMsg(t, s, rawMsg{Kind: 2, Ch: ch, Seq: 1, Env: env})
		got = readMsg(t, s)
		if got.Ch != ch || got.Seq != 1 {
			t.Fatalf("answer %+v, want channel %s seq 1", got, ch)
		}
		return got
	}
	wrongVersion := rawEnvelope(t, mine("l3"), "a0", envelope.TypeRequest, &envelope.Metadata{Tier: 3})
	wrongVersion.SchemaVersion = 7
	noType := rawEnvelope(t, mine("l3"), "a0", envelope.TypeRequest, nil)
	noType.Type = "gossip"

	cases := []struct {
		name     string
		env      *envelope.Envelope
		code     string
		security bool
	}{
		{"impersonates a local agent", rawEnvelope(t, "a0@"+target.ID().String(), "a0", envelope.TypeNotification, nil), protocol.CodeUnauthorizedSender, true},
		{"agent it never presented", rawEnvelope(t, mine("ghost"), "a0", envelope.TypeNotification, nil), protocol.CodeUnauthorizedSender, true},
		{"bare sender name", rawEnvelope(t, "l3", "a0", envelope.TypeNotification, nil), protocol.CodeUnauthorizedSender, true},
		{"metadata lies about tier", rawEnvelope(t, mine("l3"), "a0", envelope.TypeNotification, &envelope.Metadata{Tier: 0}), protocol.CodeUnauthorizedSender, true},
		{"unknown recipient", rawEnvelope(t, mine("l3"), "ghost", envelope.TypeNotification, nil), agentcard.CodeAgentNotFound, false},
		{"recipient on another node", rawEnvelope(t, mine("l3"), "a0@"+m.id().String(), envelope.TypeNotification, nil), agentcard.CodeAgentNotFound, false},
		{"L1 to L3", rawEnvelope(t, mine("l1"), "a0", envelope.TypeRequest, nil), tiers.CodeTierViolation, true},
		{"L3 proposal to L0 without justification", rawEnvelope(t, mine("l3"), "sun", envelope.TypeTaskProposal, nil), tiers.CodeEscalationRequired, false},
		{"across a sandbox", rawEnvelope(t, mine("l3"), "boxed", envelope.TypeNotification, nil), sandbox.CodeSandboxViolation, true},
		{"unknown schema version", wrongVersion, envelope.CodeSchemaVersionMismatch, false},
		{"invalid type", noType, envelope.CodeInvalidEnvelope, false},
		{"forged reply to nothing", func() *envelope.Envelope {
			e := rawEnvelope(t, mine("l1"), "a0", envelope.TypeResponse, nil)
			e.CorrelationID = "never-asked"
			return e
		}(), tiers.CodeTierViolation, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := securityEvents(target, tc.code)
			got := deliver(tc.env)
			if got.Kind != 4 || got.Code != tc.code {
				t.Fatalf("got kind %d code %q (%s), want nack %s", got.Kind, got.Code, got.Msg, tc.code)
			}
			if got.Msg == "" {
				t.Fatal("nack without a message")
			}
			if tc.code == envelope.CodeSchemaVersionMismatch && !(strings.Contains(got.Msg, "1") && strings.Contains(got.Msg, "7")) {
				t.Fatalf("version mismatch should say expected and actual: %q", got.Msg)
			}
			if after := securityEvents(target, tc.code); tc.security && after <= before {
				t.Fatalf("no security event for %s", tc.code)
			}
		})
	}
	// An envelope whose sender differs from its channel's is refused.
	writeMsg(t, s, rawMsg{Kind: 5, Ch: "pair", From: mine("l3"), To: "a0"})
	if got := readMsg(t, s); got.Kind != 6 {
		t.Fatalf("open: %+v", got)
	}
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "pair", Seq: 1, Env: rawEnvelope(t, mine("l1"), "a0", envelope.TypeNotification, nil)})
	if got := readMsg(t, s); got.Kind != 4 || got.Code != protocol.CodeUnauthorizedSender {
		t.Fatalf("sender switched inside a channel: %+v", got)
	}
	// And what is allowed is delivered: L3 -> L0 with a justification, L3 -> L3.
	ok := rawEnvelope(t, mine("l3"), "sun", envelope.TypeTaskProposal, &envelope.Metadata{Tier: 3, EscalationJustification: "prod is down"})
	if got := deliver(ok); got.Kind != 3 {
		t.Fatalf("justified escalation refused: %+v", got)
	}
	if got := deliver(rawEnvelope(t, mine("l3"), "a0", envelope.TypeRequest, nil)); got.Kind != 3 {
		t.Fatalf("L3 -> L3 refused: %+v", got)
	}
	// A retransmission (same channel, same sequence) is acknowledged and not
	// delivered again; so is the same envelope id under a new sequence.
	received := func() uint64 { return target.Observer().Metrics().TotalMessagesReceived }
	writeMsg(t, s, rawMsg{Kind: 5, Ch: "dup", From: mine("l3"), To: "a0"})
	readMsg(t, s)
	dup := rawEnvelope(t, mine("l3"), "a0", envelope.TypeNotification, nil)
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "dup", Seq: 1, Env: dup})
	if got := readMsg(t, s); got.Kind != 3 || got.Seq != 1 {
		t.Fatalf("first: %+v", got)
	}
	n := received()
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "dup", Seq: 1, Env: dup})
	if got := readMsg(t, s); got.Kind != 3 || got.Seq != 1 || received() != n {
		t.Fatalf("retransmission: %+v, received %d -> %d", got, n, received())
	}
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "dup", Seq: 2, Env: dup})
	if got := readMsg(t, s); got.Kind != 3 || got.Seq != 2 || received() != n {
		t.Fatalf("same id, new sequence: %+v, received %d -> %d", got, n, received())
	}
	// Reopening a channel reports how far the receiver got.
	writeMsg(t, s, rawMsg{Kind: 5, Ch: "dup", From: mine("l3"), To: "a0"})
	if got := readMsg(t, s); got.Kind != 6 || got.W != 2 {
		t.Fatalf("reopen: %+v, want watermark 2", got)
	}
	// A channel that has delivered still checks every envelope: the
	// receiver's cached attribution of its pair covers the cards, not the
	// envelope, and ends when a card changes.
	a0 := "a0@" + target.ID().String() // canonical, as nodes send it
	writeMsg(t, s, rawMsg{Kind: 5, Ch: "kept", From: mine("l3"), To: a0})
	readMsg(t, s)
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "kept", Seq: 1, Env: rawEnvelope(t, mine("l3"), a0, envelope.TypeRequest, &envelope.Metadata{Tier: 3})})
	if got := readMsg(t, s); got.Kind != 3 {
		t.Fatalf("L3 -> L3: %+v", got)
	}
	before := securityEvents(target, protocol.CodeUnauthorizedSender)
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "kept", Seq: 2, Env: rawEnvelope(t, mine("l3"), a0, envelope.TypeNotification, &envelope.Metadata{Tier: 0})})
	if got := readMsg(t, s); got.Kind != 4 || got.Code != protocol.CodeUnauthorizedSender || securityEvents(target, protocol.CodeUnauthorizedSender) <= before {
		t.Fatalf("metadata lie on a channel that delivered: %+v", got)
	}
	demoted := m.card("l3", tiers.L1, "")
	demoted.Revision = 1
	writeMsg(t, s, rawMsg{Kind: 1, Cards: [][]byte{m.sealed(demoted, m.key)}})
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "kept", Seq: 3, Env: rawEnvelope(t, mine("l3"), a0, envelope.TypeRequest, &envelope.Metadata{Tier: 1})})
	if got := readMsg(t, s); got.Kind != 4 || got.Code != tiers.CodeTierViolation {
		t.Fatalf("L1 (was L3) to L3 on a channel that delivered: %+v, want TIER_VIOLATION", got)
	}
	writeMsg(t, s, rawMsg{Kind: 2, Ch: "kept", Seq: 4, Env: rawEnvelope(t, mine("l3"), a0, envelope.TypeRequest, &envelope.Metadata{Tier: 3})})
	if got := readMsg(t, s); got.Kind != 4 || got.Code != protocol.CodeUnauthorizedSender {
		t.Fatalf("metadata of the card's old revision: %+v, want UNAUTHORIZED_SENDER", got)
	}
}

// TestCodesCrossTheWireBetweenNodes: a sending node with looser rules than
// the receiver is refused by the receiver, and the typed error matches with
// errors.Is on the sending side.
func TestCodesCrossTheWireBetweenNodes(t *testing.T) {
	l1 := tiers.L1
	permissive := tiers.Rules{
		{Source: 0, Allowed: []tiers.Tier{0, 1, 2, 3}}, {Source: 1, Allowed: []tiers.Tier{0, 1, 2, 3}},
		{Source: 2, Allowed: []tiers.Tier{0, 1, 2, 3}}, {Source: 3, Allowed: []tiers.Tier{0, 1, 2, 3}},
	}
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		if i == 0 {
			c.TierRules = permissive
			c.Sandbox = sandbox.Policy{Enforced: false}
			c.Agents = append(c.Agents,
				node.AgentConfig{Name: "strategist", Tier: &l1, Capabilities: []node.CapabilityConfig{{ID: "plan"}}},
				node.AgentConfig{Name: "boxed", Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "plan"}}})
		} else {
			l0 := tiers.L0
			c.Agents = append(c.Agents, node.AgentConfig{Name: "sun", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	a := net.Nodes[0]
	cases := []struct {
		from, to string
		typ      envelope.Type
		want     error
	}{
		{"strategist", "a1", envelope.TypeRequest, tiers.ErrTierViolation},
		{"a0", "sun", envelope.TypeTaskProposal, tiers.ErrEscalationRequired},
		{"boxed", "a1", envelope.TypeRequest, sandbox.ErrSandboxViolation},
	}
	for _, tc := range cases {
		env, _ := a.NewEnvelope(tc.from, tc.to, tc.typ, 1)
		res, err := a.Send(t.Context(), env)
		var re *protocol.RemoteError
		if !errors.Is(err, tc.want) || !errors.As(err, &re) || re.Peer != net.Nodes[1].ID() || res.Delivered {
			t.Errorf("%s -> %s %s: got %v (%+v), want a remote %v", tc.from, tc.to, tc.typ, err, res, tc.want)
		}
	}
	// The receiver refused an escalation its sender should have refused:
	// a security event, in its audit log.
	if securityEvents(net.Nodes[1], tiers.CodeEscalationRequired) != 1 {
		t.Errorf("%d ESCALATION_REQUIRED security events on the receiver, want 1", securityEvents(net.Nodes[1], tiers.CodeEscalationRequired))
	}
	audit, err := os.ReadFile(filepath.Join(net.Nodes[1].Config().DataDir, node.AuditFile))
	if err != nil || !strings.Contains(string(audit), `"ESCALATION_REQUIRED"`) {
		t.Errorf("the receiver's audit log has no ESCALATION_REQUIRED (%v):\n%s", err, audit)
	}
}

// An escalation that carries its justification is allowed, and the audit
// logs of both nodes (it is a cross-tier message) say why.
func TestJustifiedEscalationAuditedWithItsReason(t *testing.T) {
	l0 := tiers.L0
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		if i == 1 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "sun", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	env, _ := net.Nodes[0].NewEnvelope("a0", "sun", envelope.TypeTaskProposal, map[string]string{"task": "review"})
	env.Metadata = &envelope.Metadata{EscalationJustification: "schema change needs L0 sign-off"}
	if _, err := net.Nodes[0].Send(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	for i, n := range net.Nodes {
		waitfor.Eventually(t, 5*time.Second, func() error {
			audit, err := os.ReadFile(filepath.Join(n.Config().DataDir, node.AuditFile))
			if err != nil || !strings.Contains(string(audit), "escalation justified: schema change needs L0 sign-off") {
				return fmt.Errorf("node %d's audit log has no justification (%v):\n%s", i, err, audit)
			}
			return nil
		})
	}
}
