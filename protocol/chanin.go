package protocol

import (
	"bufio"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/frame"
)

// inStream is the writing half of an inbound stream: the stream loop and
// the channel workers send opened/ack/nack frames through it.
type inStream struct {
	st  network.Stream
	mu  sync.Mutex
	bw  *bufio.Writer
	err error
}

func newInStream(st network.Stream) *inStream {
	return &inStream{st: st, bw: bufio.NewWriterSize(st, 16<<10)}
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
	if s.err != nil {
		return
	}
	if err := frame.Write(s.bw, b); err != nil {
		s.err = err
		return
	}
	if flush {
		_ = s.st.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if err := s.bw.Flush(); err != nil {
			s.err = err
		}
	}
}

func (s *inStream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && s.bw.Buffered() > 0 {
		_ = s.st.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if err := s.bw.Flush(); err != nil {
			s.err = err
		}
	}
}

// inChannel is the receiving side of one channel. Envelopes are queued in
// sequence order by the stream loop and handed to the agent's handler one at
// a time by a worker goroutine (owned by the Router, alive only while the
// queue is not empty); the watermark (highest sequence taken, delivered or
// refused) advances in order and is acknowledged when the queue drains, and
// persisted by the Router's persister, so a retransmission after a restart
// of either side is recognised as a duplicate.
type inChannel struct {
	key      string // <peerID>/<channel id>
	id       string
	from, to agentcard.Card

	mu        sync.Mutex
	watermark uint64
	queued    uint64 // highest sequence accepted into the queue
	queue     []inItem
	running   bool
	out       *inStream
	dirty     bool
}

type inItem struct {
	seq uint64
	env *envelope.Envelope
	err error // refused: nack instead of delivering
}

// accept queues one envelope (or its refusal) unless it is a duplicate, and
// makes sure a worker runs. It reports whether the item was a duplicate.
func (r *Router) accept(ic *inChannel, out *inStream, it inItem) bool {
	ic.mu.Lock()
	ic.out = out
	if it.seq <= ic.queued {
		w := ic.watermark
		idle := !ic.running
		ic.mu.Unlock()
		if idle {
			out.send(&wireMsg{Kind: kindAck, Ch: ic.id, Seq: w}, false)
		}
		return true
	}
	ic.queued = it.seq
	// Fast path: the answer to a request this node is waiting for, with
	// nothing queued before it, is handed over here without waking a worker
	// (order is kept: the queue is empty). Handlers never run here.
	if !ic.running && it.err == nil && it.env != nil && r.isAwaited(it.env, ic) {
		ic.running = true
		ic.mu.Unlock()
		_ = r.deliverSync(it.env, ic.from, ic.to, out)
		ic.mu.Lock()
		ic.watermark, ic.dirty = it.seq, true
		if len(ic.queue) == 0 {
			ic.running = false
			w := ic.watermark
			ic.mu.Unlock()
			out.send(&wireMsg{Kind: kindAck, Ch: ic.id, Seq: w}, false)
			return false
		}
		ic.mu.Unlock()
		if !r.spawn(func() { r.work(ic) }) {
			ic.mu.Lock()
			ic.running = false
			ic.mu.Unlock()
		}
		return false
	}
	ic.queue = append(ic.queue, it)
	start := !ic.running
	ic.running = true
	ic.mu.Unlock()
	if start && !r.spawn(func() { r.work(ic) }) {
		ic.mu.Lock()
		ic.running = false
		ic.mu.Unlock()
	}
	return false
}

// work delivers queued envelopes in order, then acknowledges.
func (r *Router) work(ic *inChannel) {
	for {
		ic.mu.Lock()
		if len(ic.queue) == 0 || r.ctx.Err() != nil {
			ic.running = false
			w, out := ic.watermark, ic.out
			ic.mu.Unlock()
			if out != nil && w > 0 {
				out.send(&wireMsg{Kind: kindAck, Ch: ic.id, Seq: w}, true)
			}
			return
		}
		it := ic.queue[0]
		ic.queue = ic.queue[1:]
		out := ic.out
		ic.mu.Unlock()

		if it.err != nil {
			out.send(&wireMsg{Kind: kindNack, Ch: ic.id, Seq: it.seq, Code: CodeOf(it.err), Msg: it.err.Error()}, false)
		} else if err := r.deliverSync(it.env, ic.from, ic.to, out); err != nil {
			out.send(&wireMsg{Kind: kindNack, Ch: ic.id, Seq: it.seq, Code: CodeOf(err), Msg: err.Error()}, false)
		}
		ic.mu.Lock()
		ic.watermark = it.seq
		ic.dirty = true
		ic.mu.Unlock()
	}
}

// dirtyWatermarks collects changed watermarks for the persister.
func (r *Router) dirtyWatermarks() map[string]uint64 {
	r.mu.Lock()
	ics := make([]*inChannel, 0, len(r.inChans))
	for _, ic := range r.inChans {
		ics = append(ics, ic)
	}
	r.mu.Unlock()
	out := map[string]uint64{}
	for _, ic := range ics {
		ic.mu.Lock()
		if ic.dirty {
			out[ic.key] = ic.watermark
			ic.dirty = false
		}
		ic.mu.Unlock()
	}
	return out
}

// isAwaited reports whether env answers a request waiting on this node.
func (r *Router) isAwaited(env *envelope.Envelope, ic *inChannel) bool {
	if !isAnswerType(env.Type) || env.CorrelationID == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pr := r.pending[env.CorrelationID]
	return pr != nil && pr.from == ic.to.Address() && pr.to == ic.from.Address()
}
