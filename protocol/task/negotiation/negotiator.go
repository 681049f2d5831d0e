package negotiation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// DefaultRetention is how long finished (non-pending) records are kept when
// Config.Retention is zero.
const DefaultRetention = 7 * 24 * time.Hour

// pruneInterval bounds how long the deadline goroutine sleeps, so that old
// records are pruned even when nothing is pending.
const pruneInterval = time.Hour

// Config configures a [Negotiator]. Post is required; the rest have defaults.
type Config struct {
	// Factory builds the envelopes. Nil means envelope.NewFactory() with
	// Now as its clock.
	Factory *envelope.Factory
	// Post routes an envelope from a local agent (the router's Post). It
	// returns once the envelope is queued, or an error that keeps its code
	// (ESCALATION_REQUIRED, TIER_VIOLATION, AGENT_NOT_FOUND, ...). It may
	// deliver to a Handle of this same Negotiator before it returns.
	Post func(ctx context.Context, env *envelope.Envelope) error
	// Store persists the records. Nil means an in-memory [MemKV]: records
	// then do not survive a restart.
	Store KV
	// Now is the clock for deadlines and record times. Nil means time.Now.
	Now func() time.Time
	// Emit receives every [Event], synchronously: it must not block. Nil
	// drops them.
	Emit func(Event)
	// Retention is how long a finished record is kept after its last
	// change. Zero means [DefaultRetention]; negative keeps records forever.
	Retention time.Duration
}

// ProposeOptions are the optional parts of a proposal.
type ProposeOptions struct {
	// Justification goes in metadata.escalationJustification: required
	// by the tier rules for a proposal from L2 or L3 to L0 or L1.
	Justification string
	// ByCapability routes the proposal to an agent that has the capability
	// named by the `to` argument (routingHint "capability"); the first
	// agent to answer decides it.
	ByCapability bool
	// Tag is a local label stored in the [Record] (not sent), for callers
	// that need to find their proposals among the outcomes.
	Tag string
}

// Decision is an automatic answer to a received proposal, returned by a
// [ProposalHandler].
type Decision struct {
	// Accept selects accept (with EstimatedCompletionMs) or reject (with
	// Reason and the optional Alternative agent).
	Accept                bool
	EstimatedCompletionMs int64
	Reason                string
	Alternative           string
}

// AcceptWith returns a Decision to accept, estimating the task to take
// estimatedCompletionMs milliseconds.
func AcceptWith(estimatedCompletionMs int64) *Decision {
	return &Decision{Accept: true, EstimatedCompletionMs: estimatedCompletionMs}
}

// RejectWith returns a Decision to reject with a reason code and an optional
// alternative agent.
func RejectWith(reason, alternative string) *Decision {
	return &Decision{Reason: reason, Alternative: alternative}
}

// ProposalHandler is told of each proposal received by a local agent. It may
// return a Decision to answer at once, or nil to leave the proposal pending
// for a later [Negotiator.Accept] or [Negotiator.Reject]. It runs on the
// goroutine that called Handle and must return quickly.
type ProposalHandler func(ctx context.Context, r Record) *Decision

type state int

const (
	stateNew state = iota
	stateRunning
	stateClosed
)

type entry struct {
	rec  Record
	busy bool // a local answer is being sent
}

type sub[F any] struct {
	id uint64
	fn F
}

// Negotiator tracks the task proposals of the local agents of one node: those
// they send and those they receive. It is safe for concurrent use; one mutex
// guards its records, and no callback runs while it is held.
type Negotiator struct {
	cfg  Config
	kick chan struct{} // wakes the deadline goroutine; buffered 1
	wg   sync.WaitGroup

	mu        sync.Mutex
	state     state
	cancel    context.CancelFunc
	recs      map[string]*entry // by recordKey(direction, proposalID)
	nextSub   uint64
	proposals []sub[ProposalHandler]
	outcomes  []sub[func(Record)]
}

