package protocol

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/nova-node/nova-node/internal/frame"
)

// frames returns the frames written to st so far.
func (s *ackStream) frames(t *testing.T) [][]byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	fr := frame.NewReader(bytes.NewReader(s.buf.Bytes()), 0)
	var out [][]byte
	for {
		b, err := fr.Next()
		if err != nil {
			if fr.Buffered() > 0 {
				t.Fatalf("frames written: %v", err)
			}
			return out
		}
		out = append(out, bytes.Clone(b))
	}
}

// Writers racing the flusher's exit leave nothing unflushed: once they are
// done and the flusher has stopped (the Router's goroutines all ended),
// every frame is on the stream, whole and in each writer's order, and the
// stream holds no write buffer and no flusher.
func TestOutStreamWriterAndFlusherAreLazy(t *testing.T) {
	for round := range 50 {
		r := &Router{}
		st := &ackStream{}
		s := r.newOutStream("p", st, nil)
		const writers, each = 4, 200
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					f := fmt.Appendf(nil, "%d/%d", w, i)
					var err error
					if i%50 == 25 {
						err = s.writeFramed(frame.Append(nil, f), true)
					} else {
						err = s.write([][]byte{f}, false)
					}
					if err != nil {
						t.Errorf("write: %v", err)
						return
					}
					if i%3 == 0 {
						runtime.Gosched() // let the flusher find the buffer empty, and exit
					}
				}
			})
		}
		wg.Wait()
		r.wg.Wait() // the flusher exits once it finds nothing to flush
		s.wmu.Lock()
		bw, flushing := s.bw, s.flushing
		s.wmu.Unlock()
		if bw != nil || flushing {
			t.Fatalf("round %d: an idle stream holds a write buffer (%v) or a flusher (%v)", round, bw != nil, flushing)
		}
		next := make([]int, writers)
		got := st.frames(t)
		for _, f := range got {
			var w, i int
			if _, err := fmt.Sscanf(string(f), "%d/%d", &w, &i); err != nil || w >= writers || i != next[w] {
				t.Fatalf("round %d: frame %q out of place (next of writer %d is %d)", round, f, w, next[w])
			}
			next[w]++
		}
		if len(got) != writers*each {
			t.Fatalf("round %d: %d frames on the stream, want %d", round, len(got), writers*each)
		}
	}
}

// A closed Router starts no flusher: the write flushes itself.
func TestOutStreamFlushesItselfAfterClose(t *testing.T) {
	r := &Router{closed: true}
	st := &ackStream{}
	s := r.newOutStream("p", st, nil)
	if err := s.write([][]byte{[]byte("late")}, false); err != nil {
		t.Fatal(err)
	}
	if got := st.frames(t); len(got) != 1 || string(got[0]) != "late" {
		t.Fatalf("frames on the stream: %q", got)
	}
	if s.bw != nil || s.flushing {
		t.Fatal("the stream kept its write buffer or a flusher")
	}
}

// An inbound stream holds a write buffer only while frames wait in it.
func TestInStreamWriterIsLazy(t *testing.T) {
	r := &Router{}
	st := &ackStream{}
	s := newInStream(r, st)
	if s.bw != nil {
		t.Fatal("a new inbound stream holds a write buffer")
	}
	s.send(&wireMsg{Kind: kindAck, Ch: "c1", Seq: 1}, false)
	if s.bw == nil || len(st.frames(t)) != 0 {
		t.Fatal("an unflushed ack is not waiting in the buffer")
	}
	s.flush()
	if s.bw != nil || len(st.frames(t)) != 1 {
		t.Fatal("a flush did not write the ack and give the buffer back")
	}
	s.send(&wireMsg{Kind: kindAck, Ch: "c1", Seq: 2}, true)
	if s.bw != nil || len(st.frames(t)) != 2 {
		t.Fatal("a flushed send did not write the ack and give the buffer back")
	}
	s.send(&wireMsg{Kind: kindAck, Ch: "c1", Seq: 3}, false)
	s.close()
	if s.bw != nil {
		t.Fatal("a closed stream holds its write buffer")
	}
}
