package taskswarm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/wirecodec"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
)

// Bucket is the KV bucket that holds the swarms, one JSON value per swarm
// keyed by its id.
const Bucket = "swarm.swarms"

// Defaults of [Config].
const (
	DefaultRecruitTimeout = 30 * time.Second
	DefaultMaxAttempts    = 5
	DefaultMaxCandidates  = 64
	DefaultRetention      = 7 * 24 * time.Hour
)

// tagPrefix marks the proposals of a swarm in the Negotiator (Record.Tag).
const tagPrefix = "swarm:"

// maxSharedKeys bounds SharedState.
const maxSharedKeys = 64

// Directory finds the agents that have a capability: local and remote,
// filtered by the sandbox rules to those agent `as` may discover. node
// implements it over the agent registry and discovery. An error that
// matches agentcard.ErrCapabilityNotFound means "none".
type Directory interface {
	Capable(ctx context.Context, as string, capability string) ([]agentcard.Card, error)
}

// Shared mirrors a swarm where every participant can read and watch it;
// node implements it with a CRDT document. Publish is called with the latest
// state after changes (coalesced), from the Coordinator's goroutine.
type Shared interface {
	Publish(ctx context.Context, s Swarm) error
}

// Config configures a [Coordinator]. Negotiator, Post and Directory are
// required; the rest have defaults.
type Config struct {
	// Negotiator sends the proposals and reports their outcomes. It must
	// be started before the Coordinator (its Start may time proposals out;
	// the Coordinator reconciles with its records at Start).
	Negotiator *negotiation.Negotiator
	// Post routes an envelope from a local agent (the router's Post).
	Post func(ctx context.Context, env *envelope.Envelope) error
	// Factory builds envelopes; nil means envelope.NewFactory() with Now.
	Factory *envelope.Factory
	// Store persists the swarms; nil means an in-memory store.
	Store negotiation.KV
	// Directory finds capable agents.
	Directory Directory
	// Shared publishes swarms to participants; nil publishes nothing.
	Shared Shared
	// Escalate is told when a sub-task has no capable agent left, for an
	// external orchestrator; nil means no hook. It runs on the
	// Coordinator's goroutine and should return quickly.
	Escalate func(ctx context.Context, s Swarm, st SubTask, reason string)
	// L0 returns the address of an L0 agent to notify on escalation, or
	// ""; nil means none.
	L0 func() string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Emit receives every [Event] synchronously; it must not block.
	Emit func(Event)
	// RecruitTimeout is how long agents have to answer a proposal; zero
	// means DefaultRecruitTimeout.
	RecruitTimeout time.Duration
	// SubTaskTimeout fails a running attempt with no result after this
	// long (then it is reassigned); zero means no timeout.
	SubTaskTimeout time.Duration
	// MaxAttempts is how many times one sub-task is assigned before it is
	// escalated; zero means DefaultMaxAttempts.
	MaxAttempts int
	// MaxCandidates bounds the proposals of one swarm; zero means
	// DefaultMaxCandidates.
	MaxCandidates int
	// Retention is how long finished swarms are kept; zero means
	// DefaultRetention, negative forever.
	Retention time.Duration
}

// SubTaskSpec describes one sub-task for [CreateOptions].
type SubTaskSpec struct {
	Description string
	// RequiredCapabilities must be among the swarm's; empty means any
	// participant can do it.
	RequiredCapabilities []string
}

// CreateOptions are the optional parts of [Coordinator.Create].
type CreateOptions struct {
	// SubTasks split the work; empty means one sub-task per required
	// capability.
	SubTasks []SubTaskSpec
	// Justification is sent with every proposal (tier rules require one
	// from L2/L3 to L0/L1).
	Justification string
	// Complexity of the proposals; empty means medium.
	Complexity negotiation.Complexity
	// RecruitTimeout is how long the recruited agents have to answer this
	// swarm's proposals, those to replacements included; zero means
	// Config.RecruitTimeout. Agents whose node leaves proposals to an
	// operator need minutes rather than seconds.
	RecruitTimeout time.Duration
}

type state int

const (
	stateNew state = iota
	stateRunning
	stateClosed
)

type actionKind int

const (
	actEmit     actionKind = iota // emit ev
	actSend                       // post env; for a sub-task request a failure fails the attempt
	actRecruit                    // recruit a replacement for a sub-task (loop only)
	actEscalate                   // call Config.Escalate (loop only)
	actFinish                     // report completion, then mark completed (loop only)
)

// action is a side effect decided under the lock and performed without it.
type action struct {
	kind      actionKind
	ev        Event
	env       *envelope.Envelope
	err       error // building env failed
	swarmID   string
	subTaskID string
	agent     string
	attempt   int
	swarm     Swarm
	st        SubTask
	reason    string
	// resend marks a request sent again for the same attempt (resume,
	// PeerBack): its failure leaves the attempt running, since the
	// participant may still answer; SubTaskTimeout and PeerGone bound it.
	resend bool
}

// effects collects actions in order.
type effects struct{ acts []action }

func (f *effects) add(a action) { f.acts = append(f.acts, a) }

// Coordinator runs the swarms created by the local agents of one node: it
// recruits capable agents through the Negotiator, assigns sub-tasks,
// collects results, reassigns failed work and reports the outcome.
//
// It is safe for concurrent use. One mutex (mu) guards the swarms; no
// callback, Post, Directory or Negotiator call runs while it is held. The
// inbox has its own leaf mutex. One goroutine, started by Start and stopped
// by Close, runs timers, publishing and the asynchronous work (proposal
// outcomes, PeerGone, recruiting replacements, escalation, final reports).
type Coordinator struct {
	cfg  Config
	wake chan struct{} // buffered 1
	wg   sync.WaitGroup

	qmu   sync.Mutex // leaf: guards inbox
	inbox []func(context.Context)

	mu           sync.Mutex
	state        state
	cancel       context.CancelFunc
	unsub        func()
	swarms       map[string]*Swarm
	dirty        map[string]bool // to publish
	finishing    map[string]bool // final report in flight
	publishRetry time.Time
}

