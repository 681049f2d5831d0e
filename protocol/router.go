package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

var log = golog.Logger("nova/protocol")

// Handler answers envelopes addressed to one local agent. For a request, a
// non-nil reply becomes the payload of the response envelope (a
// *envelope.Envelope is sent as is), and an error becomes an "error"
// envelope carrying {"code", "message"}. For other types the results are
// only logged. Handlers run on goroutines owned by the Router, bounded in
// number, each under a context that ends with the request timeout or Close.
type Handler func(ctx context.Context, env *envelope.Envelope) (reply any, err error)

// ErrorPayload is the payload of an "error" envelope.
type ErrorPayload struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Router sends and receives envelopes for the agents of one node: in memory
// between local agents, over one long-lived /nova/a2a/1.0.0 stream per peer
// otherwise. Every delivery, sent or received, passes the tier and sandbox
// rules on this node.
//
// Lock order: see the package doc.
type Router struct {
	h       host.Host
	self    peer.ID
	selfStr string // self.String(), computed once: base58 is not free
	reg     *agentcard.Registry
	key     crypto.PrivKey
	o       options
	log     *zap.SugaredLogger
	opener  *agentcard.Opener // the signed cards of hellos, verified once per distinct card

	mu            orderedMutex[lockRouter]
	started       bool
	closed        bool
	running       atomic.Bool                        // started and not closed: read on every message without mu
	handlers      atomic.Pointer[map[string]Handler] // copied on write (Handle), read on every delivery
	outByPair     map[agentPair]*outChannel          // current channel of each pair
	capSeed       maphash.Seed                       // salts the tie-break of capability sends (byCapability)
	announceSoon  chan struct{}                      // AnnounceSoon's requests to helloLoop (one pending at most)
	outByID       map[string]*outChannel
	inChans       map[string]*inChannel  // "<peerID>/<channel id>"
	inByPeer      map[peer.ID]*peerChans // inChans by peer (see maxInChannelsPerPeer)
	watermarks    map[string]uint64      // persisted inbound watermarks, loaded at Start
	out           map[peer.ID]*outStream
	opening       map[peer.ID]chan struct{}
	announced     uint64                                   // Announce calls so far, under mu: a stream opening meanwhile greets again (see stream)
	quicOut       chan struct{}                            // an outbound stream on QUIC was added: wakes a sleeping livenessLoop
	regreet       *bounded[peer.ID, time.Duration]         // last re-greeting delay per peer (see regreetLater)
	regreetTimers map[peer.ID]*time.Timer                  // pending re-greetings, at most one per peer
	unreached     *bounded[peer.ID, time.Time]             // peers a stream could not be opened to, since last reached (see reach)
	foundAt       *bounded[peer.ID, time.Time]             // when the peer finder was last asked for a peer (freshAddrs)
	lastAddrs     *bounded[peer.ID, []multiaddr.Multiaddr] // where each peer was last reached (rememberAddrs)
	inbound       map[network.Stream]*inStream             // the writing half of each inbound stream
	watermarksAt  time.Time                                // last write of watermarks alone (persist; its callers do not overlap)
	persistIdle   atomic.Bool                              // the persister sleeps until persistKick (see persistLoop)
	persistUntil  atomic.Int64                             // when idle, the unix nanoseconds its timer is set for (0: none; see wakePersisterBy)
	outboxLen     atomic.Int64                             // envelopes pending on every outbound channel (maxOutbox)
	runMu         sync.Mutex
	runningReqs   map[runKey]*handlerCtx // requests whose handler runs here (see cancel.go); as many as handler slots
	peerQueued    sync.Map               // peer.ID -> *atomic.Int64: envelopes pending to that peer (maxPeerPending)
	journalWarned atomic.Bool            // a journal record was left out since the last checkpoint
	// journalRelease frees the journal's old part once a full persist
	// succeeds (the persister's only).
	journalRelease  func()
	journalSyncedAt time.Time                 // the persister's last journal Sync
	persistKick     chan struct{}             // wakes an idle persister; holds one
	working         atomic.Int64              // channel work under way (accept's hand-over, work): see ackDueAtClose
	workIdle        chan struct{}             // working reached zero after the Router's ctx ended; holds one
	pmu             orderedMutex[lockPending] // guards pending and expiry: taken for every request and answer
	pending         map[pendingKey]*pendingReq
	pendingIDs      map[string]pendingKey // requests inside a thread, by their own ID
	expiry          expiry
	answerable      askSet                    // every request/proposal sent or received
	peerIDs         *bounded[string, peer.ID] // card host string -> decoded peer ID
	seen            seenSet                   // envelopes delivered here
	answered        seenSet                   // questions sent from here whose answer came (they arrived, acked or not)
	sealed          map[string]sealedCard
	rosterMu        orderedMutex[lockRoster] // orders roster snapshots: a higher rosterSeq is a later snapshot
	rosterSeq       uint64
	rosterBoot      uint64                        // random per Router: a restarted peer's sequence starts again
	rosters         *bounded[peer.ID, rosterMark] // the newest roster applied per peer (see retainCards)
	threads         *envelope.Threads
	routes          routeCache // resolutions of direct envelopes (see resolve)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{} // slots of local and broadcast handler calls
	chSem  chan struct{} // slots of handler calls from channels (see deliverSync)
	jobs   chan func()   // idle workers take work here (see goWork)
	sub    event.Subscription
	bc     *broadcaster
	held   heldBroadcasts           // broadcasts waiting for their sender's card (see holdForCard)
	locals atomic.Pointer[localSet] // the local agents a broadcast goes to (see localRecipients)
}

type agentPair struct{ from, to string }

// pendingKey names a request waiting for its answer: its thread and the
// pair of agents, asker first. An answer carries the thread as its
// correlation ID (Factory.Reply), not the ID of the request it answers, so
// this is what an answer can be matched by. A thread's first request is
// the thread (its ID), so its answer is exactly its own; a request inside
// an existing thread is matched by the thread and the pair, or by an
// answer that names the request's ID itself (see awaitedLocked).
type pendingKey struct {
	thread string
	agentPair
}

// answerKey is the pendingKey a received answer env matches.
func answerKey(env *envelope.Envelope) pendingKey {
	return pendingKey{thread: env.CorrelationID, agentPair: agentPair{from: env.Recipient, to: env.Sender}}
}