// New returns a Negotiator; it starts nothing. It fails only when Post is
// missing.
func New(cfg Config) (*Negotiator, error) {
	if cfg.Post == nil {
		return nil, errors.New("negotiation: Config.Post is required: pass the router's Post")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Factory == nil {
		cfg.Factory = &envelope.Factory{Now: cfg.Now, NewID: envelope.NewID}
	}
	if cfg.Store == nil {
		cfg.Store = NewMemKV()
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	return &Negotiator{cfg: cfg, kick: make(chan struct{}, 1), recs: map[string]*entry{}}, nil
}

// effects collects what to do once the lock is released.
type effects struct {
	events   []Event
	outcomes []Record // sent proposals that were decided
}

// Start loads the stored records, times out at once every pending proposal
// whose deadline has passed (calling the outcome handlers registered so
// far), and starts the deadline goroutine, which runs until Close or until
// ctx ends. Unreadable stored records are skipped with an EvtStoreFailed
// event. Start may be called once.
func (n *Negotiator) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.state != stateNew {
		n.mu.Unlock()
		return errors.New("negotiation: Start called twice or after Close")
	}
	var fx effects
	err := n.cfg.Store.ForEach(Bucket, func(key string, val []byte) error {
		var r Record
		if err := json.Unmarshal(val, &r); err != nil || r.ProposalID == "" || r.key() != key {
			fx.events = append(fx.events, n.event(EvtStoreFailed, Record{ProposalID: key}, func(e *Event) {
				e.Detail = fmt.Sprintf("stored record %q is unreadable and was skipped (err %v)", key, err)
			}))
			return nil
		}
		n.recs[key] = &entry{rec: r}
		return nil
	})
	if err != nil {
		n.mu.Unlock()
		return fmt.Errorf("negotiation: load proposals from the store: %w", err)
	}
	ctx, n.cancel = context.WithCancel(ctx)
	n.state = stateRunning
	n.expireLocked(n.cfg.Now(), &fx)
	n.mu.Unlock()
	n.deliver(fx)
	n.wg.Go(func() { n.loop(ctx) })
	return nil
}

// Close stops the deadline goroutine and waits for it. Records stay in the
// store. Close is idempotent and safe before Start; a closed Negotiator
// returns [ErrClosed] from every operation.
func (n *Negotiator) Close() error {
	n.mu.Lock()
	n.state = stateClosed
	cancel := n.cancel
	n.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	n.wg.Wait()
	return nil
}

// loop fires deadlines and prunes old records until ctx ends.
func (n *Negotiator) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := n.tick()
		timer.Reset(max(next.Sub(n.cfg.Now()), time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		case <-timer.C:
		}
	}
}

// tick expires what is due and returns when to look again.
func (n *Negotiator) tick() time.Time {
	var fx effects
	n.mu.Lock()
	now := n.cfg.Now()
	n.expireLocked(now, &fx)
	n.pruneLocked(now, &fx)
	next := now.Add(pruneInterval)
	for _, e := range n.recs {
		if e.rec.Status == StatusPending && !e.busy {
			if d := e.rec.Deadline(); d.Before(next) {
				next = d
			}
		}
	}
	n.mu.Unlock()
	n.deliver(fx)
	return next
}

