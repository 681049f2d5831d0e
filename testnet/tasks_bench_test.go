package testnet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// BenchmarkSwarm: time from Create to completed for one swarm of N
// sub-tasks over a 10-node testnet (TCP on loopback, full mesh): node 0
// coordinates as "boss" (L0), nodes 1-9 each host one worker (L3) that
// accepts with node.CapabilityPolicy and answers with node.DefaultWork (no
// simulated work time). An iteration covers the whole protocol: 9
// proposals and their answers, assignment, N requests and results, every
// change stored (bbolt, fsync) and published to the swarm's document.
// Reported: ns/op and ms/swarm per swarm, and sub-tasks/s.
func BenchmarkSwarm(b *testing.B) {
	for _, n := range []int{10, 50, 100} {
		b.Run(fmt.Sprintf("subtasks=%d", n), func(b *testing.B) {
			net := swarmNet(b, 10, workCaps, nil)
			boss := net.Nodes[0]
			done := make(chan taskswarm.Event, 64)
			boss.ConfigureTasks(node.TaskOptions{
				Decide: boss.CapabilityPolicy(), RecruitTimeout: 10 * time.Second,
				OnSwarmEvent: func(ev taskswarm.Event) {
					if ev.Type == taskswarm.EvtSwarmStatusChanged && ev.To.Terminal() {
						done <- ev
					}
				},
			})
			specs := make([]localapi.SubTaskRequest, n)
			for i := range specs {
				specs[i] = localapi.SubTaskRequest{Description: fmt.Sprintf("part %d", i+1)}
			}
			var total time.Duration
			swarms := 0
			for b.Loop() {
				start := time.Now()
				s, err := boss.CreateSwarm(b.Context(), localapi.CreateSwarmRequest{As: "boss", Task: "benchmark", Capabilities: []string{"work"}, SubTasks: specs})
				if err != nil {
					b.Fatal(err)
				}
				for {
					var ev taskswarm.Event
					select {
					case ev = <-done:
					case <-time.After(60 * time.Second):
						b.Fatalf("swarm %s did not finish", s.ID)
					}
					if ev.SwarmID != s.ID {
						continue
					}
					if ev.To != taskswarm.StatusCompleted {
						b.Fatalf("swarm %s: %s %s", s.ID, ev.To, ev.Detail)
					}
					break
				}
				total += time.Since(start)
				swarms++
			}
			ms := float64(total.Microseconds()) / 1000 / float64(swarms)
			b.ReportMetric(ms, "ms/swarm")
			b.ReportMetric(float64(n)/(ms/1000), "subtasks/s")
		})
	}
}