// awaitedLocked returns the key and the waiting request that the received
// answer env answers, if any: by thread and pair, or else a request inside
// a thread whose ID env names as its correlation ID (an agent that built its
// own answer may have done so). Caller holds pmu.
func (r *Router) awaitedLocked(env *envelope.Envelope) (pendingKey, *pendingReq) {
	key := answerKey(env)
	if pr := r.pending[key]; pr != nil {
		return key, pr
	}
	if k, ok := r.pendingIDs[env.CorrelationID]; ok && k.agentPair == key.agentPair {
		return k, r.pending[k]
	}
	return key, nil
}

type pendingReq struct {
	id       string         // the request's envelope ID (a delivery failure names it)
	done     chan reqResult // the answer, or the failure to deliver the request
	deadline time.Time      // when the wait ends without an answer; zero: never
}

// end tells the waiting requester how its request ended, without ever
// blocking (done holds three: the answer, sent once by whoever removes the
// request from pending, never waits behind a failure report or the
// expiry). Called under Router.pmu while pr is in pending, and only then:
// once its requester took it out, pr goes back to pendingPool.
func (pr *pendingReq) end(res reqResult) {
	select {
	case pr.done <- res:
	default:
	}
}

// pendingPool recycles pendingReqs and their channels, two allocations per
// request otherwise.
var pendingPool = sync.Pool{New: func() any { return &pendingReq{done: make(chan reqResult, 3)} }}

// reqResult ends a pending request.
type reqResult struct {
	env *envelope.Envelope
	err error
}

type sealedCard struct {
	revision uint64
	data     []byte
}

// New returns a Router for host h whose local agents are the local cards of
// reg. It starts nothing: call Start.
func New(h host.Host, reg *agentcard.Registry, opts ...Option) (*Router, error) {
	if h == nil || reg == nil {
		return nil, errors.New("protocol: New needs a host and a registry")
	}
	if reg.Self() != h.ID() {
		return nil, fmt.Errorf("protocol: registry belongs to %s, host is %s", reg.Self(), h.ID())
	}
	o := defaults()
	for i, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("protocol: option %d: %w", i, err)
		}
	}
	key := h.Peerstore().PrivKey(h.ID())
	if key == nil {
		return nil, errors.New("protocol: host has no private key in its peerstore")
	}
	return &Router{
		h:             h,
		opener:        agentcard.NewOpener(0),
		self:          h.ID(),
		selfStr:       h.ID().String(),
		peerIDs:       newBounded[string, peer.ID](4096),
		reg:           reg,
		key:           key,
		o:             o,
		log:           log.With("self", shortID(h.ID())),
		outByPair:     make(map[agentPair]*outChannel),
		capSeed:       maphash.MakeSeed(),
		announceSoon:  make(chan struct{}, 1),
		outByID:       make(map[string]*outChannel),
		inChans:       make(map[string]*inChannel),
		inByPeer:      make(map[peer.ID]*peerChans),
		watermarks:    make(map[string]uint64),
		out:           make(map[peer.ID]*outStream),
		opening:       make(map[peer.ID]chan struct{}),
		regreet:       newBounded[peer.ID, time.Duration](4096),
		regreetTimers: make(map[peer.ID]*time.Timer),
		unreached:     newBounded[peer.ID, time.Time](4096),
		foundAt:       newBounded[peer.ID, time.Time](4096),
		lastAddrs:     newBounded[peer.ID, []multiaddr.Multiaddr](4096),
		inbound:       make(map[network.Stream]*inStream),
		pending:       make(map[pendingKey]*pendingReq),
		pendingIDs:    make(map[string]pendingKey),
		persistKick:   make(chan struct{}, 1),
		quicOut:       make(chan struct{}, 1),
		workIdle:      make(chan struct{}, 1),
		answerable:    newAskSet(16384),
		seen:          newSeenSet(65536),
		answered:      newSeenSet(4096),
		sealed:        make(map[string]sealedCard),
		rosterBoot:    rand.Uint64() | 1, // never 0, which marks a roster without order
		rosters:       newBounded[peer.ID, rosterMark](4096),
		threads:       envelope.NewThreads(10000, envelope.DefaultThreadBytes),
		sem:           make(chan struct{}, o.concurrency),
		chSem:         make(chan struct{}, o.concurrency),
		jobs:          make(chan func()),
	}, nil
}

// Start registers the stream handler, follows identify to greet new peers
// with this node's cards, and re-announces them periodically. ctx bounds
// nothing after Start returns; Close stops everything.
func (r *Router) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrChannelClosed
	}
	if r.started {
		return nil
	}
	if j := r.o.journal; j != nil {
		// What an earlier run journaled reaches the Store first.
		if n, err := ReplayJournal(r.o.journalRecs, r.o.store); err != nil {
			return err
		} else if n > 0 {
			r.log.Infow("journal replayed: envelopes and watermarks of the last run kept", "records", n)
		}
		r.o.journalRecs = nil
		if err := j.Reset(); err != nil {
			return fmt.Errorf("protocol: reset the journal: %w", err)
		}
	}
	marks, err := r.o.store.LoadWatermarks()
	if err != nil {
		return fmt.Errorf("protocol: load channel watermarks: %w", err)
	}
	r.watermarks = marks
	outbox, err := r.o.store.LoadOutbox()
	if err != nil {
		return fmt.Errorf("protocol: load outbox: %w", err)
	}
	sub, err := r.h.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
	if err != nil {
		return fmt.Errorf("protocol: subscribe to identify events: %w", err)
	}
	r.sub = sub
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.h.SetStreamHandler(IDA2A, r.handleStream)
	r.started = true
	if err := r.startBroadcastLocked(); err != nil {
		r.h.RemoveStreamHandler(IDA2A)
		r.cancel()
		_ = r.sub.Close()
		r.started, r.closed = false, true
		return err
	}
	r.running.Store(true)
	r.wg.Go(r.identifyLoop)
	r.wg.Go(r.helloLoop)
	r.wg.Go(r.persistLoop)
	r.wg.Go(r.livenessLoop)
	for _, oc := range outbox {
		r.restoreLocked(oc)
	}
	// Peers connected before Start get greeted too.
	for _, p := range r.h.Network().Peers() {
		r.greetLocked(p)
	}
	return nil
}

