package tasknode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

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
	// The node's CapabilityPolicy ([Service.CapabilityPolicy]) accepts what the target's card can do.
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

// Config is what a [Service] takes from its node. Every field but Log and
// Options is required.
type Config struct {
	// Post sends an envelope through the node's router.
	Post func(ctx context.Context, env *envelope.Envelope) error
	// Registry holds the node's agent cards, local and remote.
	Registry *agentcard.Registry
	// Docs are the node's replicated documents, where swarms are shared.
	Docs *crdt.Manager
	// FindByCapability looks a capability up in the swarm's DHT; the cards
	// it finds land in Registry.
	FindByCapability func(ctx context.Context, capability string) ([]agentcard.Card, error)
	// Host is the node's libp2p host, followed for peer departures.
	Host host.Host
	// Factory makes the envelopes the task layer sends.
	Factory *envelope.Factory
	// Sandbox is the node's sandbox policy (discovery filter of swarm
	// recruits).
	Sandbox sandbox.Policy
	// Emit records an event in the node's events.
	Emit func(localapi.Event)
	// Subscribe follows the node's events of the given types, buffered
	// buf deep, until cancel is called.
	Subscribe func(buf int, types ...string) (events <-chan localapi.Event, cancel func())
	// Store keeps proposals and swarms (negotiation.Bucket and
	// taskswarm.Bucket) across restarts.
	Store negotiation.KV
	// Options are the first task options; see [Service.Configure].
	Options TaskOptions
	// Log receives the task layer's warnings. Nil: none.
	Log *zap.SugaredLogger
}

// Service runs the task layer on a node: see the package comment.
//
// Lock order: Service.mu is a leaf; no component call runs under it.
type Service struct {
	cfg   Config
	log   *zap.SugaredLogger
	ready chan struct{} // closed once started, or once stopped

	mu      sync.Mutex
	opts    TaskOptions
	running bool
	stopped bool
	neg     *negotiation.Negotiator
	coord   *taskswarm.Coordinator
	part    *taskswarm.Participant
	gone    map[peer.ID]bool // peers that left (see watchPeers)
	shared  map[string]map[string]string
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	// hooks are for tests; nil in a node.
	hooks struct {
		watching func()                       // watchPeers follows connections
		due      func(p peer.ID, probed bool) // a disconnected peer's wait ended: dialled or left alone
	}
}

// New returns a Service for cfg; it builds and starts nothing until Start.
func New(cfg Config) *Service {
	l := cfg.Log
	if l == nil {
		l = zap.NewNop().Sugar()
	}
	return &Service{cfg: cfg, log: l, opts: cfg.Options, ready: make(chan struct{}),
		gone: map[peer.ID]bool{}, shared: map[string]map[string]string{}}
}

// Configure sets the task options (see [TaskOptions] for which take effect
// when). Safe before and after Start.
func (ts *Service) Configure(o TaskOptions) {
	ts.mu.Lock()
	ts.opts = o
	ts.mu.Unlock()
}

func (ts *Service) options() TaskOptions {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.opts
}

