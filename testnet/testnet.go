// Package testnet starts N real nova nodes in one process, on 127.0.0.1 only
// (TCP and QUIC, ephemeral ports, each node in its own temp dir), connects
// them in a topology, and closes everything when the test ends.
//
//	net := testnet.New(t, 5)
//	net.FullMesh()
//	net.WaitForCards()
//	resp, _, err := net.Nodes[0].Request(ctx, env)
//
// Wait with Eventually, never with a bare sleep. CheckLeaks (run by New's
// cleanup) fails the test if a goroutine of this module outlives the nodes.
package testnet

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/conngater"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/internal/leakcheck"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/tiers"
)

// Transport selects what the nodes listen on.
type Transport string

// Transports of the harness.
const (
	TCP  Transport = "tcp"
	QUIC Transport = "quic"
	Both Transport = "both"
)

// Net is a set of running nodes.
type Net struct {
	t      testing.TB
	Nodes  []*node.Node
	gaters []*conngater.BasicConnectionGater
	// Admin is the key of the swarm's authority: every node's config names
	// it, and by default grants it signed let each node's agents keep
	// their claims (L0 and any sandbox), as in a swarm whose admin granted
	// every member. Sign more grants and revocations with it.
	Admin  crypto.PrivKey
	serial uint64
}

type options struct {
	transport Transport
	configure func(i int, c *node.Config)
	noLeak    bool
	noGrants  bool
}

// Option configures New.
type Option func(*options)

// WithTransport restricts the listen addresses (default Both).
func WithTransport(tr Transport) Option { return func(o *options) { o.transport = tr } }

// WithConfig edits node i's config before it is built. By default node i
// hosts one echo agent named "a<i>".
func WithConfig(f func(i int, c *node.Config)) Option {
	return func(o *options) { o.configure = f }
}

// WithoutGrants leaves the nodes ungranted: they share the authority but
// hold no grant, so each holds the others' agents at least privilege (L3,
// no sandbox) whatever their cards claim.
func WithoutGrants() Option { return func(o *options) { o.noGrants = true } }

// WithoutLeakCheck skips the goroutine leak check at cleanup (for tests that
// keep their own goroutines past the net's life).
func WithoutLeakCheck(t testing.TB) Option { return func(o *options) { o.noLeak = true } }

// ListenAddrs returns loopback listen addresses for a transport.
func ListenAddrs(tr Transport) []string {
	switch tr {
	case TCP:
		return []string{"/ip4/127.0.0.1/tcp/0"}
	case QUIC:
		return []string{"/ip4/127.0.0.1/udp/0/quic-v1"}
	default:
		return []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	}
}

// Config returns the harness's config for node i in dir: loopback only,
// one echo agent "a<i>", a short socket path.
func Config(t testing.TB, i int, tr Transport) node.Config {
	cfg := node.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = ListenAddrs(tr)
	cfg.Agents = []node.AgentConfig{node.DefaultAgent(fmt.Sprintf("a%d", i))}
	cfg.APISocket = filepath.Join(shortTempDir(t), "api.sock")
	cfg.RequestTimeout = 10 * time.Second
	cfg.RetryDelay = 100 * time.Millisecond // 0.1+0.2+0.4 s before giving up
	// Envelopes to a node that is away fail when the redials are spent,
	// which most tests time; those of the outbox's waiting set a TTL.
	cfg.DeliveryTTL = 0
	cfg.MDNS = false // the network rule: no mDNS outside a namespace
	return cfg
}