// New returns a Coordinator; it starts nothing.
func New(cfg Config) (*Coordinator, error) {
	switch {
	case cfg.Negotiator == nil:
		return nil, errors.New("swarm: Config.Negotiator is required")
	case cfg.Post == nil:
		return nil, errors.New("swarm: Config.Post is required: pass the router's Post")
	case cfg.Directory == nil:
		return nil, errors.New("swarm: Config.Directory is required: it finds capable agents")
	case cfg.RecruitTimeout < 0 || cfg.SubTaskTimeout < 0 || cfg.MaxAttempts < 0 || cfg.MaxCandidates < 0:
		return nil, errors.New("swarm: negative timeout or limit in Config")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Factory == nil {
		cfg.Factory = &envelope.Factory{Now: cfg.Now, NewID: envelope.NewID}
	}
	if cfg.Store == nil {
		cfg.Store = negotiation.NewMemKV()
	}
	if cfg.RecruitTimeout == 0 {
		cfg.RecruitTimeout = DefaultRecruitTimeout
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxCandidates == 0 {
		cfg.MaxCandidates = DefaultMaxCandidates
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	return &Coordinator{
		cfg: cfg, wake: make(chan struct{}, 1), swarms: map[string]*Swarm{},
		dirty: map[string]bool{}, finishing: map[string]bool{},
	}, nil
}

// Start loads the stored swarms, subscribes to the Negotiator's outcomes and
// starts the Coordinator's goroutine, which then resumes every unfinished
// swarm: recruiting ones continue, running sub-tasks are sent again (same
// attempt; when that send fails, for example because the agent's node has
// not reconnected yet, the attempt stays running until PeerBack, PeerGone or
// SubTaskTimeout), and a swarm that was completing is reported. Start may be
// called once.
func (c *Coordinator) Start(ctx context.Context) error {
	var f effects
	c.mu.Lock()
	if c.state != stateNew {
		c.mu.Unlock()
		return errors.New("swarm: Start called twice or after Close")
	}
	err := c.cfg.Store.ForEach(Bucket, func(key string, val []byte) error {
		var s Swarm
		if err := json.Unmarshal(val, &s); err != nil || s.ID != key {
			f.add(action{kind: actEmit, ev: c.event(EvtStoreFailed, &Swarm{ID: key}, func(e *Event) {
				e.Detail = fmt.Sprintf("stored swarm %q is unreadable and was skipped (err %v)", key, err)
			})})
			return nil
		}
		if s.SharedState == nil {
			s.SharedState = map[string]json.RawMessage{}
		}
		if s.Results == nil {
			s.Results = map[string]json.RawMessage{}
		}
		c.swarms[key] = &s
		return nil
	})
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("swarm: load swarms from the store: %w", err)
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.state = stateRunning
	c.unsub = c.cfg.Negotiator.OnOutcome(func(r negotiation.Record) {
		if strings.HasPrefix(r.Tag, tagPrefix) {
			c.enqueue(func(ctx context.Context) { c.onOutcome(ctx, r) })
		}
	})
	loaded := slices.Collect(maps.Keys(c.swarms))
	c.mu.Unlock()
	c.run(ctx, f, false)
	c.enqueue(func(ctx context.Context) { c.resume(ctx, loaded) })
	c.wg.Go(func() { c.loop(ctx) })
	return nil
}

// Close stops the Coordinator's goroutine and waits for it. Swarms stay in
// the store and resume at the next Start. Close is idempotent and safe
// before Start.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.state = stateClosed
	cancel, unsub := c.cancel, c.unsub
	c.unsub = nil
	c.mu.Unlock()
	if unsub != nil {
		unsub()
	}
	if cancel != nil {
		cancel()
	}
	c.wg.Wait()
	c.qmu.Lock()
	c.inbox = nil
	c.qmu.Unlock()
	return nil
}

func (c *Coordinator) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateRunning
}

// enqueue hands work to the Coordinator's goroutine. It never blocks.
func (c *Coordinator) enqueue(job func(context.Context)) {
	c.qmu.Lock()
	c.inbox = append(c.inbox, job)
	c.qmu.Unlock()
	c.kick()
}

func (c *Coordinator) dequeue() func(context.Context) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if len(c.inbox) == 0 {
		return nil
	}
	job := c.inbox[0]
	c.inbox[0] = nil
	c.inbox = c.inbox[1:]
	return job
}

func (c *Coordinator) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// loop is the Coordinator's goroutine.
func (c *Coordinator) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		for job := c.dequeue(); job != nil; job = c.dequeue() {
			if ctx.Err() != nil {
				return
			}
			job(ctx)
		}
		c.publish(ctx)
		next := c.tick(ctx)
		timer.Reset(max(next.Sub(c.cfg.Now()), time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-timer.C:
		}
	}
}

// tick ends recruiting at its deadline, times out running attempts, prunes
// old swarms, and returns when to look again.
func (c *Coordinator) tick(ctx context.Context) time.Time {
	var f effects
	c.mu.Lock()
	now := c.cfg.Now()
	ms := now.UnixMilli()
	next := now.Add(time.Hour)
	if !c.publishRetry.IsZero() && c.publishRetry.Before(next) {
		next = c.publishRetry
	}
	for _, s := range c.sortedLocked() {
		switch s.Status {
		case StatusRecruiting:
			if ms >= s.RecruitDeadlineMs {
				c.finishRecruitingLocked(s, now, &f)
			} else if d := time.UnixMilli(s.RecruitDeadlineMs); d.Before(next) {
				next = d
			}
		case StatusActive:
			for i := range s.SubTasks {
				st := &s.SubTasks[i]
				if s.Status != StatusActive || st.Status != SubTaskRunning || st.DeadlineMs == 0 {
					continue
				}
				if ms >= st.DeadlineMs {
					c.failLocked(s, st, st.AssignedAgent, "no result within "+c.cfg.SubTaskTimeout.String(), now, &f)
				} else if d := time.UnixMilli(st.DeadlineMs); d.Before(next) {
					next = d
				}
			}
		}
		if c.cfg.Retention > 0 && s.Status.Terminal() && s.UpdatedAt < ms-c.cfg.Retention.Milliseconds() {
			delete(c.swarms, s.ID)
			if err := c.cfg.Store.Delete(Bucket, s.ID); err != nil {
				f.add(action{kind: actEmit, ev: c.storeFailed(s, err)})
			}
		}
	}
	c.mu.Unlock()
	if len(f.acts) > 0 {
		c.run(ctx, f, true)
		return now // state changed: look again at once
	}
	return next
}

// publish sends the latest state of every changed swarm to Shared.
func (c *Coordinator) publish(ctx context.Context) {
	c.mu.Lock()
	if c.cfg.Shared == nil || len(c.dirty) == 0 {
		clear(c.dirty)
		c.mu.Unlock()
		return
	}
	ids := slices.Sorted(maps.Keys(c.dirty))
	clear(c.dirty)
	snaps := make([]Swarm, 0, len(ids))
	for _, id := range ids {
		if s := c.swarms[id]; s != nil {
			snaps = append(snaps, s.Clone())
		}
	}
	c.publishRetry = time.Time{}
	c.mu.Unlock()
	for _, s := range snaps {
		if err := c.cfg.Shared.Publish(ctx, s); err != nil {
			c.emit(c.event(EvtPublishFailed, &s, func(e *Event) { e.Code, e.Detail = codeOf(err), err.Error() }))
			c.mu.Lock()
			if _, ok := c.dirty[s.ID]; !ok {
				c.dirty[s.ID] = true
				c.publishRetry = c.cfg.Now().Add(time.Second)
			}
			c.mu.Unlock()
		}
	}
}

// run performs actions in order. Recruiting, escalation and final reports
// run on the Coordinator's goroutine: from any other (inLoop false) they
// are handed to it.
func (c *Coordinator) run(ctx context.Context, f effects, inLoop bool) {
	acts := f.acts
	var deferred []action
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a.kind {
		case actEmit:
			c.emit(a.ev)
			continue
		case actSend:
			err := a.err
			if err == nil {
				err = c.cfg.Post(ctx, a.env)
			}
			if err != nil {
				c.emit(Event{Type: EvtSendFailed, Time: c.cfg.Now(), SwarmID: a.swarmID, SubTaskID: a.subTaskID,
					Agent: a.agent, Attempt: a.attempt, Code: codeOf(err), Detail: err.Error()})
				if a.subTaskID != "" && a.attempt > 0 && !a.resend {
					acts = append(acts, c.sendFailed(a, err)...)
				}
			}
			continue
		}
		if !inLoop {
			deferred = append(deferred, a)
			continue
		}
		switch a.kind {
		case actRecruit:
			acts = append(acts, c.recruitFor(ctx, a.swarmID, a.subTaskID)...)
		case actEscalate:
			if c.cfg.Escalate != nil {
				c.cfg.Escalate(ctx, a.swarm, a.st, a.reason)
			}
		case actFinish:
			acts = append(acts, c.finish(ctx, a.swarmID)...)
		}
	}
	if len(deferred) > 0 {
		c.enqueue(func(ctx context.Context) { c.run(ctx, effects{acts: deferred}, true) })
	}
}

func (c *Coordinator) emit(ev Event) {
	if c.cfg.Emit != nil {
		c.cfg.Emit(ev)
	}
}

func (c *Coordinator) event(t EventType, s *Swarm, f func(*Event)) Event {
	ev := Event{Type: t, Time: c.cfg.Now(), SwarmID: s.ID}
	if f != nil {
		f(&ev)
	}
	return ev
}

func (c *Coordinator) emitLocked(f *effects, t EventType, s *Swarm, fn func(*Event)) {
	f.add(action{kind: actEmit, ev: c.event(t, s, fn)})
}

func (c *Coordinator) storeFailed(s *Swarm, err error) Event {
	return c.event(EvtStoreFailed, s, func(e *Event) {
		e.Detail = "store: " + err.Error() + "; the swarm is kept in memory but may be lost on restart: check the data dir"
	})
}