func (n *Negotiator) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// expireLocked times out every pending record whose deadline is at or before
// now (except received ones being answered right now).
func (n *Negotiator) expireLocked(now time.Time, fx *effects) {
	ms := now.UnixMilli()
	keys := make([]string, 0)
	for k, e := range n.recs {
		if e.rec.Status == StatusPending && !e.busy && ms >= e.rec.Proposal.DeadlineMs {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		n.timeOutLocked(n.recs[k], now, fx)
	}
}

func (n *Negotiator) timeOutLocked(e *entry, now time.Time, fx *effects) {
	e.rec.Status = StatusTimedOut
	e.rec.UpdatedAt = now.UnixMilli()
	n.persistLocked(e.rec, fx)
	fx.events = append(fx.events, n.event(EvtProposalTimedOut, e.rec, func(ev *Event) {
		ev.Code = CodeProposalTimeout
		ev.Detail = (&TimeoutError{ProposalID: e.rec.ProposalID, DeadlineMs: e.rec.Proposal.DeadlineMs}).Error()
	}))
	if e.rec.Direction == Sent {
		fx.outcomes = append(fx.outcomes, e.rec.clone())
	}
}

// pruneLocked forgets finished records older than the retention.
func (n *Negotiator) pruneLocked(now time.Time, fx *effects) {
	if n.cfg.Retention < 0 {
		return
	}
	cut := now.Add(-n.cfg.Retention).UnixMilli()
	for k, e := range n.recs {
		if e.rec.Terminal() && e.rec.UpdatedAt < cut {
			delete(n.recs, k)
			if err := n.cfg.Store.Delete(Bucket, k); err != nil {
				fx.events = append(fx.events, n.storeFailed(e.rec, err))
			}
		}
	}
}

func (n *Negotiator) persistLocked(r Record, fx *effects) {
	if err := n.put(r); err != nil {
		fx.events = append(fx.events, n.storeFailed(r, err))
	}
}

func (n *Negotiator) put(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return n.cfg.Store.Put(Bucket, r.key(), b)
}

func (n *Negotiator) storeFailed(r Record, err error) Event {
	return n.event(EvtStoreFailed, r, func(e *Event) {
		e.Detail = "store: " + err.Error() + "; the record is kept in memory but may be lost on restart: check the data dir"
	})
}

func (n *Negotiator) event(t EventType, r Record, f func(*Event)) Event {
	ev := Event{
		Type: t, Time: n.cfg.Now(), ProposalID: r.ProposalID, Thread: r.Thread, Direction: r.Direction,
		Proposer: r.Proposer, Target: r.Target, Status: r.Status,
	}
	if f != nil {
		f(&ev)
	}
	return ev
}

// deliver runs the effects: events first, then outcome handlers. Called
// without the lock.
func (n *Negotiator) deliver(fx effects) {
	if n.cfg.Emit != nil {
		for _, ev := range fx.events {
			n.cfg.Emit(ev)
		}
	}
	if len(fx.outcomes) == 0 {
		return
	}
	n.mu.Lock()
	subs := slices.Clone(n.outcomes)
	n.mu.Unlock()
	for _, r := range fx.outcomes {
		for _, s := range subs {
			s.fn(r.clone())
		}
	}
}

func (n *Negotiator) emit(ev Event) {
	if n.cfg.Emit != nil {
		n.cfg.Emit(ev)
	}
}

// Propose sends a task proposal from local agent `from` to agent `to` (or,
// with opts.ByCapability, to an agent with capability `to`) and tracks it.
// An empty p.ProposerAgentID is set to from; p.DeadlineMs must be in the
// future. It returns the stored [Record], whose ProposalID and Thread are
// the proposal envelope's ID. When Post fails the error is returned with its
// code (for example ESCALATION_REQUIRED: set opts.Justification) together
// with the record, which is not kept.
func (n *Negotiator) Propose(ctx context.Context, from, to string, p Proposal, opts ProposeOptions) (Record, error) {
	if err := checkAgent("from", from, false); err != nil {
		return Record{}, err
	}
	if opts.ByCapability {
		if err := agentcard.CheckCapabilityID(to); err != nil {
			return Record{}, invalid("to", "%s", err.Error())
		}
	} else if err := checkAgent("to", to, false); err != nil {
		return Record{}, err
	}
	if p.ProposerAgentID == "" {
		p.ProposerAgentID = from
	} else if !SameAgent(p.ProposerAgentID, from) {
		return Record{}, invalid("proposerAgentId", "names %s but the proposal is sent by %s: leave it empty",
			wirecodec.Quote(p.ProposerAgentID), wirecodec.Quote(from))
	}
	p.RequiredCapabilities = slices.Clone(p.RequiredCapabilities)
	if p.RequiredCapabilities == nil {
		p.RequiredCapabilities = []string{}
	}
	if err := p.Validate(); err != nil {
		return Record{}, err
	}
	now := n.cfg.Now()
	if p.DeadlineMs <= now.UnixMilli() {
		return Record{}, invalid("deadlineMs", "%s is not in the future: give the target time to answer",
			time.UnixMilli(p.DeadlineMs).UTC().Format(time.RFC3339Nano))
	}
	env, err := n.cfg.Factory.New(from, to, envelope.TypeTaskProposal, p)
	if err != nil {
		return Record{}, fmt.Errorf("negotiation: build proposal from %s to %s: %w", from, to, err)
	}
	if opts.Justification != "" || opts.ByCapability {
		env.Metadata = &envelope.Metadata{EscalationJustification: opts.Justification}
		if opts.ByCapability {
			env.Metadata.RoutingHint = envelope.RoutingHintCapability
		}
		if err := env.Validate(); err != nil {
			return Record{}, fmt.Errorf("negotiation: build proposal from %s to %s: %w", from, to, err)
		}
	}
	rec := Record{
		ProposalID: env.ID, Thread: env.ThreadID(), Direction: Sent, Proposer: from, Target: to,
		ByCapability: opts.ByCapability, Tag: opts.Tag, Proposal: p, Status: StatusPending,
		CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli(),
	}
	key := rec.key()
	n.mu.Lock()
	if n.state != stateRunning {
		n.mu.Unlock()
		return Record{}, ErrClosed
	}
	if err := n.put(rec); err != nil {
		n.mu.Unlock()
		return Record{}, fmt.Errorf("negotiation: store proposal %s: %w", rec.ProposalID, err)
	}
	n.recs[key] = &entry{rec: rec} // before Post: the answer may arrive before Post returns
	n.mu.Unlock()
	n.wake()
	if err := n.cfg.Post(ctx, env); err != nil {
		n.mu.Lock()
		if e := n.recs[key]; e != nil && e.rec.Status == StatusPending {
			delete(n.recs, key)
			_ = n.cfg.Store.Delete(Bucket, key) // best effort: a leftover times out at its deadline
		}
		n.mu.Unlock()
		return rec.clone(), fmt.Errorf("negotiation: send proposal from %s to %s: %w", from, to, err)
	}
	n.emit(n.event(EvtProposalSent, rec, nil))
	if cur, ok := n.Lookup(rec.ProposalID, Sent); ok {
		return cur, nil
	}
	return rec.clone(), nil
}

// Handle takes an envelope delivered to a local agent. It handles
// task-proposal envelopes (recorded as received; the proposal handlers are
// called and the first Decision one returns is sent), and task-accept and
// task-reject envelopes answering a proposal this node sent (same thread).
// handled is false for anything else, which the caller routes elsewhere.
// An error says why a handled envelope was refused or ignored; it needs no
// answer (a malformed proposal is rejected with reason INVALID_PROPOSAL).
func (n *Negotiator) Handle(ctx context.Context, env *envelope.Envelope) (handled bool, err error) {
	if env == nil {
		return false, nil
	}
	switch env.Type {
	case envelope.TypeTaskProposal:
		return true, n.handleProposal(ctx, env)
	case envelope.TypeTaskAccept, envelope.TypeTaskReject:
		return n.handleAnswer(env)
	}
	return false, nil
}

func (n *Negotiator) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state == stateRunning
}

