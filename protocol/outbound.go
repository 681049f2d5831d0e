package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/streamscope"
)

// outStream is this node's one long-lived stream to a peer, shared by every
// channel to agents on that peer. Writers append frames to a 16 KiB buffer
// under wmu: an urgent write (a caller is waiting) flushes at once; other
// writes leave the flushing to the flusher goroutine, which flushes
// whatever has accumulated, so bursts coalesce into few transport writes.
// A reader goroutine routes opened/ack/nack frames to channels. Both
// goroutines belong to the Router. When the stream fails it is reset,
// every channel bound to it is told (TransportLost), and the next use
// opens a new stream.
//
// An idle stream costs one goroutine (the reader, holding no buffer: see
// frame.Reader) and no write buffer. The write buffer comes from
// outWriters when a write finds none, and goes back as soon as a flush
// empties it. The flusher runs only while something waits to be flushed:
// a non-urgent write that finds none running starts it (flushing), and it
// exits when it finds the buffer gone. Both decisions are made under wmu,
// after the write's append and at the flusher's look at the buffer, so
// one of the two always sees the other: either the flusher looks after
// the append and flushes it, or it exited before it, had cleared flushing,
// and the write starts a new one. No frame is left unflushed, and frames
// never interleave (each write appends all its frames under wmu).
type outStream struct {
	r      *Router
	p      peer.ID
	st     network.Stream
	done   chan struct{}
	opened time.Time

	wmu      orderedMutex[lockStreamWrite]
	sink     io.Writer     // the stream with its write deadline (deadlineWriter), made once
	bw       *bufio.Writer // from outWriters while it holds frames, else nil
	flushing bool          // a flusher goroutine runs (or is being started)
	werr     error
	dl       deadline // under wmu

	// For the liveness check (livenessLoop): writes and frames read so
	// far, and whether a probe is running.
	writes, reads atomic.Uint64
	probing       atomic.Bool

	mem  *streamscope.Memory // the buffers, reserved in the stream's scope; released by fail
	body int                 // the largest frame read so far, reserved in mem (readLoop's)

	mu      orderedMutex[lockOutStream]
	err     error
	opening map[string]chan openResult // channel id -> waiter for opened/refusal
	bound   map[*outChannel]struct{}   // channels open on this stream
}

type openResult struct {
	watermark, taken uint64 // see openIn
	err              error
}

// outStreamBuffers is the writer's buffer of an outbound stream, reserved
// in its scope from the stream's start. Frames read back (opened, acks,
// nacks) are reserved as they come (readLoop). The reservations are worst
// cases: the writer's buffer is held only while frames wait in it, and the
// reader's buffers only while a frame is being read, but the resource
// manager is told of both for the stream's life, so that a stream that
// becomes busy never fails for memory it reserved at its start.
const outStreamBuffers = 16 << 10

// outWriters are the write buffers of outbound streams, held by a stream
// only while frames wait in them.
var outWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, outStreamBuffers) }}

func (r *Router) newOutStream(p peer.ID, st network.Stream, mem *streamscope.Memory) *outStream {
	s := &outStream{
		r: r, p: p, st: st, mem: mem, opened: clock.Now(),
		done:    make(chan struct{}),
		opening: map[string]chan openResult{},
		bound:   map[*outChannel]struct{}{},
	}
	s.sink = deadlineWriter{st, &s.dl}
	return s
}

func (s *outStream) dead() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// fail ends the stream once: waiters fail, bound channels learn of the loss
// (on a Router goroutine, since they may be holding their own locks now).
func (s *outStream) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	close(s.done)
	opening := s.opening
	s.opening = nil
	bound := make([]*outChannel, 0, len(s.bound))
	for c := range s.bound {
		bound = append(bound, c)
	}
	s.bound = nil
	s.mu.Unlock()
	_ = s.st.Reset()
	if s.mem != nil {
		s.mem.Release()
	}
	for _, w := range opening {
		w <- openResult{err: fmt.Errorf("stream to %s lost: %w", shortID(s.p), err)}
	}
	s.r.dropOut(s.p, s)
	s.r.regreetLater(s.p, time.Since(s.opened))
	if len(bound) > 0 {
		s.r.spawn(func() {
			for _, c := range bound {
				c.transportLost(s, err)
			}
		})
	}
}

