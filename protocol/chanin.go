package protocol

import (
	"bufio"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/frame"
)

// Acknowledgements are coalesced: a receiver acknowledges a channel's
// watermark at most ackDelay after it advanced, and at once when the
// sender asked (envMsg.AckNow, set by Router.Send, which waits for it) or
// when its queue drains with ackEvery envelopes unacknowledged. This holds
// while a backlog is worked off (a slow agent, a burst), not only once the
// queue drained: what a receiver delivered but has not acknowledged is
// delivered again if it crashes, and held by the sender meanwhile. A
// one-way stream needs one ack per batch, not per envelope: each ack frame
// costs a transport write on one side and a read on the other (see
// "Performance rules" in the design).
//
// A channel whose envelopes handled since its last ack are all questions
// (a request, a task proposal) or answers is acknowledged within
// answerAckDelay instead, as long as no more than answerAckMax of them
// wait: a question's answer tells its sender that it arrived, and the
// sender of an answer only holds it a little longer, well inside
// persistAfter, so nothing is written for it. A request made now and then
// thus costs no ack frame of its own on either side: the acks of several
// requests share one frame, written while nobody waits on the CPU (an ack
// frame per request, each written by the 2 ms timer after the process went
// idle, would be the largest part of a sporadic request's CPU). A burst of requests goes over answerAckMax and is
// acknowledged within ackDelay like any other traffic, so a fast requester
// never meets maxPending.
const (
	ackDelay       = 2 * time.Millisecond
	ackEvery       = 256
	answerAckDelay = 200 * time.Millisecond
	answerAckMax   = 32
)

// inStream is the writing half of an inbound stream: the stream loop and
// the channel workers send opened/ack/nack frames through it, and its ack
// timer sends the coalesced acknowledgements (on a Router goroutine).
// Lock order: see package doc.
//
// Its write buffer comes from inWriters when a frame is written to an
// empty one, and goes back when a flush empties it, all under mu: an idle
// inbound stream holds none. Every frame written is flushed by whoever
// wrote it or later (the stream loop when its input drains, the ack
// timer, a prompt ack), as with a buffer of its own.
type inStream struct {
	r    *Router
	st   network.Stream
	mu   orderedMutex[lockInStream]
	sink io.Writer     // the stream with its write deadline (deadlineWriter), made once
	bw   *bufio.Writer // from inWriters while it holds frames, else nil
	err  error
	dl   deadline

	ended         atomic.Bool             // the stream's reading is over (close): its channels may be evicted
	closedAtClose atomic.Bool             // closed by ackDueAtClose with its last acks: not to be reset
	due           map[*inChannel]struct{} // channels whose watermark awaits an ack
	timer         *time.Timer             // sends due acks; armed while due is not empty
	armed         bool
	fires         time.Time // when the armed timer fires
}

// inWriters are the write buffers of inbound streams (acks, opened,
// nacks), held by a stream only while frames wait in them.
var inWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, inWriteBuffer) }}

func newInStream(r *Router, st network.Stream) *inStream {
	s := &inStream{r: r, st: st}
	s.sink = deadlineWriter{st, &s.dl}
	return s
}

// send writes one frame and flushes if asked. Errors are sticky; the stream
// loop notices the broken stream on its next read.
func (s *inStream) send(m *wireMsg, flush bool) {
	b, err := encodeMsg(m)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeLocked(b, flush)
}

func (s *inStream) writeLocked(b []byte, flush bool) {
	if s.err != nil {
		return
	}
	if s.bw == nil {
		s.bw = inWriters.Get().(*bufio.Writer)
		s.bw.Reset(s.sink)
	}
	if err := frame.Write(s.bw, b); err != nil {
		s.failLocked(err)
		return
	}
	if flush {
		s.flushLocked()
	}
}

// failLocked makes a write error sticky and resets the stream: its peer
// and our stream loop see it end, and the channels reopen on a new one
// (acks written after a failed write would never leave).
func (s *inStream) failLocked(err error) {
	s.err = err
	s.bw = nil // holding what never left: not for another stream
	_ = s.st.Reset()
}