func (n *Negotiator) handleProposal(ctx context.Context, env *envelope.Envelope) error {
	if !n.running() {
		return ErrClosed
	}
	p, err := DecodeProposal(env.Payload)
	if err == nil && !SameAgent(p.ProposerAgentID, env.Sender) {
		err = invalid("proposerAgentId", "names %s but the envelope comes from %s",
			wirecodec.Quote(p.ProposerAgentID), wirecodec.Quote(env.Sender))
	}
	now := n.cfg.Now()
	if err != nil {
		n.emit(Event{
			Type: EvtProposalInvalid, Time: now, ProposalID: env.ID, Thread: env.ThreadID(), Direction: Received,
			Proposer: env.Sender, Target: env.Recipient, Code: CodeInvalidProposal, Detail: err.Error(),
		})
		// Answer at once so the proposer need not wait for a deadline it
		// may not even have sent; if this fails the proposer times out.
		if rej, berr := n.cfg.Factory.New(env.Recipient, env.Sender, envelope.TypeTaskReject,
			Reject{Reason: ReasonInvalidProposal}); berr == nil {
			rej.CorrelationID = env.ThreadID()
			_ = n.cfg.Post(ctx, rej)
		}
		return err
	}
	rec := Record{
		ProposalID: env.ID, Thread: env.ThreadID(), Direction: Received, Proposer: env.Sender,
		Target: env.Recipient, Proposal: p, Status: StatusPending,
		CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli(),
	}
	var fx effects
	n.mu.Lock()
	if n.state != stateRunning {
		n.mu.Unlock()
		return ErrClosed
	}
	if _, dup := n.recs[rec.key()]; dup {
		n.mu.Unlock()
		return nil // delivered twice: the first delivery was handled
	}
	expired := now.UnixMilli() >= p.DeadlineMs
	e := &entry{rec: rec}
	n.recs[rec.key()] = e
	fx.events = append(fx.events, n.event(EvtProposalReceived, rec, nil))
	if expired {
		n.timeOutLocked(e, now, &fx)
	} else {
		n.persistLocked(rec, &fx)
	}
	handlers := slices.Clone(n.proposals)
	n.mu.Unlock()
	n.wake()
	n.deliver(fx)
	if expired {
		return &TimeoutError{ProposalID: rec.ProposalID, DeadlineMs: p.DeadlineMs}
	}
	var decision *Decision
	for _, h := range handlers {
		if d := h.fn(ctx, rec.clone()); d != nil && decision == nil {
			decision = d
		}
	}
	if decision == nil {
		return nil
	}
	if err := n.answer(ctx, rec.ProposalID, *decision); err != nil {
		return fmt.Errorf("negotiation: automatic answer to proposal %s: %w", rec.ProposalID, err)
	}
	return nil
}

