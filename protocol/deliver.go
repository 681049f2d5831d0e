package protocol

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/protocol/channel"
)

// sendChannel queues env on the channel from -> to. With done == nil it
// waits for the receiver's acknowledgement (or ctx); otherwise it returns
// once queued and done reports the outcome. env's payload must have been
// checked and compacted (Normalize, the factory or a decoder).
// enq is when the envelope was handed to the router (a clock read the
// caller made anyway), from which the outbox counts its age.
func (r *Router) sendChannel(ctx context.Context, from string, to agentcard.Card, env *envelope.Envelope, urgent bool, enq time.Time, done func(error), report sentReport) error {
	p, err := r.peerOf(to.Host)
	if err != nil {
		return fmt.Errorf("protocol: card %s has a bad host: %w", to.Address(), err)
	}
	// env was normalized (prepare) or built by the factory (replies): its
	// payload is checked and compact, only the header changed since.
	buf := encBufs.Get().(*[]byte)
	raw, err := envelope.AppendCBORValidated((*buf)[:0], env)
	if err != nil {
		encBufs.Put(buf)
		return err
	}
	if len(raw)+128 > r.o.maxFrame {
		encBufs.Put(buf)
		return &envelope.InvalidError{Field: "payload", Reason: fmt.Sprintf("envelope encodes to %d bytes, over the %d-byte frame limit", len(raw), r.o.maxFrame)}
	}
	// Indexed before it leaves: its answer may arrive before the ack.
	r.recordEncoded(env, raw)
	if *buf = raw; cap(raw) > maxPooledEnc {
		buf = nil // too large to keep around
	}
	var wait chan error
	ackNow := done == nil
	if ackNow {
		wait = make(chan error, 1)
		done = func(err error) { wait <- err }
	}
	// If the pair's channel closed meanwhile (a refusal, or retries spent),
	// a new channel is opened for the next envelope.
	var expires time.Time
	if ttl := r.sendTTL(ctx); ttl > 0 {
		expires = enq.Add(ttl)
	}
	for attempt := 0; ; attempt++ {
		c := r.outChannelFor(from, env.Recipient, p)
		err = c.enqueue(env, raw, buf, urgent, ackNow, enq, expires, done, report)
		if err == nil || attempt > 0 || r.isClosed() {
			break
		}
	}
	if err != nil && buf != nil {
		encBufs.Put(buf) // no channel took it
	}
	if err != nil || wait == nil {
		return err
	}
	select {
	case err := <-wait:
		if err != nil {
			// The channel emitted its error event (emitFailure); PEER_AWAY
			// is no failure: the envelope waits.
			return &channelReported{err}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("protocol: waiting for %s to acknowledge (the envelope stays queued): %w", to.Address(), ctx.Err())
	}
}

// channelReported is a failure its channel already reported as an error
// event: the caller reports the routing decision, not the error again.
type channelReported struct{ error }

func (e *channelReported) Unwrap() error { return e.error }

// Post routes env like Send but does not wait for a remote acknowledgement:
// it returns once the envelope is queued on its channel (Delivered stays
// false for a remote target). The outcome is reported as events: a
// message-sent on acknowledgement, an error with DELIVERY_FAILED (or the
// receiver's refusal code) otherwise, exactly once per envelope.
func (r *Router) Post(ctx context.Context, env *envelope.Envelope) (RoutingResult, error) {
	start := clock.Now()
	if env == nil {
		return RoutingResult{Path: PathLocal}, &envelope.InvalidError{Field: "envelope", Reason: "nil"}
	}
	env = cloneForSend(env)
	from, to, err := r.prepare(env)
	return r.post(ctx, env, from, to, err, start)
}

// post delivers env, which was prepared (or admitted) with from, to and err
// (a failure is only reported), without waiting for a remote
// acknowledgement.
func (r *Router) post(ctx context.Context, env *envelope.Envelope, from, to agentcard.Card, err error, start time.Time) (RoutingResult, error) {
	res := RoutingResult{Path: r.pathTo(to), TargetAgentID: env.Recipient}
	if err != nil {
		res.Error = fmt.Sprintf("%s: %v", CodeOf(err), err)
		r.emitRoute(env, from, to, res.Path, start, clock.Now(), err)
		return res, err
	}
	if to.Host == r.selfStr { // indexed by deliverLocal, or by sendChannel
		err = r.deliverLocal(env, from, to, r.self)
		res.Delivered = err == nil
	} else {
		// A failure is reported once, by the channel (emitFailure). An answer
		// has someone waiting for it: it is flushed at once.
		err = r.sendChannel(ctx, env.Sender, to, env, isAnswerType(env.Type), start, noWait, sentReport{true, from.Tier, to.Tier})
	}
	now := clock.Now()
	res.LatencyMs = float64(now.Sub(start).Microseconds()) / 1000
	if err != nil {
		res.Error = fmt.Sprintf("%s: %v", CodeOf(err), err)
	}
	r.emitRoute(env, from, to, res.Path, start, now, err)
	if err == nil && res.Path == PathLocal {
		r.emitSent(env, from, to, PathLocal, start)
	}
	return res, err
}

// emitRoute reports the routing decision on env, made between start and
// now (one clock read serves the result's latency and the event).
func (r *Router) emitRoute(env *envelope.Envelope, from, to agentcard.Card, path string, start, now time.Time, err error) {
	ev := Event{Type: EvtRouteDecided, Time: now, EnvelopeID: env.ID, Sender: env.Sender, Recipient: env.Recipient,
		MessageType: env.Type, Path: path, Latency: now.Sub(start), Success: err == nil, SourceTier: -1, TargetTier: -1}
	if from.ID != "" {
		ev.SourceTier = int(from.Tier)
	}
	if to.ID != "" {
		ev.TargetTier = int(to.Tier)
	}
	if err != nil {
		ev.Code, ev.Detail = CodeOf(err), err.Error()
	}
	r.o.sink.Emit(ev)
	if err != nil {
		ev.Type = EvtErrorRaised
		r.o.sink.Emit(ev)
	}
}

func (r *Router) emitSent(env *envelope.Envelope, from, to agentcard.Card, path string, start time.Time) {
	r.emitSentTiers(env, int(from.Tier), int(to.Tier), path, start)
}

// emitSentTiers is emitSent with only the cards' tiers: what a callback
// that runs on acknowledgement needs to keep (two cards would be most of
// a kilobyte per envelope in flight).
func (r *Router) emitSentTiers(env *envelope.Envelope, fromTier, toTier int, path string, start time.Time) {
	r.emitSentTiersAt(env, fromTier, toTier, path, start, clock.Now())
}

// emitSentTiersAt is emitSentTiers at now, which an acknowledgement of many
// envelopes reads once for all.
func (r *Router) emitSentTiersAt(env *envelope.Envelope, fromTier, toTier int, path string, start, now time.Time) {
	r.o.sink.Emit(Event{Type: EvtMessageSent, Time: now, EnvelopeID: env.ID, Sender: env.Sender, Recipient: env.Recipient,
		MessageType: env.Type, Path: path, Latency: now.Sub(start), Success: true, SourceTier: fromTier, TargetTier: toTier,
		Detail: justification(env)})
}

// justification is the detail of a message event for env: the reason an
// escalation gave (so the audit log of a cross-tier task proposal says
// why it was allowed), or "".
func justification(env *envelope.Envelope) string {
	if env.Metadata == nil || env.Metadata.EscalationJustification == "" {
		return ""
	}
	return "escalation justified: " + env.Metadata.EscalationJustification
}

// EvtChannelChanged reports a channel's state change or redial.
const EvtChannelChanged = "channel"

func (r *Router) emitChannel(c *outChannel, detail string) {
	r.o.sink.Emit(Event{Type: EvtChannelChanged, Time: clock.Now(), Sender: c.from, Recipient: c.to, Peer: c.p, Detail: detail, Success: true, SourceTier: -1, TargetTier: -1})
}

// emitFailure reports an envelope that will never be delivered, once.
func (r *Router) emitFailure(env *envelope.Envelope, c *outChannel, err error) {
	if env == nil {
		return
	}
	r.o.sink.Emit(Event{Type: EvtErrorRaised, Time: clock.Now(), EnvelopeID: env.ID, Sender: env.Sender, Recipient: env.Recipient,
		MessageType: env.Type, Path: PathRemote, Code: CodeOf(err), Detail: err.Error(), Peer: c.p, SourceTier: -1, TargetTier: -1})
	// A request waiting for its answer learns of the failure at once.
	if env.Type.AsksForAnswer() {
		r.pmu.Lock()
		key := pendingKey{thread: env.ThreadID(), agentPair: agentPair{from: env.Sender, to: env.Recipient}}
		if pr := r.pending[key]; pr != nil && pr.id == env.ID {
			pr.end(reqResult{err: err})
		}
		r.pmu.Unlock()
	}
}

// deliverSync hands an envelope that arrived on a channel to its agent, on
// the channel's worker: the handler runs now, in order. A request's answer
// is posted back on the reverse channel. env's addresses are canonical
// (receive checked them against the channel's cards).
func (r *Router) deliverSync(env *envelope.Envelope, from, to agentcard.Card, out *inStream, at time.Time) error {
	via := r.self
	if p, err := r.peerOf(from.Host); err == nil {
		via = p
	}
	// Recorded as seen before anything else (one probe of the set rather
	// than a check and a record); forgotten again if refused.
	key := seenKey{from: env.Sender, id: env.ID}
	if !r.seen.addNew(key) {
		return nil
	}
	// The thread index has env already: the stream's reader indexed it
	// (inReader.frame) while its encoding was at hand.
	if r.matchAnswer(env) {
		r.emitReceivedAt(env, from, to, via, at)
		return nil
	}
	h := r.handler(to.ID)
	if h == nil {
		r.seen.forget(key)
		return &deliveryError{Target: env.Recipient, Reason: "the agent has no handler on its node"}
	}
	r.noteAsked(env)
	r.emitReceivedAt(env, from, to, via, at)
	// Each channel runs one handler at a time, but a peer opens many
	// channels: handlers from channels take a slot, so no more than the
	// concurrency bound run at once. Their own pool, not the local one: a
	// handler that sends to a local agent takes a local slot while it
	// holds this one, and if both came from one pool, enough such handlers
	// would wait on each other forever. Answers take none: above, or
	// handed over on arrival when their channel's worker is busy (accept),
	// so a handler waiting for one never waits on a slot.
	select {
	case r.chSem <- struct{}{}:
		defer func() { <-r.chSem }()
	case <-r.ctx.Done(): // closing: Close waits for this worker anyway
	}
	r.runHandler(h, env, from, to, true, true, at) // the handler's alone: the thread index keeps a copy
	return nil
}

// takeAnswer hands env, an answer received on a channel whose worker is
// busy, to the request waiting for it, recording it as seen. It reports
// whether env needs nothing more (handed over, or a duplicate); otherwise
// it is left unrecorded, for the worker to deliver in its turn. Called
// under the channel's mutex (lock order: see package doc).
func (r *Router) takeAnswer(env *envelope.Envelope, from, to agentcard.Card, at time.Time) bool {
	key := seenKey{from: env.Sender, id: env.ID}
	if !r.seen.addNew(key) {
		return true
	}
	if !r.matchAnswer(env) {
		r.seen.forget(key) // its request gave up meanwhile
		return false
	}
	via := r.self
	if p, err := r.peerOf(from.Host); err == nil {
		via = p
	}
	r.emitReceivedAt(env, from, to, via, at)
	return true
}

// matchAnswer completes a waiting Request with its answer. env's addresses
// are canonical.
func (r *Router) matchAnswer(env *envelope.Envelope) bool {
	if !isAnswerType(env.Type) || env.CorrelationID == "" {
		return false
	}
	r.pmu.Lock()
	key, pr := r.awaitedLocked(env)
	if pr == nil {
		r.pmu.Unlock()
		return false
	}
	delete(r.pending, key)
	asked := seenKey{from: env.Recipient, id: pr.id} // pr is reused once ended
	pr.end(reqResult{env: env})                      // the requester's: the thread index keeps its own copy
	r.pmu.Unlock()
	r.answered.add(asked)
	return true
}

// wasAnswered reports whether env, sent from here, is a question whose
// answer came: it arrived, though its channel may fail it before the
// receiver's coalesced ack (the receiver stopping just after answering).
func (r *Router) wasAnswered(env *envelope.Envelope) bool {
	return env.Type.AsksForAnswer() && r.answered.has(seenKey{from: env.Sender, id: env.ID})
}

// forgetChannel drops closed channel c from the Router's indexes.
func (r *Router) forgetChannel(c *outChannel) {
	r.mu.Lock()
	if r.outByID[c.id] == c {
		delete(r.outByID, c.id)
	}
	if k := (agentPair{c.from, c.to}); r.outByPair[k] == c {
		delete(r.outByPair, k)
	}
	r.mu.Unlock()
}

// persistLoop writes the outbox and watermarks behind the traffic, a pass
// every persistEvery while a pass has something to write now. When none
// has, it sleeps until wakePersister, or until the first thing due later
// (an envelope still unacknowledged after persistAfter, watermarks held back
// by watermarkEvery): an idle node's persister woke 50 times a second for
// nothing, most of such a node's CPU, and one that ticked every 20 ms until
// the watermarks were written cost a request made now and then a pass per
// node every 20 ms (see wakePersisterBy).
func (r *Router) persistLoop() {
	t := time.NewTimer(r.o.persistEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		more, due := r.persistPass()
		if more {
			t.Reset(r.o.persistEvery)
			continue
		}
		r.persistIdle.Store(true)
		// A change made while the pass ran saw the persister awake and did
		// not wake it: look once more now that it is marked idle.
		if more, due = r.persistPass(); more {
			r.persistIdle.Store(false)
			t.Reset(r.o.persistEvery)
			continue
		}
		// Changes from here on find it idle: a lazy one (wakePersisterBy)
		// due no sooner than due leaves it asleep until then.
		var timeout <-chan time.Time
		if !due.IsZero() {
			r.persistUntil.Store(due.UnixNano())
			t.Reset(max(r.o.persistEvery, due.Sub(clock.Now())))
			timeout = t.C
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.persistKick:
		case <-timeout:
			if r.persistIdle.CompareAndSwap(true, false) {
				r.persistUntil.Store(0)
				t.Reset(0)
				continue
			}
			<-r.persistKick // a waker took the idle flag: its kick is on its way
		}
		r.persistUntil.Store(0)
		t.Reset(r.o.persistEvery)
	}
}

// persistPass runs one pass and reports whether a next one has something
// to write now, or else when the first thing left falls due (zero: none).
func (r *Router) persistPass() (more bool, due time.Time) {
	if r.checkpointJournal() {
		return true, time.Time{}
	}
	more, due, err := r.persist(false)
	if err != nil {
		r.log.Errorw("cannot persist the outbox; unacknowledged envelopes would not survive a crash", "err", err)
		return true, time.Time{} // try again
	}
	return more, due
}

// wakePersister tells an idle persister that something may need writing
// now: an envelope queued on a channel that is not open, settled after it
// was written, a channel closed or off Open. Cheap when the persister is
// awake (an atomic load).
func (r *Router) wakePersister() {
	if r.persistIdle.Load() && r.persistIdle.CompareAndSwap(true, false) {
		select {
		case r.persistKick <- struct{}{}:
		default:
		}
	}
}

// wakePersisterBy tells the persister of a change that needs writing only
// at due, or, with a zero due, of a watermark moved (written within
// watermarkEvery). A persister asleep with a timer set no later than due is
// left asleep; one asleep with nothing due at all, or due later, is woken to
// set its timer. A request made now and then thus wakes the persister of
// each node once, for the envelope it sends, not again for the one it
// receives nor every 20 ms until the watermark is written.
func (r *Router) wakePersisterBy(due time.Time) {
	if !r.persistIdle.Load() {
		return
	}
	until := r.persistUntil.Load()
	if until == 0 || !due.IsZero() && due.UnixNano() < until {
		r.wakePersister()
	}
}

// persist writes what is due, everything when force, and reports whether a
// later pass may have more to write now (envelopes on a channel that is not
// open), and else when the first thing left falls due: an envelope
// unacknowledged for persistAfter, or watermarks held back by
// watermarkEvery (zero: nothing is left).
func (r *Router) persist(force bool) (more bool, due time.Time, err error) {
	r.mu.Lock()
	chans := make([]*outChannel, 0, len(r.outByID))
	for _, c := range r.outByID {
		chans = append(chans, c)
	}
	r.mu.Unlock()
	now := clock.Now()
	var ops []OutboxOp
	type handed struct {
		c   *outChannel
		op  OutboxOp
		put []*outItem
	}
	var hs []handed
	for _, c := range chans {
		op, put, ok, d, forget := c.persistOps(now, r.o.persistAfter, force)
		if !d.IsZero() && (due.IsZero() || d.Before(due)) {
			due = d
		}
		if ok {
			ops = append(ops, op)
			hs = append(hs, handed{c, op, put})
		}
		if forget {
			r.forgetChannel(c)
		}
	}
	if len(ops) > 0 {
		err = r.o.store.SaveOutbox(ops)
		for _, h := range hs {
			h.c.saved(h.op, h.put, err)
			if h.op.Drop && err == nil {
				// Dropped from the store: the Router forgets it too (Drop
				// means closed, and a closed channel never reopens). Not
				// before: a failed drop is made again by the next pass.
				r.forgetChannel(h.c)
			}
		}
	}
	// Watermarks alone are written at most every watermarkEvery: a message
	// now and then cost each node a commit, about a millisecond of CPU and
	// an fsync per message. Writing them sooner buys little: a receiver
	// acknowledges within ackDelay of delivering (answerAckDelay for
	// questions and answers), and a sender resends only what was not
	// acknowledged, so after a crash a persisted watermark only spares
	// redeliveries of that short while, and Close writes it exactly.
	if force || len(ops) > 0 || now.Sub(r.watermarksAt) >= watermarkEvery {
		if w := r.dirtyWatermarks(); len(w) > 0 {
			r.watermarksAt = now
			if werr := r.o.store.SaveWatermarks(w); werr != nil && err == nil {
				err = werr
			}
		}
	} else if r.anyDirtyWatermark() {
		if d := r.watermarksAt.Add(watermarkEvery); due.IsZero() || d.Before(due) {
			due = d
		}
	}
	return more, due, err
}

// watermarkEvery is how often watermarks that changed are written when
// nothing else is (see persist).
const watermarkEvery = time.Second

// restoreLocked recreates a channel persisted by an earlier run; its
// envelopes are retransmitted once it reopens. Caller holds r.mu.
func (r *Router) restoreLocked(oc OutboxChannel) {
	_, host, _ := strings.Cut(oc.To, "@")
	p, err := peer.Decode(host)
	if err != nil {
		r.log.Warnw("dropping unusable outbox channel", "channel", oc.ID, "to", oc.To, "err", err)
		return
	}
	items := make([]channel.Item, 0, len(oc.Items))
	for _, it := range oc.Items {
		env, err := envelope.DecodeCBOR(it.Env)
		if err != nil {
			r.log.Warnw("dropping unreadable outbox envelope", "channel", oc.ID, "seq", it.Seq, "err", err)
			continue
		}
		expires := it.Expires
		if expires.IsZero() && r.o.deliveryTTL > 0 {
			// Written without one: its time to live runs from its creation.
			expires = time.UnixMilli(env.Timestamp).Add(r.o.deliveryTTL)
		}
		items = append(items, channel.Item{Seq: it.Seq, Data: &outItem{env: env, raw: it.Env, persisted: true, stored: true, enq: clock.Now(), expires: expires}})
	}
	r.outboxLen.Add(int64(len(items)))
	r.peerOutbox(p).Add(int64(len(items)))
	c := &outChannel{r: r, id: oc.ID, from: oc.From, to: oc.To, p: p, metaSaved: true}
	r.outByID[c.id] = c
	r.outByPair[agentPair{c.from, c.to}] = c
	m, acts := channel.Restore(r.o.channel, items, 1)
	c.m = m
	for _, a := range acts {
		if _, ok := a.(channel.Dial); ok {
			r.wg.Go(func() { c.dial(0) }) // a first dial since the start: patient, as for a new channel
		}
	}
}