func (s *inStream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

// flushLocked writes what is buffered and gives the emptied buffer back.
func (s *inStream) flushLocked() {
	if s.err != nil || s.bw == nil {
		return
	}
	if err := s.bw.Flush(); err != nil {
		s.failLocked(err)
		return
	}
	s.bw.Reset(nil) // no hold on the stream from the pool
	inWriters.Put(s.bw)
	s.bw = nil
}

// ack acknowledges ic's watermark now (flushed if asked), unless an ack
// already covers it. The watermark counts as acknowledged only once its
// frame is written on a live stream.
func (s *inStream) ack(ic *inChannel, flush bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ic.mu.Lock()
	ic.ackSoon = false // whatever was scheduled is being done (or the stream is gone)
	w, due := ic.watermark, ic.watermark > ic.acked
	ic.mu.Unlock()
	if s.err != nil {
		return
	}
	if due {
		b, err := encodeMsg(&wireMsg{Kind: kindAck, Ch: ic.id, Seq: w})
		if err != nil {
			return
		}
		if s.writeLocked(b, false); s.err != nil {
			return
		}
		ic.mu.Lock()
		ic.acked = max(ic.acked, w)
		if ic.acked == ic.watermark {
			ic.ackPrompt = false
		}
		ic.mu.Unlock()
	}
	if flush {
		s.flushLocked()
	}
}

// ackLater schedules an acknowledgement of ic's watermark within delay
// (ackDelay or answerAckDelay): a timer armed for later is brought forward,
// one armed sooner takes ic along.
func (s *inStream) ackLater(ic *inChannel, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		ic.mu.Lock()
		ic.ackSoon = false
		ic.mu.Unlock()
		return
	}
	if s.due == nil {
		s.due = make(map[*inChannel]struct{}, 1)
	}
	s.due[ic] = struct{}{}
	at := time.Now().Add(delay)
	if s.armed {
		// Fired but not run yet (Stop reports false): sendDue takes ic
		// with the others in a moment.
		if at.Before(s.fires) && s.timer.Stop() {
			s.fires = at
			s.timer.Reset(delay)
		}
		return
	}
	s.armed, s.fires = true, at
	if s.timer == nil {
		// The timer only hands over: the acks are written on a Router
		// goroutine, which Close waits for.
		s.timer = time.AfterFunc(delay, func() {
			if !s.r.spawn(s.sendDue) {
				s.close() // the Router is closing: nothing more to ack
			}
		})
	} else {
		s.timer.Reset(delay)
	}
}

// sendDue runs on the ack timer: it acknowledges every due channel in one
// flush.
func (s *inStream) sendDue() {
	s.mu.Lock()
	due := s.due
	s.due, s.armed = nil, false
	s.mu.Unlock()
	for ic := range due {
		s.ack(ic, false)
	}
	s.flush()
}

// ackDueAtClose writes the acks still due on ins as the Router closes, and
// closes the streams it wrote them on (Close resets the others), so
// that what this node took is neither sent again to its next run nor
// reported undelivered by a sender that cannot reach it any more: an
// answer's ack waits up to answerAckDelay, and a node that asks one
// question and stops closes within it. It first lets the channel work
// under way finish (its requester may have woken before its ack was
// scheduled; the Router's ctx ended, the work stops after the envelope in
// hand), then writes on goroutines of r.wg, which Close waits for. It
// waits at most closeAckTimeout in all, for a slow handler or a peer that
// does not read; Close then resets the streams, which ends such a write.
func (r *Router) ackDueAtClose(ins []*inStream) {
	t := time.NewTimer(closeAckTimeout)
	defer t.Stop()
	for r.working.Load() > 0 {
		select {
		case <-r.workIdle:
		case <-t.C:
			return
		}
	}
	done := make(chan struct{}, len(ins))
	n := 0
	for _, s := range ins {
		s.mu.Lock()
		due := s.err == nil && len(s.due) > 0
		s.mu.Unlock()
		if due {
			n++
			r.wg.Go(func() {
				s.sendDue()
				s.mu.Lock()
				if s.err == nil {
					// Closed, not reset: a reset stream's peer drops
					// what it has not read yet, these acks with it.
					s.closedAtClose.Store(true) // before: its reader sees the close at once
					_ = s.st.Close()
				}
				s.mu.Unlock()
				done <- struct{}{}
			})
		}
	}
	for ; n > 0; n-- {
		select {
		case <-done:
		case <-t.C:
			return
		}
	}
}

// workDone ends a span of channel work begun by r.working.Add(1).
func (r *Router) workDone() {
	if r.working.Add(-1) == 0 && r.ctx.Err() != nil {
		select {
		case r.workIdle <- struct{}{}:
		default:
		}
	}
}

// closeAckTimeout bounds the wait for the acks written by Router.Close.
const closeAckTimeout = 100 * time.Millisecond

