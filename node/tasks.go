package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/tiers"
)

// Task negotiation and swarms on a node.
//
// Every node runs one negotiation.Negotiator (the proposals its agents send
// and receive), one taskswarm.Coordinator (the swarms its agents create) and one
// taskswarm.Participant (the sub-tasks sent to its agents). They are started by
// Start after the router and the documents, in that order, and stopped by
// Close before them, in reverse order. Their records live in the node's
// bbolt file (buckets negotiation.proposals and swarm.swarms), so proposals
// and swarms survive a restart; a coordinator resumes its unfinished swarms.
//
// Each local agent's router handler is wrapped (wrapTaskHandler) so that the
// task envelopes addressed to it reach these components before the agent's
// own handler sees the rest; see taskState.handle for the dispatch rules.

// Defaults of TaskOptions.
const (
	// DefaultSubTaskTimeout fails a sub-task attempt that has had no answer
	// for this long, so that work lost with a participant that restarted
	// (without leaving) is reassigned.
	DefaultSubTaskTimeout = 10 * time.Minute
	// DefaultPeerGoneAfter is how long a peer must stay disconnected, and
	// then fail one dial, before it counts as gone.
	DefaultPeerGoneAfter = time.Second
	// DefaultProposalTimeout is the response deadline of a proposal made
	// through the API when the request gives none.
	DefaultProposalTimeout = 10 * time.Minute
	// DefaultEstimate is the estimated completion of an accept made
	// through the API when the request gives none.
	DefaultEstimate = 10 * time.Minute
)

// TaskOptions configure task negotiation and swarms on a node. The zero
// value is the default: received proposals wait for `nova-node tasks
// accept|reject`, and sub-tasks are done by [DefaultWork].
//
// Decide, Work, Escalate and PeerGoneAfter take effect at once, even on a
// running node; RecruitTimeout, SubTaskTimeout, MaxAttempts and Workers
// when the node starts.
type TaskOptions struct {
	// Decide answers each proposal received by a local agent; returning
	// nil leaves it pending. Nil: every proposal stays pending.
	// [Node.CapabilityPolicy] accepts what the target's card can do.
	Decide negotiation.ProposalHandler
	// Work does the sub-tasks sent to local agents. Nil: [DefaultWork].
	Work func(ctx context.Context, agent string, task taskswarm.Task) (json.RawMessage, error)
	// Escalate is told when a swarm of this node has a sub-task that no
	// capable agent remains for (an external orchestrator's hook), in
	// addition to the L0 agent's notification and an event. Nil: none.
	Escalate func(ctx context.Context, s taskswarm.Swarm, st taskswarm.SubTask, reason string)
	// RecruitTimeout is how long recruited agents have to answer a swarm's
	// proposal. Zero: taskswarm.DefaultRecruitTimeout (30s).
	RecruitTimeout time.Duration
	// SubTaskTimeout fails an attempt with no answer after this long (it is
	// then reassigned). Zero: DefaultSubTaskTimeout (10m); negative: never.
	SubTaskTimeout time.Duration
	// MaxAttempts is how often one sub-task is assigned before it is
	// escalated. Zero: taskswarm.DefaultMaxAttempts (5).
	MaxAttempts int
	// Workers is how many sub-tasks this node works on at once. Zero:
	// taskswarm.DefaultWorkers (4).
	Workers int
	// OnProposalEvent and OnSwarmEvent, when set, also receive every
	// negotiation and swarm event of this node (they are recorded in the
	// node's events in any case), synchronously: they must not block.
	OnProposalEvent func(negotiation.Event)
	OnSwarmEvent    func(taskswarm.Event)
	// PeerGoneAfter is how long a peer must stay disconnected before it is
	// dialled once more and, if that fails, counts as gone: its running
	// sub-tasks are reassigned and its agents are offered no more work.
	// Zero: DefaultPeerGoneAfter (1s).
	PeerGoneAfter time.Duration
}