// saveLocked stamps, persists and marks s for publishing.
func (c *Coordinator) saveLocked(s *Swarm, now time.Time, f *effects) {
	s.UpdatedAt = now.UnixMilli()
	b, err := json.Marshal(s)
	if err == nil {
		err = c.cfg.Store.Put(Bucket, s.ID, b)
	}
	if err != nil {
		f.add(action{kind: actEmit, ev: c.storeFailed(s, err)})
	}
	c.dirty[s.ID] = true
	c.kick()
}

func (c *Coordinator) sortedLocked() []*Swarm {
	out := slices.Collect(maps.Values(c.swarms))
	slices.SortFunc(out, func(a, b *Swarm) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// loadsLocked counts running sub-tasks per agent across all swarms.
func (c *Coordinator) loadsLocked() map[string]int {
	loads := map[string]int{}
	for _, s := range c.swarms {
		if s.Status.Terminal() {
			continue
		}
		for _, st := range s.SubTasks {
			if st.Status == SubTaskRunning && st.AssignedAgent != "" {
				loads[st.AssignedAgent]++
			}
		}
	}
	return loads
}

func (c *Coordinator) newID() string {
	id := ""
	if c.cfg.Factory.NewID != nil {
		id = c.cfg.Factory.NewID()
	} else {
		id = envelope.NewID()
	}
	if len(id) <= MaxIDLen-len("swarm-") {
		id = "swarm-" + id
	}
	return id
}

// recruitTimeout is how long the agents proposed to for s have to answer.
func (c *Coordinator) recruitTimeout(s *Swarm) time.Duration {
	if s.RecruitTimeoutMs > 0 {
		return time.Duration(s.RecruitTimeoutMs) * time.Millisecond
	}
	return c.cfg.RecruitTimeout
}

// Create starts a swarm for local agent creator: it sends a task proposal,
// through the Negotiator, to every agent visible to creator whose card
// lists one of caps (property 25), local and remote, and returns the swarm
// as it stands once every proposal is out: recruiting, or further along
// when the recruits answered (and even finished) meanwhile, as local agents
// can. When all have answered, or RecruitTimeout passes, the acceptors get
// the sub-tasks (see [CreateOptions]) and the swarm turns active; with no
// acceptor it fails. Progress is reported through events, Get, and Shared.
//
// It fails with a *NoCapableAgentError (CAPABILITY_NOT_FOUND) when no agent
// has a required capability. When not one proposal could be sent (tier or
// sandbox rules, routing), the swarm is returned failed together with an
// error wrapping the causes, whose code is the first cause's (for example
// ESCALATION_REQUIRED: pass opts.Justification).
func (c *Coordinator) Create(ctx context.Context, creator, task string, caps []string, opts CreateOptions) (Swarm, error) {
	specs, err := c.checkCreate(creator, task, caps, &opts)
	if err != nil {
		return Swarm{}, err
	}
	if !c.running() {
		return Swarm{}, ErrClosed
	}
	cands, err := c.candidates(ctx, creator, caps, caps, nil, nil)
	if err != nil {
		return Swarm{}, err
	}
	if len(cands) == 0 {
		return Swarm{}, &NoCapableAgentError{Creator: creator, Capabilities: slices.Clone(caps)}
	}
	now := c.cfg.Now()
	id := c.newID()
	recruitFor := c.cfg.RecruitTimeout
	var recruitMs int64
	if opts.RecruitTimeout > 0 {
		// As the swarm records it for replacement proposals: the first
		// round waits the same.
		recruitMs = recruitMillis(opts.RecruitTimeout)
		recruitFor = max(time.Duration(recruitMs)*time.Millisecond, opts.RecruitTimeout) // max: no wrap near MaxInt64
	}
	s := &Swarm{
		ID: id, TaskDescription: task, Creator: creator, RequiredCapabilities: slices.Clone(caps),
		Participants: []string{}, Status: StatusRecruiting, SharedState: map[string]json.RawMessage{},
		Results: map[string]json.RawMessage{}, Thread: id, Justification: opts.Justification,
		Complexity: opts.Complexity, RecruitDeadlineMs: now.Add(recruitFor).UnixMilli(),
		RecruitTimeoutMs: recruitMs,
		CreatedAt:        now.UnixMilli(),
	}
	for i, sp := range specs {
		s.SubTasks = append(s.SubTasks, SubTask{
			ID: "st-" + strconv.Itoa(i+1), Description: sp.Description,
			RequiredCapabilities: append([]string{}, sp.RequiredCapabilities...), Status: SubTaskPending,
		})
	}
	setProgress(s)

	var f effects
	c.mu.Lock()
	if c.state != stateRunning {
		c.mu.Unlock()
		return Swarm{}, ErrClosed
	}
	sortCandidates(cands, c.loadsLocked())
	if len(cands) > c.cfg.MaxCandidates {
		cands = cands[:c.cfg.MaxCandidates]
	}
	for _, cd := range cands {
		s.Recruits = append(s.Recruits, Recruit{Agent: cd.agent, Capabilities: cd.caps, Status: RecruitProposing})
	}
	c.swarms[id] = s
	c.emitLocked(&f, EvtSwarmCreated, s, func(e *Event) {
		e.To, e.Agent = StatusRecruiting, creator
		e.Detail = fmt.Sprintf("%d sub-tasks; proposing to %d capable agents", len(s.SubTasks), len(cands))
	})
	c.saveLocked(s, now, &f)
	c.mu.Unlock()
	c.run(ctx, f, false)

	prop := negotiation.Proposal{
		TaskDescription: task, RequiredCapabilities: slices.Clone(caps),
		EstimatedComplexity: opts.Complexity, DeadlineMs: s.RecruitDeadlineMs,
	}
	var errs []error
	for i, cd := range cands {
		rec, err := c.cfg.Negotiator.Propose(ctx, creator, cd.agent, prop,
			negotiation.ProposeOptions{Justification: opts.Justification, Tag: tagPrefix + id})
		if err != nil {
			errs = append(errs, err)
		}
		c.run(ctx, effects{acts: c.proposed(id, i, rec, err)}, false)
	}

	f = effects{}
	c.mu.Lock()
	c.finishRecruitingLocked(s, c.cfg.Now(), &f)
	snap := s.Clone()
	c.mu.Unlock()
	c.run(ctx, f, false)
	if len(errs) == len(cands) {
		return snap, fmt.Errorf("swarm: create %s: none of the %d capable agents could be sent a proposal: %w",
			id, len(cands), errors.Join(errs...))
	}
	return snap, nil
}

func (c *Coordinator) checkCreate(creator, task string, caps []string, opts *CreateOptions) ([]SubTaskSpec, error) {
	if err := checkAgent("creator", creator); err != nil {
		return nil, err
	}
	if err := checkText("task", task, MaxDescriptionLen); err != nil {
		return nil, err
	}
	if len(caps) == 0 {
		return nil, invalid("capabilities", "give at least one required capability")
	}
	if err := checkCaps("capabilities", caps); err != nil {
		return nil, err
	}
	if opts.Complexity == "" {
		opts.Complexity = negotiation.ComplexityMedium
	}
	if !opts.Complexity.Valid() {
		return nil, invalid("complexity", "must be simple, medium or complex, got %s", wirecodec.Quote(string(opts.Complexity)))
	}
	if opts.RecruitTimeout < 0 {
		return nil, invalid("recruitTimeout", "must not be negative, got %s", opts.RecruitTimeout)
	}
	if len(opts.Justification) > envelope.MaxJustificationLen {
		return nil, invalid("justification", "%d bytes, over the %d-byte limit", len(opts.Justification), envelope.MaxJustificationLen)
	}
	specs := opts.SubTasks
	if len(specs) == 0 {
		for _, cp := range caps {
			specs = append(specs, SubTaskSpec{Description: task + " (part: " + cp + ")", RequiredCapabilities: []string{cp}})
		}
	}
	if len(specs) > MaxSubTasks {
		return nil, invalid("subTasks", "%d sub-tasks, over the limit of %d", len(specs), MaxSubTasks)
	}
	for i, sp := range specs {
		field := "subTasks[" + strconv.Itoa(i) + "]"
		if err := checkText(field+".description", sp.Description, MaxDescriptionLen); err != nil {
			return nil, err
		}
		if err := checkCaps(field+".requiredCapabilities", sp.RequiredCapabilities); err != nil {
			return nil, err
		}
		for _, cp := range sp.RequiredCapabilities {
			if !slices.Contains(caps, cp) {
				return nil, invalid(field+".requiredCapabilities", "%s is not one of the swarm's required capabilities: add it to them", wirecodec.Quote(cp))
			}
		}
	}
	return specs, nil
}

func setProgress(s *Swarm) {
	done := 0
	for _, st := range s.SubTasks {
		if st.Status == SubTaskCompleted {
			done++
		}
	}
	b, _ := json.Marshal(map[string]int{"completed": done, "total": len(s.SubTasks)})
	s.SharedState["progress"] = b
}

func sortCandidates(cands []candidate, loads map[string]int) {
	for i := range cands {
		cands[i].load = loads[cands[i].agent]
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.load, b.load), cmp.Compare(a.agent, b.agent))
	})
}

