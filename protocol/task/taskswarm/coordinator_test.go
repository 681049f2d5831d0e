package taskswarm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/leakcheck"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/tiers"
)

// tb is the part of testing.TB and *rapid.T the checks use.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// settle lets fake time pass and waits until every goroutine is idle.
func settle(d time.Duration) {
	synctest.Wait()
	if d > 0 {
		time.Sleep(d)
		synctest.Wait()
	}
}

func mustGet(t tb, c *taskswarm.Coordinator, id string) taskswarm.Swarm {
	t.Helper()
	s, ok := c.Get(id)
	if !ok {
		t.Fatalf("swarm %s not found", id)
	}
	return s
}

// resultsOnce checks that every sub-task was completed exactly once.
func resultsOnce(t tb, rec *recorder, s taskswarm.Swarm) {
	t.Helper()
	count := map[string]int{}
	for _, ev := range rec.of(taskswarm.EvtSubTaskCompleted) {
		if ev.SwarmID == s.ID {
			count[ev.SubTaskID]++
		}
	}
	for _, st := range s.SubTasks {
		if count[st.ID] != 1 {
			t.Errorf("sub-task %s completed %d times", st.ID, count[st.ID])
		}
		if string(s.Results[st.ID]) != string(st.Result) {
			t.Errorf("aggregate of %s is %s, sub-task result %s", st.ID, s.Results[st.ID], st.Result)
		}
	}
}

func TestSwarmCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("mars", "n2", tiers.L2, "code.write", "test.write")
		m.addAgent("venus", "n3", tiers.L2, "code.review")
		m.addAgent("io", "n3", tiers.L3, "docs.write")
		m.addAgent("pluto", "n2", tiers.L2, "design.ui") // not capable: gets no proposal
		n1 := m.addNode("n1", acceptAll)
		m.addNode("n2", acceptAll)
		m.addNode("n3", acceptAll)
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())

		s, err := c.Create(t.Context(), sun, "ship the parser", []string{"code.write", "code.review", "docs.write"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Create returns the swarm once the proposals are out; with agents
		// that answer at once it may already be active, or done.
		if s.Status != taskswarm.StatusRecruiting && s.Status != taskswarm.StatusActive && s.Status != taskswarm.StatusCompleted {
			t.Fatalf("status %s", s.Status)
		}
		settle(0)
		s = mustGet(t, c, s.ID)
		if s.Status != taskswarm.StatusCompleted {
			t.Fatalf("status %s (%s)\n%s", s.Status, s.Error, &rec)
		}
		if len(s.Participants) != 3 || len(s.Results) != 3 {
			t.Fatalf("participants %v results %v", s.Participants, s.Results)
		}
		for _, p := range m.delivered(envelope.TypeTaskProposal) {
			if strings.HasPrefix(p.Recipient, "pluto@") {
				t.Fatal("pluto got a proposal without a required capability")
			}
		}
		resultsOnce(t, &rec, s)
		// Transitions, in order.
		var trans []string
		for _, ev := range rec.of(taskswarm.EvtSwarmStatusChanged) {
			trans = append(trans, string(ev.From)+">"+string(ev.To))
		}
		if want := []string{"recruiting>active", "active>completing", "completing>completed"}; !slices.Equal(trans, want) {
			t.Fatalf("transitions %v", trans)
		}
		rep := n1.notices(taskswarm.NoticeCompleted)
		if len(rep) != 1 || len(rep[0].Results) != 3 || rep[0].SwarmID != s.ID {
			t.Fatalf("creator reports %+v", rep)
		}
		// The last publication is the final state.
		rec.mu.Lock()
		last := rec.published[len(rec.published)-1]
		rec.mu.Unlock()
		if last.Status != taskswarm.StatusCompleted || len(last.Results) != 3 {
			t.Fatalf("last published %s %v", last.Status, last.Results)
		}
		// Property 24: every envelope with an agent is in that agent's thread.
		checkThreads(t, m, s)
		if errs := m.handlerErrors(); len(errs) != 0 {
			t.Fatalf("handler errors: %v", errs)
		}
	})
}