// Close removes the stream handler, resets every stream, fails pending
// requests and waits for every goroutine the Router started. It is
// idempotent and safe before Start.
func (r *Router) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.running.Store(false)
	started := r.started
	outs := make([]*outStream, 0, len(r.out))
	for _, s := range r.out {
		outs = append(outs, s)
	}
	ins := make([]*inStream, 0, len(r.inbound))
	for _, s := range r.inbound {
		ins = append(ins, s)
	}
	chans := make([]*outChannel, 0, len(r.outByID))
	for _, c := range r.outByID {
		chans = append(chans, c)
	}
	for p, t := range r.regreetTimers {
		t.Stop()
		delete(r.regreetTimers, p)
	}
	r.mu.Unlock()
	if !started {
		return nil
	}
	for _, c := range chans {
		c.stop()
	}
	r.h.RemoveStreamHandler(IDA2A)
	r.cancel()
	r.stopExpiry()
	_ = r.sub.Close()
	r.stopBroadcast()
	for _, s := range outs {
		s.fail(ErrChannelClosed)
	}
	r.ackDueAtClose(ins)
	for _, s := range ins {
		if !s.closedAtClose.Load() {
			_ = s.st.Reset()
		}
	}
	r.wg.Wait()
	// Everything is still now: keep what is unacknowledged, and the watermarks.
	_, _, err := r.persist(true)
	if err == nil && r.o.journal != nil {
		err = r.o.journal.Reset() // the Store holds it all
	}
	return err
}

// spawn runs f on a goroutine the Router owns, unless it is closing.
func (r *Router) spawn(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || !r.started {
		return false
	}
	r.wg.Go(f)
	return true
}

// Handle sets the handler of local agent id (replacing any previous one).
func (r *Router) Handle(id string, h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hs := make(map[string]Handler)
	if old := r.handlers.Load(); old != nil {
		maps.Copy(hs, *old)
	}
	if h == nil {
		delete(hs, id)
	} else {
		hs[id] = h
	}
	r.handlers.Store(&hs)
}

// handler returns the handler of local agent id, or nil.
func (r *Router) handler(id string) Handler {
	if hs := r.handlers.Load(); hs != nil {
		return (*hs)[id]
	}
	return nil
}

// Thread returns the envelopes of the correlation thread id seen by this
// router, in timestamp order: the most recent of the last 10,000 envelopes
// of any thread that fit in envelope.DefaultThreadBytes of encoding. They
// are decoded anew: the caller owns them.
func (r *Router) Thread(id string) []*envelope.Envelope {
	return r.threads.Thread(id)
}

// Announce sends this node's current cards to every connected peer. Call it
// after registering or changing a local card.
func (r *Router) Announce() {
	r.mu.Lock()
	r.announced++
	outs := make([]*outStream, 0, len(r.out))
	for _, s := range r.out {
		outs = append(outs, s)
	}
	r.mu.Unlock()
	frames, err := r.helloFrames()
	if err != nil {
		r.log.Warnw("cannot seal local cards", "err", err)
		return
	}
	for _, s := range outs {
		_ = s.write(frames, false)
	}
}

// Send routes one envelope from a local agent and reports the outcome as the
// seed's RoutingResult. The envelope is copied; the sender must be a local
// agent. A remote delivery is done when the receiving node acknowledged it,
// after its own policy checks.
func (r *Router) Send(ctx context.Context, env *envelope.Envelope) (RoutingResult, error) {
	return r.send(ctx, env, true)
}

// send routes env; a remote envelope is waited for (its acknowledgement)
// only when wait is set; otherwise failures reach a waiting Request through
// emitFailure.
func (r *Router) send(ctx context.Context, env *envelope.Envelope, wait bool) (RoutingResult, error) {
	start := clock.Now()
	if env == nil {
		return RoutingResult{Path: PathLocal}, &envelope.InvalidError{Field: "envelope", Reason: "nil"}
	}
	env = cloneForSend(env)
	if env.Recipient == envelope.Broadcast {
		return r.sendBroadcast(ctx, env, start)
	}
	from, to, err := r.prepare(env)
	return r.dispatch(ctx, env, from, to, err, wait, start)
}

// dispatch delivers env, which prepare returned with from, to and err (a
// failure is only reported), and emits the routing decision and the
// message-sent or error events.
func (r *Router) dispatch(ctx context.Context, env *envelope.Envelope, from, to agentcard.Card, err error, wait bool, start time.Time) (RoutingResult, error) {
	res := RoutingResult{Path: r.pathTo(to), TargetAgentID: env.Recipient}
	if err == nil {
		// Recorded in the thread index before it leaves (sendChannel,
		// deliverLocal): its answer may arrive before the ack.
		if to.Host == r.selfStr {
			err = r.deliverLocal(env, from, to, r.self)
		} else {
			done, report := noWait, sentReport{true, from.Tier, to.Tier}
			if wait {
				// message-sent below, once acknowledged; or by the channel
				// (report.on), if it tells this caller PEER_AWAY
				done, report = nil, sentReport{false, from.Tier, to.Tier}
			}
			err = r.sendChannel(ctx, env.Sender, to, env, true, start, done, report)
		}
	}
	reported := false
	if rep, ok := err.(*channelReported); ok {
		err, reported = rep.error, true
	}
	now := clock.Now()
	res.LatencyMs = float64(now.Sub(start).Microseconds()) / 1000
	ev := Event{
		Type: EvtRouteDecided, Time: now, EnvelopeID: env.ID, Sender: env.Sender,
		Recipient: env.Recipient, MessageType: env.Type, Path: res.Path, Latency: now.Sub(start),
		Success: err == nil, SourceTier: -1, TargetTier: -1,
	}
	if from.ID != "" {
		ev.SourceTier = int(from.Tier)
	}
	if to.ID != "" {
		ev.TargetTier = int(to.Tier)
	}
	if err != nil {
		res.Error = fmt.Sprintf("%s: %v", CodeOf(err), err)
		ev.Code, ev.Detail = CodeOf(err), err.Error()
		r.o.sink.Emit(ev)
		if !reported {
			ev.Type = EvtErrorRaised
			r.o.sink.Emit(ev)
		}
		return res, err
	}
	res.Delivered = true
	r.o.sink.Emit(ev)
	if res.Path == PathRemote && !wait {
		// Only queued: its channel emits message-sent on acknowledgement,
		// or an error if it never arrives, as for Post.
		return res, nil
	}
	ev.Type, ev.Detail = EvtMessageSent, justification(env)
	r.o.sink.Emit(ev)
	return res, nil
}

