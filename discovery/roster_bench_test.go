package discovery_test

import (
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/internal/waitfor"
)

var rosterNodes = flag.Int("nova.rosternodes", 30, "nodes in BenchmarkRosterCost's swarm")

// BenchmarkRosterCost measures what keeping every agent's card on every
// node costs in DHT work, once every node lists every agent: the DHT
// reads (walks and single requests; publishes are not counted) per node
// per refresh interval, with the roster carried by the DHT alone
// ("dht": the roster loop and the refresh loop read each member's records)
// and by roster gossip ("gossip", on an in-memory topic standing in for
// GossipSub). The intervals are shortened to 5 s (TTL 1 minute, well
// above a publish's duration on a loaded machine) so that the steady
// state shows within seconds; -nova.rosternodes sets the swarm's
// size. Run it once per size:
//
//	go test -run '^$' -bench BenchmarkRosterCost -benchtime 1x ./discovery/ -nova.rosternodes 30
func BenchmarkRosterCost(b *testing.B) {
	const every = 5 * time.Second
	tm := timing{ttl: 12 * every, republish: every, refresh: every, cache: every / 2}
	for _, mode := range []string{"dht", "gossip"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				bs := &bus{}
				nodes := make([]*testNode, 0, *rosterNodes)
				rng := mrand.New(mrand.NewPCG(uint64(*rosterNodes), 7))
				for i := range *rosterNodes {
					var boot []peer.AddrInfo
					for _, j := range rng.Perm(i)[:min(i, 3)] {
						boot = append(boot, nodes[j].info())
					}
					cards := []agentcard.Card{agentCard(agentName(i), "echo")}
					opts := []discovery.Option{discovery.WithRosterInterval(every)}
					var n *testNode
					if mode == "gossip" {
						self := new(peer.ID)
						n = newNode(b, boot, tm, cards, append(opts, bs.publisher(self))...)
						bs.mu.Lock()
						*self = n.h.ID()
						bs.nodes = append(bs.nodes, n)
						bs.mu.Unlock()
					} else {
						n = newNode(b, boot, tm, cards, opts...)
					}
					nodes = append(nodes, n)
				}
				start := time.Now()
				waitfor.Eventually(b, 2*time.Minute, func() error {
					for i, n := range nodes {
						if got := len(n.reg.Remote()); got < len(nodes)-1 {
							return fmt.Errorf("node %d lists %d of %d agents", i, got, len(nodes)-1)
						}
					}
					return nil
				})
				listed := time.Since(start)
				reads := func() (q, r uint64) {
					for _, n := range nodes {
						st := n.svc.Stats()
						q += st.DHTQueries
						r += st.DHTRequests
					}
					return q, r
				}
				q0, r0 := reads()
				const window = 3
				time.Sleep(window * every) // a rate over time is what is measured
				q1, r1 := reads()
				per := float64(len(nodes) * window)
				b.ReportMetric(listed.Seconds(), "listed-s")
				b.ReportMetric(float64(q1-q0)/per, "dht-walks/node/interval")
				b.ReportMetric(float64(r1-r0)/per, "dht-requests/node/interval")
				for _, n := range nodes {
					n.close()
				}
			}
		})
	}
}