// checkThreads checks that every envelope exchanged between the creator and
// one agent after the proposal is in the thread that proposal started.
func checkThreads(t tb, m *mesh, s taskswarm.Swarm) {
	t.Helper()
	threads := map[string]bool{}
	for _, r := range s.Recruits {
		if r.Thread != "" {
			threads[r.Thread] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.log {
		if e.Type == envelope.TypeTaskProposal {
			if e.CorrelationID != "" {
				t.Errorf("proposal %s has a correlation id", e.ID)
			}
			continue
		}
		if e.ThreadID() == s.Thread {
			continue // reports to the creator and the L0 agent
		}
		if !threads[e.CorrelationID] {
			t.Errorf("%s %s -> %s is in thread %q, not in an agent's task thread", e.Type, e.Sender, e.Recipient, e.CorrelationID)
		}
	}
}

func TestReassignAfterFailSubTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		mars := m.addAgent("mars", "n2", tiers.L2, "code.review")
		venus := m.addAgent("venus", "n3", tiers.L2, "code.review")
		n1 := m.addNode("n1", acceptAll)
		n2 := m.addNode("n2", acceptAll)
		m.addNode("n3", acceptAll)
		release := make(chan struct{})
		n2.setWork(func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			select { // mars is stuck until the test lets it answer, too late
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return json.RawMessage(`"late"`), nil
		})
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		s, err := c.Create(t.Context(), sun, "review it", []string{"code.review"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		s = mustGet(t, c, s.ID)
		// Two acceptors, one sub-task: mars (first by address) got it, venus was released.
		if s.Status != taskswarm.StatusActive || s.SubTasks[0].AssignedAgent != mars || !slices.Equal(s.Participants, []string{mars}) {
			t.Fatalf("%s %+v %v\n%s", s.Status, s.SubTasks[0], s.Participants, &rec)
		}
		if len(rec.of(taskswarm.EvtAgentReleased)) != 1 {
			t.Fatalf("released: %+v", rec.of(taskswarm.EvtAgentReleased))
		}
		if err := c.FailSubTask(t.Context(), s.ID, "st-1", "mars is overloaded"); err != nil {
			t.Fatal(err)
		}
		settle(0)
		s = mustGet(t, c, s.ID)
		st := s.SubTasks[0]
		if s.Status != taskswarm.StatusCompleted || st.AssignedAgent != venus || st.Attempts != 2 || !slices.Equal(st.Tried, []string{mars}) {
			t.Fatalf("%s %+v\n%s", s.Status, st, &rec)
		}
		if !slices.Equal(s.Participants, []string{venus}) {
			t.Fatalf("participants %v", s.Participants)
		}
		// mars answers attempt 1 at last: ignored.
		close(release)
		settle(0)
		ign := rec.of(taskswarm.EvtResultIgnored)
		if len(ign) != 1 || ign[0].Agent != mars {
			t.Fatalf("ignored %+v", ign)
		}
		s = mustGet(t, c, s.ID)
		resultsOnce(t, &rec, s)
		if !strings.Contains(string(s.Results["st-1"]), "venus") {
			t.Fatalf("result %s", s.Results["st-1"])
		}
		if len(rec.of(taskswarm.EvtSubTaskReassigned)) != 1 {
			t.Fatal("no reassignment event")
		}
		checkThreads(t, m, s)
		// Errors with codes and hints.
		err = c.FailSubTask(t.Context(), s.ID, "st-1", "again")
		if !errors.Is(err, taskswarm.ErrWrongState) {
			t.Fatalf("fail after completion: %v", err)
		}
		if err := c.CompleteSubTask(t.Context(), "nope", "st-1", nil); !errors.Is(err, taskswarm.ErrNotFound) || negotiation.CodeOf(err) != taskswarm.CodeSwarmNotFound {
			t.Fatalf("unknown swarm: %v", err)
		}
	})
}

func TestReassignAfterPeerGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		mars := m.addAgent("mars", "n2", tiers.L2, "test.write", "code.write")
		venus := m.addAgent("venus", "n3", tiers.L2, "test.write", "code.write")
		n1 := m.addNode("n1", acceptAll)
		m.addNode("n2", acceptAll)
		n3 := m.addNode("n3", acceptAll)
		n3.setWork(func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			<-ctx.Done() // venus never finishes: its node will die
			return nil, ctx.Err()
		})
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		s, err := c.Create(t.Context(), sun, "build and test", []string{"code.write", "test.write"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		s = mustGet(t, c, s.ID)
		var venusTask string
		for _, st := range s.SubTasks {
			if st.AssignedAgent == venus {
				venusTask = st.ID
			}
		}
		if s.Status != taskswarm.StatusActive || venusTask == "" || len(s.Participants) != 2 {
			t.Fatalf("%s %+v\n%s", s.Status, s.SubTasks, &rec)
		}
		// n3 dies.
		m.setDown("n3")
		n3.stop()
		c.PeerGone("n3")
		settle(0)
		s = mustGet(t, c, s.ID)
		if s.Status != taskswarm.StatusCompleted {
			t.Fatalf("status %s %s\n%s", s.Status, s.Error, &rec)
		}
		st, _ := s.SubTask(venusTask)
		if st.AssignedAgent != mars || st.Attempts != 2 || !strings.Contains(st.Error, "") {
			t.Fatalf("reassigned sub-task %+v", st)
		}
		if !slices.Equal(s.Participants, []string{mars}) {
			t.Fatalf("participants %v", s.Participants)
		}
		resultsOnce(t, &rec, s)
		failed := rec.of(taskswarm.EvtSubTaskFailed)
		if len(failed) != 1 || !strings.Contains(failed[0].Detail, "n3") {
			t.Fatalf("failures %+v", failed)
		}
	})
}