func (n *Negotiator) handleAnswer(env *envelope.Envelope) (bool, error) {
	if env.CorrelationID == "" {
		return false, nil
	}
	key := recordKey(Sent, env.CorrelationID)
	n.mu.Lock()
	if n.state != stateRunning {
		n.mu.Unlock()
		return true, ErrClosed
	}
	e := n.recs[key]
	if e == nil {
		n.mu.Unlock()
		return false, nil
	}
	rec := e.rec.clone()
	n.mu.Unlock()

	accept := env.Type == envelope.TypeTaskAccept
	var acc Accept
	var rej Reject
	var err error
	if accept {
		acc, err = DecodeAccept(env.Payload)
		if err == nil && !SameAgent(acc.AcceptedBy, env.Sender) {
			err = invalid("acceptedBy", "names %s but the envelope comes from %s", wirecodec.Quote(acc.AcceptedBy), wirecodec.Quote(env.Sender))
		}
	} else {
		rej, err = DecodeReject(env.Payload)
	}
	if err == nil && !rec.ByCapability && !SameAgent(env.Sender, rec.Target) {
		err = &AttributionError{ProposalID: rec.ProposalID, Target: rec.Target, From: env.Sender}
	}
	if err != nil {
		n.emit(n.event(EvtAnswerIgnored, rec, func(ev *Event) {
			ev.From, ev.Code, ev.Detail = env.Sender, CodeOf(err), err.Error()
		}))
		return true, err
	}

	var fx effects
	n.mu.Lock()
	now := n.cfg.Now()
	e = n.recs[key]
	switch {
	case e == nil: // pruned meanwhile
		n.mu.Unlock()
		return true, nil
	case e.rec.Status == StatusPending && now.UnixMilli() >= e.rec.Proposal.DeadlineMs:
		n.timeOutLocked(e, now, &fx) // the deadline passed before the timer noticed
	}
	if e.rec.Status != StatusPending {
		var late error = &StateError{ProposalID: rec.ProposalID, Status: e.rec.Status}
		if e.rec.Status == StatusTimedOut {
			late = &TimeoutError{ProposalID: rec.ProposalID, DeadlineMs: rec.Proposal.DeadlineMs}
		}
		fx.events = append(fx.events, n.event(EvtAnswerIgnored, e.rec, func(ev *Event) {
			ev.From, ev.Code, ev.Detail = env.Sender, CodeOf(late), "late answer ("+string(env.Type)+"): "+late.Error()
		}))
		n.mu.Unlock()
		n.deliver(fx)
		return true, nil
	}
	e.rec.AnsweredBy = env.Sender
	e.rec.UpdatedAt = now.UnixMilli()
	evt := EvtProposalAccepted
	if accept {
		e.rec.Status, e.rec.AcceptedBy, e.rec.EstimatedCompletionMs = StatusAccepted, env.Sender, acc.EstimatedCompletionMs
	} else {
		e.rec.Status, e.rec.RejectionReason, e.rec.AlternativeSuggestion = StatusRejected, rej.Reason, rej.AlternativeSuggestion
		evt = EvtProposalRejected
	}
	n.persistLocked(e.rec, &fx)
	fx.events = append(fx.events, n.event(evt, e.rec, func(ev *Event) { ev.From = env.Sender }))
	fx.outcomes = append(fx.outcomes, e.rec.clone())
	n.mu.Unlock()
	n.deliver(fx)
	return true, nil
}