// Request sends a request-like envelope and waits for the envelope that
// answers it (same correlation thread, from the target back to the sender).
// An "error" answer is returned as a *RemoteError carrying its code.
//
// The answer is the caller's: the thread index keeps its own copy.
//
// An answer names its thread, not the request it answers (Factory.Reply),
// so a request inside an existing thread (CorrelationID set) is matched by
// the thread and the two agents: one such request at a time between two
// agents in a thread (a second is refused with INVALID_MESSAGE), and the
// late answer to one that gave up (its timeout, its ctx) would be taken as
// the answer to the next one asked between the same agents in that thread.
// A request that starts its thread (no CorrelationID) has no such limit.
func (r *Router) Request(ctx context.Context, env *envelope.Envelope) (*envelope.Envelope, RoutingResult, error) {
	return r.RequestWithin(ctx, env, 0)
}

// RequestWithin is Request that gives up waiting for the answer after
// timeout (when positive) as if ctx had that deadline: the same as
// Request under context.WithTimeout, without a context per request.
func (r *Router) RequestWithin(ctx context.Context, env *envelope.Envelope, timeout time.Duration) (*envelope.Envelope, RoutingResult, error) {
	if env == nil {
		return nil, RoutingResult{}, &envelope.InvalidError{Field: "envelope", Reason: "nil"}
	}
	if env.Recipient == envelope.Broadcast {
		return r.sendErr(ctx, env, nil)
	}
	start := clock.Now()
	env = cloneForSend(env)
	// Prepared (resolved, checked, canonical) first, so the waiter knows
	// whom to expect the answer from.
	from, to, err := r.prepare(env)
	if err != nil {
		res, err := r.dispatch(ctx, env, from, to, err, false, start)
		return nil, res, err
	}
	key := pendingKey{thread: env.ThreadID(), agentPair: agentPair{from: env.Sender, to: env.Recipient}}
	pr := pendingPool.Get().(*pendingReq)
	pr.id, pr.deadline = env.ID, time.Time{}
	if timeout > 0 {
		pr.deadline = start.Add(timeout) // as a deadline set at the call
	}
	r.pmu.Lock()
	switch {
	case r.expiry.closed:
		err = ErrChannelClosed
	case r.pending[key] != nil:
		// Its answer could not tell the two apart, and the one replaced
		// would wait past its deadline.
		err = &envelope.InvalidError{Field: "correlationId", Reason: "a request from this agent to that one in this thread is already waiting for its answer: wait for it, or start a new thread"}
	default:
		r.pending[key] = pr
		if key.thread != env.ID {
			r.pendingIDs[env.ID] = key
		}
		r.expiry.watchLocked(r, pr.deadline)
	}
	r.pmu.Unlock()
	if err != nil {
		pendingPool.Put(pr)
		res, err := r.dispatch(ctx, env, from, to, err, false, start)
		return nil, res, err
	}
	defer func() {
		r.pmu.Lock()
		if r.pending[key] == pr {
			delete(r.pending, key)
		}
		if r.pendingIDs[env.ID] == key {
			delete(r.pendingIDs, env.ID)
		}
		r.pmu.Unlock()
		// Out of pending, pr gets nothing more (see end): empty, reuse.
		for len(pr.done) > 0 {
			<-pr.done
		}
		pendingPool.Put(pr)
	}()
	res, err := r.dispatch(ctx, env, from, to, nil, false, start)
	if err != nil {
		return nil, res, err
	}
	res.Delivered = res.Path == PathLocal // remote: known when the answer (or a failure) arrives
	select {
	case got := <-pr.done:
		if got.err == errExpired {
			return nil, res, fmt.Errorf("protocol: waiting for the answer of %s: %w", env.Recipient, context.DeadlineExceeded)
		}
		if got.err != nil {
			res.Error = fmt.Sprintf("%s: %v", CodeOf(got.err), got.err)
			return nil, res, got.err
		}
		res.Delivered = true
		if got.env.Type == envelope.TypeError {
			return got.env, res, errorFromPayload(got.env, to)
		}
		return got.env, res, nil
	case <-ctx.Done():
		r.cancelRequest(from.Address(), env.ID, to.Host) // nobody waits for the answer: its handler may stop
		return nil, res, fmt.Errorf("protocol: waiting for the answer of %s: %w", env.Recipient, ctx.Err())
	}
}

// errExpired ends a pending request whose deadline passed (see expiry).
var errExpired = errors.New("protocol: request expired")

// expiry ends the waits of pending requests whose deadline passed, with
// one timer for the Router, armed at the earliest deadline, instead of a
// timer per request: arming a runtime timer, and the wake-up of an idle
// thread that it can cost, was a visible share of a round trip. When the
// timer fires it ends what expired and re-arms for the earliest deadline
// left; requests answered in time only leave it a scan to do. Guarded by
// Router.pmu.
type expiry struct {
	timer  *time.Timer
	at     time.Time // the deadline the timer is armed for; zero: not armed
	closed bool
}

// watchLocked makes sure the timer fires by deadline (zero: no deadline).
func (e *expiry) watchLocked(r *Router, deadline time.Time) {
	if deadline.IsZero() || e.closed || (!e.at.IsZero() && !deadline.Before(e.at)) {
		return
	}
	e.at = deadline
	if e.timer == nil {
		// The timer only hands over, as the Router's other timers do: the
		// scan runs on a Router goroutine, which Close waits for.
		e.timer = time.AfterFunc(time.Until(deadline), func() { r.spawn(r.expire) })
	} else {
		e.timer.Reset(time.Until(deadline))
	}
}

// expire runs when the expiry timer fires (briefly, under pmu, never
// blocking): every pending request past its deadline is told so and
// forgotten.
func (r *Router) expire() {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	now := clock.Now()
	r.expiry.at = time.Time{}
	var next time.Time
	for id, pr := range r.pending {
		switch {
		case pr.deadline.IsZero():
		case !now.Before(pr.deadline):
			delete(r.pending, id)
			pr.end(reqResult{err: errExpired})
		case next.IsZero() || pr.deadline.Before(next):
			next = pr.deadline
		}
	}
	r.expiry.watchLocked(r, next)
}

// stopExpiry ends every pending request's wait when the Router closes: no
// answer can arrive any more.
func (r *Router) stopExpiry() {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	r.expiry.closed = true
	if r.expiry.timer != nil {
		r.expiry.timer.Stop()
	}
	for id, pr := range r.pending {
		delete(r.pending, id)
		pr.end(reqResult{err: ErrChannelClosed})
	}
}

