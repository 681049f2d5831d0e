package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/frame"
)

// outStream is this node's one long-lived stream to a peer. A writer
// goroutine drains a queue into a 64 KiB buffered writer and flushes when the
// queue is empty (many envelopes, one transport write); a reader goroutine
// matches acks and nacks to waiting senders by sequence number. Both belong to
// the Router's WaitGroup. When either side fails, the stream is reset, every
// waiter fails, and the next send opens a new stream.
type outStream struct {
	r     *Router
	p     peer.ID
	st    network.Stream
	queue chan []byte
	done  chan struct{}

	mu      sync.Mutex
	seq     uint64
	waiters map[uint64]chan error
	err     error
}

func (r *Router) newOutStream(p peer.ID, st network.Stream) *outStream {
	return &outStream{r: r, p: p, st: st, queue: make(chan []byte, 1024), done: make(chan struct{}), waiters: make(map[uint64]chan error)}
}

func (s *outStream) dead() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// fail ends the stream once and fails all its waiters with err.
func (s *outStream) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	close(s.done)
	ws := s.waiters
	s.waiters = nil
	s.mu.Unlock()
	_ = s.st.Reset()
	for _, w := range ws {
		w <- fmt.Errorf("stream to %s lost: %w", shortID(s.p), err)
	}
	s.r.dropOut(s.p, s)
}

func (s *outStream) enqueueControl(frames [][]byte) {
	for _, f := range frames {
		select {
		case s.queue <- f:
		case <-s.done:
			return
		default:
			// The queue is full of envelopes; the next periodic hello will carry the cards.
			return
		}
	}
}

// send writes one envelope and waits for the peer's ack or nack.
func (s *outStream) send(ctx context.Context, env *envelope.Envelope) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.seq++
	seq := s.seq
	w := make(chan error, 1)
	s.waiters[seq] = w
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		if s.waiters != nil {
			delete(s.waiters, seq)
		}
		s.mu.Unlock()
	}
	body, err := encodeMsg(&wireMsg{Kind: kindEnvelope, Seq: seq, Env: env})
	if err != nil {
		forget()
		return fmt.Errorf("protocol: encode envelope: %w", err)
	}
	if len(body) > s.r.o.maxFrame {
		forget()
		return &envelope.InvalidError{Field: "payload", Reason: fmt.Sprintf("envelope encodes to %d bytes, over the %d-byte frame limit", len(body), s.r.o.maxFrame)}
	}
	select {
	case s.queue <- body:
	case <-ctx.Done():
		forget()
		return ctx.Err()
	case <-s.done:
		return <-w
	}
	select {
	case err := <-w:
		return err
	case <-ctx.Done():
		forget()
		return ctx.Err()
	}
}

func (s *outStream) writeLoop() {
	bw := bufio.NewWriterSize(s.st, 64<<10)
	for {
		var f []byte
		select {
		case f = <-s.queue:
		case <-s.done:
			return
		}
		_ = s.st.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if err := frame.Write(bw, f); err != nil {
			s.fail(err)
			return
		}
	drain:
		for bw.Buffered() < 48<<10 {
			select {
			case f = <-s.queue:
				if err := frame.Write(bw, f); err != nil {
					s.fail(err)
					return
				}
			default:
				break drain
			}
		}
		if err := bw.Flush(); err != nil {
			s.fail(err)
			return
		}
	}
}

func (s *outStream) readLoop() {
	fr := frame.NewReader(s.st, s.r.o.maxFrame)
	for {
		body, err := fr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: peer closed the stream", ErrChannelClosed)
			}
			s.fail(err)
			return
		}
		m, err := decodeMsg(body)
		if err == nil && m.Kind != kindAck && m.Kind != kindNack {
			err = fmt.Errorf("%w: unexpected frame kind %d on an outbound stream", ErrProtocol, m.Kind)
		}
		if err != nil {
			s.r.security(Event{Code: CodeProtocolError, Detail: err.Error(), Peer: s.p})
			s.fail(err)
			return
		}
		s.mu.Lock()
		w := s.waiters[m.Seq]
		delete(s.waiters, m.Seq)
		s.mu.Unlock()
		if w == nil {
			continue // the sender gave up waiting
		}
		if m.Kind == kindAck {
			w <- nil
		} else {
			w <- &RemoteError{ErrCode: m.Code, Message: m.Msg, Peer: s.p}
		}
	}
}

// stream returns the live outbound stream to p, opening one (once, for all
// concurrent callers) if needed. A new stream starts with this node's hello.
func (r *Router) stream(ctx context.Context, p peer.ID) (*outStream, error) {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, ErrChannelClosed
		}
		if s := r.out[p]; s != nil && !s.dead() {
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
		r.mu.Unlock()

		s, err := r.open(ctx, p)
		r.mu.Lock()
		delete(r.opening, p)
		close(ch)
		if err == nil {
			if r.closed {
				r.mu.Unlock()
				_ = s.st.Reset()
				return nil, ErrChannelClosed
			}
			r.out[p] = s
			r.wg.Go(s.writeLoop)
			r.wg.Go(s.readLoop)
		}
		r.mu.Unlock()
		return s, err
	}
}

func (r *Router) open(ctx context.Context, p peer.ID) (*outStream, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := r.h.NewStream(ctx, p, IDA2A)
	if err != nil {
		return nil, fmt.Errorf("open stream to %s: %w", shortID(p), err)
	}
	if err := st.Scope().SetService(ServiceName); err != nil {
		_ = st.Reset()
		return nil, fmt.Errorf("open stream to %s: %w", shortID(p), err)
	}
	s := r.newOutStream(p, st)
	frames, err := r.helloFrames()
	if err != nil {
		_ = st.Reset()
		return nil, err
	}
	for _, f := range frames {
		s.queue <- f
	}
	return s, nil
}

func (r *Router) dropOut(p peer.ID, s *outStream) {
	r.mu.Lock()
	if r.out[p] == s {
		delete(r.out, p)
	}
	r.mu.Unlock()
}

// sendRemote delivers env to the peer hosting `to`, retrying a lost stream up
// to o.retries times with doubling delays. A refusal by the peer (a nack) is
// final and returned as is.
func (r *Router) sendRemote(ctx context.Context, to agentcard.Card, env *envelope.Envelope) error {
	p, err := r.peerOf(to.Host)
	if err != nil {
		return fmt.Errorf("protocol: card %s has a bad host: %w", to.Address(), err)
	}
	delay := r.o.retryBase
	var last error
	for attempt := 0; attempt <= r.o.retries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			delay *= 2
		}
		s, err := r.stream(ctx, p)
		if err == nil {
			err = s.send(ctx, env)
		}
		if err == nil {
			return nil
		}
		var re *RemoteError
		var ie *envelope.InvalidError
		if errors.As(err, &re) || errors.As(err, &ie) || errors.Is(err, ErrChannelClosed) && r.isClosed() || ctx.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		last = err
		r.log.Debugw("delivery attempt failed", "to", to.Address(), "attempt", attempt+1, "err", err)
	}
	return &deliveryError{Target: to.Address(), Reason: fmt.Sprintf("%d attempts", r.o.retries+1), Err: last}
}
