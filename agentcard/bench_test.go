package agentcard_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nova-node/nova-node/agentcard"
)

// benchCard is a typical card: three capabilities, two with schemas.
func benchCard() agentcard.Card {
	c := sampleCard("venus", "codegen.react", "schema.design", "review")
	c.Description = "operational agent: writes React components and designs schemas"
	c.Endpoints = append(c.Endpoints, agentcard.Endpoint{Transport: "libp2p", Address: "/ip4/127.0.0.1/tcp/4001"})
	c.Capabilities[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"spec":{"type":"string"},"framework":{"enum":["react","preact"]}}}`)
	c.Capabilities[1].OutputSchema = json.RawMessage(`{"type":"object","properties":{"schema":{"type":"object"}}}`)
	return c
}

func BenchmarkSeal(b *testing.B) {
	n := newNode(b, 1)
	c := benchCard()
	for b.Loop() {
		if _, err := agentcard.Seal(c, n.key); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	n := newNode(b, 1)
	data, err := agentcard.Seal(benchCard(), n.key)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := agentcard.Open(data); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRegistry is a registry of 1,000 cards: 200 local and 800 remote on
// 4 peers, 100 names hosted on two nodes, 10 capabilities of 100 cards each.
func benchRegistry(b *testing.B) (*agentcard.Registry, []node) {
	nodes := testNodes(b)
	r := agentcard.NewRegistry(nodes[0].id)
	for i := range 200 {
		if _, err := r.Register(sampleCard(fmt.Sprintf("local-%d", i), "plan", fmt.Sprintf("cap-%d", i%10))); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 800 {
		id := fmt.Sprintf("remote-%d", i/4*4+i%4) // unique
		if i < 100 {
			id = fmt.Sprintf("local-%d", i) // clashes with a local name
		}
		c := remoteCard(id, nodes[1+i%4].id, 1, fmt.Sprintf("cap-%d", i%10))
		if _, err := r.MergeRemote(c); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(r.List()); n != 1000 {
		b.Fatalf("registry holds %d cards", n)
	}
	return r, nodes
}

// BenchmarkResolve resolves names in [benchRegistry].
func BenchmarkResolve(b *testing.B) {
	r, nodes := benchRegistry(b)
	full := "remote-500@" + nodes[1].id.String()
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Resolve("local-150"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Resolve(full); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ambiguous", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Resolve("local-50"); err == nil {
				b.Fatal("not ambiguous")
			}
		}
	})
	b.Run("notfound", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Resolve("nobody"); err == nil {
				b.Fatal("found")
			}
		}
	})
	b.Run("capability", func(b *testing.B) {
		for b.Loop() {
			if got := r.FindByCapability("cap-3"); len(got) != 100 {
				b.Fatalf("found %d", len(got))
			}
		}
	})
}

// getBench is what the router looks up per message: its sender, a local
// agent by bare name and by full address, and a remote recipient, each a
// typical card ([benchCard]) in [benchRegistry].
func getBench(b *testing.B) (r *agentcard.Registry, local, localFull, remote string) {
	r, nodes := benchRegistry(b)
	if _, err := r.Register(benchCard()); err != nil {
		b.Fatal(err)
	}
	c := benchCard()
	c.ID = "mercury"
	c.Host = nodes[1].id.String()
	if _, err := r.MergeRemote(c); err != nil {
		b.Fatal(err)
	}
	return r, "venus", "venus@" + nodes[0].id.String(), c.Address()
}

func BenchmarkRegistryGet(b *testing.B) {
	r, local, localFull, remote := getBench(b)
	for _, addr := range []struct{ name, addr string }{{"local", local}, {"local-full", localFull}, {"remote", remote}} {
		b.Run(addr.name, func(b *testing.B) {
			for b.Loop() {
				if _, ok := r.Get(addr.addr); !ok {
					b.Fatal("not found")
				}
			}
		})
	}
	// The router's pattern before GetSharedAddr: the card, then its address.
	b.Run("remote+addr", func(b *testing.B) {
		for b.Loop() {
			c, ok := r.Get(remote)
			if !ok || c.Address() != remote {
				b.Fatal("not found")
			}
		}
	})
}

// BenchmarkRegistryGetShared is [BenchmarkRegistryGet] without the copies.
func BenchmarkRegistryGetShared(b *testing.B) {
	r, local, localFull, remote := getBench(b)
	for _, addr := range []struct{ name, addr string }{{"local", local}, {"local-full", localFull}, {"remote", remote}} {
		b.Run(addr.name, func(b *testing.B) {
			for b.Loop() {
				if _, ok := r.GetShared(addr.addr); !ok {
					b.Fatal("not found")
				}
			}
		})
	}
	b.Run("remote+addr", func(b *testing.B) {
		for b.Loop() {
			if _, a, ok := r.GetSharedAddr(remote); !ok || a != remote {
				b.Fatal("not found")
			}
		}
	})
	b.Run("resolve-full", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := r.ResolveShared(remote); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("first-capability", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := r.FirstByCapabilityShared("cap-3"); !ok {
				b.Fatal("not found")
			}
		}
	})
}

// BenchmarkRegistryLocal lists the local agents of a node holding two of
// its own and 1,000 remote cards, as every broadcast received does.
func BenchmarkRegistryLocal(b *testing.B) {
	nodes := testNodes(b)
	r := agentcard.NewRegistry(nodes[0].id)
	for i := range 2 {
		if _, err := r.Register(sampleCard(fmt.Sprintf("local-%d", i), "plan")); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1000 {
		if _, err := r.MergeRemote(remoteCard(fmt.Sprintf("remote-%d", i), nodes[1+i%4].id, 1, "plan")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(r.Local()) != 2 {
			b.Fatal("not the two local cards")
		}
	}
}