// Accept answers a proposal received by a local agent with a task-accept
// from that agent, in the proposal's thread, and marks it accepted.
// estimatedCompletionMs is how long the task should take, in milliseconds.
// A proposal past its deadline can no longer be accepted ([*TimeoutError]).
func (n *Negotiator) Accept(ctx context.Context, proposalID string, estimatedCompletionMs int64) error {
	return n.answer(ctx, proposalID, Decision{Accept: true, EstimatedCompletionMs: estimatedCompletionMs})
}

// Reject answers a proposal received by a local agent with a task-reject
// carrying a reason code (such as [ReasonBusy]) and optionally an
// alternative agent, and marks it rejected.
func (n *Negotiator) Reject(ctx context.Context, proposalID, reason, alternative string) error {
	return n.answer(ctx, proposalID, Decision{Reason: reason, Alternative: alternative})
}

func (n *Negotiator) answer(ctx context.Context, proposalID string, d Decision) error {
	var payload any
	t := envelope.TypeTaskReject
	n.mu.Lock()
	if n.state != stateRunning {
		n.mu.Unlock()
		return ErrClosed
	}
	e := n.recs[recordKey(Received, proposalID)]
	if e == nil {
		n.mu.Unlock()
		return &NotFoundError{ProposalID: proposalID, Direction: Received}
	}
	rec := e.rec.clone()
	if d.Accept {
		a := Accept{AcceptedBy: rec.Target, EstimatedCompletionMs: d.EstimatedCompletionMs}
		payload, t = a, envelope.TypeTaskAccept
		if err := a.Validate(); err != nil {
			n.mu.Unlock()
			return err
		}
	} else {
		r := Reject{Reason: d.Reason, AlternativeSuggestion: d.Alternative}
		payload = r
		if err := r.Validate(); err != nil {
			n.mu.Unlock()
			return err
		}
	}
	var fx effects
	now := n.cfg.Now()
	if rec.Status == StatusPending && !e.busy && now.UnixMilli() >= rec.Proposal.DeadlineMs {
		n.timeOutLocked(e, now, &fx)
		n.mu.Unlock()
		n.deliver(fx)
		return &TimeoutError{ProposalID: proposalID, DeadlineMs: rec.Proposal.DeadlineMs}
	}
	switch {
	case rec.Status == StatusTimedOut:
		n.mu.Unlock()
		return &TimeoutError{ProposalID: proposalID, DeadlineMs: rec.Proposal.DeadlineMs}
	case rec.Status != StatusPending:
		n.mu.Unlock()
		return &StateError{ProposalID: proposalID, Status: rec.Status}
	case e.busy:
		n.mu.Unlock()
		return &StateError{ProposalID: proposalID, Status: "being answered"}
	}
	e.busy = true
	n.mu.Unlock()

	env, err := n.cfg.Factory.New(rec.Target, rec.Proposer, t, payload)
	if err == nil {
		env.CorrelationID = rec.Thread
		if err = env.Validate(); err == nil {
			err = n.cfg.Post(ctx, env)
		}
	}
	n.mu.Lock()
	e.busy = false
	if err != nil {
		n.mu.Unlock()
		n.wake() // its deadline may be due
		return fmt.Errorf("negotiation: send %s for proposal %s to %s: %w", t, proposalID, rec.Proposer, err)
	}
	e.rec.AnsweredBy = rec.Target
	e.rec.UpdatedAt = n.cfg.Now().UnixMilli()
	evt := EvtProposalAccepted
	if d.Accept {
		e.rec.Status, e.rec.AcceptedBy, e.rec.EstimatedCompletionMs = StatusAccepted, rec.Target, d.EstimatedCompletionMs
	} else {
		e.rec.Status, e.rec.RejectionReason, e.rec.AlternativeSuggestion = StatusRejected, d.Reason, d.Alternative
		evt = EvtProposalRejected
	}
	n.persistLocked(e.rec, &fx)
	fx.events = append(fx.events, n.event(evt, e.rec, nil))
	n.mu.Unlock()
	n.deliver(fx)
	return nil
}

