package agentcard_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/nova-node/nova-node/agentcard"
)

// members returns n identities, one per member of a swarm.
func members(tb testing.TB, n int) []node {
	tb.Helper()
	out := make([]node, n)
	for i := range out {
		var s [32]byte
		binary.LittleEndian.PutUint64(s[:], uint64(i)+1000)
		out[i] = nodeFrom(tb, s)
	}
	return out
}

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHeldPerMember measures what a node holds for each member of its
// swarm in the registry (a member's card, merged from a hello, or as
// discovery merges it from a roster message or the DHT, sharing its
// cache's card: registry-shared) and in the router's Opener (the member's card as its hellos
// present it), in bytes of live heap per member: every node holds this
// for every member, so a swarm of n holds n² of it. Each member hosts one
// agent with one capability, all members offering the same one, as in the
// simulation.
//
//	go test -run '^$' -bench BenchmarkHeldPerMember -benchtime 1x ./agentcard/
func BenchmarkHeldPerMember(b *testing.B) {
	const n = 1000
	ms := members(b, n)
	cards := make([]agentcard.Card, n)
	sealed := make([][]byte, n)
	for i, m := range ms {
		c := remoteCard(fmt.Sprintf("agent-%d", i), m.id, 1, "echo")
		c.Endpoints = append(c.Endpoints, agentcard.Endpoint{Transport: "libp2p", Address: "/ip4/10.0.0.1/udp/4001/quic-v1"})
		cards[i] = c
		s, err := agentcard.Seal(c, m.key)
		if err != nil {
			b.Fatal(err)
		}
		sealed[i] = s
	}
	b.Run("registry", func(b *testing.B) {
		for b.Loop() {
			before := liveHeap()
			r := agentcard.NewRegistry(testNodes(b)[0].id)
			for _, c := range cards {
				if _, err := r.MergeRemote(c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(liveHeap()-before)/n, "B/member")
			runtime.KeepAlive(r)
		}
	})
	// As discovery merges: the registry keeps the slices of the card
	// discovery's cache holds (here, cards), so it holds less of its own.
	b.Run("registry-shared", func(b *testing.B) {
		for b.Loop() {
			before := liveHeap()
			r := agentcard.NewRegistry(testNodes(b)[0].id)
			now := time.Now()
			for _, c := range cards {
				if _, err := r.MergeRemoteAtShared(c, now); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(liveHeap()-before)/n, "B/member")
			runtime.KeepAlive(r)
		}
	})
	b.Run("opener", func(b *testing.B) {
		for b.Loop() {
			before := liveHeap()
			o := agentcard.NewOpener(0)
			for _, s := range sealed {
				if _, _, err := o.Open(s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(liveHeap()-before)/n, "B/member")
			runtime.KeepAlive(o)
		}
	})
}

// BenchmarkMergeRemoteRefresh merges a card the registry holds at its
// revision, as every member's roster message does for each of its cards
// on every node every republish interval.
func BenchmarkMergeRemoteRefresh(b *testing.B) {
	nodes := testNodes(b)
	r := agentcard.NewRegistry(nodes[0].id)
	c := benchCard()
	c.Host = nodes[1].id.String()
	if _, err := r.MergeRemote(c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if changed, err := r.MergeRemote(c); err != nil || changed {
			b.Fatal(changed, err)
		}
	}
}