// Start builds and starts the Negotiator, the Coordinator and the
// Participant, in that order, and follows peer departures until Close.
// ctx is the life of that work, not a start-up bound: give a context that
// ends no earlier than Close. It fails when called twice or after Close.
func (ts *Service) Start(ctx context.Context) error {
	ts.mu.Lock()
	if ts.stopped || ts.running {
		ts.mu.Unlock()
		return errors.New("node: tasks started twice or after close")
	}
	o := ts.opts
	ts.mu.Unlock()
	post, factory, store := ts.cfg.Post, ts.cfg.Factory, ts.cfg.Store
	neg, err := negotiation.New(negotiation.Config{
		Factory: factory, Post: post, Store: store,
		Emit: func(ev negotiation.Event) {
			ts.emitProposalEvent(ev)
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
		ts.emitSwarmEvent(ev)
		if f := ts.options().OnSwarmEvent; f != nil {
			f(ev)
		}
	}
	coord, err := taskswarm.New(taskswarm.Config{
		Negotiator: neg, Post: post, Factory: factory, Store: store,
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
		Post: post, Factory: factory, Emit: emitSwarm, Workers: o.Workers,
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

// Close stops what Start started and waits for its goroutines. It is
// idempotent, safe when Start did not run (handlers waiting for the start
// then fail), and never calls back into the node.
func (ts *Service) Close() {
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

// ErrNotRunning is returned by the Service's API methods before Start and
// after Close.
var ErrNotRunning = errors.New("node: not started: tasks and swarms run on a started node")

// Running returns the running Negotiator and Coordinator, or
// [ErrNotRunning].
func (ts *Service) Running() (*negotiation.Negotiator, *taskswarm.Coordinator, error) {
	neg, coord, _, err := ts.now()
	if err != nil {
		return nil, nil, ErrNotRunning
	}
	return neg, coord, nil
}

// errTasksClosed is returned when tasks are not running.
var errTasksClosed = fmt.Errorf("node: task negotiation is not running: %w", protocol.ErrChannelClosed)

// components returns the running components, waiting (bounded by ctx) for
// Start to finish starting them: the router delivers envelopes a moment
// before Start runs.
func (ts *Service) components(ctx context.Context) (*negotiation.Negotiator, *taskswarm.Coordinator, *taskswarm.Participant, error) {
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
func (ts *Service) now() (*negotiation.Negotiator, *taskswarm.Coordinator, *taskswarm.Participant, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.running {
		return nil, nil, nil, errTasksClosed
	}
	return ts.neg, ts.coord, ts.part, nil
}

// Wrap returns the router handler of local agent id: it routes the task
// envelopes addressed to id to negotiation and swarms (see handle) before
// h, which may be nil, sees the rest.
func (ts *Service) Wrap(id string, h protocol.Handler) protocol.Handler {
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
func (ts *Service) handle(ctx context.Context, id string, h protocol.Handler, env *envelope.Envelope) (any, error) {
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
					ts.log.Debugw("sub-task not taken", "agent", id, "from", env.Sender, "err", err)
				}
				return nil, nil // participant errors travel as its own error answer, never as the handler's
			}
		}
	case envelope.TypeNotification:
		if nt, err := taskswarm.DecodeNotice(env.Payload); err == nil {
			ts.emitNotice(env, nt)
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
func (ts *Service) l0() string {
	reg := ts.cfg.Registry
	var best []string
	for _, c := range reg.Local() {
		if c.Tier == tiers.L0 {
			best = append(best, c.Address())
		}
	}
	if len(best) == 0 {
		for _, c := range reg.FindByTier(tiers.L0) {
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

func (ts *Service) isGone(hostID string) bool {
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
func (ts *Service) emitProposalEvent(ev negotiation.Event) {
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
	ts.cfg.Emit(localapi.Event{
		Type: t, Time: ev.Time, EnvelopeID: ev.ProposalID, Sender: ev.Proposer, Recipient: to,
		MessageType: envelope.TypeTaskProposal, Success: ev.Code == "", Code: ev.Code, Detail: detail,
		SourceTier: -1, TargetTier: -1,
	})
}

// emitSwarmEvent records a swarm event in the node's events: type
// "swarm-…", envelopeId the swarm id, recipient the agent concerned.
func (ts *Service) emitSwarmEvent(ev taskswarm.Event) {
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
	ts.cfg.Emit(localapi.Event{
		Type: t, Time: ev.Time, EnvelopeID: ev.SwarmID, Recipient: ev.Agent,
		Success: ev.Code == "" && ev.Type != taskswarm.EvtSubTaskFailed && ev.Type != taskswarm.EvtSubTaskEscalated,
		Code:    ev.Code, Detail: detail, SourceTier: -1, TargetTier: -1,
	})
}

// EvtSwarmNotice is the event type of a swarm notification received by a
// local agent (released, completed, failed, escalation).
const EvtSwarmNotice = "swarm-notice"

func (ts *Service) emitNotice(env *envelope.Envelope, nt taskswarm.Notice) {
	detail := nt.Kind
	if nt.Reason != "" {
		detail += ": " + nt.Reason
	}
	if nt.SubTaskID != "" {
		detail += " (sub-task " + nt.SubTaskID + ")"
	}
	ts.cfg.Emit(localapi.Event{
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
func (ts *Service) CapabilityPolicy() negotiation.ProposalHandler {
	return func(_ context.Context, r negotiation.Record) *negotiation.Decision {
		c, ok := ts.cfg.Registry.Get(r.Target)
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