func TestEscalationWhenNoCapableAgentRemains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		earth := m.addAgent("earth", "n1", tiers.L1)
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("jupiter", "n2", tiers.L1, "plan.decompose")
		m.addAgent("mercury", "n2", tiers.L1, "docs.write")
		n1 := m.addNode("n1", acceptAll)
		n2 := m.addNode("n2", acceptAll)
		n2.setWork(func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			if agent == "jupiter@n2" {
				return nil, errors.New("cannot decompose this")
			}
			return defaultWork(agent, t), nil
		})
		var rec recorder
		cfg := rec.coordinatorConfig()
		cfg.L0 = func() string { return sun }
		c := n1.startCoordinator(cfg)
		s, err := c.Create(t.Context(), earth, "plan and document", []string{"plan.decompose", "docs.write"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		s = mustGet(t, c, s.ID)
		if s.Status != taskswarm.StatusFailed || !strings.Contains(s.Error, "no capable agent remains") {
			t.Fatalf("%s %q\n%s", s.Status, s.Error, &rec)
		}
		st, _ := s.SubTask("st-1")
		if st.Status != taskswarm.SubTaskFailed || !strings.Contains(st.Error, "plan.decompose") {
			t.Fatalf("sub-task %+v", st)
		}
		rec.mu.Lock()
		esc := slices.Clone(rec.escalated)
		rec.mu.Unlock()
		if !slices.Equal(esc, []string{s.ID + "/st-1"}) {
			t.Fatalf("escalation hook calls %v", esc)
		}
		var l0, creator []taskswarm.Notice
		n1.mu.Lock()
		for _, e := range n1.inbox {
			no, err := taskswarm.DecodeNotice(e.Payload)
			if err != nil {
				continue
			}
			switch {
			case e.Recipient == sun && no.Kind == taskswarm.NoticeEscalation:
				l0 = append(l0, no)
			case e.Recipient == earth && no.Kind == taskswarm.NoticeFailed:
				creator = append(creator, no)
			}
			if e.CorrelationID != s.Thread {
				t.Errorf("report not in the swarm thread: %+v", e)
			}
		}
		n1.mu.Unlock()
		if len(l0) != 1 || l0[0].SubTaskID != "st-1" || len(creator) != 1 {
			t.Fatalf("L0 notices %+v, creator notices %+v", l0, creator)
		}
		// Later results are ignored: the swarm is over.
		if err := c.CompleteSubTask(t.Context(), s.ID, "st-2", json.RawMessage(`1`)); !errors.Is(err, taskswarm.ErrWrongState) {
			t.Fatalf("complete after failure: %v", err)
		}
	})
}

func TestCoordinatorRestartResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("mars", "n2", tiers.L2, "code.write")
		m.addAgent("venus", "n2", tiers.L2, "code.review")
		n1 := m.addNode("n1", acceptAll)
		n2 := m.addNode("n2", acceptAll)
		gate := make(chan struct{})
		var runs atomic.Int32
		n2.setWork(func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			runs.Add(1)
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return defaultWork(agent, t), nil
		})
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		s, err := c.Create(t.Context(), sun, "write and review", []string{"code.write", "code.review"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		if got := mustGet(t, c, s.ID); got.Status != taskswarm.StatusActive {
			t.Fatalf("status %s\n%s", got.Status, &rec)
		}
		// The coordinating node's services stop; the participants finish
		// meanwhile, and their answers find nobody.
		n1.stopCoordinator()
		close(gate)
		settle(0)
		n1.mu.Lock()
		answers := len(n1.inbox)
		n1.mu.Unlock()
		if n := answers; n != 2 {
			t.Fatalf("%d answers reached the stopped coordinator's node", n)
		}
		// Restart on the same store.
		n1.startNegotiator(acceptAll)
		var rec2 recorder
		c2 := n1.startCoordinator(rec2.coordinatorConfig())
		settle(0)
		s = mustGet(t, c2, s.ID)
		if s.Status != taskswarm.StatusCompleted || len(s.Results) != 2 {
			t.Fatalf("after restart: %s %v\n%s", s.Status, s.Results, &rec2)
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("work ran %d times, want 2 (once per sub-task)", n)
		}
		for _, st := range s.SubTasks {
			if st.Attempts != 1 {
				t.Fatalf("attempts %+v", st)
			}
		}
		resultsOnce(t, &rec2, s)
		if len(n1.notices(taskswarm.NoticeCompleted)) != 1 {
			t.Fatal("no completion report after restart")
		}
	})
}

func TestCoordinatorRestartWhileRecruiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("mars", "n2", tiers.L2, "code.write")
		n1 := m.addNode("n1", acceptAll)
		var pending []negotiation.Record
		n2 := m.addNode("n2", func(_ context.Context, r negotiation.Record) *negotiation.Decision {
			pending = append(pending, r)
			return nil // decide later, by hand
		})
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		s, err := c.Create(t.Context(), sun, "write it", []string{"code.write"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		n1.stopCoordinator()
		time.Sleep(2 * time.Second)
		if len(pending) != 1 {
			t.Fatalf("pending %d", len(pending))
		}
		n1.startNegotiator(acceptAll)
		c2 := n1.startCoordinator(rec.coordinatorConfig())
		settle(0)
		if got := mustGet(t, c2, s.ID); got.Status != taskswarm.StatusRecruiting {
			t.Fatalf("status after restart %s", got.Status)
		}
		if err := n2.neg.Accept(t.Context(), pending[0].ProposalID, 500); err != nil {
			t.Fatal(err)
		}
		settle(0)
		if got := mustGet(t, c2, s.ID); got.Status != taskswarm.StatusCompleted {
			t.Fatalf("status %s\n%s", got.Status, &rec)
		}
	})
}