// candidates asks the directory for the agents, visible to creator, that
// have one of query; it keeps those whose card lists every capability in
// need, that are not creator and not excluded, recording which of the
// swarm's capabilities swarmCaps each has. Property 25: only cards that
// really list a required capability are kept, whatever the directory says.
func (c *Coordinator) candidates(ctx context.Context, creator string, swarmCaps, query, need []string, excluded map[string]bool) ([]candidate, error) {
	seen := map[string]bool{}
	var out []candidate
	for _, cp := range query {
		cards, err := c.cfg.Directory.Capable(ctx, creator, cp)
		if err != nil {
			if errors.Is(err, agentcard.ErrCapabilityNotFound) {
				continue
			}
			return nil, fmt.Errorf("swarm: find agents with capability %s: %w", cp, err)
		}
		for _, card := range cards {
			addr := card.Address()
			if seen[addr] || negotiation.SameAgent(addr, creator) || excluded[addr] {
				continue
			}
			seen[addr] = true
			var have []string
			for _, sc := range swarmCaps {
				if card.HasCapability(sc) {
					have = append(have, sc)
				}
			}
			if len(have) == 0 || !capable(have, need) {
				continue
			}
			out = append(out, candidate{agent: addr, caps: have})
		}
	}
	return out, nil
}

// proposed records the result of sending the proposal of recruit idx.
func (c *Coordinator) proposed(swarmID string, idx int, rec negotiation.Record, err error) []action {
	var f effects
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.swarms[swarmID]
	if s == nil || idx >= len(s.Recruits) {
		return nil
	}
	r := &s.Recruits[idx]
	now := c.cfg.Now()
	if err != nil {
		if r.Status.open() {
			r.Status, r.Reason = RecruitUnreachable, wirecodec.Truncate(err.Error(), 512)
			c.emitLocked(&f, EvtRecruitAnswered, s, func(e *Event) {
				e.Agent, e.Code, e.Detail = r.Agent, codeOf(err), "unreachable: "+err.Error()
			})
		}
		if r.ForSubTask != "" {
			f.add(action{kind: actRecruit, swarmID: s.ID, subTaskID: r.ForSubTask})
		}
	} else {
		if r.ProposalID == "" {
			r.ProposalID, r.Thread = rec.ProposalID, rec.Thread
		}
		if r.Status == RecruitProposing {
			r.Status = RecruitProposed
		}
	}
	c.saveLocked(s, now, &f)
	return f.acts
}

// onOutcome applies a proposal's outcome reported by the Negotiator.
func (c *Coordinator) onOutcome(ctx context.Context, rec negotiation.Record) {
	var f effects
	c.mu.Lock()
	s := c.swarms[strings.TrimPrefix(rec.Tag, tagPrefix)]
	if s != nil {
		c.applyOutcomeLocked(s, rec, c.cfg.Now(), &f)
	}
	c.mu.Unlock()
	c.run(ctx, f, true)
}

func (c *Coordinator) applyOutcomeLocked(s *Swarm, rec negotiation.Record, now time.Time, f *effects) {
	var r *Recruit
	for i := range s.Recruits {
		if s.Recruits[i].ProposalID == rec.ProposalID {
			r = &s.Recruits[i]
			break
		}
	}
	if r == nil { // the outcome came before Propose returned
		for i := len(s.Recruits) - 1; i >= 0; i-- {
			x := &s.Recruits[i]
			if x.ProposalID == "" && x.Status.open() && negotiation.SameAgent(x.Agent, rec.Target) {
				r = x
				break
			}
		}
	}
	if r == nil || rec.Status == negotiation.StatusPending {
		return
	}
	if r.ProposalID == "" {
		r.ProposalID, r.Thread = rec.ProposalID, rec.Thread
	}
	defer c.saveLocked(s, now, f)
	if !r.Status.open() {
		if rec.Status == negotiation.StatusAccepted && r.Status == RecruitTimedOut {
			c.releaseLocked(s, r, "accepted after the recruiting deadline", f)
		}
		return
	}
	switch rec.Status {
	case negotiation.StatusAccepted:
		r.Status, r.Reason = RecruitAccepted, ""
	case negotiation.StatusRejected:
		r.Status, r.Reason = RecruitRejected, rec.RejectionReason
		if rec.AlternativeSuggestion != "" {
			r.Reason += " (suggests " + rec.AlternativeSuggestion + ")"
		}
	default:
		r.Status, r.Reason = RecruitTimedOut, "no answer by the proposal deadline"
	}
	c.emitLocked(f, EvtRecruitAnswered, s, func(e *Event) {
		e.Agent, e.Detail = r.Agent, string(r.Status)
		if r.Reason != "" {
			e.Detail += ": " + r.Reason
		}
		if r.Status == RecruitTimedOut {
			e.Code = negotiation.CodeProposalTimeout
		}
	})
	switch {
	case s.Status == StatusRecruiting && r.ForSubTask == "":
		c.finishRecruitingLocked(s, now, f)
	case s.Status == StatusActive && r.ForSubTask != "":
		if r.Status == RecruitAccepted {
			// Its own sub-task if that still waits, else another it can do.
			st := s.subTask(r.ForSubTask)
			if st == nil || st.Status != SubTaskPending || st.AssignedAgent != "" {
				st = nil
				for i := range s.SubTasks {
					x := &s.SubTasks[i]
					if x.Status == SubTaskPending && x.AssignedAgent == "" && !slices.Contains(x.Tried, r.Agent) &&
						capable(r.Capabilities, x.RequiredCapabilities) {
						st = x
						break
					}
				}
			}
			if st != nil {
				c.startLocked(s, st, r.Agent, now, f)
			} else {
				c.releaseLocked(s, r, "the sub-task no longer needs it", f)
			}
		}
		// Sub-tasks parked on this recruit (see recruitFor) move on.
		for i := range s.SubTasks {
			if st := &s.SubTasks[i]; s.Status == StatusActive && c.waitingLocked(s, st) {
				c.placeLocked(s, st, now, f)
			}
		}
	case r.Status == RecruitAccepted:
		c.releaseLocked(s, r, "the swarm no longer needs it", f)
	}
}

