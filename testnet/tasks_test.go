package testnet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// swarmNet starts n nodes: node 0 hosts "boss" (L0, capability plan), node
// i > 0 hosts worker "w<i>" (L3) with the capabilities caps(i). These are
// config agents (no Go handler): proposals reach them through the
// negotiator and sub-tasks through the participant. Every node accepts
// what its agents can do (CapabilityPolicy) and works with work (nil:
// node.DefaultWork).
func swarmNet(t testing.TB, n int, caps func(i int) []string, work func(i int) func(context.Context, string, taskswarm.Task) (json.RawMessage, error)) *testnet.Net {
	t.Helper()
	l0, l3 := tiers.L0, tiers.L3
	net := testnet.New(t, n, testnet.WithTransport(testnet.TCP), testnet.WithConfig(func(i int, c *node.Config) {
		c.MetricsListen = "off"
		if i == 0 {
			c.Agents = []node.AgentConfig{{Name: "boss", Tier: &l0, Capabilities: []node.CapabilityConfig{{ID: "plan"}}}}
			return
		}
		a := node.AgentConfig{Name: fmt.Sprintf("w%d", i), Tier: &l3}
		for _, cp := range caps(i) {
			a.Capabilities = append(a.Capabilities, node.CapabilityConfig{ID: cp})
		}
		c.Agents = []node.AgentConfig{a}
	}))
	for i, nd := range net.Nodes {
		configure(nd, i, work)
	}
	net.FullMesh()
	net.WaitForCards()
	return net
}

func configure(nd *node.Node, i int, work func(i int) func(context.Context, string, taskswarm.Task) (json.RawMessage, error)) {
	o := node.TaskOptions{Decide: nd.CapabilityPolicy(), RecruitTimeout: 10 * time.Second}
	if work != nil {
		o.Work = work(i)
	}
	nd.ConfigureTasks(o)
}

func workCaps(int) []string { return []string{"work"} }

// waitSwarm waits until swarm id on nd is completed or failed and returns it.
func waitSwarm(t testing.TB, nd *node.Node, id string, timeout time.Duration) taskswarm.Swarm {
	t.Helper()
	var s taskswarm.Swarm
	waitfor.Eventually(t, timeout, func() error {
		var err error
		s, err = nd.Swarm(context.Background(), id)
		if err != nil {
			return err
		}
		if !s.Status.Terminal() {
			return fmt.Errorf("swarm %s is %s: %s", id, s.Status, s.SharedState["progress"])
		}
		return nil
	})
	return s
}

// completedOnce checks every sub-task has one result, recorded once: one
// subtask-completed event each on the coordinating node.
func completedOnce(t *testing.T, nd *node.Node, s taskswarm.Swarm) {
	t.Helper()
	if s.Status != taskswarm.StatusCompleted {
		t.Fatalf("swarm %s: %s (%s)", s.ID, s.Status, s.Error)
	}
	if len(s.Results) != len(s.SubTasks) {
		t.Fatalf("%d results for %d sub-tasks", len(s.Results), len(s.SubTasks))
	}
	done := map[string]int{}
	for _, e := range nd.Observer().Recent(0) {
		if e.Type == "swarm-"+string(taskswarm.EvtSubTaskCompleted) && e.EnvelopeID == s.ID {
			done[strings.Fields(e.Detail)[0]]++
		}
	}
	for _, st := range s.SubTasks {
		if st.Status != taskswarm.SubTaskCompleted || len(s.Results[st.ID]) == 0 {
			t.Fatalf("sub-task %+v without its result", st)
		}
		if done[st.ID] != 1 {
			t.Fatalf("sub-task %s completed %d times, want once (events %v)", st.ID, done[st.ID], done)
		}
	}
}