// sendErr routes env through Send so the failure is reported like any other.
func (r *Router) sendErr(ctx context.Context, env *envelope.Envelope, _ error) (*envelope.Envelope, RoutingResult, error) {
	res, err := r.Send(ctx, env)
	return nil, res, err
}

func errorFromPayload(resp *envelope.Envelope, from agentcard.Card) error {
	var p ErrorPayload
	if err := json.Unmarshal(resp.Payload, &p); err != nil || p.Code == "" {
		return &RemoteError{ErrCode: CodeInternal, Message: fmt.Sprintf("agent %s answered with an error: %s", from.Address(), resp.Payload)}
	}
	pid, _ := peer.Decode(from.Host)
	return &RemoteError{ErrCode: p.Code, Message: p.Message, Peer: pid}
}

// resolve checks env (and compacts its payload: from here on only its
// header is checked again) and finds the local sender card and the target
// card. env's sender is made canonical (name@peer) once it is found, with
// the address the registry keeps (not built anew per message).
func (r *Router) resolve(env *envelope.Envelope) (from, to agentcard.Card, err error) {
	if err := env.Normalize(); err != nil {
		return from, to, err
	}
	if env.Metadata == nil || env.Metadata.RoutingHint != envelope.RoutingHintCapability {
		if rt := r.routes.get(r.reg, agentPair{env.Sender, env.Recipient}); rt != nil {
			env.Sender, env.Recipient = rt.fromAddr, rt.toAddr
			return rt.from, rt.to, nil
		}
	}
	lease := r.reg.Lease() // before the lookups: see agentcard.Lease
	asked := agentPair{env.Sender, env.Recipient}
	var fromAddr, toAddr string
	from, fromAddr, err = r.localSender(env.Sender)
	if err != nil {
		return from, to, err
	}
	env.Sender = fromAddr
	if env.Recipient == envelope.Broadcast {
		return from, to, &deliveryError{Target: envelope.Broadcast, Reason: "a broadcast has no single recipient: use Send or Post"}
	}
	if env.Metadata != nil && env.Metadata.RoutingHint == envelope.RoutingHintCapability {
		to, err = r.byCapability(env, from)
		if errors.Is(err, agentcard.ErrCapabilityNotFound) && r.lookup(func(ctx context.Context, res Resolver) error {
			_, err := res.FindByCapability(ctx, env.Recipient)
			return err
		}) {
			to, err = r.byCapability(env, from)
		}
		return from, to, err
	}
	defer func() {
		if err == nil {
			env.Recipient = toAddr
			r.routes.put(asked, &route{lease: r.reg.For(lease, &from, &to), from: from, to: to, fromAddr: fromAddr, toAddr: toAddr})
		}
	}()
	to, toAddr, err = r.resolveFor(from, env.Recipient)
	if errors.Is(err, agentcard.ErrAgentNotFound) && r.lookup(func(ctx context.Context, res Resolver) error {
		if strings.Contains(env.Recipient, "@") {
			_, err := res.Lookup(ctx, env.Recipient)
			return err
		}
		_, err := res.FindByName(ctx, env.Recipient)
		return err
	}) {
		to, toAddr, err = r.resolveFor(from, env.Recipient)
	}
	return from, to, err
}

// resolveFor resolves addr as seen by agent from. A full address is exact
// (the reach check then decides, with a security event on a violation). A
// bare name is resolved among the agents from may discover (sandbox
// discovery filter, requirement 10.4): unique, ambiguous or not found.
func (r *Router) resolveFor(from agentcard.Card, addr string) (c agentcard.Card, cAddr string, err error) {
	if strings.Contains(addr, "@") || !r.o.policy.Enforced {
		return r.reg.ResolveShared(addr) // read-only: the router never modifies cards
	}
	viewer := from.SandboxAgent()
	// The usual case: the name is unique in the swarm and visible to from.
	if c, cAddr, err := r.reg.ResolveShared(addr); err == nil {
		if r.o.policy.CheckDiscover(viewer, c.SandboxAgentAt(cAddr)).Allowed {
			return c, cAddr, nil
		}
	}
	c, err = r.resolveVisible(from, viewer, addr)
	if err != nil {
		return c, "", err
	}
	return c, c.Address(), nil
}

// resolveVisible is resolveFor's slow path: the name is ambiguous, or not
// visible to from, or unknown.
func (r *Router) resolveVisible(from agentcard.Card, viewer sandbox.Agent, addr string) (agentcard.Card, error) {
	var visible []agentcard.Card
	total := 0
	for _, c := range r.reg.ByID(addr) {
		total++
		if r.o.policy.CheckDiscover(viewer, c.SandboxAgent()).Allowed {
			visible = append(visible, c)
		}
	}
	switch len(visible) {
	case 1:
		return visible[0], nil
	case 0:
		if total == 0 {
			return r.reg.Resolve(addr) // the registry's own not-found, naming what it searched
		}
		return agentcard.Card{}, &agentcard.NotFoundError{Query: addr, Where: fmt.Sprintf("the agents %s may discover", from.Address())}
	}
	cands := make([]string, len(visible))
	for i, c := range visible {
		cands[i] = c.Address()
	}
	sort.Strings(cands)
	return agentcard.Card{}, &agentcard.AmbiguousError{Name: addr, Candidates: cands}
}

// Resolver finds remote agents the registry does not know yet (the
// discovery service satisfies it); what it finds lands in the registry.
type Resolver interface {
	FindByName(ctx context.Context, name string) ([]agentcard.Card, error)
	FindByCapability(ctx context.Context, capID string) ([]agentcard.Card, error)
	Lookup(ctx context.Context, addr string) (agentcard.Card, error)
}

// lookup asks the resolver (bounded by the lookup timeout) and reports
// whether it found something.
func (r *Router) lookup(f func(ctx context.Context, res Resolver) error) bool {
	if r.o.resolver == nil || r.ctx == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.o.lookupTimeout)
	defer cancel()
	return f(ctx, r.o.resolver) == nil
}

// localSender returns the card of local agent addr and its canonical
// address.
func (r *Router) localSender(addr string) (agentcard.Card, string, error) {
	id, host, _ := strings.Cut(addr, "@")
	if host == "" || host == r.selfStr {
		if c, cAddr, ok := r.reg.GetSharedAddr(id); ok && c.Origin == agentcard.OriginLocal {
			return c, cAddr, nil
		}
	}
	return agentcard.Card{}, "", &agentcard.NotFoundError{Query: addr, Where: fmt.Sprintf("agents hosted on this node (%d); a sender must be a local agent", len(r.reg.Local()))}
}