// DefaultWork is the sub-task worker of agents when TaskOptions.Work is not
// set: it does nothing but answer, deterministically, with
// {"agent", "swarmId", "subTaskId", "attempt", "done"}, where done repeats
// the sub-task's description. It lets config-file agents take part in
// swarms (and tests and demos run them); real agents set TaskOptions.Work.
func DefaultWork(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"agent": agent, "swarmId": t.SwarmID, "subTaskId": t.SubTaskID, "attempt": t.Attempt, "done": t.Description,
	})
}

// taskState is the node's task negotiation and swarm coordination. It is
// created, under Node.mu, by the first wrapTaskHandler or startTasks, and
// never replaced, so handlers hold it directly and never take Node.mu.
//
// Lock order: taskState.mu is a leaf; no component call runs under it.
type taskState struct {
	n     *Node
	ready chan struct{} // closed once started, or once stopped

	mu      sync.Mutex
	opts    TaskOptions
	running bool
	stopped bool
	neg     *negotiation.Negotiator
	coord   *taskswarm.Coordinator
	part    *taskswarm.Participant
	docs    *crdt.Manager
	gone    map[peer.ID]bool // peers that left (see watchPeers)
	shared  map[string]map[string]string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// tasksLocked returns the node's taskState, creating it. n.mu must be held.
func (n *Node) tasksLocked() *taskState {
	if n.tasks == nil {
		n.tasks = &taskState{n: n, ready: make(chan struct{}), gone: map[peer.ID]bool{}, shared: map[string]map[string]string{}}
	}
	return n.tasks
}

func (n *Node) taskState() *taskState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tasksLocked()
}

// ConfigureTasks sets the node's task options (see [TaskOptions] for which
// take effect when). Safe before and after Start.
func (n *Node) ConfigureTasks(o TaskOptions) {
	ts := n.taskState()
	ts.mu.Lock()
	ts.opts = o
	ts.mu.Unlock()
}

func (ts *taskState) options() TaskOptions {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.opts
}