func TestRecruitingTimeoutAndNoAcceptance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("mars", "n2", tiers.L2, "code.write")
		m.addAgent("venus", "n2", tiers.L2, "code.write")
		n1 := m.addNode("n1", acceptAll)
		m.addNode("n2", func(_ context.Context, r negotiation.Record) *negotiation.Decision {
			if strings.HasPrefix(r.Target, "venus") {
				return negotiation.RejectWith(negotiation.ReasonBusy, "")
			}
			return nil // mars never answers
		})
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		s, err := c.Create(t.Context(), sun, "write it", []string{"code.write"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		settle(9 * time.Second)
		if got := mustGet(t, c, s.ID); got.Status != taskswarm.StatusRecruiting {
			t.Fatalf("status %s before the deadline", got.Status)
		}
		settle(2 * time.Second)
		got := mustGet(t, c, s.ID)
		if got.Status != taskswarm.StatusFailed || !strings.Contains(got.Error, "1 rejected, 1 timed out") {
			t.Fatalf("%s %q\n%s", got.Status, got.Error, &rec)
		}
		if len(n1.notices(taskswarm.NoticeFailed)) != 1 {
			t.Fatal("creator not told")
		}
	})
}

func TestEachResultRecordedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		m.dup = func(e *envelope.Envelope) bool {
			return e.Type == envelope.TypeResponse || e.Type == envelope.TypeRequest
		}
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("mars", "n2", tiers.L2, "code.write", "code.review")
		m.addAgent("venus", "n3", tiers.L2, "code.write", "code.review")
		n1 := m.addNode("n1", acceptAll)
		m.addNode("n2", acceptAll)
		m.addNode("n3", acceptAll)
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		specs := []taskswarm.SubTaskSpec{
			{Description: "a", RequiredCapabilities: []string{"code.write"}},
			{Description: "b", RequiredCapabilities: []string{"code.review"}},
			{Description: "c"}, {Description: "d"}, {Description: "e"},
		}
		s, err := c.Create(t.Context(), sun, "many parts", []string{"code.write", "code.review"}, taskswarm.CreateOptions{SubTasks: specs})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		s = mustGet(t, c, s.ID)
		if s.Status != taskswarm.StatusCompleted {
			t.Fatalf("%s\n%s", s.Status, &rec)
		}
		resultsOnce(t, &rec, s)
		if len(rec.of(taskswarm.EvtResultIgnored)) == 0 {
			t.Fatal("duplicates were not seen")
		}
		// Load balancing: 5 sub-tasks over 2 agents.
		per := map[string]int{}
		for _, st := range s.SubTasks {
			per[st.AssignedAgent]++
		}
		for a, n := range per {
			if n < 2 || n > 3 {
				t.Fatalf("unbalanced: %v (%s)", per, a)
			}
		}
	})
}

func TestCreateErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		io := m.addAgent("io", "n1", tiers.L3)
		m.addAgent("jupiter", "n2", tiers.L1, "plan.decompose")
		m.addAgent("earth", "n2", tiers.L1, "plan.decompose")
		n1 := m.addNode("n1", acceptAll)
		m.addNode("n2", acceptAll)
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		_, err := c.Create(t.Context(), io, "x", []string{"design.ui"}, taskswarm.CreateOptions{})
		if !errors.Is(err, agentcard.ErrCapabilityNotFound) || negotiation.CodeOf(err) != "CAPABILITY_NOT_FOUND" {
			t.Fatalf("no capable agent: %v", err)
		}
		// L3 -> L1 proposals need a justification.
		s, err := c.Create(t.Context(), io, "plan", []string{"plan.decompose"}, taskswarm.CreateOptions{})
		if !errors.Is(err, tiers.ErrEscalationRequired) || negotiation.CodeOf(err) != tiers.CodeEscalationRequired {
			t.Fatalf("unjustified escalation: %v", err)
		}
		if s.Status != taskswarm.StatusFailed {
			t.Fatalf("status %s", s.Status)
		}
		s, err = c.Create(t.Context(), io, "plan", []string{"plan.decompose"}, taskswarm.CreateOptions{Justification: "io needs a plan to proceed"})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		if got := mustGet(t, c, s.ID); got.Status != taskswarm.StatusCompleted {
			t.Fatalf("%s\n%s", got.Status, &rec)
		}
		var ie *taskswarm.InvalidError
		for _, c2 := range []struct {
			caps  []string
			opts  taskswarm.CreateOptions
			field string
		}{
			{nil, taskswarm.CreateOptions{}, "capabilities"},
			{[]string{"a b"}, taskswarm.CreateOptions{}, "capabilities[0]"},
			{[]string{"a"}, taskswarm.CreateOptions{SubTasks: []taskswarm.SubTaskSpec{{Description: "x", RequiredCapabilities: []string{"b"}}}}, "subTasks[0].requiredCapabilities"},
			{[]string{"a"}, taskswarm.CreateOptions{SubTasks: []taskswarm.SubTaskSpec{{Description: " "}}}, "subTasks[0].description"},
			{[]string{"a"}, taskswarm.CreateOptions{Complexity: "hard"}, "complexity"},
		} {
			if _, err := c.Create(t.Context(), io, "x", c2.caps, c2.opts); !errors.As(err, &ie) || ie.Field != c2.field {
				t.Errorf("%v %+v: got %v, want invalid %s", c2.caps, c2.opts, err, c2.field)
			}
		}
	})
}

func TestSetShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("mars", "n2", tiers.L2, "code.write")
		n1 := m.addNode("n1", acceptAll)
		n2 := m.addNode("n2", acceptAll)
		gate := make(chan struct{})
		n2.setWork(func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			<-gate
			return json.RawMessage(`{"ok":true}`), nil
		})
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		s, _ := c.Create(t.Context(), sun, "x", []string{"code.write"}, taskswarm.CreateOptions{})
		settle(0)
		if err := c.SetShared(t.Context(), s.ID, "notes", json.RawMessage(`{"branch":"main"}`)); err != nil {
			t.Fatal(err)
		}
		if err := c.SetShared(t.Context(), s.ID, "progress", json.RawMessage(`1`)); !errors.Is(err, taskswarm.ErrInvalid) {
			t.Fatalf("progress overwritten: %v", err)
		}
		settle(0)
		rec.mu.Lock()
		last := rec.published[len(rec.published)-1]
		rec.mu.Unlock()
		if string(last.SharedState["notes"]) != `{"branch":"main"}` || string(last.SharedState["progress"]) != `{"completed":0,"total":1}` {
			t.Fatalf("shared %v", last.SharedState)
		}
		close(gate)
		settle(0)
		rec.mu.Lock()
		last = rec.published[len(rec.published)-1]
		rec.mu.Unlock()
		if string(last.SharedState["progress"]) != `{"completed":1,"total":1}` || last.Status != taskswarm.StatusCompleted {
			t.Fatalf("shared %v %s", last.SharedState, last.Status)
		}
	})
}

// TestNoGoroutineLeaks runs a swarm in real time and checks that Close
// leaves nothing behind.
func TestNoGoroutineLeaks(t *testing.T) {
	m := newMesh(t)
	sun := m.addAgent("sun", "n1", tiers.L0)
	m.addAgent("mars", "n2", tiers.L2, "code.write")
	m.addAgent("venus", "n2", tiers.L2, "code.write")
	n1 := m.addNode("n1", acceptAll)
	m.addNode("n2", acceptAll)
	var rec recorder
	c := n1.startCoordinator(rec.coordinatorConfig())
	s, err := c.Create(t.Context(), sun, "x", []string{"code.write"}, taskswarm.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		if got := mustGet(t, c, s.ID); got.Status != taskswarm.StatusCompleted {
			return fmt.Errorf("%s, not completed\n%s", got.Status, &rec)
		}
		return nil
	})
	m.close()
	if s := leakcheck.Wait("protocol/task/taskswarm.", 2*time.Second); s != "" {
		t.Fatalf("leaked goroutines:\n%s", s)
	}
	if s := leakcheck.Wait("protocol/task/negotiation.", 2*time.Second); s != "" {
		t.Fatalf("leaked goroutines:\n%s", s)
	}
}

