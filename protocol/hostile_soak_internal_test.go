//go:build soak

package protocol

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/frame"
)

// After 30 s without a flush, a bufio write of its own (more than 4 KiB of
// frames before a flush) meets a live write deadline (deadlineWriter
// extends it before every write), and a failed write resets the stream.
// The deadline used to be re-armed only before explicit flushes: such a
// write hit the stale one, the error was sticky (s.err) and nothing reset
// the stream, so the node went on delivering on it but never acknowledged
// again. It takes over 30 s.
func TestHostileAcksGoOnAfterAQuietSpell(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 30 s write timeout")
	}
	tg := rvNewTarget(t)
	var got atomic.Int64
	tg.r.Handle("a0", func(context.Context, *envelope.Envelope) (any, error) { got.Add(1); return nil, nil })
	m := rvNewMallory(t, tg)
	s := m.stream(tg, "m")
	acks := make(chan *inMsg, 1000)
	go func() {
		fr := frame.NewReader(s.st, 0)
		for {
			b, err := fr.Next()
			if err != nil {
				close(acks)
				return
			}
			if msg, err := decodeMsg(b); err == nil && msg.Kind == kindAck {
				acks <- msg
			}
		}
	}()
	f := envelope.NewFactory()
	seq := uint64(0)
	send := func(rcpt string) {
		env, _ := f.New(m.addr("m"), rcpt, envelope.TypeNotification, nil)
		seq++
		s.write(&wireMsg{Kind: kindEnvelope, Ch: "c1", Seq: seq, Env: env})
	}
	s.write(&wireMsg{Kind: kindOpen, Ch: "c1", From: m.addr("m"), To: "a0"})
	send("a0")
	s.flush()
	select {
	case a := <-acks:
		t.Logf("ack %d before the pause", a.Seq)
	case <-time.After(5 * time.Second):
		t.Fatal("no first ack")
	}
	time.Sleep(32 * time.Second) // past writeTimeout: the deadline set at the last flush expires
	// a burst of refused envelopes: their nacks fill the 4 KiB buffer
	for range 60 {
		send("nobody-" + string(make([]byte, 0)) + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
	}
	s.flush()
	time.Sleep(time.Second) // the scenario: the target writes the burst's nacks before the next envelope
	before := got.Load()
	send("a0")
	s.flush()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case a, ok := <-acks:
			if !ok {
				t.Fatal("stream ended")
			}
			if a.Seq == seq {
				t.Logf("ack %d after the burst: fine", a.Seq)
				return
			}
		case <-deadline:
			t.Errorf("DEFECT: envelope %d delivered (handler calls %d -> %d) but never acknowledged; the stream was not reset", seq, before, got.Load())
			return
		}
	}
}