// startTasks starts negotiation, swarm coordination and participation.
// Called from Start with n.mu held: it must not call methods that lock it.
func (n *Node) startTasks(ctx context.Context, r *protocol.Router, docs *crdt.Manager) error {
	ts := n.tasksLocked()
	ts.mu.Lock()
	if ts.stopped || ts.running {
		ts.mu.Unlock()
		return errors.New("node: tasks started twice or after close")
	}
	o := ts.opts
	ts.docs = docs // before the Coordinator starts: it publishes at once
	ts.mu.Unlock()
	post := func(ctx context.Context, env *envelope.Envelope) error {
		_, err := r.Post(ctx, env)
		return err
	}
	store := kvStore{n.db}
	neg, err := negotiation.New(negotiation.Config{
		Factory: n.factory, Post: post, Store: store,
		Emit: func(ev negotiation.Event) {
			n.emitProposalEvent(ev)
			if f := ts.options().OnProposalEvent; f != nil {
				f(ev)
			}
		},
	})
	if err != nil {
		return err
	}
	neg.OnProposalReceived(func(ctx context.Context, rec negotiation.Record) *negotiation.Decision {
		if d := ts.options().Decide; d != nil {
			return d(ctx, rec)
		}
		return nil
	})
	sub := o.SubTaskTimeout
	switch {
	case sub == 0:
		sub = DefaultSubTaskTimeout
	case sub < 0:
		sub = 0
	}
	emitSwarm := func(ev taskswarm.Event) {
		n.emitSwarmEvent(ev)
		if f := ts.options().OnSwarmEvent; f != nil {
			f(ev)
		}
	}
	coord, err := taskswarm.New(taskswarm.Config{
		Negotiator: neg, Post: post, Factory: n.factory, Store: store,
		Directory: taskDirectory{ts}, Shared: swarmDocs{ts}, L0: ts.l0, Emit: emitSwarm,
		Escalate: func(ctx context.Context, s taskswarm.Swarm, st taskswarm.SubTask, reason string) {
			if e := ts.options().Escalate; e != nil {
				e(ctx, s, st, reason)
			}
		},
		RecruitTimeout: o.RecruitTimeout, SubTaskTimeout: sub, MaxAttempts: o.MaxAttempts,
	})
	if err != nil {
		return err
	}
	part, err := taskswarm.NewParticipant(taskswarm.ParticipantConfig{
		Post: post, Factory: n.factory, Emit: emitSwarm, Workers: o.Workers,
		Work: func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			if w := ts.options().Work; w != nil {
				return w(ctx, agent, t)
			}
			return DefaultWork(ctx, agent, t)
		},
	})
	if err != nil {
		return err
	}
	// Negotiator -> Coordinator -> Participant; Close in reverse.
	if err := neg.Start(ctx); err != nil {
		return fmt.Errorf("node: tasks: %w", err)
	}
	if err := coord.Start(ctx); err != nil {
		neg.Close()
		return fmt.Errorf("node: tasks: %w", err)
	}
	if err := part.Start(ctx); err != nil {
		coord.Close()
		neg.Close()
		return fmt.Errorf("node: tasks: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	ts.mu.Lock()
	ts.neg, ts.coord, ts.part, ts.cancel, ts.running = neg, coord, part, cancel, true
	ts.mu.Unlock()
	ts.wg.Go(func() { ts.watchPeers(wctx) })
	close(ts.ready)
	return nil
}

// closeTasks stops what startTasks started; safe when it did not run, and
// safe with n.mu held (Start's error path): it never takes n.mu.
func (n *Node) closeTasks() {
	ts := n.tasks // set under n.mu before Close or Start's error path runs
	if ts == nil {
		return
	}
	ts.mu.Lock()
	if ts.stopped {
		ts.mu.Unlock()
		return
	}
	ts.stopped = true
	wasRunning := ts.running
	ts.running = false
	neg, coord, part, cancel := ts.neg, ts.coord, ts.part, ts.cancel
	ts.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if part != nil {
		part.Close()
	}
	if coord != nil {
		coord.Close()
	}
	if neg != nil {
		neg.Close()
	}
	ts.wg.Wait()
	if !wasRunning {
		close(ts.ready)
	}
}

// errTasksClosed is returned when tasks are not running.
var errTasksClosed = fmt.Errorf("node: task negotiation is not running: %w", protocol.ErrChannelClosed)

// components returns the running components, waiting (bounded by ctx) for
// Start to finish starting them: the router delivers envelopes a moment
// before startTasks runs.
func (ts *taskState) components(ctx context.Context) (*negotiation.Negotiator, *taskswarm.Coordinator, *taskswarm.Participant, error) {
	select {
	case <-ts.ready:
	case <-ctx.Done():
		return nil, nil, nil, errTasksClosed
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.running {
		return nil, nil, nil, errTasksClosed
	}
	return ts.neg, ts.coord, ts.part, nil
}

// now returns the running components without waiting.
func (ts *taskState) now() (*negotiation.Negotiator, *taskswarm.Coordinator, *taskswarm.Participant, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.running {
		return nil, nil, nil, errTasksClosed
	}
	return ts.neg, ts.coord, ts.part, nil
}

// wrapTaskHandler routes task envelopes of local agent id to negotiation
// and swarms before h (which may be nil) sees the rest.
func (n *Node) wrapTaskHandler(id string, h protocol.Handler) protocol.Handler {
	ts := n.tasksLocked() // called by RegisterAgent with n.mu held
	return func(ctx context.Context, env *envelope.Envelope) (any, error) {
		return ts.handle(ctx, id, h, env)
	}
}

// handle dispatches an envelope delivered to local agent id:
//
//   - task-proposal carrying a valid proposal payload: the Negotiator
//     (recorded, answered by TaskOptions.Decide or left pending); any
//     other task-proposal goes to h, or, when h is nil, to the Negotiator,
//     which rejects it with INVALID_PROPOSAL;
//   - task-accept and task-reject answering a proposal this node sent
//     through the Negotiator: the Negotiator; others go to h;
//   - response and error answering a sub-task request of a swarm this node
//     coordinates: the Coordinator; others go to h;
//   - request carrying a sub-task (taskswarm.Task payload): the Participant,
//     which answers later in the request's thread; the router's own
//     immediate answer is a null response, which the Coordinator ignores;
//   - notification from a swarm coordinator: an event, then h.
//
// Everything else goes to h. When h is nil a request is answered with
// DELIVERY_FAILED (the agent has no handler) and anything else is dropped.
func (ts *taskState) handle(ctx context.Context, id string, h protocol.Handler, env *envelope.Envelope) (any, error) {
	switch env.Type {
	case envelope.TypeTaskProposal:
		if _, err := negotiation.DecodeProposal(env.Payload); err != nil && h != nil {
			break // not a seed proposal: the agent speaks its own dialect
		}
		neg, _, _, err := ts.components(ctx)
		if err != nil {
			return nil, err
		}
		_, err = neg.Handle(ctx, env)
		return nil, err
	case envelope.TypeTaskAccept, envelope.TypeTaskReject:
		neg, _, _, err := ts.components(ctx)
		if err != nil {
			return nil, err
		}
		if handled, err := neg.Handle(ctx, env); handled {
			return nil, err
		}
	case envelope.TypeResponse, envelope.TypeError:
		_, coord, _, err := ts.components(ctx)
		if err != nil {
			return nil, err
		}
		if handled, err := coord.Handle(ctx, env); handled {
			return nil, err
		}
	case envelope.TypeRequest:
		if _, err := taskswarm.DecodeTask(env.Payload); err == nil {
			_, _, part, err := ts.components(ctx)
			if err != nil {
				return nil, err
			}
			if handled, err := part.Handle(ctx, env); handled {
				if err != nil {
					ts.n.log.Debugw("sub-task not taken", "agent", id, "from", env.Sender, "err", err)
				}
				return nil, nil // participant errors travel as its own error answer, never as the handler's
			}
		}
	case envelope.TypeNotification:
		if nt, err := taskswarm.DecodeNotice(env.Payload); err == nil {
			ts.n.emitNotice(env, nt)
		}
	}
	if h == nil {
		if env.Type == envelope.TypeRequest {
			return nil, fmt.Errorf("node: agent %s has no handler for plain requests: %w", id, protocol.ErrDeliveryFailed)
		}
		return nil, nil
	}
	return h(ctx, env)
}

// l0 returns the address of an L0 agent to notify when a sub-task is
// escalated: a local one first, else a known remote one on a peer that has
// not left; "" when there is none.
func (ts *taskState) l0() string {
	n := ts.n
	var best []string
	for _, c := range n.reg.Local() {
		if c.Tier == tiers.L0 {
			best = append(best, c.Address())
		}
	}
	if len(best) == 0 {
		for _, c := range n.reg.FindByTier(tiers.L0) {
			if !ts.isGone(c.Host) {
				best = append(best, c.Address())
			}
		}
	}
	if len(best) == 0 {
		return ""
	}
	sort.Strings(best)
	return best[0]
}

func (ts *taskState) isGone(hostID string) bool {
	p, err := peer.Decode(hostID)
	if err != nil {
		return false
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.gone[p]
}

// emitProposalEvent records a negotiation event in the node's events:
// type "proposal-…", envelopeId the proposal id, sender the proposer,
// recipient the target (or, for an answer, who answered).
func (n *Node) emitProposalEvent(ev negotiation.Event) {
	t := string(ev.Type)
	if len(t) < 9 || t[:9] != "proposal-" {
		t = "proposal-" + t
	}
	to := ev.Target
	if ev.From != "" {
		to = ev.From
	}
	detail := ev.Detail
	if detail == "" {
		detail = string(ev.Direction) + ", " + string(ev.Status)
	}
	n.obs.Emit(protocol.Event{
		Type: t, Time: ev.Time, EnvelopeID: ev.ProposalID, Sender: ev.Proposer, Recipient: to,
		MessageType: envelope.TypeTaskProposal, Success: ev.Code == "", Code: ev.Code, Detail: detail,
		SourceTier: -1, TargetTier: -1,
	})
}

// emitSwarmEvent records a swarm event in the node's events: type
// "swarm-…", envelopeId the swarm id, recipient the agent concerned.
func (n *Node) emitSwarmEvent(ev taskswarm.Event) {
	t := string(ev.Type)
	if len(t) < 6 || t[:6] != "swarm-" {
		t = "swarm-" + t
	}
	detail := ev.Detail
	if ev.SubTaskID != "" {
		detail = fmt.Sprintf("%s attempt %d: %s", ev.SubTaskID, ev.Attempt, detail)
	}
	if ev.To != "" {
		if ev.From != "" {
			detail = fmt.Sprintf("%s -> %s %s", ev.From, ev.To, detail)
		} else {
			detail = fmt.Sprintf("%s %s", ev.To, detail)
		}
	}
	n.obs.Emit(protocol.Event{
		Type: t, Time: ev.Time, EnvelopeID: ev.SwarmID, Recipient: ev.Agent,
		Success: ev.Code == "" && ev.Type != taskswarm.EvtSubTaskFailed && ev.Type != taskswarm.EvtSubTaskEscalated,
		Code:    ev.Code, Detail: detail, SourceTier: -1, TargetTier: -1,
	})
}

// EvtSwarmNotice is the event type of a swarm notification received by a
// local agent (released, completed, failed, escalation).
const EvtSwarmNotice = "swarm-notice"

func (n *Node) emitNotice(env *envelope.Envelope, nt taskswarm.Notice) {
	detail := nt.Kind
	if nt.Reason != "" {
		detail += ": " + nt.Reason
	}
	if nt.SubTaskID != "" {
		detail += " (sub-task " + nt.SubTaskID + ")"
	}
	n.obs.Emit(protocol.Event{
		Type: EvtSwarmNotice, Time: time.Now(), EnvelopeID: nt.SwarmID, Sender: env.Sender, Recipient: env.Recipient,
		MessageType: env.Type, Success: nt.Kind != taskswarm.NoticeFailed && nt.Kind != taskswarm.NoticeEscalation,
		Detail: detail, SourceTier: -1, TargetTier: -1,
	})
}

// CapabilityPolicy returns a proposal policy for TaskOptions.Decide: a
// local target whose card declares at least one of the required
// capabilities (or any proposal, when none is required) accepts, with an
// estimate by complexity (1m simple, 5m medium, 30m complex); any other
// target rejects with CAPABILITY_MISSING.
func (n *Node) CapabilityPolicy() negotiation.ProposalHandler {
	return func(_ context.Context, r negotiation.Record) *negotiation.Decision {
		c, ok := n.reg.Get(r.Target)
		if !ok || c.Origin != agentcard.OriginLocal {
			return nil
		}
		need := r.Proposal.RequiredCapabilities
		if len(need) > 0 && !slices.ContainsFunc(need, c.HasCapability) {
			return negotiation.RejectWith(negotiation.ReasonCapabilityMissing, "")
		}
		est := 5 * time.Minute
		switch r.Proposal.EstimatedComplexity {
		case negotiation.ComplexitySimple:
			est = time.Minute
		case negotiation.ComplexityComplex:
			est = 30 * time.Minute
		}
		return negotiation.AcceptWith(est.Milliseconds())
	}
}