// finishRecruitingLocked ends recruiting once every proposal is answered or
// the deadline has passed: it assigns the sub-tasks to the acceptors, or
// fails the swarm when nobody accepted.
func (c *Coordinator) finishRecruitingLocked(s *Swarm, now time.Time, f *effects) {
	if s.Status != StatusRecruiting {
		return
	}
	due := now.UnixMilli() >= s.RecruitDeadlineMs
	for _, r := range s.Recruits {
		if r.Status.open() && !due {
			return
		}
	}
	counts := map[RecruitStatus]int{}
	loads := c.loadsLocked()
	var cands []candidate
	for i := range s.Recruits {
		r := &s.Recruits[i]
		if r.Status.open() {
			r.Status, r.Reason = RecruitTimedOut, "no answer before the recruiting deadline"
			c.emitLocked(f, EvtRecruitAnswered, s, func(e *Event) {
				e.Agent, e.Code, e.Detail = r.Agent, negotiation.CodeProposalTimeout, "timed-out: "+r.Reason
			})
		}
		counts[r.Status]++
		if r.Status == RecruitAccepted && r.ForSubTask == "" && !r.Gone {
			cands = append(cands, candidate{agent: r.Agent, caps: r.Capabilities, load: loads[r.Agent]})
		}
	}
	if len(cands) == 0 {
		s.Error = fmt.Sprintf("no capable agent accepted: of %d proposed, %d rejected, %d timed out, %d unreachable",
			len(s.Recruits), counts[RecruitRejected], counts[RecruitTimedOut], counts[RecruitUnreachable])
		c.setStatusLocked(s, StatusFailed, f)
		c.reportFailureLocked(s, f)
		c.saveLocked(s, now, f)
		return
	}
	todo := make([]int, len(s.SubTasks))
	for i := range todo {
		todo[i] = i
	}
	assign, matched, released := plan(s.SubTasks, todo, cands)
	for _, a := range released {
		if r := s.member(a); r != nil {
			c.releaseLocked(s, r, fmt.Sprintf("%d agents accepted %d sub-tasks", len(cands), len(s.SubTasks)), f)
		}
	}
	s.Participants = matched
	c.setStatusLocked(s, StatusActive, f)
	for j := range s.SubTasks {
		if agent, ok := assign[j]; ok {
			c.startLocked(s, &s.SubTasks[j], agent, now, f)
		}
	}
	for j := range s.SubTasks {
		if st := &s.SubTasks[j]; s.Status == StatusActive && st.Status == SubTaskPending && st.AssignedAgent == "" {
			c.placeLocked(s, st, now, f)
		}
	}
	c.saveLocked(s, now, f)
}

func (c *Coordinator) setStatusLocked(s *Swarm, to Status, f *effects) {
	from := s.Status
	if from == to {
		return
	}
	s.Status = to
	c.emitLocked(f, EvtSwarmStatusChanged, s, func(e *Event) {
		e.From, e.To = from, to
		if to == StatusFailed {
			e.Detail = s.Error
		}
	})
}

// releaseLocked tells an acceptor it is not needed.
func (c *Coordinator) releaseLocked(s *Swarm, r *Recruit, reason string, f *effects) {
	r.Status, r.Reason = RecruitReleased, reason
	c.emitLocked(f, EvtAgentReleased, s, func(e *Event) { e.Agent, e.Detail = r.Agent, reason })
	c.noticeLocked(s, r.Agent, r.Thread, Notice{Kind: NoticeReleased, SwarmID: s.ID, Status: s.Status, Reason: reason}, f)
}

// noticeLocked queues a notification from the creator.
func (c *Coordinator) noticeLocked(s *Swarm, to, thread string, n Notice, f *effects) {
	env, err := c.noticeEnv(s.Creator, to, thread, n)
	f.add(action{kind: actSend, env: env, err: err, swarmID: s.ID, agent: to})
}