// close stops the ack timer when the stream ends; acks still due are
// dropped (the sender retransmits what it has not seen acknowledged, and
// the watermark makes that a duplicate).
func (s *inStream) close() {
	s.ended.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = ErrChannelClosed
	}
	if s.bw != nil { // acks still buffered are dropped with the due ones
		s.bw.Reset(nil)
		inWriters.Put(s.bw)
		s.bw = nil
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	for ic := range s.due {
		ic.mu.Lock()
		ic.ackSoon = false
		ic.mu.Unlock()
	}
	s.due, s.armed = nil, false
}

// inChannel is the receiving side of one channel. Envelopes are queued in
// sequence order by the stream loop and handed to the agent's handler one at
// a time by a worker goroutine (owned by the Router, alive only while the
// queue is not empty); the watermark (highest sequence taken, delivered or
// refused) advances in order and is acknowledged when the queue drains, and
// persisted by the Router's persister, so a retransmission after a restart
// of either side is recognised as a duplicate.
type inChannel struct {
	key   string // <peerID>/<channel id>
	id    string
	cards atomic.Pointer[inCards] // replaced whole when a re-open refreshes them: read without mu by the stream loop

	mu        orderedMutex[lockInChannel]
	watermark uint64
	acked     uint64 // highest watermark sent in an ack
	queued    uint64 // highest sequence accepted into the queue
	queue     []inItem
	running   bool
	ackNow    bool // an item handled since the last ack asked for a prompt one
	ackSoon   bool // an ack is scheduled (ackLater) while the queue is worked off
	ackPrompt bool // an envelope handled since the last ack is neither a question nor an answer: ackDelay, not answerAckDelay
	out       *inStream
	dirty     bool

	known   atomic.Pointer[route] // the last attribution of the pair, for the stream loop (see receive)
	evicted atomic.Bool           // dropped from inChans (see evictIdleLocked): no longer takes envelopes
}

// inCards are the attributed cards of an inbound channel's pair.
type inCards struct{ from, to agentcard.Card }

type inItem struct {
	seq    uint64
	at     time.Time // when its frame arrived
	env    *envelope.Envelope
	err    error // refused: nack instead of delivering
	ackNow bool  // the sender waits for the acknowledgement
	answer bool  // a question or an answer: its ack may wait answerAckDelay
	taken  bool  // an answer already handed to its requester (see accept)
}

// accept queues one envelope (or its refusal) unless it is a duplicate. It
// reports whether the channel's work must be started: the caller then runs
// r.work(ic) (marked running here), on whatever goroutine it picks.
func (r *Router) accept(ic *inChannel, out *inStream, it inItem) (startWork bool) {
	ic.mu.Lock()
	ic.out = out
	if it.seq <= ic.queued {
		// A retransmission: the sender has not seen our ack, say it again.
		w := ic.watermark
		idle := !ic.running
		ic.mu.Unlock()
		if idle {
			out.send(&wireMsg{Kind: kindAck, Ch: ic.id, Seq: w}, false)
		}
		return false
	}
	ic.queued = it.seq
	ic.ackNow = ic.ackNow || it.ackNow
	// Fast path: the answer to a request this node is waiting for, with
	// nothing queued before it, is handed over here without waking a worker
	// (order is kept: the queue is empty). Handlers never run here.
	if !ic.running && it.err == nil && it.env != nil && r.isAwaited(it.env, ic) {
		ic.running = true
		ic.mu.Unlock()
		r.working.Add(1)
		defer r.workDone()
		c := ic.cards.Load()
		_ = r.deliverSync(it.env, c.from, c.to, out, it.at)
		r.journalMark(ic.key, it.seq)
		ic.mu.Lock()
		ic.watermark, ic.dirty = it.seq, true
		r.wakePersisterBy(time.Time{}) // written within watermarkEvery
		if len(ic.queue) == 0 {
			ic.running = false
			ic.mu.Unlock()
			r.ackDrained(ic, out, false)
			return false
		}
		ic.mu.Unlock()
		return true // queued meanwhile from another stream of the peer
	}
	// The channel's worker is busy, perhaps with the very handler that
	// waits for this answer (an agent asking back the agent that messaged
	// it): the answer is handed to its requester now, and the worker only
	// moves the watermark past it in its turn. Queued behind that handler,
	// it waited out the request's timeout. What handlers see keeps the
	// channel's order; only a requester's answer comes before it.
	if ic.running && it.err == nil && it.env != nil && r.isAwaited(it.env, ic) {
		c := ic.cards.Load()
		if r.takeAnswer(it.env, c.from, c.to, it.at) {
			it.env, it.taken = nil, true
		}
	}
	ic.queue = append(ic.queue, it)
	start := !ic.running
	ic.running = true
	ic.mu.Unlock()
	return start
}

