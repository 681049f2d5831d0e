package testnet_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// firstContactNodes is the size of BenchmarkFirstContact's swarm.
const firstContactNodes = 20

// BenchmarkFirstContact measures first contact as a user feels it: a new
// node starts with one bootstrap peer (no mDNS), finds an agent by its bare
// name through the DHT, dials its host and gets the answer to a first
// request. The swarm is 20 nodes on loopback (TCP) connected in a ring
// (each node knows two others; the DHT finds the rest), node 10 hosting
// the echo agent "a10"; every iteration starts a fresh node (new key, new
// data dir) bootstrapping from another swarm node, and closes it after.
// It reports p50s in milliseconds: start-ms is node.New and Start (data
// dir, key, host, every service); contact-ms runs from the running node to
// the answer (the router resolves the bare name through discovery,
// connects, greets, sends; the agent answers); first-answer-ms is both,
// the user's whole wait. raw-ms is the same discover + connect + one
// round trip with raw libp2p in the same run, the counterpart of
// Hyperswarm's discover + connect (20 ms on loopback): a fresh host with
// a kad-dht client on the same DHT, FindProvidersAsync of the agent's
// name key until the first provider, Connect, one libp2p ping. x-raw is
// contact-ms / raw-ms.
//
//	go test -run '^$' -bench BenchmarkFirstContact -benchtime 20x ./testnet/
func BenchmarkFirstContact(b *testing.B) {
	const target = firstContactNodes / 2
	net := testnet.New(b, firstContactNodes, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		c.MetricsListen = "off"
	}))
	net.Ring()
	net.WaitForCards()
	name := fmt.Sprintf("a%d", target)
	// The swarm has published: the name resolves from a node not next to
	// the target in the ring.
	waitfor.Eventually(b, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := net.Nodes[0].FindAgents(ctx, name, "", "", "")
		return err
	})
	boot := func(i int) (peer.AddrInfo, string) {
		j := i % firstContactNodes
		if j == target {
			j = (j + 1) % firstContactNodes
		}
		ai := net.Info(j)
		return ai, fmt.Sprintf("%s/p2p/%s", ai.Addrs[0], ai.ID)
	}
	var start, contact, total, raw []time.Duration
	i := 0
	for b.Loop() {
		ai, addr := boot(i)
		cfg := testnet.Config(b, 100+i, testnet.TCP)
		me := fmt.Sprintf("newcomer%d", i)
		cfg.Agents = []node.AgentConfig{node.DefaultAgent(me)}
		cfg.MetricsListen = "off"
		cfg.Bootstrap = []string{addr}
		cfg.Authority = net.AdminID().String()
		key, _, err := node.EnsureIdentity(cfg.DataDir)
		if err != nil {
			b.Fatal(err)
		}
		id, _ := peer.IDFromPrivateKey(key)
		cfg.Grants = []string{base64.RawURLEncoding.EncodeToString(net.Grant(authority.Grant{Peer: id, MaxTier: tiers.L0, Sandboxes: []string{authority.AnySandbox}}))}

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		nd, err := node.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := nd.Start(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		env, err := nd.NewEnvelope(me, name, envelope.TypeRequest, "hello")
		if err != nil {
			b.Fatal(err)
		}
		resp, _, err := nd.Request(ctx, env)
		t2 := time.Now()
		if err != nil || string(resp.Payload) != `"hello"` {
			b.Fatalf("iteration %d: first request: %v", i, err)
		}
		_ = nd.Close()
		start, contact, total = append(start, t1.Sub(t0)), append(contact, t2.Sub(t1)), append(total, t2.Sub(t0))

		d, err := rawContact(ctx, ai, net.ConfigOf(0).Swarm, name)
		cancel()
		if err != nil {
			b.Fatalf("iteration %d: raw: %v", i, err)
		}
		raw = append(raw, d)
		i++
	}
	p50 := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	c50, r50 := p50(contact), p50(raw)
	b.ReportMetric(ms(p50(start)), "start-ms")
	b.ReportMetric(ms(c50), "contact-ms")
	b.ReportMetric(ms(p50(total)), "first-answer-ms")
	b.ReportMetric(ms(r50), "raw-ms")
	b.ReportMetric(float64(c50)/float64(r50), "x-raw")
}

// rawContact is raw libp2p's first contact, timed from a new host: a
// kad-dht client on nova's DHT bootstrapping from boot, the first provider
// of name's key, a connection to it and one ping round trip.
func rawContact(ctx context.Context, boot peer.AddrInfo, swarm, name string) (time.Duration, error) {
	t0 := time.Now()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay(), libp2p.Ping(true))
	if err != nil {
		return 0, err
	}
	defer h.Close()
	d, err := dht.New(h, dht.ProtocolPrefix(discovery.ProtocolPrefix), dht.Mode(dht.ModeClient),
		dht.Validator(record.NamespacedValidator{discovery.Namespace: discovery.Validator{}}), dht.BootstrapPeers(boot))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if err := h.Connect(ctx, boot); err != nil {
		return 0, err
	}
	key := discovery.KeyCID(discovery.NameKey(swarm, name))
	for {
		if d.RoutingTable().Size() > 0 {
			for ai := range d.FindProvidersAsync(ctx, key, 1) {
				if err := h.Connect(ctx, ai); err != nil {
					return 0, err
				}
				r := <-ping.Ping(ctx, h, ai.ID)
				if r.Error != nil {
					return 0, r.Error
				}
				return time.Since(t0), nil
			}
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		time.Sleep(100 * time.Microsecond) // polling for identify to fill the routing table
	}
}