// byCapability picks an agent with the capability that the sender may
// reach. Agents of this node come first, then agents whose grant (or
// trust) covers the capability, then the rest, whose claims nobody vouches
// for; within each, one whose node this node has reached before comes
// before one it has not (see reach), and ties go by a hash of the address
// salted per node, so no peer wins by choosing its agent's name. A card
// outlives its host by up to its TTL (10 minutes): a laptop whose lid
// closed keeps its cards in every registry that long, and would otherwise
// take, and fail, capability sends meanwhile while another agent with the
// capability was there to answer.
func (r *Router) byCapability(env *envelope.Envelope, from agentcard.Card) (agentcard.Card, error) {
	cards := r.reg.FindByCapability(env.Recipient)
	fromAddr := from.Address()
	viewer := from.SandboxAgentAt(fromAddr)
	best, bestKey := -1, capRank{}
	for i, c := range cards {
		if c.HasAddress(fromAddr) {
			continue
		}
		cAddr := c.Address()
		if !r.o.policy.CheckDiscover(viewer, c.SandboxAgentAt(cAddr)).Allowed {
			continue // what from may not discover, capability routing does not offer
		}
		if r.policyErr(env, from, c, fromAddr, cAddr, false) != nil {
			continue
		}
		k := capRank{vouch: vouchRank(c, env.Recipient)}
		if k.vouch > 0 {
			k.reach, k.failed = r.reach(c)
			k.salt = maphash.String(r.capSeed, cAddr)
		}
		if best < 0 || k.less(bestKey) {
			best, bestKey = i, k
		}
	}
	if best >= 0 {
		return cards[best], nil
	}
	where := fmt.Sprintf("%d local and %d remote cards", len(r.reg.Local()), len(r.reg.Remote()))
	if len(cards) > 0 {
		where += fmt.Sprintf("; %d agents have it but tier or sandbox rules forbid reaching them", len(cards))
	}
	return agentcard.Card{}, &agentcard.CapabilityNotFoundError{Capability: env.Recipient, Where: where}
}

// capRank orders the candidates of a capability send: lower is better.
type capRank struct {
	vouch  int // 0 local, 1 covered by a grant or trust, 2 unvouched
	reach  int
	failed time.Time
	salt   uint64
}

func (a capRank) less(b capRank) bool {
	switch {
	case a.vouch != b.vouch:
		return a.vouch < b.vouch
	case a.reach != b.reach:
		return a.reach < b.reach
	case !a.failed.Equal(b.failed):
		return a.failed.Before(b.failed)
	}
	return a.salt < b.salt
}

// vouchRank says how much this node can rely on c offering capability id:
// 0 for its own agents, 1 where a grant or trust covers it, 2 otherwise.
func vouchRank(c agentcard.Card, id string) int {
	switch {
	case c.Origin == agentcard.OriginLocal:
		return 0
	case c.Covers(id):
		return 1
	}
	return 2
}

// pathTo is the path of an envelope to agent to, refused or not: remote
// for an agent of another node, else local (an agent of this node, or no
// agent resolved).
func (r *Router) pathTo(to agentcard.Card) string {
	if to.ID != "" && to.Host != r.selfStr {
		return PathRemote
	}
	return PathLocal
}

// How likely a card's node is to answer, best first (see reach).
const (
	reachConnected = iota // this node, or a node connected and not failed since
	reachUnknown          // a node not connected that no stream failed to reach
	reachFailed           // a node a stream could not be opened to since it was last reached
)

// reach ranks card c's node for capability routing. A node is "failed" from
// the moment a stream to it could not be opened (every redial of a channel
// to a node that went away: Router.stream) until one is, or until the node
// identifies again (it came back, or dialled us): whether libp2p still
// counts a connection to it does not matter, as such a connection may be
// the dead one the failure was on. failed is when the latest such failure
// happened: among failed nodes the one that failed longest ago goes first,
// having had the longest to come back.
func (r *Router) reach(c agentcard.Card) (rank int, failed time.Time) {
	if c.Host == "" || c.Host == r.selfStr {
		return reachConnected, time.Time{}
	}
	p, err := r.peerOf(c.Host)
	if err != nil {
		return reachUnknown, time.Time{}
	}
	if t, ok := r.unreached.get(p); ok {
		return reachFailed, t
	}
	if r.h.Network().Connectedness(p) == network.Connected {
		return reachConnected, time.Time{}
	}
	return reachUnknown, time.Time{}
}

// prepare resolves, canonicalises and checks an outgoing envelope.
func (r *Router) prepare(env *envelope.Envelope) (from, to agentcard.Card, err error) {
	if r.isClosed() {
		return from, to, ErrChannelClosed
	}
	from, to, err = r.resolve(env)
	if err != nil {
		return from, to, err
	}
	return from, to, r.admit(env, from, to)
}

// sendEnv is an envelope the router sends and its metadata, allocated
// together: admit always sets metadata, and most callers leave it nil.
type sendEnv struct {
	env envelope.Envelope
	md  envelope.Metadata
}

// cloneForSend copies the caller's envelope, with room for the metadata
// admit sets. Its payload stays the caller's: the router only reads it
// within the call (checked, then encoded, for a remote target: the
// encoding is what is kept, sent again and indexed), and a local agent
// gets its own copy (deliverLocal).
func cloneForSend(e *envelope.Envelope) *envelope.Envelope {
	b := &sendEnv{env: *e}
	if e.Metadata != nil {
		b.md = *e.Metadata
	}
	b.env.Metadata = &b.md
	return &b.env
}

// admit canonicalises valid env, from local agent from to agent to: full
// addresses, metadata from the sender's card; then applies the policy and
// notes a question.
func (r *Router) admit(env *envelope.Envelope, from, to agentcard.Card) error {
	return r.admitWith(env, from, to, false)
}