// TestParkedSubTaskWaitsForOpenRecruit is the regression found by property
// 26: two sub-tasks fail at once and the only agent left that can do either
// is being proposed to for the first; the second waits for that answer
// instead of being escalated, and both end up with that agent.
func TestParkedSubTaskWaitsForOpenRecruit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("io", "n2", tiers.L3, "code.write")
		m.addAgent("jupiter", "n2", tiers.L1, "plan.decompose")
		mars := m.addAgent("mars", "n1", tiers.L2, "code.write", "plan.decompose")
		n1 := m.addNode("n1", acceptAll)
		n2 := m.addNode("n2", acceptAll)
		n2.setWork(func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			return nil, errors.New(agent + " gives up")
		})
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		s, err := c.Create(t.Context(), sun, "plan and build", []string{"code.write", "plan.decompose"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		s = mustGet(t, c, s.ID)
		if s.Status != taskswarm.StatusCompleted || !slices.Equal(s.Participants, []string{mars}) {
			t.Fatalf("%s %v %q\n%s", s.Status, s.Participants, s.Error, &rec)
		}
		for _, st := range s.SubTasks {
			if st.AssignedAgent != mars || st.Attempts != 2 {
				t.Fatalf("sub-task %+v", st)
			}
		}
		if n := len(rec.of(taskswarm.EvtSubTaskEscalated)); n != 0 {
			t.Fatalf("%d escalations", n)
		}
	})
}

// TestResumeKeepsAttemptsWhenPeerUnreachable: a coordinator that restarts
// while a participant's node is unreachable keeps the running attempts
// (the participant may still answer) instead of failing them, and
// PeerBack, when that node is back, sends them again and the swarm
// completes without re-running work.
func TestResumeKeepsAttemptsWhenPeerUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMesh(t)
		defer m.close()
		sun := m.addAgent("sun", "n1", tiers.L0)
		m.addAgent("mars", "n2", tiers.L2, "code.write")
		m.addAgent("venus", "n3", tiers.L2, "code.write")
		n1 := m.addNode("n1", acceptAll)
		n2 := m.addNode("n2", acceptAll)
		n3 := m.addNode("n3", acceptAll)
		gate := make(chan struct{})
		var runs atomic.Int32
		work := func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			runs.Add(1)
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return defaultWork(agent, t), nil
		}
		n2.setWork(work)
		n3.setWork(work)
		var rec recorder
		c := n1.startCoordinator(rec.coordinatorConfig())
		s, err := c.Create(t.Context(), sun, "write twice", []string{"code.write"}, taskswarm.CreateOptions{
			SubTasks: []taskswarm.SubTaskSpec{{Description: "one"}, {Description: "two"}}})
		if err != nil {
			t.Fatal(err)
		}
		settle(0)
		n1.stopCoordinator()
		m.setDown("n2")
		close(gate) // both finish; mars's answer cannot leave n2, venus's finds nobody
		settle(0)
		n1.startNegotiator(acceptAll)
		var rec2 recorder
		c2 := n1.startCoordinator(rec2.coordinatorConfig())
		settle(0)
		s = mustGet(t, c2, s.ID)
		if s.Status != taskswarm.StatusActive || len(s.Results) != 1 {
			t.Fatalf("after restart with n2 down: %s, %d results\n%s", s.Status, len(s.Results), &rec2)
		}
		for _, st := range s.SubTasks {
			if st.Attempts != 1 || len(st.Tried) != 0 {
				t.Fatalf("an unreachable participant's attempt was failed: %+v\n%s", st, &rec2)
			}
		}
		m.mu.Lock()
		delete(m.down, "n2")
		m.mu.Unlock()
		c2.PeerBack("n2")
		settle(0)
		s = mustGet(t, c2, s.ID)
		if s.Status != taskswarm.StatusCompleted || len(s.Results) != 2 {
			t.Fatalf("after PeerBack: %s %v\n%s", s.Status, s.Results, &rec2)
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("work ran %d times, want once per sub-task", n)
		}
		resultsOnce(t, &rec2, s)
	})
}