// Get returns the proposal with this id: the one a local agent sent if
// there is one, else the one a local agent received (a proposal between two
// local agents has both; see [Negotiator.Lookup]).
func (n *Negotiator) Get(proposalID string) (Record, bool) {
	if r, ok := n.Lookup(proposalID, Sent); ok {
		return r, true
	}
	return n.Lookup(proposalID, Received)
}

// Lookup returns the record of proposalID in one direction.
func (n *Negotiator) Lookup(proposalID string, d Direction) (Record, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := n.recs[recordKey(d, proposalID)]; e != nil {
		return e.rec.clone(), true
	}
	return Record{}, false
}

// ListPending returns the proposals awaiting a decision: those received by
// local agents that can still be accepted (deadline not passed) and those
// sent by local agents that have no answer yet, oldest first.
func (n *Negotiator) ListPending() []Record {
	now := n.cfg.Now().UnixMilli()
	return n.list(func(r Record) bool {
		return r.Status == StatusPending && (r.Direction == Sent || now < r.Proposal.DeadlineMs)
	})
}

// List returns every record held, oldest first.
func (n *Negotiator) List() []Record { return n.list(func(Record) bool { return true }) }

func (n *Negotiator) list(keep func(Record) bool) []Record {
	n.mu.Lock()
	out := make([]Record, 0, len(n.recs))
	for _, e := range n.recs {
		if keep(e.rec) {
			out = append(out, e.rec.clone())
		}
	}
	n.mu.Unlock()
	slices.SortFunc(out, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ProposalID, b.ProposalID),
			cmp.Compare(a.Direction, b.Direction))
	})
	return out
}

// OnProposalReceived registers fn for every proposal received by a local
// agent (see [ProposalHandler]); handlers run in registration order, and the
// first non-nil Decision is sent. It returns a function that unregisters fn.
func (n *Negotiator) OnProposalReceived(fn ProposalHandler) (unsubscribe func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextSub++
	id := n.nextSub
	n.proposals = append(n.proposals, sub[ProposalHandler]{id, fn})
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.proposals = slices.DeleteFunc(n.proposals, func(s sub[ProposalHandler]) bool { return s.id == id })
	}
}

// OnOutcome registers fn for every proposal sent by a local agent that is
// decided: accepted, rejected or timed-out (the proposer's notification of
// PROPOSAL_TIMEOUT). fn gets the updated record, on the goroutine that
// decided it, and must not block. It returns a function that unregisters fn.
func (n *Negotiator) OnOutcome(fn func(Record)) (unsubscribe func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextSub++
	id := n.nextSub
	n.outcomes = append(n.outcomes, sub[func(Record)]{id, fn})
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.outcomes = slices.DeleteFunc(n.outcomes, func(s sub[func(Record)]) bool { return s.id == id })
	}
}

// NewInThread builds a later envelope of an accepted task, in its thread
// (property 24): for a proposal a local agent sent, from the proposer to the
// agent that accepted it; for one a local agent received, from that agent
// back to the proposer. The caller posts it. It fails for an unknown
// proposal and for one that is not accepted.
func (n *Negotiator) NewInThread(proposalID string, d Direction, t envelope.Type, payload any) (*envelope.Envelope, error) {
	r, ok := n.Lookup(proposalID, d)
	if !ok {
		return nil, &NotFoundError{ProposalID: proposalID, Direction: d}
	}
	if r.Status != StatusAccepted {
		return nil, &StateError{ProposalID: proposalID, Status: r.Status, Want: StatusAccepted}
	}
	from, to := r.Proposer, r.AcceptedBy
	if d == Received {
		from, to = r.Target, r.Proposer
	}
	env, err := n.cfg.Factory.New(from, to, t, payload)
	if err != nil {
		return nil, fmt.Errorf("negotiation: build %s in the thread of proposal %s: %w", t, proposalID, err)
	}
	env.CorrelationID = r.Thread
	if err := env.Validate(); err != nil {
		return nil, fmt.Errorf("negotiation: build %s in the thread of proposal %s: %w", t, proposalID, err)
	}
	return env, nil
}