// write appends frames and flushes now (urgent) or soon (the flusher).
func (s *outStream) write(frames [][]byte, urgent bool) error {
	return s.writeWith(urgent, func(bw *bufio.Writer) error {
		for _, f := range frames {
			if err := frame.Write(bw, f); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeWith runs fill, which appends frames to the stream's buffer, then
// flushes now (urgent) or soon (the flusher). fill runs under the write
// lock: frames from concurrent writers never interleave.
func (s *outStream) writeWith(urgent bool, fill func(bw *bufio.Writer) error) error {
	s.wmu.Lock()
	if s.werr != nil {
		err := s.werr
		s.wmu.Unlock()
		return err
	}
	if s.bw == nil {
		s.bw = outWriters.Get().(*bufio.Writer)
		s.bw.Reset(s.sink)
	}
	err := fill(s.bw)
	s.writes.Add(1)
	if err == nil && urgent {
		err = s.bw.Flush()
	}
	start := false
	switch {
	case err != nil:
		s.werr = err
		s.bw = nil // holding what never left: not for another stream
	case s.bw.Buffered() == 0:
		s.putWriterLocked()
	case !s.flushing:
		s.flushing, start = true, true
	}
	s.wmu.Unlock()
	if err != nil {
		s.fail(err)
		return err
	}
	if start {
		s.startFlusher()
	}
	return nil
}

// putWriterLocked gives the empty write buffer back. wmu is held.
func (s *outStream) putWriterLocked() {
	s.bw.Reset(nil) // no hold on the stream from the pool
	outWriters.Put(s.bw)
	s.bw = nil
}

// startFlusher runs flushLoop on a Router goroutine, which Close waits
// for. Once the Router is closed no goroutine starts: the caller flushes
// itself, as the stream is about to be reset anyway.
func (s *outStream) startFlusher() {
	r := s.r
	r.mu.Lock()
	ok := !r.closed
	if ok {
		r.wg.Go(s.flushLoop)
	}
	r.mu.Unlock()
	if !ok {
		s.flushLoop()
	}
}

// writeFramed writes frames already length-prefixed, then flushes now
// (urgent) or soon (the flusher).
func (s *outStream) writeFramed(b []byte, urgent bool) error {
	return s.writeWith(urgent, func(bw *bufio.Writer) error {
		_, err := bw.Write(b)
		return err
	})
}

// flushLoop flushes what writers append until it finds nothing more, then
// exits (see outStream for why nothing is left behind).
func (s *outStream) flushLoop() {
	for {
		s.wmu.Lock()
		if s.werr != nil || s.bw == nil {
			s.flushing = false
			s.wmu.Unlock()
			return
		}
		err := s.bw.Flush()
		if err != nil {
			s.werr, s.bw, s.flushing = err, nil, false
		} else {
			s.putWriterLocked()
		}
		s.wmu.Unlock()
		if err != nil {
			s.fail(err)
			return
		}
	}
}

// openChannel sends an open frame for c and waits for the receiver's answer.
func (s *outStream) openChannel(ctx context.Context, c *outChannel) (watermark, taken uint64, err error) {
	w := make(chan openResult, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return 0, 0, err
	}
	s.opening[c.id] = w
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		if s.opening != nil {
			delete(s.opening, c.id)
		}
		s.mu.Unlock()
	}
	body, err := encodeMsg(&wireMsg{Kind: kindOpen, Ch: c.id, From: c.from, To: c.to})
	if err != nil {
		forget()
		return 0, 0, err
	}
	if err := s.write([][]byte{body}, true); err != nil {
		forget()
		return 0, 0, err
	}
	select {
	case res := <-w:
		return res.watermark, res.taken, res.err
	case <-ctx.Done():
		forget()
		return 0, 0, ctx.Err()
	}
}

// unbind forgets channel c, closed while the stream lives.
func (s *outStream) unbind(c *outChannel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.bound, c) // nil once the stream failed: a no-op
}

func (s *outStream) bind(c *outChannel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.bound[c] = struct{}{}
	return true
}

func (s *outStream) readLoop() {
	fr := frame.NewReader(s.st, s.r.o.maxFrame)
	for {
		body, err := fr.Next()
		s.reads.Add(1)
		if err == nil && len(body) > s.body && s.mem != nil {
			// The largest frame so far, reserved for the stream's life: a
			// worst case, as the reader holds its body buffer only while
			// frames keep coming.
			n := (len(body) + 4<<10 - 1) &^ (4<<10 - 1)
			if err = s.mem.Grow(outStreamBuffers + n); err == nil {
				s.body = n
			} else {
				s.r.log.Debugw("cannot reserve memory for a frame from the peer", "peer", s.p, "bytes", n, "err", err)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: peer closed the stream", ErrChannelClosed)
			}
			s.fail(err)
			return
		}
		m, err := decodeMsg(body)
		if err == nil {
			switch m.Kind {
			case kindOpened, kindAck, kindNack:
			default:
				err = fmt.Errorf("%w: frame kind %d is not sent to the opener of a stream", ErrProtocol, m.Kind)
			}
		}
		if err != nil {
			s.r.security(Event{Code: CodeProtocolError, Detail: err.Error(), Peer: s.p})
			s.fail(err)
			return
		}
		if m.Kind == kindOpened || m.Kind == kindNack && m.Seq == 0 {
			s.mu.Lock()
			w := s.opening[m.Ch]
			delete(s.opening, m.Ch)
			s.mu.Unlock()
			if w != nil {
				if m.Kind == kindOpened {
					w <- openResult{watermark: m.W, taken: m.Seq}
				} else {
					w <- openResult{err: &RemoteError{ErrCode: m.Code, Message: m.Msg, Peer: s.p}}
				}
			}
			continue
		}
		c := s.r.outChannelByID(m.Ch)
		if c == nil {
			continue // a channel this node no longer has
		}
		c.fromStream(streamEvent{s: s, nack: m.Kind == kindNack, seq: m.Seq, code: m.Code, msg: m.Msg})
	}
}

// stream returns the live outbound stream to p, opening one (once, for all
// concurrent callers) if needed. A new stream starts with this node's hello,
// written before the stream is handed to any caller.
func (r *Router) stream(ctx context.Context, p peer.ID) (*outStream, error) {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, ErrChannelClosed
		}
		if s := r.out[p]; s != nil && !s.dead() {
			r.reached(p) // a live stream: p is reached, whatever an older failure said
			r.mu.Unlock()
			return s, nil
		}
		if ch := r.opening[p]; ch != nil {
			r.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		r.opening[p] = ch
		announced := r.announced
		r.mu.Unlock()

		s, err := r.open(ctx, p)
		if err == nil {
			// The hello goes out before anyone else can use the stream: the
			// peer attributes every later frame (an open, say) from the cards
			// in it, so no caller waiting on ch may write first.
			frames, herr := r.helloFrames()
			if herr == nil {
				herr = s.write(frames, true) // on failure the stream is already reset
			}
			err = herr
		}
		r.mu.Lock()
		delete(r.opening, p)
		close(ch)
		// The mark changes under r.mu, with the opening: a failure can
		// then not overwrite a later success's clearing.
		if err == nil {
			r.reached(p)
		} else if ctx.Err() != context.Canceled { // a caller that gave up is no news of p
			r.unreached.put(p, time.Now())
		}
		if err == nil {
			if r.closed {
				r.mu.Unlock()
				_ = s.st.Reset()
				return nil, ErrChannelClosed
			}
			r.out[p] = s
			r.wg.Go(s.readLoop) // the flusher starts with the first write that needs it
			if onQUIC(s.st.Conn()) {
				select {
				case r.quicOut <- struct{}{}:
				default:
				}
			}
		}
		// An Announce since this opening began did not find the stream
		// (it was not in r.out yet) and its hello may be newer than the
		// one sealed above: say it again, or p holds stale cards until
		// the next refresh.
		again := err == nil && r.announced != announced
		r.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if again {
			if frames, herr := r.helloFrames(); herr == nil {
				_ = s.write(frames, false)
			}
		}
		return s, nil
	}
}

// reached forgets that p could not be reached (see Router.reach). Callers
// may hold r.mu (lock order: see package doc).
func (r *Router) reached(p peer.ID) {
	if _, ok := r.unreached.get(p); ok {
		r.unreached.remove(p)
	}
}

func (r *Router) open(ctx context.Context, p peer.ID) (*outStream, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := r.h.NewStream(ctx, p, IDA2A)
	if err != nil && (r.restoreAddrs(p) || r.freshAddrs(ctx, p)) {
		st, err = r.h.NewStream(ctx, p, IDA2A)
	}
	if err != nil {
		return nil, fmt.Errorf("open stream to %s: %w", shortID(p), err)
	}
	r.rememberAddrs(p)
	if err := st.Scope().SetService(ServiceName); err != nil {
		_ = st.Reset()
		return nil, fmt.Errorf("open stream to %s: %w", shortID(p), err)
	}
	mem, err := streamscope.Reserve(st.Scope(), outStreamBuffers)
	if err != nil {
		_ = st.Reset()
		return nil, fmt.Errorf("open stream to %s: %w", shortID(p), err)
	}
	return r.newOutStream(p, st, mem), nil
}

// rememberedAddrs caps the addresses kept per peer by rememberAddrs.
const rememberedAddrs = 8

// rememberAddrs keeps where p could be reached when a stream to it opened:
// the peerstore's addresses for it, at most rememberedAddrs.
func (r *Router) rememberAddrs(p peer.ID) {
	addrs := r.h.Peerstore().Addrs(p)
	if len(addrs) > rememberedAddrs {
		addrs = addrs[:rememberedAddrs]
	}
	if len(addrs) > 0 {
		r.lastAddrs.put(p, addrs)
	}
}

// restoreAddrs gives the peerstore back the addresses p was last reached
// at (rememberAddrs) when it holds none for p, and reports whether it did.
// libp2p's identify takes a peer's addresses from what the peer last said:
// a go-libp2p host that closes tells its peers, as its listeners close,
// that it has no addresses, and they forget where it was. Its redials, the
// moment it is back at the same address, failed with "no addresses".
func (r *Router) restoreAddrs(p peer.ID) bool {
	ps := r.h.Peerstore()
	if len(ps.Addrs(p)) > 0 {
		return false
	}
	addrs, ok := r.lastAddrs.get(p)
	if !ok {
		return false
	}
	ps.AddAddrs(p, addrs, peerstore.RecentlyConnectedAddrTTL)
	r.log.Debugw("gave the peerstore back the addresses a peer was last reached at", "peer", p, "addrs", addrs)
	return true
}

// findPeerEvery is the least time between two questions to the peer
// finder about one peer.
const findPeerEvery = 30 * time.Second

// findPeerTimeout bounds a question to the peer finder, so that a channel's
// redial schedule is not held up by a DHT query for a node that is away.
const findPeerTimeout = 3 * time.Second

// freshAddrs asks the peer finder (WithPeerFinder) for the addresses of p,
// which is not connected after a failed open, adds them to the peerstore,
// and reports whether the open is worth another try: the peerstore holds
// an address it did not hold before the question, or p is connected now.
// The peerstore is read before the question because the swarm's finder,
// kad-dht's FindPeer, adds every address its lookup hears to the
// peerstore itself and answers with the peerstore's addresses: compared
// with the peerstore after it, nothing was ever new, and the open failed
// though the new addresses were at hand. Its lookup may also dial p (the
// closest peer to its own ID), leaving it connected.
func (r *Router) freshAddrs(ctx context.Context, p peer.ID) bool {
	if r.o.findPeer == nil || ctx.Err() != nil || r.h.Network().Connectedness(p) == network.Connected {
		return false
	}
	// A node away for good is redialled on a schedule; one DHT query per
	// peer and findPeerEvery is enough to learn where it went.
	now := time.Now()
	if last, ok := r.foundAt.get(p); ok && now.Sub(last) < findPeerEvery {
		return false
	}
	r.foundAt.put(p, now)
	ps := r.h.Peerstore()
	known := ps.Addrs(p)
	fctx, cancel := context.WithTimeout(ctx, findPeerTimeout)
	addrs, err := r.o.findPeer(fctx, p)
	cancel()
	if err == nil {
		ps.AddAddrs(p, addrs, peerstore.TempAddrTTL)
	}
	// What the lookup added to the peerstore counts even when it then
	// timed out: kad-dht adds addresses as it hears them.
	fresh := false
	for _, a := range ps.Addrs(p) {
		if !slices.ContainsFunc(known, a.Equal) {
			fresh = true
			break
		}
	}
	connected := r.h.Network().Connectedness(p) == network.Connected
	r.log.Debugw("asked the DHT for the addresses of a peer a stream could not be opened to", "peer", p, "addrs", addrs, "new", fresh, "connected", connected, "err", err)
	return fresh || connected
}

// regreetLater opens a new stream to p, which starts with this node's
// hello, after a delay if p is still connected. A peer learns our cards
// from the hello on our stream; when that stream dies with its connection
// while another connection to p survives (two nodes that dialled each
// other at once), no identify event greets p again, and without a channel
// to redial p would wait for the hello refresh, minutes later. The delay
// doubles per peer from 250 ms to a minute, and starts over after a stream
// that lived a minute, so a peer whose streams keep dying is not hammered.
func (r *Router) regreetLater(p peer.ID, lived time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || !r.started {
		return
	}
	d, _ := r.regreet.get(p)
	if d == 0 || lived >= time.Minute {
		d = 250 * time.Millisecond
	} else {
		d = min(2*d, time.Minute)
	}
	r.regreet.put(p, d)
	// One pending re-greeting per peer; Close stops them. The timer only
	// hands over to a Router goroutine, which Close waits for.
	if t := r.regreetTimers[p]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		r.spawn(func() {
			r.mu.Lock()
			if r.regreetTimers[p] == t {
				delete(r.regreetTimers, p)
			}
			r.mu.Unlock()
			if r.h.Network().Connectedness(p) != network.Connected {
				return
			}
			r.mu.Lock()
			r.greetLocked(p)
			r.mu.Unlock()
		})
	})
	r.regreetTimers[p] = t
}

func (r *Router) dropOut(p peer.ID, s *outStream) {
	r.mu.Lock()
	if r.out[p] == s {
		delete(r.out, p)
	}
	r.mu.Unlock()
}