// work delivers queued envelopes in order, then acknowledges.
func (r *Router) work(ic *inChannel) {
	r.working.Add(1)
	defer r.workDone()
	for {
		ic.mu.Lock()
		if len(ic.queue) == 0 || r.ctx.Err() != nil {
			ic.running = false
			out := ic.out
			ic.mu.Unlock()
			if out != nil {
				r.ackDrained(ic, out, true)
			}
			return
		}
		it := ic.queue[0]
		ic.queue[0] = inItem{} // the envelope is not the queue's any more
		if len(ic.queue) == 1 {
			ic.queue = ic.queue[:0] // reuse the array from its start
		} else {
			ic.queue = ic.queue[1:]
		}
		out := ic.out
		ic.mu.Unlock()

		err := it.err
		if err == nil && !it.taken {
			c := ic.cards.Load()
			err = r.deliverSync(it.env, c.from, c.to, out, it.at)
		}
		if err != nil {
			out.send(&wireMsg{Kind: kindNack, Ch: ic.id, Seq: it.seq, Code: CodeOf(err), Msg: err.Error()}, false)
		}
		r.journalMark(ic.key, it.seq) // delivered: a crash from here on does not deliver it again
		ic.mu.Lock()
		ic.watermark = it.seq
		ic.dirty = true
		ic.ackPrompt = ic.ackPrompt || !it.answer || it.err != nil
		r.wakePersisterBy(time.Time{}) // written within watermarkEvery
		// A backlog (a slow handler, a burst) is acknowledged as it is
		// worked off, not only once it drained: within ackDelay of the
		// first envelope not acknowledged, and at once for one whose
		// sender waits (Send). Not every ackEvery envelopes as well: at
		// 400k envelopes a second those acks cost the one-way rate 2-8%
		// (two interleaved sets of three runs), for a bound the 2 ms
		// already give.
		more := len(ic.queue) > 0 // otherwise ackDrained acknowledges
		now := more && it.ackNow
		soon := more && !now && !ic.ackSoon
		if soon {
			ic.ackSoon = true
		}
		ic.mu.Unlock()
		if now {
			out.ack(ic, true)
		} else if soon {
			out.ackLater(ic, ackDelay)
		}
	}
}

// ackDrained acknowledges ic once its queue drained: at once (flushed if
// flush) when the sender waits for it or many envelopes are unacknowledged,
// within answerAckDelay when all it handled since the last ack are a few
// questions and answers, otherwise within ackDelay.
func (r *Router) ackDrained(ic *inChannel, out *inStream, flush bool) {
	ic.mu.Lock()
	unacked := ic.watermark - ic.acked
	now := ic.ackNow || unacked >= ackEvery
	delay := ackDelay
	if !ic.ackPrompt && unacked <= answerAckMax {
		delay = answerAckDelay
	}
	ic.ackNow = false
	zero := ic.watermark == 0
	ic.mu.Unlock()
	switch {
	case zero:
	case now:
		out.ack(ic, flush)
	default:
		out.ackLater(ic, delay)
	}
}

// inChannels returns the inbound channels (a copy, taken under mu).
func (r *Router) inChannels() []*inChannel {
	r.mu.Lock()
	defer r.mu.Unlock()
	ics := make([]*inChannel, 0, len(r.inChans))
	for _, ic := range r.inChans {
		ics = append(ics, ic)
	}
	return ics
}

// anyDirtyWatermark reports whether a watermark changed since it was last
// collected.
func (r *Router) anyDirtyWatermark() bool {
	for _, ic := range r.inChannels() {
		ic.mu.Lock()
		dirty := ic.dirty
		ic.mu.Unlock()
		if dirty {
			return true
		}
	}
	return false
}

// dirtyWatermarks collects changed watermarks for the persister.
func (r *Router) dirtyWatermarks() map[string]uint64 {
	out := map[string]uint64{}
	for _, ic := range r.inChannels() {
		ic.mu.Lock()
		if ic.dirty {
			out[ic.key] = ic.watermark
			ic.dirty = false
		}
		ic.mu.Unlock()
	}
	return out
}

// isAwaited reports whether env (received: canonical addresses) answers a
// request waiting on this node.
func (r *Router) isAwaited(env *envelope.Envelope, ic *inChannel) bool {
	if !isAnswerType(env.Type) || env.CorrelationID == "" {
		return false
	}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	_, pr := r.awaitedLocked(env)
	return pr != nil
}
