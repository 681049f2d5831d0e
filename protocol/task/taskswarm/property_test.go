package taskswarm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/tiers"
)

var (
	capPool   = []string{"plan.decompose", "code.write", "code.review", "test.write", "docs.write"}
	namePool  = []string{"mercury", "earth", "jupiter", "venus", "mars", "pluto", "saturn", "titan", "io", "europa"}
	tierGen   = rapid.SampledFrom([]tiers.Tier{tiers.L0, tiers.L1, tiers.L2, tiers.L3})
	nodeNames = []string{"n1", "n2", "n3"}
)

// bubbleTB hides testing.T's Deadline from rapid: calling it inside a
// synctest bubble panics.
type bubbleTB struct{ rapid.TB }

// world is a random mesh of agents.
type world struct {
	m       *mesh
	creator string
	cards   map[string]agentcard.Card
	accept  map[string]bool // agent -> accepts proposals
	flaky   map[string]bool // agent -> fails its first attempt of each sub-task
	nodes   map[string]*node
}

// genWorld draws agents into m (which the caller closes).
func genWorld(t *rapid.T, m *mesh, creatorTier *tiers.Tier) *world {
	w := &world{m: m, cards: map[string]agentcard.Card{}, accept: map[string]bool{}, flaky: map[string]bool{}, nodes: map[string]*node{}}
	ct := tierGen.Draw(t, "creatorTier")
	if creatorTier != nil {
		ct = *creatorTier
	}
	w.creator = w.m.addAgent("sun", "n1", ct, rapid.SliceOfDistinct(rapid.SampledFrom(capPool), rapid.ID[string]).Filter(func(c []string) bool { return len(c) <= 2 }).Draw(t, "creatorCaps")...)
	nNodes := rapid.IntRange(1, 3).Draw(t, "nodes")
	names := rapid.Permutation(namePool).Draw(t, "names")[:rapid.IntRange(1, 8).Draw(t, "agents")]
	for _, name := range names {
		nd := nodeNames[rapid.IntRange(0, nNodes-1).Draw(t, "node_"+name)]
		caps := rapid.SliceOfNDistinct(rapid.SampledFrom(capPool), 0, 3, rapid.ID[string]).Draw(t, "caps_"+name)
		addr := w.m.addAgent(name, nd, tierGen.Draw(t, "tier_"+name), caps...)
		w.accept[addr] = rapid.Float64Range(0, 1).Draw(t, "accept_"+name) < 0.8
		w.flaky[addr] = rapid.Float64Range(0, 1).Draw(t, "flaky_"+name) < 0.2
	}
	w.m.mu.Lock()
	for a, c := range w.m.cards {
		w.cards[a] = c
	}
	w.m.mu.Unlock()
	decide := func(_ context.Context, r negotiation.Record) *negotiation.Decision {
		if w.accept[r.Target] {
			return negotiation.AcceptWith(1000)
		}
		return negotiation.RejectWith(negotiation.ReasonBusy, "")
	}
	for _, nd := range nodeNames[:nNodes] {
		n := w.m.addNode(nd, decide)
		n.setWork(func(ctx context.Context, agent string, task taskswarm.Task) (json.RawMessage, error) {
			if w.flaky[agent] && task.Attempt == 1 {
				return nil, errors.New("flaky agent fails its first attempt")
			}
			return defaultWork(agent, task), nil
		})
		w.nodes[nd] = n
	}
	return w
}

func (w *world) capable(addr string, caps []string) bool {
	c := w.cards[addr]
	for _, cp := range caps {
		if c.HasCapability(cp) {
			return true
		}
	}
	return false
}

func genCreate(t *rapid.T) (caps []string, opts taskswarm.CreateOptions) {
	caps = rapid.SliceOfNDistinct(rapid.SampledFrom(capPool), 1, 3, rapid.ID[string]).Draw(t, "required")
	if rapid.Bool().Draw(t, "customSubTasks") {
		n := rapid.IntRange(1, 6).Draw(t, "subTasks")
		for i := range n {
			sc := rapid.SliceOfNDistinct(rapid.SampledFrom(caps), 0, 2, rapid.ID[string]).Draw(t, fmt.Sprintf("stCaps%d", i))
			opts.SubTasks = append(opts.SubTasks, taskswarm.SubTaskSpec{Description: fmt.Sprintf("part %d", i), RequiredCapabilities: sc})
		}
	}
	if rapid.Bool().Draw(t, "justified") {
		opts.Justification = "the creator needs help"
	}
	return caps, opts
}