// TestSwarmOverRemoteAgents: a swarm created on node 0 recruits the
// capable agents of four other nodes (and only those, property 25), each
// participant gets a sub-task (property 26), every envelope of one agent's
// work is in its proposal's thread (property 24), and the shared state is
// readable on a participant's node.
func TestSwarmOverRemoteAgents(t *testing.T) {
	net := swarmNet(t, 6, func(i int) []string {
		if i == 5 {
			return []string{"unrelated"}
		}
		if i%2 == 0 {
			return []string{"work", "review"}
		}
		return []string{"work"}
	}, nil)
	boss := net.Nodes[0]
	s, err := boss.CreateSwarm(t.Context(), localapi.CreateSwarmRequest{
		As: "boss", Task: "build and review the parser", Capabilities: []string{"work", "review"},
		SubTasks: []localapi.SubTaskRequest{
			{Description: "write the lexer", Capabilities: []string{"work"}},
			{Description: "write the grammar", Capabilities: []string{"work"}},
			{Description: "review the lexer", Capabilities: []string{"review"}},
			{Description: "review the grammar", Capabilities: []string{"review"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Recruits) != 4 {
		t.Fatalf("proposed to %d agents, want the 4 capable ones: %+v", len(s.Recruits), s.Recruits)
	}
	s = waitSwarm(t, boss, s.ID, 20*time.Second)
	completedOnce(t, boss, s)
	if len(s.Participants) != 4 {
		t.Fatalf("participants %v, want all 4 acceptors", s.Participants)
	}
	for _, st := range s.SubTasks {
		if !strings.Contains(st.AssignedAgent, "@") || strings.HasSuffix(st.AssignedAgent, boss.ID().String()) {
			t.Fatalf("sub-task %s done by %q, want a remote agent", st.ID, st.AssignedAgent)
		}
		var r map[string]any
		if err := json.Unmarshal(s.Results[st.ID], &r); err != nil || r["done"] != st.Description {
			t.Fatalf("result of %s: %s", st.ID, s.Results[st.ID])
		}
	}
	// Property 24 on the wire: each participant's request and answer are in
	// the thread of the proposal it accepted.
	threads := map[string]string{}
	for _, r := range s.Recruits {
		threads[r.Agent] = r.Thread
	}
	for _, st := range s.SubTasks {
		for _, env := range boss.Router().Thread(threads[st.AssignedAgent]) {
			if env.ID != threads[st.AssignedAgent] && env.CorrelationID != threads[st.AssignedAgent] {
				t.Fatalf("envelope %s %s is not in thread %s", env.ID, env.Type, threads[st.AssignedAgent])
			}
		}
	}
	// The shared document, read on a participant's node.
	waitfor.Eventually(t, 10*time.Second, func() error {
		view, err := net.Nodes[1].Swarm(t.Context(), s.ID)
		if err != nil {
			return err
		}
		if view.Status != taskswarm.StatusCompleted || len(view.Results) != 4 || len(view.SubTasks) != 4 {
			return fmt.Errorf("participant sees %s with %d results", view.Status, len(view.Results))
		}
		return nil
	})
}

// blockFirst returns a Work that blocks the first attempt of agent's
// sub-tasks until its context ends (its node is closed) and does every
// other attempt at once.
func blockFirst(agent string, started chan<- string) func(context.Context, string, taskswarm.Task) (json.RawMessage, error) {
	return func(ctx context.Context, a string, t taskswarm.Task) (json.RawMessage, error) {
		if negotiation.AgentName(a) == agent && t.Attempt == 1 {
			started <- t.SubTaskID
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return node.DefaultWork(ctx, a, t)
	}
}

// TestSwarmParticipantNodeKilledMidTask: the node of a participant dies
// while it works; its sub-task is reassigned to another capable
// participant, and the swarm completes with each result recorded once.
func TestSwarmParticipantNodeKilledMidTask(t *testing.T) {
	started := make(chan string, 4)
	net := swarmNet(t, 6, workCaps, func(i int) func(context.Context, string, taskswarm.Task) (json.RawMessage, error) {
		return blockFirst("w2", started)
	})
	boss := net.Nodes[0]
	var specs []localapi.SubTaskRequest
	for i := range 5 {
		specs = append(specs, localapi.SubTaskRequest{Description: fmt.Sprintf("part %d", i+1), Capabilities: []string{"work"}})
	}
	s, err := boss.CreateSwarm(t.Context(), localapi.CreateSwarmRequest{As: "boss", Task: "five parts", Capabilities: []string{"work"}, SubTasks: specs})
	if err != nil {
		t.Fatal(err)
	}
	var stuck string
	select {
	case stuck = <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("w2 never started its sub-task")
	}
	net.Kill(2)
	s = waitSwarm(t, boss, s.ID, 30*time.Second)
	completedOnce(t, boss, s)
	st, _ := s.SubTask(stuck)
	w2 := "w2@" + net.Nodes[2].ID().String()
	if st.Attempts != 2 || !slices.Contains(st.Tried, w2) || st.AssignedAgent == w2 {
		t.Fatalf("w2's sub-task was not reassigned: %+v", st)
	}
	gone := false
	for _, e := range boss.Observer().Recent(0) {
		if e.Type == localapi.EvtPeerGone && e.Peer == net.Nodes[2].ID() {
			gone = true
		}
	}
	if !gone {
		t.Fatal("no peer-gone event for the killed node")
	}
}

// TestSwarmCoordinatorRestartResumes: the coordinator's node goes down
// while every sub-task is running, and the participants finish meanwhile
// (their answers cannot be delivered). The node comes back on the same data
// dir and addresses, resumes the swarm from its store, sends the running
// attempts again, gets the answers the participants kept, and completes the
// swarm without running anything twice.
func TestSwarmCoordinatorRestartResumes(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	work := func(int) func(context.Context, string, taskswarm.Task) (json.RawMessage, error) {
		return func(ctx context.Context, a string, task taskswarm.Task) (json.RawMessage, error) {
			mu.Lock()
			runs[task.SubTaskID]++
			mu.Unlock()
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return node.DefaultWork(ctx, a, task)
		}
	}
	net := swarmNet(t, 5, workCaps, work)
	s, err := net.Nodes[0].CreateSwarm(t.Context(), localapi.CreateSwarmRequest{As: "boss", Task: "four parts", Capabilities: []string{"work"},
		SubTasks: []localapi.SubTaskRequest{{Description: "a"}, {Description: "b"}, {Description: "c"}, {Description: "d"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(runs) != 4 {
			return fmt.Errorf("%d sub-tasks running", len(runs))
		}
		return nil
	})
	cfg := net.ConfigOf(0)
	net.Kill(0)
	close(release)
	// Every participant answered, and its router gave up delivering the
	// answer to the node that is down.
	waitfor.Eventually(t, 20*time.Second, func() error {
		for i := 1; i < len(net.Nodes); i++ {
			lost := false
			for _, e := range net.Nodes[i].Observer().Recent(0) {
				lost = lost || e.Type == protocol.EvtErrorRaised && e.MessageType == envelope.TypeResponse
			}
			if !lost {
				return fmt.Errorf("node %d has not given up delivering its answer yet", i)
			}
		}
		return nil
	})
	boss := net.Start(0, cfg, func(nd *node.Node) { configure(nd, 0, nil) })
	got, err := boss.Swarm(t.Context(), s.ID)
	if err != nil || got.Status != taskswarm.StatusActive {
		t.Fatalf("after the restart the coordinator has %+v, %v; want the active swarm", got.Status, err)
	}
	for j := 1; j < len(net.Nodes); j++ {
		net.Connect(0, j)
	}
	s = waitSwarm(t, boss, s.ID, 30*time.Second)
	completedOnce(t, boss, s)
	mu.Lock()
	defer mu.Unlock()
	for _, st := range s.SubTasks {
		if st.Attempts != 1 || runs[st.ID] != 1 {
			t.Fatalf("sub-task %s: %d attempts, run %d times; want the resumed attempt, run once", st.ID, st.Attempts, runs[st.ID])
		}
	}
}

// TestProposalsSurviveRestarts: a pending proposal survives a restart of
// the node that received it and of the node that sent it, and its answer
// still reaches the proposer.
func TestProposalsSurviveRestarts(t *testing.T) {
	net := swarmNet(t, 2, workCaps, nil)
	for _, nd := range net.Nodes {
		nd.ConfigureTasks(node.TaskOptions{}) // leave proposals pending
	}
	propose := func() string {
		t.Helper()
		rec, err := net.Nodes[0].ProposeTask(t.Context(), localapi.ProposeRequest{From: "boss", To: "w1", Task: "index the corpus",
			Capabilities: []string{"work"}, TimeoutMs: time.Minute.Milliseconds()})
		if err != nil {
			t.Fatal(err)
		}
		return rec.ProposalID
	}
	pendingOn := func(i int, id string) {
		t.Helper()
		waitfor.Eventually(t, 10*time.Second, func() error {
			recs, err := net.Nodes[i].PendingTasks()
			if err != nil {
				return err
			}
			for _, r := range recs {
				if r.ProposalID == id {
					return nil
				}
			}
			return fmt.Errorf("proposal %s not pending on node %d", id, i)
		})
	}
	acceptedOn0 := func(id string) {
		t.Helper()
		waitfor.Eventually(t, 10*time.Second, func() error {
			r, err := net.Nodes[0].TaskProposal(id)
			if err != nil {
				return err
			}
			if r.Status != negotiation.StatusAccepted || r.EstimatedCompletionMs != 42_000 {
				return fmt.Errorf("proposal %s is %s", id, r.Status)
			}
			return nil
		})
	}
	restart := func(i int) {
		net.Restart(i, nil)
		net.Connect(0, 1)
		net.WaitForCards()
	}

	// The receiver restarts.
	id := propose()
	pendingOn(1, id)
	restart(1)
	pendingOn(1, id)
	if _, err := net.Nodes[1].AcceptTask(t.Context(), id, localapi.AnswerRequest{EstimatedCompletionMs: 42_000}); err != nil {
		t.Fatal(err)
	}
	acceptedOn0(id)

	// The proposer restarts.
	id = propose()
	pendingOn(1, id)
	restart(0)
	pendingOn(0, id)
	if _, err := net.Nodes[1].AcceptTask(t.Context(), id, localapi.AnswerRequest{EstimatedCompletionMs: 42_000}); err != nil {
		t.Fatal(err)
	}
	acceptedOn0(id)
}