// admitWith is admit for an envelope that the caller may know answers a
// question its recipient asked its sender in its thread (the router's own
// answer to a request it recorded): then the question set is not probed.
func (r *Router) admitWith(env *envelope.Envelope, from, to agentcard.Card, answers bool) error {
	if !from.HasAddress(env.Sender) {
		env.Sender = from.Address()
	}
	if !to.HasAddress(env.Recipient) {
		env.Recipient = to.Address()
	}
	md := env.Metadata
	if md == nil {
		md = &envelope.Metadata{}
		env.Metadata = md
	}
	md.Tier, md.SandboxID, md.RoutingHint = uint8(from.Tier), from.SandboxID, ""
	if err := r.checkPolicy(env, from, to, answers || r.isAnswer(env), r.self); err != nil {
		return err
	}
	r.noteAsked(env)
	return nil
}

// addrOf returns c's canonical address, which is hint when hint already is
// it (no string is built then).
func addrOf(c agentcard.Card, hint string) string {
	if c.HasAddress(hint) {
		return hint
	}
	return c.Address()
}

// isAnswerType reports whether envelopes of type t answer an earlier request
// or task proposal in their thread.
func isAnswerType(t envelope.Type) bool {
	switch t {
	case envelope.TypeResponse, envelope.TypeError, envelope.TypeTaskAccept, envelope.TypeTaskReject:
		return true
	}
	return false
}

// noteAsked records that env's sender asked its recipient something in
// env's thread, on the asking node (when it leaves) and on the answering
// node (when it arrives), so that the answer passes both nodes' policy as a
// reply. env's addresses are canonical (prepared or received).
func (r *Router) noteAsked(env *envelope.Envelope) {
	if env.Type.AsksForAnswer() {
		r.answerable.add(askKey{env.ThreadID(), env.Sender, env.Recipient})
	}
}

// isAnswer reports whether env answers a question that its recipient asked
// its sender in env's thread. Tier rules do not apply to answers: whoever
// may ask may be answered. env's addresses are canonical.
func (r *Router) isAnswer(env *envelope.Envelope) bool {
	if !isAnswerType(env.Type) || env.CorrelationID == "" {
		return false
	}
	return r.answerable.has(askKey{env.CorrelationID, env.Recipient, env.Sender})
}

// policyErr applies the tier and sandbox rules to env from -> to, whose
// canonical addresses are fromAddr and toAddr.
func (r *Router) policyErr(env *envelope.Envelope, from, to agentcard.Card, fromAddr, toAddr string, reply bool) error {
	just := ""
	if env.Metadata != nil {
		just = env.Metadata.EscalationJustification
	}
	if err := r.o.rules.Check(tiers.Message{
		Source: from.Tier, Target: to.Tier, Type: string(env.Type), Justification: just, Reply: reply,
	}); err != nil {
		return err
	}
	if !r.o.policy.Enforced {
		return nil
	}
	d := r.o.policy.CheckReach(from.SandboxAgentAt(fromAddr), to.SandboxAgentAt(toAddr))
	if !d.Allowed {
		return d.Err
	}
	return nil
}

// checkPolicy applies tier and sandbox rules to env, whose addresses are
// canonical (env.Sender is from's, env.Recipient is to's), and emits a
// security event for a violation (escalation-required is a plain refusal,
// not an attack).
func (r *Router) checkPolicy(env *envelope.Envelope, from, to agentcard.Card, reply bool, via peer.ID) error {
	err := r.policyErr(env, from, to, env.Sender, env.Recipient, reply)
	if err == nil {
		return nil
	}
	// An escalation without a justification is refused by the sending node
	// before it leaves; one received was sent by a node that skipped that
	// check, so it is a security event too (and so audited).
	if errors.Is(err, tiers.ErrTierViolation) || errors.Is(err, sandbox.ErrSandboxViolation) ||
		via != r.self && errors.Is(err, tiers.ErrEscalationRequired) {
		r.security(Event{
			EnvelopeID: env.ID, Sender: env.Sender, Recipient: env.Recipient, MessageType: env.Type,
			Code: CodeOf(err), Detail: err.Error(), Peer: via, SourceTier: int(from.Tier), TargetTier: int(to.Tier),
		})
	}
	return err
}

func (r *Router) security(ev Event) {
	ev.Type, ev.Time, ev.Success = EvtSecurityRaised, clock.Now(), false
	if ev.SourceTier == 0 && ev.TargetTier == 0 && ev.Sender == "" {
		ev.SourceTier, ev.TargetTier = -1, -1
	}
	r.log.Debugw("security event", "code", ev.Code, "peer", ev.Peer, "detail", ev.Detail)
	r.o.sink.Emit(ev)
}

// deliverLocal hands env to local agent `to`. via is the peer it came from
// (self for local traffic).
func (r *Router) deliverLocal(env *envelope.Envelope, from, to agentcard.Card, via peer.ID) error {
	key := seenKey{from: env.Sender, id: env.ID}
	if r.seen.has(key) {
		return nil // a retry of something already delivered: acknowledge, do not redeliver
	}
	r.recordThread(env)
	// The requester or the handler gets env after the sender's call
	// returned, and env's payload may be the sender's (see cloneForSend):
	// copied now, theirs.
	mine := *env
	mine.Payload = bytes.Clone(env.Payload)
	if r.matchAnswer(&mine) {
		r.seen.add(key)
		r.emitReceived(env, from, to, via)
		return nil
	}
	h := r.handler(to.ID)
	if h == nil {
		return &deliveryError{Target: env.Recipient, Reason: "the agent has no handler on its node"}
	}
	r.noteAsked(env)
	select {
	case r.sem <- struct{}{}:
	case <-r.ctx.Done():
		return ErrChannelClosed
	}
	if !r.goWork(func() {
		defer func() { <-r.sem }()
		r.runHandler(h, &mine, from, to, true, true, clock.Now())
	}) {
		<-r.sem
		return ErrChannelClosed
	}
	r.seen.add(key)
	r.emitReceived(env, from, to, via)
	return nil
}

func (r *Router) emitReceived(env *envelope.Envelope, from, to agentcard.Card, via peer.ID) {
	r.emitReceivedAt(env, from, to, via, clock.Now())
}

// emitReceivedAt is emitReceived for an envelope that arrived at at.
func (r *Router) emitReceivedAt(env *envelope.Envelope, from, to agentcard.Card, via peer.ID, at time.Time) {
	path := PathLocal
	if via != r.self {
		path = PathRemote
	}
	r.o.sink.Emit(Event{
		Type: EvtMessageReceived, Time: at, EnvelopeID: env.ID, Sender: env.Sender,
		Recipient: env.Recipient, MessageType: env.Type, Path: path, Success: true, Peer: via,
		SourceTier: int(from.Tier), TargetTier: int(to.Tier), Detail: justification(env),
	})
}

