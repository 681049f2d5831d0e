package protocol

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/internal/frame"
)

// ackStream is the writing end of an inbound stream that records the ack
// frames written to it.
type ackStream struct {
	network.Stream // nil: inStream uses only the methods below
	mu             sync.Mutex
	buf            bytes.Buffer
}

func (s *ackStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *ackStream) SetWriteDeadline(time.Time) error { return nil }
func (s *ackStream) Reset() error                     { return nil }
func (s *ackStream) Close() error                     { return nil }

// acks returns the sequences acknowledged so far, in order.
func (s *ackStream) acks(t *testing.T) []uint64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	fr := frame.NewReader(bytes.NewReader(s.buf.Bytes()), 0)
	var seqs []uint64
	for {
		b, err := fr.Next()
		if err != nil {
			return seqs
		}
		m, err := decodeMsg(b)
		if err != nil {
			t.Fatalf("frame written: %v", err)
		}
		if m.Kind == kindAck {
			seqs = append(seqs, m.Seq)
		}
	}
}

// ackBench is one inbound channel of a started Router, whose items are
// handled without a handler (taken, as an answer handed over on arrival):
// what is tested is when their acks are written.
type ackBench struct {
	t   *testing.T
	r   *Router
	ic  *inChannel
	out *inStream
	st  *ackStream
	seq uint64
}

func newAckBench(t *testing.T) *ackBench {
	r := &Router{started: true}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	st := &ackStream{}
	b := &ackBench{t: t, r: r, ic: &inChannel{key: "p/c1", id: "c1"}, out: newInStream(r, st), st: st}
	t.Cleanup(func() {
		b.out.close()
		r.cancel()
		r.wg.Wait()
	})
	return b
}

// handle takes one envelope, a question or an answer when answer is set,
// and works the channel's queue off as the stream's reader would.
func (b *ackBench) handle(answer, ackNow bool) {
	b.seq++
	if b.r.accept(b.ic, b.out, inItem{seq: b.seq, taken: true, answer: answer, ackNow: ackNow}) {
		b.r.work(b.ic)
	}
}

// expect checks the acks written so far, once every goroutine of the
// bubble is idle.
func (b *ackBench) expect(want ...uint64) {
	b.t.Helper()
	synctest.Wait()
	got := b.st.acks(b.t)
	if len(got) != len(want) {
		b.t.Fatalf("at %v: acks %v, want %v", time.Now().Format("05.000"), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			b.t.Fatalf("at %v: acks %v, want %v", time.Now().Format("05.000"), got, want)
		}
	}
}

// A question and its answer are acknowledged late, in one frame: the answer
// already told the requester, and the answerer only holds its answer a
// little longer. Nothing else waits on the CPU when the ack is written.
func TestQuestionsAndAnswersAreAcknowledgedLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAckBench(t)
		b.handle(true, false) // a request
		time.Sleep(time.Millisecond)
		b.handle(true, false) // an answer, on the same channel for the test
		time.Sleep(10 * ackDelay)
		b.expect()
		time.Sleep(answerAckDelay - 10*ackDelay - time.Millisecond - time.Nanosecond)
		b.expect()
		time.Sleep(time.Millisecond + time.Nanosecond)
		b.expect(2)
	})
}

// A one-way envelope is acknowledged within ackDelay: its sender learns
// of it only so, and holds it until then.
func TestPostIsAcknowledgedWithinAckDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAckBench(t)
		b.handle(false, false)
		time.Sleep(ackDelay - time.Nanosecond)
		b.expect()
		time.Sleep(time.Nanosecond)
		b.expect(1)
	})
}

// A post after a question brings the channel's ack forward to ackDelay,
// and that ack covers the question too.
func TestPostAfterAQuestionBringsTheAckForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAckBench(t)
		b.handle(true, false)
		time.Sleep(50 * time.Millisecond)
		b.expect()
		b.handle(false, false)
		time.Sleep(ackDelay)
		b.expect(2)
		time.Sleep(answerAckDelay) // the timer armed for the question writes nothing more
		b.expect(2)
	})
}

// More than answerAckMax questions waiting for their ack (a fast
// requester) are acknowledged within ackDelay, like any other traffic.
func TestBurstOfQuestionsIsAcknowledgedWithinAckDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAckBench(t)
		for range answerAckMax {
			b.handle(true, false)
			time.Sleep(100 * time.Microsecond)
		}
		b.expect()
		b.handle(true, false)
		time.Sleep(ackDelay)
		b.expect(answerAckMax + 1)
	})
}

// A question whose sender waits for the ack (Send) is acknowledged at
// once, as any such envelope.
func TestAckNowQuestionIsAcknowledgedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAckBench(t)
		b.handle(true, true)
		b.expect(1)
	})
}

// A Router that closes writes the acks still due: an answer it took is
// neither sent again to its next run nor reported undelivered by its
// sender.
func TestCloseWritesTheAcksStillDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAckBench(t)
		b.handle(true, false)
		b.expect()
		b.r.cancel()
		b.r.ackDueAtClose([]*inStream{b.out})
		b.expect(1)
	})
}