func (c *Coordinator) noticeEnv(from, to, thread string, n Notice) (*envelope.Envelope, error) {
	env, err := c.cfg.Factory.New(from, to, envelope.TypeNotification, n)
	if err != nil {
		return nil, err
	}
	if thread != "" {
		env.CorrelationID = thread
		if err := env.Validate(); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// startLocked assigns st to agent as a new attempt and queues its request.
func (c *Coordinator) startLocked(s *Swarm, st *SubTask, agent string, now time.Time, f *effects) {
	st.AssignedAgent, st.Status, st.Error = agent, SubTaskRunning, ""
	st.Attempts++
	st.DeadlineMs = 0
	if c.cfg.SubTaskTimeout > 0 {
		st.DeadlineMs = now.Add(c.cfg.SubTaskTimeout).UnixMilli()
	}
	if !slices.Contains(s.Participants, agent) {
		s.Participants = append(s.Participants, agent)
	}
	t := EvtSubTaskAssigned
	if st.Attempts > 1 {
		t = EvtSubTaskReassigned
	}
	c.emitLocked(f, t, s, func(e *Event) {
		e.SubTaskID, e.Agent, e.Attempt, e.Detail = st.ID, agent, st.Attempts, st.Description
	})
	c.requestLocked(s, st, false, f)
}

// requestLocked queues the request envelope of st's current attempt, in
// the assigned agent's thread; resend marks the same attempt sent again.
func (c *Coordinator) requestLocked(s *Swarm, st *SubTask, resend bool, f *effects) {
	task := Task{SwarmID: s.ID, SubTaskID: st.ID, Attempt: st.Attempts, Description: st.Description,
		RequiredCapabilities: st.RequiredCapabilities}
	env, err := c.cfg.Factory.New(s.Creator, st.AssignedAgent, envelope.TypeRequest, task)
	if err == nil {
		if m := s.member(st.AssignedAgent); m != nil && m.Thread != "" {
			env.CorrelationID = m.Thread
			err = env.Validate()
		}
	}
	f.add(action{kind: actSend, env: env, err: err, swarmID: s.ID, subTaskID: st.ID, agent: st.AssignedAgent, attempt: st.Attempts, resend: resend})
}

// sendFailed fails the attempt whose request could not be posted.
func (c *Coordinator) sendFailed(a action, err error) []action {
	var f effects
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.swarms[a.swarmID]
	if s == nil || s.Status != StatusActive {
		return nil
	}
	st := s.subTask(a.subTaskID)
	if st != nil && st.Status == SubTaskRunning && st.Attempts == a.attempt && st.AssignedAgent == a.agent {
		c.failLocked(s, st, a.agent, "the request could not be delivered: "+err.Error(), c.cfg.Now(), &f)
	}
	return f.acts
}

// failLocked records the failure of st's current attempt by agent and
// reassigns it, or escalates when it has failed MaxAttempts times.
func (c *Coordinator) failLocked(s *Swarm, st *SubTask, agent, reason string, now time.Time, f *effects) {
	c.emitLocked(f, EvtSubTaskFailed, s, func(e *Event) {
		e.SubTaskID, e.Agent, e.Attempt, e.Detail = st.ID, agent, st.Attempts, reason
	})
	st.Error = wirecodec.Truncate(reason, MaxErrorLen)
	if agent != "" && !slices.Contains(st.Tried, agent) {
		st.Tried = append(st.Tried, agent)
	}
	st.AssignedAgent, st.Status, st.DeadlineMs = "", SubTaskPending, 0
	if agent != "" && !s.holds(agent) {
		s.Participants = slices.DeleteFunc(s.Participants, func(p string) bool { return p == agent })
		if m := s.member(agent); m != nil {
			m.Status, m.Reason = RecruitDropped, "failed its sub-task "+st.ID
		}
	}
	if st.Attempts >= c.cfg.MaxAttempts {
		c.escalateLocked(s, st, fmt.Sprintf("failed %d attempts; last: %s", st.Attempts, reason), now, f)
	} else {
		c.placeLocked(s, st, now, f)
	}
	c.saveLocked(s, now, f)
}

// placeLocked gives a pending sub-task to the least loaded capable
// participant that has not failed it, or queues recruiting a new agent.
func (c *Coordinator) placeLocked(s *Swarm, st *SubTask, now time.Time, f *effects) {
	loads := c.loadsLocked()
	best := ""
	for _, p := range s.Participants {
		m := s.member(p)
		if m == nil || m.Gone || slices.Contains(st.Tried, p) || !capable(m.Capabilities, st.RequiredCapabilities) {
			continue
		}
		if best == "" || loads[p] < loads[best] || loads[p] == loads[best] && p < best {
			best = p
		}
	}
	if best != "" {
		c.startLocked(s, st, best, now, f)
		return
	}
	st.Status, st.AssignedAgent = SubTaskPending, ""
	f.add(action{kind: actRecruit, swarmID: s.ID, subTaskID: st.ID})
}

// recruitFor proposes a pending sub-task to one new capable agent (one at a
// time), or escalates when none remains.
func (c *Coordinator) recruitFor(ctx context.Context, swarmID, subTaskID string) []action {
	c.mu.Lock()
	s := c.swarms[swarmID]
	st := (*SubTask)(nil)
	if s != nil {
		st = s.subTask(subTaskID)
	}
	if !c.waitingLocked(s, st) {
		c.mu.Unlock()
		return nil
	}
	creator, swarmCaps, need := s.Creator, slices.Clone(s.RequiredCapabilities), slices.Clone(st.RequiredCapabilities)
	excluded := map[string]bool{}
	for _, a := range st.Tried {
		excluded[a] = true
	}
	for _, p := range s.Participants {
		excluded[p] = true // considered by placeLocked already
	}
	for _, r := range s.Recruits {
		if r.Gone || r.Status != RecruitReleased {
			excluded[r.Agent] = true // declined, unreachable, gone, dropped or busy with the swarm
		}
	}
	c.mu.Unlock()

	query := need
	if len(query) == 0 {
		query = swarmCaps
	}
	cands, err := c.candidates(ctx, creator, swarmCaps, query, need, excluded)

	var f effects
	c.mu.Lock()
	if !c.waitingLocked(s, st) || c.swarms[swarmID] != s {
		c.mu.Unlock()
		return nil
	}
	now := c.cfg.Now()
	if err == nil && len(cands) == 0 && parked(s, st) {
		c.mu.Unlock()
		return nil // an agent proposed to for another sub-task can do it: wait for its answer
	}
	if err != nil || len(cands) == 0 {
		reason := fmt.Sprintf("no capable agent remains for [%s] (failed by %s)",
			strings.Join(st.RequiredCapabilities, ", "), strings.Join(st.Tried, ", "))
		if err != nil {
			reason += "; directory: " + err.Error()
		}
		c.escalateLocked(s, st, reason, now, &f)
		c.saveLocked(s, now, &f)
		c.mu.Unlock()
		return f.acts
	}
	sortCandidates(cands, c.loadsLocked())
	cd := cands[0]
	idx := len(s.Recruits)
	s.Recruits = append(s.Recruits, Recruit{Agent: cd.agent, Capabilities: cd.caps, Status: RecruitProposing, ForSubTask: st.ID})
	prop := negotiation.Proposal{
		TaskDescription: st.Description, RequiredCapabilities: query, EstimatedComplexity: s.Complexity,
		DeadlineMs: now.Add(c.recruitTimeout(s)).UnixMilli(),
	}
	if !prop.EstimatedComplexity.Valid() {
		prop.EstimatedComplexity = negotiation.ComplexityMedium
	}
	opts := negotiation.ProposeOptions{Justification: s.Justification, Tag: tagPrefix + s.ID}
	c.saveLocked(s, now, &f)
	c.mu.Unlock()

	rec, perr := c.cfg.Negotiator.Propose(ctx, creator, cd.agent, prop, opts)
	return append(f.acts, c.proposed(swarmID, idx, rec, perr)...)
}

// parked reports whether an open proposal of the swarm (for another
// sub-task) went to an agent that could also do st: recruiting for st then
// waits for that answer instead of escalating.
func parked(s *Swarm, st *SubTask) bool {
	for _, r := range s.Recruits {
		if r.Status.open() && !r.Gone && !slices.Contains(st.Tried, r.Agent) && capable(r.Capabilities, st.RequiredCapabilities) {
			return true
		}
	}
	return false
}

// waitingLocked reports whether st is pending with nobody assigned and no
// recruit proposed for it yet.
func (c *Coordinator) waitingLocked(s *Swarm, st *SubTask) bool {
	if s == nil || st == nil || s.Status != StatusActive || st.Status != SubTaskPending || st.AssignedAgent != "" {
		return false
	}
	for _, r := range s.Recruits {
		if r.ForSubTask == st.ID && r.Status.open() {
			return false
		}
	}
	return true
}

// escalateLocked gives up on st: the L0 agent and the escalation hook are
// told, the sub-task and the swarm fail, and the creator is told.
func (c *Coordinator) escalateLocked(s *Swarm, st *SubTask, reason string, now time.Time, f *effects) {
	st.Status, st.Error, st.AssignedAgent, st.DeadlineMs = SubTaskFailed, wirecodec.Truncate(reason, MaxErrorLen), "", 0
	c.emitLocked(f, EvtSubTaskEscalated, s, func(e *Event) { e.SubTaskID, e.Attempt, e.Detail = st.ID, st.Attempts, reason })
	s.Error = "sub-task " + st.ID + " escalated: " + reason
	if c.cfg.L0 != nil {
		if l0 := c.cfg.L0(); l0 != "" {
			c.noticeLocked(s, l0, s.Thread, Notice{
				Kind: NoticeEscalation, SwarmID: s.ID, TaskDescription: s.TaskDescription, Status: StatusFailed,
				SubTaskID: st.ID, Reason: reason,
			}, f)
		}
	}
	c.setStatusLocked(s, StatusFailed, f)
	f.add(action{kind: actEscalate, swarm: s.Clone(), st: *st, reason: reason})
	c.reportFailureLocked(s, f)
}

func (c *Coordinator) reportFailureLocked(s *Swarm, f *effects) {
	c.noticeLocked(s, s.Creator, s.Thread, Notice{
		Kind: NoticeFailed, SwarmID: s.ID, TaskDescription: s.TaskDescription, Status: StatusFailed,
		Reason: s.Error, Results: cloneRaw(s.Results),
	}, f)
	c.emitLocked(f, EvtSwarmReported, s, func(e *Event) { e.Agent, e.To, e.Detail = s.Creator, StatusFailed, s.Error })
}

// completeLocked records st's result; the last one starts the final report.
func (c *Coordinator) completeLocked(s *Swarm, st *SubTask, result json.RawMessage, now time.Time, f *effects) {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	st.Status, st.Result, st.Error, st.DeadlineMs = SubTaskCompleted, slices.Clone(result), "", 0
	s.Results[st.ID] = slices.Clone(result)
	setProgress(s)
	c.emitLocked(f, EvtSubTaskCompleted, s, func(e *Event) { e.SubTaskID, e.Agent, e.Attempt = st.ID, st.AssignedAgent, st.Attempts })
	if len(s.Results) == len(s.SubTasks) && s.Status == StatusActive {
		c.setStatusLocked(s, StatusCompleting, f)
		f.add(action{kind: actFinish, swarmID: s.ID})
	}
	c.saveLocked(s, now, f)
}

// finish reports a completing swarm's aggregate to its creator, then marks
// it completed.
func (c *Coordinator) finish(ctx context.Context, swarmID string) []action {
	c.mu.Lock()
	s := c.swarms[swarmID]
	if s == nil || s.Status != StatusCompleting || c.finishing[swarmID] {
		c.mu.Unlock()
		return nil
	}
	c.finishing[swarmID] = true
	n := Notice{Kind: NoticeCompleted, SwarmID: s.ID, TaskDescription: s.TaskDescription, Status: StatusCompleted,
		Results: cloneRaw(s.Results)}
	creator, thread := s.Creator, s.Thread
	c.mu.Unlock()

	env, err := c.noticeEnv(creator, creator, thread, n)
	if err != nil { // too large for one envelope: the creator reads them from the swarm
		n.Results, n.ResultsOmitted = nil, true
		env, err = c.noticeEnv(creator, creator, thread, n)
	}
	if err == nil {
		err = c.cfg.Post(ctx, env)
	}

	var f effects
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.finishing, swarmID)
	if c.swarms[swarmID] != s || s.Status != StatusCompleting {
		return nil
	}
	c.setStatusLocked(s, StatusCompleted, &f)
	c.emitLocked(&f, EvtSwarmReported, s, func(e *Event) {
		e.Agent, e.To = creator, StatusCompleted
		e.Detail = fmt.Sprintf("%d results", len(s.Results))
		if err != nil {
			e.Code, e.Detail = codeOf(err), "the report could not be delivered: "+err.Error()
		}
	})
	c.saveLocked(s, c.cfg.Now(), &f)
	return f.acts
}

// Handle takes a "response" or "error" envelope delivered to a local agent.
// It handles the answers to sub-task requests of this Coordinator's swarms
// ([Result] payload): from the assigned agent, for the current attempt, in
// the agent's thread, a response completes the sub-task and an error fails
// it (it is reassigned). Other answers about a known swarm (another agent,
// a stale attempt, a sub-task already done) are ignored with an
// EvtResultIgnored event, so that each result is recorded once. An answer
// without a swarm payload in a swarm thread (the router's own reply to a
// request) is consumed: an error fails the agent's running sub-task, a
// response is dropped. handled is false for anything else.
func (c *Coordinator) Handle(ctx context.Context, env *envelope.Envelope) (handled bool, err error) {
	if env == nil || env.Type != envelope.TypeResponse && env.Type != envelope.TypeError {
		return false, nil
	}
	res, derr := DecodeResult(env.Payload)
	var f effects
	c.mu.Lock()
	if c.state != stateRunning {
		c.mu.Unlock()
		return false, ErrClosed
	}
	var s *Swarm
	if derr == nil {
		s = c.swarms[res.SwarmID]
		if s == nil {
			c.mu.Unlock()
			return false, nil
		}
	} else {
		var st *SubTask
		s, st = c.byThreadLocked(env)
		if s == nil {
			c.mu.Unlock()
			return false, nil
		}
		if env.Type == envelope.TypeResponse || st == nil {
			c.mu.Unlock()
			return true, nil
		}
		res = Result{SwarmID: s.ID, SubTaskID: st.ID, Attempt: st.Attempts, Error: errorText(env.Payload)}
	}
	now := c.cfg.Now()
	st := s.subTask(res.SubTaskID)
	if why := ignoreReason(s, st, res, env); why != "" {
		c.emitLocked(&f, EvtResultIgnored, s, func(e *Event) {
			e.SubTaskID, e.Agent, e.Attempt, e.Detail = res.SubTaskID, env.Sender, res.Attempt, why
		})
	} else if env.Type == envelope.TypeError {
		c.failLocked(s, st, st.AssignedAgent, res.reason(), now, &f)
	} else {
		c.completeLocked(s, st, res.Result, now, &f)
	}
	c.mu.Unlock()
	c.run(ctx, f, false)
	return true, nil
}

// ignoreReason says why an answer is not applied, or "".
func ignoreReason(s *Swarm, st *SubTask, res Result, env *envelope.Envelope) string {
	switch {
	case st == nil:
		return "no sub-task " + wirecodec.Quote(res.SubTaskID)
	case s.Status.Terminal():
		return "the swarm is " + string(s.Status)
	case st.Status == SubTaskCompleted:
		return "the sub-task is already completed: its result is recorded once"
	case st.Status != SubTaskRunning:
		return "the sub-task is " + string(st.Status) + ", not running"
	case !negotiation.SameAgent(env.Sender, st.AssignedAgent):
		return "from " + env.Sender + ", but the sub-task is assigned to " + st.AssignedAgent
	case res.Attempt != st.Attempts:
		return fmt.Sprintf("attempt %d is stale (current attempt %d)", res.Attempt, st.Attempts)
	}
	if m := s.member(st.AssignedAgent); m != nil && m.Thread != "" && env.ThreadID() != m.Thread {
		return "not in the agent's task thread " + m.Thread
	}
	return ""
}

// byThreadLocked finds the swarm whose agent thread env is in, and the one
// running sub-task of env's sender there (nil if not exactly one).
func (c *Coordinator) byThreadLocked(env *envelope.Envelope) (*Swarm, *SubTask) {
	if env.CorrelationID == "" {
		return nil, nil
	}
	for _, s := range c.swarms {
		found := false
		for _, r := range s.Recruits {
			if r.Thread == env.CorrelationID && negotiation.SameAgent(r.Agent, env.Sender) {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		var match *SubTask
		n := 0
		for i := range s.SubTasks {
			st := &s.SubTasks[i]
			if st.Status == SubTaskRunning && negotiation.SameAgent(st.AssignedAgent, env.Sender) {
				if m := s.member(st.AssignedAgent); m != nil && m.Thread == env.CorrelationID {
					match, n = st, n+1
				}
			}
		}
		if n != 1 {
			match = nil
		}
		return s, match
	}
	return nil, nil
}

// errorText reads a {code, message} error payload.
func errorText(p json.RawMessage) string {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if len(p) > MaxPayloadSize || json.Unmarshal(p, &e) != nil || e.Code == "" && e.Message == "" {
		return "the agent's node answered the request with an error"
	}
	return wirecodec.Truncate(strings.TrimPrefix(e.Code+": "+e.Message, ": "), MaxErrorLen)
}

// CompleteSubTask records the result of a sub-task that is pending or
// running, whoever is working on it (for example by an operator). The
// result is JSON (empty means null). A sub-task's result is recorded once:
// completing it again is a *StateError.
func (c *Coordinator) CompleteSubTask(ctx context.Context, swarmID, subTaskID string, result json.RawMessage) error {
	if len(result) > MaxResultSize {
		return invalid("result", "%d bytes, over the %d-byte limit", len(result), MaxResultSize)
	}
	if len(result) > 0 && !json.Valid(result) {
		return invalid("result", "not valid json")
	}
	var f effects
	c.mu.Lock()
	s, st, err := c.subTaskLocked(swarmID, subTaskID)
	if err == nil && (st.Status == SubTaskCompleted || st.Status == SubTaskFailed) {
		err = &StateError{SwarmID: swarmID, SubTaskID: subTaskID, State: string(st.Status), Hint: "a sub-task's result is recorded once"}
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.completeLocked(s, st, result, c.cfg.Now(), &f)
	c.mu.Unlock()
	c.run(ctx, f, false)
	return nil
}

// FailSubTask fails the running attempt of a sub-task: it is reassigned to
// another capable participant or a newly recruited capable agent (attempt
// + 1), or, when none remains, escalated (L0 agent and the Escalate hook)
// and the swarm fails.
func (c *Coordinator) FailSubTask(ctx context.Context, swarmID, subTaskID, reason string) error {
	if strings.TrimSpace(reason) == "" {
		reason = "failed by request"
	}
	var f effects
	c.mu.Lock()
	s, st, err := c.subTaskLocked(swarmID, subTaskID)
	if err == nil && st.Status != SubTaskRunning {
		err = &StateError{SwarmID: swarmID, SubTaskID: subTaskID, State: string(st.Status),
			Hint: "only a running sub-task can fail (a pending one is already being reassigned)"}
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.failLocked(s, st, st.AssignedAgent, wirecodec.Truncate(reason, MaxErrorLen), c.cfg.Now(), &f)
	c.mu.Unlock()
	c.run(ctx, f, false)
	return nil
}

func (c *Coordinator) subTaskLocked(swarmID, subTaskID string) (*Swarm, *SubTask, error) {
	if c.state != stateRunning {
		return nil, nil, ErrClosed
	}
	s := c.swarms[swarmID]
	if s == nil {
		return nil, nil, &NotFoundError{SwarmID: swarmID}
	}
	if s.Status != StatusActive {
		return nil, nil, &StateError{SwarmID: swarmID, State: string(s.Status), Hint: "sub-tasks change only while the swarm is active"}
	}
	st := s.subTask(subTaskID)
	if st == nil {
		return nil, nil, &NotFoundError{SwarmID: swarmID, SubTaskID: subTaskID}
	}
	return s, st, nil
}

// PeerGone tells the Coordinator that the node with this peer ID left:
// every running sub-task assigned to an agent "…@peerID" fails and is
// reassigned, and its agents get no more work. It returns at once; the work
// is done on the Coordinator's goroutine.
func (c *Coordinator) PeerGone(peerID string) {
	if peerID == "" || !c.running() {
		return
	}
	c.enqueue(func(ctx context.Context) { c.peerGone(ctx, peerID) })
}

func (c *Coordinator) peerGone(ctx context.Context, peerID string) {
	suffix := "@" + peerID
	var f effects
	c.mu.Lock()
	now := c.cfg.Now()
	for _, s := range c.sortedLocked() {
		if s.Status.Terminal() {
			continue
		}
		changed := false
		for i := range s.Recruits {
			r := &s.Recruits[i]
			if !strings.HasSuffix(r.Agent, suffix) {
				continue
			}
			r.Gone, changed = true, true
			if r.Status.open() {
				r.Status, r.Reason = RecruitUnreachable, "its node "+peerID+" left"
				c.emitLocked(&f, EvtRecruitAnswered, s, func(e *Event) { e.Agent, e.Detail = r.Agent, "unreachable: "+r.Reason })
				if r.ForSubTask != "" {
					f.add(action{kind: actRecruit, swarmID: s.ID, subTaskID: r.ForSubTask})
				}
			}
		}
		if s.Status == StatusRecruiting {
			c.finishRecruitingLocked(s, now, &f)
		}
		for i := range s.SubTasks {
			st := &s.SubTasks[i]
			if s.Status == StatusActive && st.Status == SubTaskRunning && strings.HasSuffix(st.AssignedAgent, suffix) {
				c.failLocked(s, st, st.AssignedAgent, "its node "+peerID+" left the swarm", now, &f)
				changed = true
			}
		}
		if changed {
			c.saveLocked(s, now, &f)
		}
	}
	c.mu.Unlock()
	c.run(ctx, f, true)
}

// PeerBack tells the Coordinator that the node with this peer ID is
// reachable (again): it connected, or presented its cards, after a restart
// or a disconnection of either side. The current attempt of every running
// sub-task assigned to one of its agents is sent again; the participant runs
// an attempt once, and answers a repeat of one it finished with the same
// answer, so nothing is done twice and an answer lost meanwhile arrives. It
// returns at once; the work is done on the Coordinator's goroutine.
func (c *Coordinator) PeerBack(peerID string) {
	if peerID == "" || !c.running() {
		return
	}
	c.enqueue(func(ctx context.Context) { c.peerBack(ctx, peerID) })
}

func (c *Coordinator) peerBack(ctx context.Context, peerID string) {
	suffix := "@" + peerID
	var f effects
	c.mu.Lock()
	for _, s := range c.sortedLocked() {
		if s.Status != StatusActive {
			continue
		}
		for i := range s.SubTasks {
			st := &s.SubTasks[i]
			if st.Status == SubTaskRunning && strings.HasSuffix(st.AssignedAgent, suffix) {
				c.requestLocked(s, st, true, &f)
			}
		}
	}
	c.mu.Unlock()
	c.run(ctx, f, true)
}

// resume reconciles the swarms loaded at Start (ids) with the Negotiator's
// records and picks up where they were.
func (c *Coordinator) resume(ctx context.Context, ids []string) {
	recs := c.cfg.Negotiator.List()
	byID := map[string]negotiation.Record{}
	byTarget := map[string]negotiation.Record{} // tag + "\x00" + target -> latest sent record
	for _, r := range recs {
		if r.Direction != negotiation.Sent || !strings.HasPrefix(r.Tag, tagPrefix) {
			continue
		}
		byID[r.ProposalID] = r
		byTarget[r.Tag+"\x00"+r.Target] = r
	}
	var f effects
	c.mu.Lock()
	now := c.cfg.Now()
	for _, s := range c.sortedLocked() {
		if s.Status.Terminal() || !slices.Contains(ids, s.ID) {
			continue
		}
		type attempt struct {
			id string
			n  int
		}
		var running []attempt
		if s.Status == StatusActive {
			for _, st := range s.SubTasks {
				if st.Status == SubTaskRunning {
					running = append(running, attempt{st.ID, st.Attempts})
				}
			}
		}
		for i := range s.Recruits {
			r := &s.Recruits[i]
			if !r.Status.open() {
				continue
			}
			rec, ok := byID[r.ProposalID]
			if r.ProposalID == "" {
				rec, ok = byTarget[tagPrefix+s.ID+"\x00"+r.Agent]
			}
			switch {
			case ok && rec.Terminal():
				c.applyOutcomeLocked(s, rec, now, &f)
			case ok:
				r.ProposalID, r.Thread, r.Status = rec.ProposalID, rec.Thread, RecruitProposed
			default:
				r.Status, r.Reason = RecruitUnreachable, "the proposal was lost when the coordinator stopped"
				if r.ForSubTask != "" {
					f.add(action{kind: actRecruit, swarmID: s.ID, subTaskID: r.ForSubTask})
				}
			}
		}
		switch s.Status {
		case StatusRecruiting:
			c.finishRecruitingLocked(s, now, &f)
		case StatusActive:
			for _, a := range running {
				if st := s.subTask(a.id); st != nil && st.Status == SubTaskRunning && st.Attempts == a.n {
					// Same attempt: the participant answers once. Right after
					// a restart the agent may be unknown until its node
					// reconnects: a failure here leaves the attempt running,
					// and PeerBack sends it again then.
					c.requestLocked(s, st, true, &f)
				}
			}
			for i := range s.SubTasks {
				if st := &s.SubTasks[i]; c.waitingLocked(s, st) {
					f.add(action{kind: actRecruit, swarmID: s.ID, subTaskID: st.ID})
				}
			}
		case StatusCompleting:
			f.add(action{kind: actFinish, swarmID: s.ID})
		}
		c.saveLocked(s, now, &f)
	}
	c.mu.Unlock()
	c.run(ctx, f, true)
}

// SetShared sets one key of a swarm's shared state to a JSON value (it is
// published with the swarm). The key "progress" belongs to the
// Coordinator.
func (c *Coordinator) SetShared(ctx context.Context, swarmID, key string, value json.RawMessage) error {
	if envelope.CheckID(key, MaxSharedKeyLen) != nil {
		return invalid("key", "must be 1..%d bytes of printable ascii without spaces", MaxSharedKeyLen)
	}
	if key == "progress" {
		return invalid("key", "\"progress\" is maintained by the coordinator: choose another key")
	}
	if len(value) == 0 || len(value) > MaxSharedValue || !json.Valid(value) {
		return invalid("value", "must be valid JSON of at most %d bytes", MaxSharedValue)
	}
	var f effects
	c.mu.Lock()
	if c.state != stateRunning {
		c.mu.Unlock()
		return ErrClosed
	}
	s := c.swarms[swarmID]
	if s == nil {
		c.mu.Unlock()
		return &NotFoundError{SwarmID: swarmID}
	}
	if _, ok := s.SharedState[key]; !ok && len(s.SharedState) >= maxSharedKeys {
		c.mu.Unlock()
		return invalid("key", "the shared state already has %d keys, the limit", maxSharedKeys)
	}
	s.SharedState[key] = slices.Clone(value)
	c.saveLocked(s, c.cfg.Now(), &f)
	c.mu.Unlock()
	c.run(ctx, f, false)
	return nil
}

// Get returns a copy of the swarm with this id.
func (c *Coordinator) Get(swarmID string) (Swarm, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.swarms[swarmID]; s != nil {
		return s.Clone(), true
	}
	return Swarm{}, false
}

// List returns copies of every swarm held, oldest first.
func (c *Coordinator) List() []Swarm {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Swarm, 0, len(c.swarms))
	for _, s := range c.sortedLocked() {
		out = append(out, s.Clone())
	}
	return out
}

// recruitMillis is d in whole milliseconds, rounded up: a positive d never
// becomes 0, which a swarm's RecruitTimeoutMs reads as "the default".
func recruitMillis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}