// TestProperty25_ProposalsOnlyToCapable: for any swarm task with required
// capabilities, proposals go only to agents whose cards list one of them
// (never to the creator); every other capable agent is proposed to, unless
// the tier rules forbid it, in which case it is recorded unreachable.
func TestProperty25_ProposalsOnlyToCapable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(bubbleTB{t}, func(rt *rapid.T) {
			m := newMesh(rt)
			defer m.close()
			w := genWorld(rt, m, nil)
			var rec recorder
			c := w.nodes["n1"].startCoordinator(rec.coordinatorConfig())
			caps, opts := genCreate(rt)
			s, err := c.Create(context.Background(), w.creator, "task", caps, opts)
			settle(11 * time.Second)

			var capableOthers []string
			for a := range w.cards {
				if a != w.creator && w.capable(a, caps) {
					capableOthers = append(capableOthers, a)
				}
			}
			proposals := w.m.delivered(envelope.TypeTaskProposal)
			for _, p := range proposals {
				if p.Recipient == w.creator || !w.capable(p.Recipient, caps) {
					rt.Fatalf("proposal to %s, whose card lists none of %v", p.Recipient, caps)
				}
			}
			if len(capableOthers) == 0 {
				if !errors.Is(err, agentcard.ErrCapabilityNotFound) || len(proposals) != 0 {
					rt.Fatalf("no capable agent: err %v, %d proposals", err, len(proposals))
				}
				return
			}
			s = mustGet(rt, c, s.ID)
			var recruited []string
			for _, r := range s.Recruits {
				if r.ForSubTask == "" {
					recruited = append(recruited, r.Agent) // replacements are checked below
				}
				if !w.capable(r.Agent, caps) {
					rt.Fatalf("recruit %s is not capable", r.Agent)
				}
				ct, tt := w.cards[w.creator].Tier, w.cards[r.Agent].Tier
				forbidden := tiers.DefaultRules().Check(tiers.Message{Source: ct, Target: tt, Type: "task-proposal", Justification: opts.Justification}) != nil
				if forbidden != (r.Status == taskswarm.RecruitUnreachable) {
					rt.Fatalf("recruit %s (%s -> %s) is %s", r.Agent, ct, tt, r.Status)
				}
				sent := slices.ContainsFunc(proposals, func(e *envelope.Envelope) bool { return e.Recipient == r.Agent })
				if sent == forbidden {
					rt.Fatalf("recruit %s: proposal delivered %v, forbidden %v", r.Agent, sent, forbidden)
				}
			}
			slices.Sort(recruited)
			slices.Sort(capableOthers)
			if !slices.Equal(recruited, capableOthers) {
				rt.Fatalf("recruited %v, capable %v", recruited, capableOthers)
			}
		})
	})
}

