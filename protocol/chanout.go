package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	lpswarm "github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/protocol/channel"
	"github.com/nova-node/nova-node/tiers"
)

// ChannelInfo describes one outbound channel (for status displays).
type ChannelInfo struct {
	ID      string  `json:"id"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	Peer    peer.ID `json:"peer"`
	State   string  `json:"state"`
	Pending int     `json:"pending"`
	Stored  int     `json:"stored"` // of Pending, those written to the outbox: they survive a crash
	NextSeq uint64  `json:"nextSeq"`
	// OldestAgeMs is how long the oldest pending envelope has waited (0:
	// none pending); in state "away" the peer's node is away and they wait
	// for it in the outbox.
	OldestAgeMs int64 `json:"oldestAgeMs,omitempty"`
}

// outChannel is the sending side of one channel (local agent -> remote
// agent). Its state machine (package channel) is owned by mu: every event is
// applied, and its actions performed, under mu, so transmissions leave in
// sequence order. It has no goroutine of its own: dials run on Router
// goroutines and retry timers only post an event.
type outChannel struct {
	r        *Router
	id       string
	from, to string // canonical agent addresses
	p        peer.ID

	mu        orderedMutex[lockChannel] // release with unlock, which hands over what the stream reported meanwhile
	m         *channel.Machine
	st        *outStream // the transport while open
	timer     *time.Timer
	expTimer  *time.Timer   // parked: fails envelopes whose time to live ends
	stopped   bool          // the router is closing: perform nothing more
	refusal   error         // the receiver refused the channel itself
	dialErr   error         // under mu: why the last dial failed, for the next "redial N in" event
	dialTook  time.Duration // under mu: how long that dial took
	metaSaved bool
	settled   []uint64    // persisted items settled since the last persist
	jbuf      []byte      // under mu: the journal record being written
	jgen      uint64      // under mu: the journal generation holding this channel's addresses (0: none)
	closed    atomic.Bool // the machine reached Closed (final): read under Router.mu, which must not wait for mu

	// Frames leave in two steps, so that no one waits for the peer to read
	// while holding mu (the persister, status and the stream's reader all
	// need it): transmit, under mu, appends the frames to sendBuf, bound
	// for stream sendSt; whoever queued them writes them after releasing
	// mu (flushSends), holding sendMu, which keeps this channel's frames in
	// sequence order. A sender whose peer stops reading still blocks in
	// Post (the backpressure), but only on sendMu and the stream.
	sendMu     orderedMutex[lockChannelSend]
	sendSt     *outStream  // under mu
	sendBuf    []byte      // under mu: length-prefixed envelope frames
	spareBuf   []byte      // under sendMu: the buffer last written, for reuse
	sendUrgent bool        // under mu: flush sendBuf at once
	sendDue    bool        // under mu: the holder queued frames and writes them after unlocking
	sendQueued atomic.Bool // sendBuf is not empty

	// Acks and nacks from the stream's reader wait here, in order, for
	// whoever holds mu (see fromStream): the reader never blocks on mu,
	// which a sender may hold while its write waits for the peer to read,
	// and the peer may be waiting for this reader to take its acks.
	evMu  orderedMutex[lockChannelEvents]
	evs   []streamEvent
	evDue atomic.Bool
}

// streamEvent is an ack or nack frame read from stream s for a channel.
type streamEvent struct {
	s         *outStream
	nack      bool
	seq       uint64
	code, msg string
}

// outItem is what the machine carries for one envelope.
type outItem struct {
	env       *envelope.Envelope
	done      func(error)
	report    sentReport // the message-sent event due on acknowledgement
	urgent    bool       // flush at once: someone waits for this envelope or its answer
	ackNow    bool       // the sender waits for the acknowledgement itself
	enq       time.Time
	expires   time.Time // end of its time to live while the peer is away (zero: none)
	persisted bool      // handed to the persister (the write may still be running)
	stored    bool      // written: the outbox commit succeeded
	raw       []byte    // the envelope's CBOR, for the outbox
	buf       *[]byte   // raw's buffer, back to encBufs once settled unless persisted
}

// encBufs recycles the buffers envelopes are encoded into: an envelope's
// encoding lives until its acknowledgement, a few milliseconds, and was
// the largest allocation of a message (two per round trip). A buffer goes
// back once its envelope is settled, under the channel's mutex, which every
// write of it holds too, and never after the persister took it (it writes
// outside the mutex).
var encBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledEnc is the largest buffer encBufs keeps.
const maxPooledEnc = 16 << 10

// release gives oi's encoding buffer back, if it may.
func (oi *outItem) release() {
	if oi.buf != nil && !oi.persisted {
		oi.raw = nil
		encBufs.Put(oi.buf)
	}
	oi.buf = nil
}

// sentReport asks for a message-sent event when the envelope is
// acknowledged (with the cards' tiers: two cards would be most of a
// kilobyte per envelope in flight). Carried in the outItem rather than in
// a closure: one allocation less per envelope.
type sentReport struct {
	on               bool
	fromTier, toTier tiers.Tier
}

// noWait is the done of an envelope whose sender does not wait for its
// acknowledgement.
func noWait(error) {}

// maxPending bounds the unacknowledged envelopes of one channel, and
// maxOutbox those of all channels together (what waits for a node that is
// away included). Beyond either, a send fails with QUEUE_FULL.
const (
	maxPending     = 10000
	maxPeerPending = 50000 // on all channels to one peer
	maxOutbox      = 100000
)

func (r *Router) newOutChannel(from, to string, p peer.ID) *outChannel {
	return &outChannel{r: r, id: envelope.NewID(), from: from, to: to, p: p}
}

// outChannelFor returns the open-or-opening channel from -> to, creating it.
func (r *Router) outChannelFor(from, to string, p peer.ID) *outChannel {
	key := agentPair{from, to}
	r.mu.Lock()
	c := r.outByPair[key]
	if c != nil && !c.closed.Load() {
		r.mu.Unlock()
		return c
	}
	// The new channel has its machine, and its mutex held, before anyone
	// else can see it: c.mu ranks before r.mu (lock order: see package
	// doc), and is taken under it only because nobody else can hold it yet.
	c = r.newOutChannel(from, to, p)
	m, acts := channel.New(r.o.channel)
	c.m = m
	c.mu.lockUnshared()
	r.outByPair[key] = c
	r.outByID[c.id] = c
	r.mu.Unlock()
	c.perform(acts)
	c.unlock()
	return c
}

func (r *Router) outChannelByID(id string) *outChannel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outByID[id]
}

// enqueue hands env to the channel. done (which must not block) is called
// once with nil when the receiver took it, or with the reason it never will.
func (c *outChannel) enqueue(env *envelope.Envelope, raw []byte, buf *[]byte, urgent, ackNow bool, enq, expires time.Time, done func(error), report sentReport) error {
	// For an envelope on a channel with few unacknowledged (a request now
	// and then, its answer) the persister is woken after the frame went to
	// the stream (defers run last first): the wake-up, which may bring up
	// an idle CPU, is then not on the envelope's way out. Behind a backlog
	// (a stream of posts) it is woken at once: a write may wait for the
	// peer's window, and the persister's passes checkpoint the journal.
	wake := false
	defer func() {
		if wake {
			c.r.wakePersister()
		}
	}()
	c.mu.Lock()
	defer c.unlock()
	if c.stopped {
		return ErrChannelClosed
	}
	if len(c.m.Pending()) >= maxPending {
		return &queueFullError{Target: c.to, Reason: fmt.Sprintf("%d envelopes already wait for acknowledgement on this channel", maxPending)}
	}
	if c.r.outboxLen.Load() >= maxOutbox {
		return &queueFullError{Target: c.to, Reason: fmt.Sprintf("the outbox holds %d envelopes, its limit", maxOutbox)}
	}
	peerLen := c.r.peerOutbox(c.p)
	if peerLen.Load() >= maxPeerPending {
		return &queueFullError{Target: c.to, Reason: fmt.Sprintf("%d envelopes already wait for that agent's node", maxPeerPending)}
	}
	if c.m.State() == channel.Closed {
		return fmt.Errorf("%w: the channel closed", ErrChannelClosed)
	}
	if j := c.r.o.journal; j != nil {
		// In the journal before Post returns: a crash from here on loses
		// nothing accepted.
		// The channel's addresses go in its first record of each
		// generation of the journal only.
		written := false
		if c.jgen != 0 {
			c.jbuf = appendPutRec(c.jbuf[:0], c.id, "", "", c.m.NextSeq(), expires, raw)
			written = j.AppendIn(c.jgen, c.jbuf)
		}
		if !written {
			c.jbuf = appendPutRec(c.jbuf[:0], c.id, c.from, c.to, c.m.NextSeq(), expires, raw)
			gen, err := j.Append(c.jbuf)
			if err != nil {
				return &queueFullError{Target: c.to, Reason: fmt.Sprintf("the outbox journal is full until the node writes it out: %v", err)}
			}
			c.jgen = gen
		}
	}
	fresh := c.m.Fresh()
	lone := len(c.m.Pending()) < answerAckMax
	oi := &outItem{env: env, raw: raw, buf: buf, done: done, report: report, urgent: urgent, ackNow: ackNow, enq: enq, expires: expires}
	it, transmit, err := c.m.Enqueue(oi)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrChannelClosed, err)
	}
	c.r.outboxLen.Add(1)
	peerLen.Add(1)
	// Not wakePersisterBy, though an envelope on an open channel is written
	// only if still unacknowledged after persistAfter: the passes a stream
	// of envelopes wakes also checkpoint the journal, which would fill
	// (and fail the sends) without them.
	if lone {
		wake = true
	} else {
		c.r.wakePersister()
	}
	if c.m.State() == channel.Away {
		// The peer is away: a waiting sender hears so now, and the
		// envelope waits with the others. Someone waiting for it or its
		// answer brings the next dial forward.
		c.parkItemLocked(it)
		if urgent && !c.m.Dialing() {
			if c.timer != nil {
				c.timer.Stop()
			}
			c.stepLocked(channel.Wake{})
		}
		c.armExpiryLocked()
		return nil
	}
	if transmit {
		c.transmit([]channel.Item{it})
	}
	if fresh && c.timer != nil && c.timer.Stop() {
		// The channel was redialling with nothing to send, on a delay
		// chosen for no envelope: this one starts its own schedule with a
		// dial now (unless one is under way, or due: the timer fired).
		c.r.emitChannel(c, redialForEnvelope)
		c.stepLocked(channel.RetryDue{})
	}
	return nil
}

// peerOutbox is the count of envelopes pending on every channel to p. The
// entry stays while the Router lives: one per peer ever sent to, which
// the channel bounds keep in proportion.
func (r *Router) peerOutbox(p peer.ID) *atomic.Int64 {
	if v, ok := r.peerQueued.Load(p); ok {
		return v.(*atomic.Int64)
	}
	v, _ := r.peerQueued.LoadOrStore(p, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// parkItemLocked tells the sender waiting for item it's acknowledgement
// that the peer is away and the envelope waits (its done is then spent:
// the outcome is reported by events only). A request, whose sender waits
// for an answer that cannot come while the node is away, fails instead;
// the caller collects those with expiredRequests. Caller holds mu.
func (c *outChannel) parkItemLocked(it channel.Item) {
	oi := it.Data.(*outItem)
	if oi.done == nil || !oi.ackNow || oi.env.Type.AsksForAnswer() {
		return
	}
	oi.done(&PeerAwayError{Target: c.to, Until: oi.expires})
	oi.done = nil
	oi.report.on = true // its acknowledgement, later, is reported as an event
}

// parkLocked runs when the channel parks: requests fail now (their
// senders wait for answers), waiting senders of the rest hear PEER_AWAY,
// and the expiry timer starts. Caller holds mu.
func (c *outChannel) parkLocked() {
	for _, it := range c.m.Pending() {
		c.parkItemLocked(it)
	}
	c.failRequestsLocked()
}

// failRequestsLocked fails the pending requests of a parked channel (and
// envelopes without a time to live): their senders wait for answers, which
// cannot come while the node is away. It runs when the channel parks and
// after each failed dial while parked (a request sent meanwhile brought
// that dial forward). Caller holds mu.
func (c *outChannel) failRequestsLocked() {
	if c.m.State() != channel.Away {
		return
	}
	var requests []uint64
	for _, it := range c.m.Pending() {
		if oi := it.Data.(*outItem); oi.env.Type.AsksForAnswer() || oi.expires.IsZero() {
			requests = append(requests, it.Seq)
		}
	}
	if len(requests) > 0 {
		c.stepLocked(channel.Expire{Seqs: requests, Msg: fmt.Sprintf("gave up after %d retries: the node is away, and a request waits for an answer", c.r.o.channel.Retries)})
	}
	c.armExpiryLocked()
}

// armExpiryLocked sets the expiry timer for the earliest end of a pending
// envelope's time to live, while the channel is parked. Caller holds mu.
func (c *outChannel) armExpiryLocked() {
	if c.m.State() != channel.Away {
		c.stopExpiryLocked()
		return
	}
	var first time.Time
	for _, it := range c.m.Pending() {
		if e := it.Data.(*outItem).expires; !e.IsZero() && (first.IsZero() || e.Before(first)) {
			first = e
		}
	}
	c.stopExpiryLocked()
	if first.IsZero() {
		return
	}
	c.expTimer = time.AfterFunc(max(0, first.Sub(clock.Now())), c.expireDue)
}

func (c *outChannel) stopExpiryLocked() {
	if c.expTimer != nil {
		c.expTimer.Stop()
		c.expTimer = nil
	}
}

// expireDue fails the parked envelopes whose time to live is over.
func (c *outChannel) expireDue() {
	c.mu.Lock()
	defer c.unlock()
	if c.stopped || c.m.State() != channel.Away {
		return
	}
	now := clock.Now()
	var gone []uint64
	for _, it := range c.m.Pending() {
		if e := it.Data.(*outItem).expires; !e.IsZero() && !now.Before(e) {
			gone = append(gone, it.Seq)
		}
	}
	if len(gone) > 0 {
		c.stepLocked(channel.Expire{Seqs: gone, Msg: "not delivered within its time to live: the node stayed away"})
	}
	c.armExpiryLocked()
}

// journalSettled records in the journal that items are settled, so that a
// replay after a crash does not bring them back. Caller holds mu.
func (c *outChannel) journalSettled(items []channel.Item) {
	j := c.r.o.journal
	if j == nil || len(items) == 0 {
		return
	}
	seqs := make([]uint64, len(items))
	for i, it := range items {
		seqs[i] = it.Seq
	}
	c.jbuf = appendDelRec(c.jbuf[:0], c.id, seqs)
	c.r.journalAppend(c.jbuf)
}

// redialForEnvelope is the channel event of a redial brought forward by an
// envelope sent to an idle channel that was redialling.
const redialForEnvelope = "redial now: an envelope to send"

// step applies an event; invalid transitions (late acks, stale timers) are
// dropped with a debug log.
func (c *outChannel) step(e channel.Event) {
	c.mu.Lock()
	defer c.unlock()
	c.stepLocked(e)
}

func (c *outChannel) stepLocked(e channel.Event) {
	if c.stopped {
		return
	}
	acts, err := c.m.Step(e)
	if err != nil {
		c.r.log.Debugw("channel event ignored", "channel", c.id, "err", err)
		return
	}
	c.perform(acts)
}

// fromStream takes an ack or nack read from stream s. It never waits for
// mu: the event is queued (consecutive acks merge: they are cumulative) and
// applied now if mu is free, else by the holder of mu when it unlocks.
func (c *outChannel) fromStream(ev streamEvent) {
	c.evMu.Lock()
	if n := len(c.evs); n > 0 && !ev.nack && !c.evs[n-1].nack && c.evs[n-1].s == ev.s {
		c.evs[n-1].seq = max(c.evs[n-1].seq, ev.seq)
	} else {
		c.evs = append(c.evs, ev)
	}
	c.evMu.Unlock()
	c.evDue.Store(true)
	if c.mu.TryLock() {
		c.applyStreamLocked()
		c.unlock()
	}
}

// applyStreamLocked applies the queued stream events in order; those of a
// stream the channel is no longer bound to are dropped, as they always
// were. Caller holds mu.
func (c *outChannel) applyStreamLocked() {
	c.evDue.Store(false)
	c.evMu.Lock()
	evs := c.evs
	c.evs = nil
	c.evMu.Unlock()
	for _, ev := range evs {
		switch {
		case ev.s != c.st:
		case ev.nack:
			c.stepLocked(channel.Nack{Seq: ev.seq, Code: ev.code, Msg: ev.msg})
		default:
			c.stepLocked(channel.Ack{Seq: ev.seq})
		}
	}
}

// unlock releases mu, first applying the stream events queued while it was
// held. An event queued just as mu is released is not left behind: its
// reader set evDue before trying mu, so either its TryLock succeeds or this
// check sees evDue.
//
// Frames the holder queued (transmit) are then written, after mu is
// released.
func (c *outChannel) unlock() {
	if c.release() {
		c.flushSends()
	}
}

// release is unlock without the writing: it reports whether frames were
// queued for the caller to write.
func (c *outChannel) release() (sendDue bool) {
	for {
		if c.evDue.Load() {
			c.applyStreamLocked()
		}
		sendDue = sendDue || c.sendDue
		c.sendDue = false
		c.mu.Unlock()
		if !c.evDue.Load() || !c.mu.TryLock() {
			return sendDue
		}
	}
}

// flushSends writes the channel's queued frames, in order, until none are
// left. It holds sendMu, not mu, while it writes: a peer that stops reading
// blocks this sender (and later senders of the channel, in line for
// sendMu) but nobody who only needs the channel's state.
// maxSpareSend caps the send buffer a channel keeps for reuse: a burst
// (a retransmission after a reconnection) may need megabytes once, and a
// node may hold thousands of channels.
const maxSpareSend = 16 << 10

func (c *outChannel) flushSends() {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	for c.sendQueued.Load() {
		c.mu.Lock()
		st, buf, urgent := c.sendSt, c.sendBuf, c.sendUrgent
		stale := st != c.st // bound for a stream since lost: the channel retransmits on reconnection
		c.sendBuf, c.sendUrgent = c.spareBuf[:0], false
		c.sendQueued.Store(false)
		c.release() // frames queued meanwhile are this loop's to write
		if !stale && len(buf) > 0 {
			_ = st.writeFramed(buf, urgent) // a failed write fails the stream, and the channel with it
		}
		c.spareBuf = nil
		if cap(buf) <= maxSpareSend {
			c.spareBuf = buf[:0]
		}
	}
}

func (c *outChannel) transportLost(s *outStream, err error) {
	c.mu.Lock()
	defer c.unlock()
	if c.st == s {
		c.st = nil
		c.stepLocked(channel.TransportLost{Err: err})
	}
}

// perform carries out the machine's actions. Caller holds c.mu.
func (c *outChannel) perform(acts []channel.Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case channel.Dial:
			c.st = nil
			attempt := c.m.Attempt()
			if c.m.State() == channel.Reconnecting {
				// A redial even at attempt 0 (the first of an envelope
				// sent to an idle channel that was redialling): clear the
				// dial backoff and bound the connect, as for the others.
				attempt = max(attempt, 1)
			}
			if !c.r.spawn(func() { c.dial(attempt) }) {
				c.stopped = true
			}
		case channel.Transmit:
			c.transmit(a.Items)
		case channel.Schedule:
			if c.timer != nil {
				c.timer.Stop()
			}
			c.timer = time.AfterFunc(a.Delay, func() { c.step(channel.RetryDue{}) })
			detail := fmt.Sprintf("redial %d in %s", a.Attempt, a.Delay)
			if c.dialErr != nil {
				// What the failed dial met, so `events` tells a peer that
				// refuses from one that does not answer or a wrong address.
				// On one line: libp2p lists each address's error on its own.
				detail += fmt.Sprintf(": the dial failed after %s: %s", c.dialTook.Round(time.Millisecond), strings.Join(strings.Fields(c.dialErr.Error()), " "))
				c.dialErr = nil
			}
			c.r.emitChannel(c, detail)
			if c.m.State() == channel.Away {
				defer c.failRequestsLocked() // a dial while parked failed
			}
		case channel.Delivered:
			c.r.outboxLen.Add(-int64(len(a.Items)))
			c.r.peerOutbox(c.p).Add(-int64(len(a.Items)))
			c.journalSettled(a.Items)
			var now time.Time
			for _, it := range a.Items {
				oi := it.Data.(*outItem)
				if oi.persisted {
					c.settled = append(c.settled, it.Seq)
					c.r.wakePersister()
				}
				if oi.done != nil {
					oi.done(nil)
				}
				if oi.report.on {
					if now.IsZero() {
						now = clock.Now()
					}
					c.r.emitSentTiersAt(oi.env, int(oi.report.fromTier), int(oi.report.toTier), PathRemote, oi.enq, now)
				}
				oi.release()
			}
		case channel.Failed:
			c.r.outboxLen.Add(-int64(len(a.Items)))
			c.r.peerOutbox(c.p).Add(-int64(len(a.Items)))
			c.journalSettled(a.Items)
			for _, it := range a.Items {
				oi := it.Data.(*outItem)
				if oi.persisted {
					c.settled = append(c.settled, it.Seq)
					c.r.wakePersister()
				}
				if !a.Remote && c.r.wasAnswered(oi.env) {
					// Its answer proved it arrived: no failure to report.
					if oi.done != nil {
						oi.done(nil)
					}
					if oi.report.on {
						c.r.emitSentTiersAt(oi.env, int(oi.report.fromTier), int(oi.report.toTier), PathRemote, oi.enq, clock.Now())
					}
					oi.release()
					continue
				}
				err := c.failure(a)
				c.r.emitFailure(oi.env, c, err)
				if oi.done != nil {
					oi.done(err)
				}
				oi.release()
			}
		case channel.StateChanged:
			// The connection manager must not trim a peer we have an open channel to.
			switch a.To {
			case channel.Open:
				c.stopExpiryLocked()
				c.r.h.ConnManager().Protect(c.p, "nova/channel/"+c.id)
			case channel.Closed:
				c.stopExpiryLocked()
				if j := c.r.o.journal; j != nil {
					c.jbuf = appendDropRec(c.jbuf[:0], c.id)
					c.r.journalAppend(c.jbuf)
				}
				c.closed.Store(true)
				c.r.h.ConnManager().Unprotect(c.p, "nova/channel/"+c.id)
			}
			c.r.emitChannel(c, a.From.String()+" -> "+a.To.String())
			if a.To == channel.Away {
				defer c.parkLocked() // after the rest of this step's actions
			}
			// Off Open, pending envelopes are written at once; closed, the
			// channel's outbox entry goes.
			c.r.wakePersister()
		}
	}
}

func (c *outChannel) failure(a channel.Failed) error {
	switch {
	case a.Remote:
		return &RemoteError{ErrCode: a.Code, Message: a.Msg, Peer: c.p}
	case a.Code == channel.ReasonChannelClosed && c.refusal != nil:
		return c.refusal
	case a.Code == channel.ReasonDeliveryFailed:
		return &deliveryError{Target: c.to, Reason: a.Msg}
	case a.Code == channel.ReasonChannelClosed:
		return fmt.Errorf("%w: %s", ErrChannelClosed, a.Msg)
	}
	return &RemoteError{ErrCode: a.Code, Message: a.Msg, Peer: c.p}
}

// transmit writes items to the bound stream. A failed write fails the stream,
// which reports TransportLost; the items stay pending for the retransmission.
// Each frame is built straight in the stream's buffer from the envelope's
// encoding (kept for the outbox anyway): no frame is allocated per send.
func (c *outChannel) transmit(items []channel.Item) {
	if c.st == nil {
		return
	}
	if c.sendSt != c.st {
		c.sendSt, c.sendBuf, c.sendUrgent = c.st, c.sendBuf[:0], false
	}
	urgent := len(items) > 1
	for _, it := range items {
		oi := it.Data.(*outItem)
		urgent = urgent || oi.urgent
		c.sendBuf = appendFramedEnv(c.sendBuf, c.id, it.Seq, oi.raw, oi.ackNow)
	}
	c.sendUrgent = c.sendUrgent || urgent
	c.sendDue = true
	c.sendQueued.Store(true)
}

// dial runs on a Router goroutine. It opens the channel on the stream to its peer. attempt is 0 for the
// first dial and n for the nth redial after a loss.
//
// A redial is a fresh try: libp2p's dial backoff (5 s and more after a
// failed dial) would otherwise answer the second and third redials from
// the failure of the first without dialling, so a peer back within the
// retries would still be given up on. In exchange a redial waits for its
// connection to a peer it is not connected to no longer than the delay
// that preceded it, and at least redialMin, so that an address that never
// answers (a QUIC handshake to a gone host waits up to 10 s) does not
// stretch the retries far past their schedule.
// redialMin is the least time a redial waits for its dial: TCP, TLS and
// yamux take three round trips, QUIC one or two. On a link slower than
// that the later redials, with longer delays, wait longer.
const redialMin = time.Second

func (c *outChannel) dial(attempt int) {
	ctx, cancel := context.WithTimeout(c.r.ctx, 10*time.Second)
	defer cancel()
	connect := ctx
	if attempt > 0 && c.r.h.Network().Connectedness(c.p) != network.Connected {
		// Only reaching the peer is bounded short; the open's answer may
		// queue behind other channels' retransmissions on a slow link.
		if sw, ok := c.r.h.Network().(*lpswarm.Swarm); ok {
			sw.Backoff().Clear(c.p)
		}
		var cancelConnect context.CancelFunc
		connect, cancelConnect = context.WithTimeout(ctx, max(redialMin, c.r.o.channel.Base<<(attempt-1)))
		defer cancelConnect()
	}
	began := time.Now()
	s, err := c.r.stream(connect, c.p)
	var w, taken uint64
	if err == nil {
		w, taken, err = s.openChannel(ctx, c)
	}
	c.mu.Lock()
	defer c.unlock()
	if c.stopped || c.m.State() == channel.Closed { // closed meanwhile (CloseChannel)
		return
	}
	var re *RemoteError
	if errors.As(err, &re) {
		// The receiver refused the channel (policy, unknown agent): final.
		c.refusal = err
		c.stepLocked(channel.Close{})
		return
	}
	if err != nil {
		c.dialErr, c.dialTook = err, time.Since(began)
		c.stepLocked(channel.DialFailed{Err: err})
		return
	}
	if !s.bind(c) {
		c.stepLocked(channel.DialFailed{Err: errors.New("stream lost while opening")})
		return
	}
	c.st = s
	c.stepLocked(channel.Connected{Watermark: w, Taken: taken})
}

// redialNow brings a scheduled redial forward: the peer was just seen again
// (it connected and identified), so waiting out the delay would only hold
// its envelopes back. A redial already under way is left alone.
func (c *outChannel) redialNow() {
	c.mu.Lock()
	defer c.unlock()
	if !c.stopped && c.m.State() == channel.Away && !c.m.Dialing() {
		if c.timer != nil {
			c.timer.Stop()
		}
		c.r.emitChannel(c, "dial now: the away peer was seen again")
		c.stepLocked(channel.Wake{})
		return
	}
	if c.stopped || c.timer == nil || c.m.State() != channel.Reconnecting {
		return
	}
	if !c.timer.Stop() {
		return // fired (its RetryDue is on the way) or already brought forward
	}
	c.r.emitChannel(c, "redial now: peer seen again")
	c.stepLocked(channel.RetryDue{})
}

// stop freezes the channel for shutdown: nothing is failed, pending items
// stay for the outbox.
func (c *outChannel) stop() {
	c.mu.Lock()
	defer c.unlock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.stopExpiryLocked()
}

func (c *outChannel) info() ChannelInfo {
	c.mu.Lock()
	defer c.unlock()
	return c.infoLocked()
}

func (c *outChannel) infoLocked() ChannelInfo {
	pending := c.m.Pending()
	stored := 0
	for _, it := range pending {
		if it.Data.(*outItem).stored {
			stored++
		}
	}
	info := ChannelInfo{ID: c.id, From: c.from, To: c.to, Peer: c.p, State: c.m.State().String(), Pending: len(pending), Stored: stored, NextSeq: c.m.NextSeq()}
	if len(pending) > 0 {
		info.OldestAgeMs = clock.Now().Sub(pending[0].Data.(*outItem).enq).Milliseconds()
	}
	return info
}

// persistOps returns the outbox changes of this channel: items unacknowledged
// for longer than after (or all, when the channel is not open or force), and
// persisted items settled since; the items it hands over (for saved); and
// when the first item left unwritten falls due (zero: none is left).
//
// forget reports a closed channel with nothing on disk: the Router drops
// it (a closed channel never reopens; the next envelope to the pair opens
// a new one), so that status does not list it for good.
func (c *outChannel) persistOps(now time.Time, after time.Duration, force bool) (op OutboxOp, put []*outItem, ok bool, due time.Time, forget bool) {
	c.mu.Lock()
	defer c.unlock()
	op = OutboxOp{Channel: c.id, Delete: c.settled}
	c.settled = nil
	open := c.m.State() == channel.Open
	for _, it := range c.m.Pending() {
		oi := it.Data.(*outItem)
		if oi.persisted || oi.raw == nil {
			continue
		}
		if force || !open || now.Sub(oi.enq) >= after {
			oi.persisted = true
			op.Put = append(op.Put, OutboxItem{Seq: it.Seq, Env: oi.raw, Expires: oi.expires})
			put = append(put, oi)
		} else if d := oi.enq.Add(after); due.IsZero() || d.Before(due) {
			due = d
		}
	}
	if len(op.Put) > 0 && !c.metaSaved {
		op.From, op.To = c.from, c.to
		c.metaSaved = true
	}
	closed := c.m.State() == channel.Closed
	if closed && c.metaSaved && len(op.Put) == 0 {
		op.Drop = true
		c.metaSaved = false
	}
	ok = len(op.Put) > 0 || len(op.Delete) > 0 || op.Drop
	return op, put, ok, due, closed && !ok && !c.metaSaved
}

// saved records the outcome of writing op, with put its items: they are
// stored; or, when the write failed, handed back for a later pass to write
// again, with op's deletions and its drop (items of a failed pass left
// marked as written would never reach the disk).
func (c *outChannel) saved(op OutboxOp, put []*outItem, err error) {
	c.mu.Lock()
	defer c.unlock()
	for _, oi := range put {
		if err == nil {
			oi.stored = true
		} else {
			oi.persisted = false
		}
	}
	if err != nil {
		c.settled = append(op.Delete, c.settled...)
		if op.From != "" {
			c.metaSaved = false
		}
		if op.Drop {
			c.metaSaved = true // still on disk: the next pass drops it again
		}
	}
}

// CodeChannelNotFound is CloseChannel's code for an id that names no open
// channel of this node (a local code: it never crosses the wire).
const CodeChannelNotFound = "CHANNEL_NOT_FOUND"

// NoChannelError is CloseChannel's error for an id that names no channel
// this node holds open.
type NoChannelError struct{ ID string }

func (e *NoChannelError) Error() string {
	return fmt.Sprintf("protocol: no open channel %q on this node", e.ID)
}

// Code returns CHANNEL_NOT_FOUND.
func (e *NoChannelError) Code() string { return CodeChannelNotFound }

// CloseChannel closes outbound channel id (as Channels lists it), as the
// seed's A2AChannel.close: each envelope still waiting on it for its
// acknowledgement fails with CHANNEL_CLOSED (its sender's error and an
// error event; an envelope its peer may have taken unacknowledged is not
// taken back), its outbox entry goes, and it stops redialling. The next
// envelope between the same two agents opens a new channel. It returns the
// channel as it was just before.
func (r *Router) CloseChannel(id string) (ChannelInfo, error) {
	c := r.outChannelByID(id)
	if c == nil || c.closed.Load() {
		return ChannelInfo{}, &NoChannelError{ID: id}
	}
	info, err := c.close()
	if err != nil {
		return ChannelInfo{}, err
	}
	// The outbox entry goes now, not at the persister's next pass: a crash
	// in between would restore the channel and deliver envelopes that were
	// reported failed. (A pass already under way may write the entry back;
	// its next pass, finding the channel closed, drops it again.)
	if r.o.store != nil {
		if err := r.o.store.SaveOutbox([]OutboxOp{{Channel: id, Drop: true}}); err != nil {
			r.log.Warnw("closed channel's outbox entry not deleted yet (the persister tries again)", "channel", id, "err", err)
		}
	}
	r.wakePersister()
	return info, nil
}

// close closes the channel for CloseChannel and returns it as it was.
func (c *outChannel) close() (ChannelInfo, error) {
	c.mu.Lock()
	defer c.unlock()
	info := c.infoLocked()
	if c.stopped || c.m.State() == channel.Closed {
		return ChannelInfo{}, &NoChannelError{ID: c.id}
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.stopExpiryLocked()
	c.stepLocked(channel.Close{})
	if c.st != nil {
		c.st.unbind(c) // the stream would otherwise hold it while it lives
		c.st = nil
	}
	return info, nil
}

// Channels describes the outbound channels.
func (r *Router) Channels() []ChannelInfo {
	r.mu.Lock()
	cs := make([]*outChannel, 0, len(r.outByID))
	for _, c := range r.outByID {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	out := make([]ChannelInfo, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.info())
	}
	return out
}