// shortTempDir is a temp dir with a short path (Unix socket paths are
// limited to ~100 bytes; t.TempDir() includes the test name).
func shortTempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "nova")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// New starts n nodes. They are not connected: call a topology method.
func New(t testing.TB, n int, opts ...Option) *Net {
	t.Helper()
	o := options{transport: Both}
	for _, opt := range opts {
		opt(&o)
	}
	if !o.noLeak {
		t.Cleanup(func() { CheckLeaks(t) }) // registered first, so it runs after the nodes close
	}
	admin, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	net := &Net{t: t, Admin: admin}
	for i := 0; i < n; i++ {
		cfg := Config(t, i, o.transport)
		g, err := conngater.NewBasicConnectionGater(nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnectionGater = g
		net.gaters = append(net.gaters, g)
		cfg.Authority = net.AdminID().String()
		if !o.noGrants {
			key, _, err := node.EnsureIdentity(cfg.DataDir)
			if err != nil {
				t.Fatal(err)
			}
			id, _ := peer.IDFromPrivateKey(key)
			cfg.Grants = []string{base64.RawURLEncoding.EncodeToString(net.Grant(authority.Grant{Peer: id, MaxTier: tiers.L0, Sandboxes: []string{authority.AnySandbox}}))}
		}
		if o.configure != nil {
			o.configure(i, &cfg)
		}
		nd, err := node.New(cfg)
		if err != nil {
			t.Fatalf("testnet: node %d: %v", i, err)
		}
		t.Cleanup(func() { _ = nd.Close() })
		if err := nd.Start(context.Background()); err != nil {
			t.Fatalf("testnet: start node %d: %v", i, err)
		}
		net.Nodes = append(net.Nodes, nd)
	}
	return net
}

// Restart closes node i and starts a new node on the same data dir and the
// same listen addresses (ports), so peers that knew it can redial it. It
// returns the new node, which replaces the old one in n.Nodes.
func (n *Net) Restart(i int, prepare func(*node.Node)) *node.Node {
	n.t.Helper()
	cfg := n.ConfigOf(i)
	n.Kill(i)
	return n.Start(i, cfg, prepare)
}

// ConfigOf returns node i's config listening on the addresses (ports) it
// listens on now: what starts it again (Start) where its peers can redial
// it.
func (n *Net) ConfigOf(i int) node.Config {
	cfg := n.Nodes[i].Config()
	cfg.Listen = nil
	for _, a := range n.Nodes[i].Host().Addrs() {
		cfg.Listen = append(cfg.Listen, a.String())
	}
	return cfg
}

// Kill closes node i (its store keeps what it persisted).
func (n *Net) Kill(i int) {
	n.t.Helper()
	if err := n.Nodes[i].Close(); err != nil {
		n.t.Fatalf("testnet: close node %d: %v", i, err)
	}
}

// Start starts a node from cfg in slot i (after Kill, or to replace it);
// prepare, if not nil, runs between New and Start (to register agents with
// Go handlers before peers can reach them).
func (n *Net) Start(i int, cfg node.Config, prepare func(*node.Node)) *node.Node {
	n.t.Helper()
	nd, err := node.New(cfg)
	if err != nil {
		n.t.Fatalf("testnet: restart node %d: %v", i, err)
	}
	n.t.Cleanup(func() { _ = nd.Close() })
	if prepare != nil {
		prepare(nd)
	}
	if err := nd.Start(context.Background()); err != nil {
		n.t.Fatalf("testnet: restart node %d: %v", i, err)
	}
	n.Nodes[i] = nd
	return nd
}

// Partition cuts every connection between the nodes of a and those of b
// and keeps them from reconnecting (each node's connection gater blocks the
// other side), until Heal.
func (n *Net) Partition(a, b []int) {
	n.t.Helper()
	for _, i := range a {
		for _, j := range b {
			_ = n.gaters[i].BlockPeer(n.Nodes[j].ID())
			_ = n.gaters[j].BlockPeer(n.Nodes[i].ID())
			_ = n.Nodes[i].Host().Network().ClosePeer(n.Nodes[j].ID())
			_ = n.Nodes[j].Host().Network().ClosePeer(n.Nodes[i].ID())
		}
	}
}

// Heal lifts every partition and reconnects each pair that Partition cut.
func (n *Net) Heal(a, b []int) {
	n.t.Helper()
	n.Lift(a, b)
	for _, i := range a {
		for _, j := range b {
			n.Connect(i, j)
		}
	}
}

// Lift lets the nodes of a and those of b connect again after Partition,
// without connecting them: they meet again when one dials the other.
func (n *Net) Lift(a, b []int) {
	for _, i := range a {
		for _, j := range b {
			_ = n.gaters[i].UnblockPeer(n.Nodes[j].ID())
			_ = n.gaters[j].UnblockPeer(n.Nodes[i].ID())
		}
	}
}

// Info is node i's dialable address info.
func (n *Net) Info(i int) peer.AddrInfo {
	nd := n.Nodes[i]
	return peer.AddrInfo{ID: nd.ID(), Addrs: nd.Host().Addrs()}
}

// Connect dials node j from node i.
func (n *Net) Connect(i, j int) {
	n.t.Helper()
	// A dial made while j was down (a channel redialling, a greeting) puts
	// j in libp2p's dial backoff for 5 s, and right after j restarted on
	// the same address a dial can be refused: the test asks to connect,
	// so Connect clears the backoff and dials again until j answers.
	waitfor.Eventually(n.t, 10*time.Second, func() error {
		if sw, ok := n.Nodes[i].Host().Network().(*swarm.Swarm); ok {
			sw.Backoff().Clear(n.Nodes[j].Host().ID())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := n.Nodes[i].Host().Connect(ctx, n.Info(j)); err != nil {
			return fmt.Errorf("testnet: connect %d -> %d: %w", i, j, err)
		}
		return nil
	})
}

// FullMesh connects every pair.
func (n *Net) FullMesh() {
	for i := range n.Nodes {
		for j := i + 1; j < len(n.Nodes); j++ {
			n.Connect(i, j)
		}
	}
}

// Star connects every node to node center.
func (n *Net) Star(center int) {
	for i := range n.Nodes {
		if i != center {
			n.Connect(i, center)
		}
	}
}

// Ring connects node i to node i+1, and the last to the first.
func (n *Net) Ring() {
	for i := range n.Nodes {
		if j := (i + 1) % len(n.Nodes); j != i {
			n.Connect(i, j)
		}
	}
}

// WaitForCards waits until every node knows the local cards of every node
// it is connected to, and sees it on the swarm's broadcast topic.
func (n *Net) WaitForCards() {
	n.t.Helper()
	// Generous: on a loaded 2-core machine thirty handshakes and topic
	// subscriptions queue behind each other; the wait ends at the event.
	waitfor.Eventually(n.t, 30*time.Second, func() error {
		for i, a := range n.Nodes {
			for j, b := range n.Nodes {
				if i == j || a.Host().Network().Connectedness(b.ID()) != network.Connected {
					continue
				}
				for _, c := range b.Registry().Local() {
					if _, ok := a.Registry().Get(c.Address()); !ok {
						return fmt.Errorf("node %d does not know %s yet", i, c.Address())
					}
				}
				if !slices.Contains(a.Router().TopicPeers(), b.ID()) {
					return fmt.Errorf("node %d does not see node %d on the broadcast topic yet", i, j)
				}
			}
		}
		return nil
	})
}

// Settle waits until the nodes' connections stop changing (the same count
// over a whole second) or timeout passes, and reports whether they did.
// Discovery keeps dialling for a while after the nodes start; a benchmark
// that measures latency in the middle of that measures the handshakes of
// thirty nodes sharing two cores, not the steady state.
func (n *Net) Settle(timeout time.Duration) bool {
	count := func() int {
		c := 0
		for _, nd := range n.Nodes {
			if h := nd.Host(); h != nil {
				c += len(h.Network().Conns())
			}
		}
		return c
	}
	deadline := time.Now().Add(timeout)
	last, stable := count(), 0
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		c := count()
		if c == last {
			if stable++; stable >= 4 {
				return true
			}
		} else {
			last, stable = c, 0
		}
	}
	return false
}

// CheckLeaks fails t if goroutines running code of this module remain
// (after a grace period for them to unwind). Call it after closing nodes.
func CheckLeaks(t testing.TB) {
	t.Helper()
	if last := leakcheck.Wait("github.com/nova-node/nova-node/", 5*time.Second); last != "" {
		t.Errorf("testnet: goroutines outlived their owners:\n%s", last)
	}
}

// AdminID is the peer ID of the swarm's authority (its founding key).
func (n *Net) AdminID() peer.ID {
	id, err := peer.IDFromPrivateKey(n.Admin)
	if err != nil {
		n.t.Fatal(err)
	}
	return id
}

// Grant signs g with the admin key (its Authority and, when zero, its
// Serial are filled in) and returns it as signed.
func (n *Net) Grant(g authority.Grant) []byte {
	n.t.Helper()
	g.Authority = n.AdminID()
	if g.Serial == 0 {
		n.serial++
		g.Serial = n.serial
	}
	b, err := authority.SealGrant(g, n.Admin)
	if err != nil {
		n.t.Fatal(err)
	}
	return b
}

// Revoke signs a revocation of grant serial with the admin key.
func (n *Net) Revoke(serial uint64, p peer.ID, reason string) []byte {
	n.t.Helper()
	b, err := authority.SealRevocation(authority.Revocation{Authority: n.AdminID(), Serial: serial, Peer: p, Reason: reason, At: time.Now()}, n.Admin)
	if err != nil {
		n.t.Fatal(err)
	}
	return b
}