// runHandler calls h with env and, for a request, sends the answer back.
// asked says env was recorded as a question (noteAsked), so the answer the
// router builds passes as a reply without looking that up again; own says
// env's payload goes to this handler alone (see agentCopy). The handler's
// timeout runs from at: when env arrived (or now).
func (r *Router) runHandler(h Handler, env *envelope.Envelope, from, to agentcard.Card, asked, own bool, at time.Time) {
	ctx := newHandlerCtx(r.ctx, at, r.o.requestTimeout)
	defer ctx.release()
	if env.Type == envelope.TypeRequest {
		k := r.startRun(from.Address(), env, ctx)
		defer r.endRun(k, ctx)
	}
	reply, herr := safeCall(ctx, h, env, own)
	if env.Type != envelope.TypeRequest {
		if herr != nil {
			r.log.Debugw("handler failed", "agent", to.ID, "type", env.Type, "err", herr)
		}
		return
	}
	start := clock.Now()
	// A broadcast's recipient is "*": the replying agent is to.
	toAddr, fromAddr := addrOf(to, env.Recipient), addrOf(from, env.Sender)
	var resp *envelope.Envelope
	var err error
	answers := asked // the router's own answer, unless the agent made its own
	switch {
	case herr != nil:
		resp, err = r.o.factory.ReplyAs(toAddr, env, envelope.TypeError, ErrorPayload{Code: CodeOf(herr), Message: herr.Error()})
	default:
		if e, ok := reply.(*envelope.Envelope); ok && e != nil {
			// The agent's own envelope: copied (the agent keeps its own) and
			// checked like any envelope it would send.
			resp = e.Clone()
			err = resp.Normalize()
			answers = false
		} else {
			resp, err = r.o.factory.ReplyAs(toAddr, env, envelope.TypeResponse, reply)
		}
	}
	if err != nil {
		resp, err = r.o.factory.ReplyAs(toAddr, env, envelope.TypeError, ErrorPayload{Code: CodeInternal, Message: "agent reply is not encodable: " + err.Error()})
		if err != nil {
			return
		}
		answers = asked
	}
	resp.Sender, resp.Recipient = toAddr, fromAddr
	if resp.CorrelationID == "" {
		resp.CorrelationID = env.ThreadID()
	}
	// The reply goes back to the cards just used: no new resolution.
	err = r.admitOpen(resp, to, from, answers)
	if _, err := r.post(ctx, resp, to, from, err, start); err != nil {
		r.log.Debugw("reply not sent", "agent", to.ID, "to", fromAddr, "err", err)
	}
}

// admitOpen is admit for a router that is still open; answers is as for
// admitWith.
func (r *Router) admitOpen(env *envelope.Envelope, from, to agentcard.Card, answers bool) error {
	if r.isClosed() {
		return ErrChannelClosed
	}
	return r.admitWith(env, from, to, answers)
}

// safeCall runs a handler, turning a panic into an error so one bad agent
// cannot take the node down. The handler gets its own copy of env (see
// agentCopy).
func safeCall(ctx context.Context, h Handler, env *envelope.Envelope, own bool) (reply any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("protocol: agent handler panicked: %v", p)
		}
	}()
	return h(ctx, agentCopy(env, own))
}

// agentCopy is the envelope an agent's handler gets: its own header and
// metadata, allocated together, and its own payload unless own says env's
// payload is the handler's alone (a received envelope for one agent: the
// router reads only its header after the handler; not so a broadcast,
// whose payload each local agent must get a copy of).
func agentCopy(env *envelope.Envelope, own bool) *envelope.Envelope {
	b := &sendEnv{env: *env}
	if !own && env.Payload != nil {
		b.env.Payload = bytes.Clone(env.Payload)
	}
	if env.Metadata != nil {
		b.md = *env.Metadata
		b.env.Metadata = &b.md
	}
	return &b.env
}

func (r *Router) isClosed() bool { return !r.running.Load() }

// peerOf decodes a card's host, memoised: the same few hosts recur on every
// message, and base58 decoding costs microseconds.
func (r *Router) peerOf(host string) (peer.ID, error) {
	if p, ok := r.peerIDs.get(host); ok {
		return p, nil
	}
	p, err := peer.Decode(host)
	if err != nil {
		return "", err
	}
	r.peerIDs.put(host, p)
	return p, nil
}

// recordThread indexes env in the correlation threads if it belongs to one
// (it has a correlation id, or it is a request or proposal that starts one);
// one-way traffic outside any thread is not indexed. The index encodes env:
// use recordEncoded where the encoding is at hand.
func (r *Router) recordThread(env *envelope.Envelope) {
	if recordable(env) {
		r.threads.Add(env)
	}
}

// recordEncoded is recordThread for env encoded canonically as raw (sent,
// or received and read by the canonical decoder): the index copies raw.
func (r *Router) recordEncoded(env *envelope.Envelope, raw []byte) {
	if recordable(env) {
		r.threads.AddEncoded(env, raw)
	}
}

// recordable reports whether the thread index keeps env (a copy of its
// encoding: what the router and its agents do with env afterwards does not
// change it).
func recordable(env *envelope.Envelope) bool {
	return env.CorrelationID != "" || env.Type.AsksForAnswer()
}

// sendBroadcast publishes env (recipient "*") on the swarm's topic. Every
// node, this one included, delivers it to each local agent the sender may
// reach.
func (r *Router) sendBroadcast(ctx context.Context, env *envelope.Envelope, start time.Time) (RoutingResult, error) {
	res := RoutingResult{Path: PathBroadcast, TargetAgentID: envelope.Broadcast}
	err := env.Validate()
	var from agentcard.Card
	if err == nil && r.isClosed() {
		err = ErrChannelClosed
	}
	if err == nil {
		from, _, err = r.localSender(env.Sender)
	}
	if err == nil {
		err = r.publish(ctx, env, from)
	}
	now := clock.Now()
	res.LatencyMs = float64(now.Sub(start).Microseconds()) / 1000
	r.emitRoute(env, from, agentcard.Card{}, PathBroadcast, start, now, err)
	if err != nil {
		res.Error = fmt.Sprintf("%s: %v", CodeOf(err), err)
		return res, err
	}
	res.Delivered = true
	r.emitSent(env, from, agentcard.Card{Tier: from.Tier}, PathBroadcast, start)
	return res, nil
}