// TestProperty26_AssignmentAndCompletion: for any active swarm with N
// participants, each holds at least one sub-task it is capable of; completing
// sub-tasks updates the shared state; when all are completed the swarm is
// completed with the aggregated results, reported once to the creator.
func TestProperty26_AssignmentAndCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(bubbleTB{t}, func(rt *rapid.T) {
			l0 := tiers.L0
			m := newMesh(rt)
			defer m.close()
			w := genWorld(rt, m, &l0)
			var rec recorder
			c := w.nodes["n1"].startCoordinator(rec.coordinatorConfig())
			caps, opts := genCreate(rt)
			s, err := c.Create(context.Background(), w.creator, "task", caps, opts)
			if errors.Is(err, agentcard.ErrCapabilityNotFound) {
				return
			}
			if err != nil {
				rt.Fatal(err)
			}
			settle(11 * time.Second)
			settle(11 * time.Second)
			s = mustGet(rt, c, s.ID)
			if !s.Status.Terminal() {
				rt.Fatalf("swarm still %s\n%s", s.Status, &rec)
			}

			// Every published state of an active swarm is consistent.
			rec.mu.Lock()
			published := slices.Clone(rec.published)
			rec.mu.Unlock()
			for _, p := range published {
				checkAssigned(rt, w, p)
			}
			checkAssigned(rt, w, s)

			// Status transitions.
			var trans []string
			for _, ev := range rec.of(taskswarm.EvtSwarmStatusChanged) {
				trans = append(trans, string(ev.To))
			}
			completedPath := []string{"active", "completing", "completed"}
			switch s.Status {
			case taskswarm.StatusCompleted:
				if !slices.Equal(trans, completedPath) {
					rt.Fatalf("transitions %v", trans)
				}
			case taskswarm.StatusFailed:
				if len(trans) == 0 || trans[len(trans)-1] != "failed" || len(trans) > 2 {
					rt.Fatalf("transitions %v", trans)
				}
			}

			if s.Status == taskswarm.StatusFailed {
				escalated := slices.ContainsFunc(s.SubTasks, func(st taskswarm.SubTask) bool { return st.Status == taskswarm.SubTaskFailed })
				if !escalated && !strings.HasPrefix(s.Error, "no capable agent accepted") {
					rt.Fatalf("failed for no reason: %q", s.Error)
				}
				if escalated {
					// Nobody capable and untried was left for the failed sub-task.
					for _, st := range s.SubTasks {
						if st.Status != taskswarm.SubTaskFailed {
							continue
						}
						for a := range w.cards {
							if a == w.creator || !w.capableAll(a, st.RequiredCapabilities, caps) || slices.Contains(st.Tried, a) {
								continue
							}
							if w.accept[a] && st.Attempts < taskswarm.DefaultMaxAttempts && !w.declinedOrGone(s, a) {
								rt.Fatalf("sub-task %s escalated while %s could take it\n%s", st.ID, a, &rec)
							}
						}
					}
				}
				return
			}
			// Completed: every result once, aggregated, reported once.
			if len(s.Results) != len(s.SubTasks) {
				rt.Fatalf("results %v", s.Results)
			}
			resultsOnce(rt, &rec, s)
			if string(s.SharedState["progress"]) != fmt.Sprintf(`{"completed":%d,"total":%d}`, len(s.SubTasks), len(s.SubTasks)) {
				rt.Fatalf("progress %s", s.SharedState["progress"])
			}
			reports := w.nodes["n1"].notices(taskswarm.NoticeCompleted)
			if len(reports) != 1 || len(reports[0].Results) != len(s.SubTasks) {
				rt.Fatalf("reports %+v", reports)
			}
			for id, r := range reports[0].Results {
				if string(r) != string(s.Results[id]) {
					rt.Fatalf("reported %s=%s, recorded %s", id, r, s.Results[id])
				}
			}
			checkThreads(rt, w.m, s)
		})
	})
}

// capableAll: the card lists every capability of need, and at least one of
// the swarm's (the recruiting rule).
func (w *world) capableAll(addr string, need, swarmCaps []string) bool {
	c := w.cards[addr]
	for _, cp := range need {
		if !c.HasCapability(cp) {
			return false
		}
	}
	return w.capable(addr, swarmCaps)
}

// declinedOrGone: the agent refused this swarm or could not be reached.
func (w *world) declinedOrGone(s taskswarm.Swarm, a string) bool {
	for _, r := range s.Recruits {
		if r.Agent == a && (r.Status == taskswarm.RecruitRejected || r.Status == taskswarm.RecruitUnreachable ||
			r.Status == taskswarm.RecruitTimedOut || r.Status == taskswarm.RecruitDropped || r.Gone) {
			return true
		}
	}
	return false
}

// checkAssigned checks property 26's assignment invariant on one state.
func checkAssigned(t *rapid.T, w *world, s taskswarm.Swarm) {
	if s.Status == taskswarm.StatusRecruiting {
		return
	}
	for _, p := range s.Participants {
		if !slices.ContainsFunc(s.SubTasks, func(st taskswarm.SubTask) bool { return st.AssignedAgent == p }) {
			t.Fatalf("%s: participant %s holds no sub-task: %+v", s.Status, p, s.SubTasks)
		}
	}
	for _, st := range s.SubTasks {
		if st.AssignedAgent == "" {
			continue
		}
		if !slices.Contains(s.Participants, st.AssignedAgent) {
			t.Fatalf("%s: sub-task %s assigned to non-participant %s (%v)", s.Status, st.ID, st.AssignedAgent, s.Participants)
		}
		c := w.cards[st.AssignedAgent]
		for _, cp := range st.RequiredCapabilities {
			if !c.HasCapability(cp) {
				t.Fatalf("sub-task %s needs %s; %s lacks it", st.ID, cp, st.AssignedAgent)
			}
		}
	}
}
