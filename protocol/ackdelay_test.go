package protocol_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
)

// sentOf returns the message-sent events of type typ that sink recorded.
func sentOf(sink *typeSink, typ envelope.Type) []protocol.Event {
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var evs []protocol.Event
	for _, e := range sink.evs {
		if e.MessageType == typ {
			evs = append(evs, e)
		}
	}
	return evs
}

// The answer to a lone request is acknowledged late (its requester has
// it, and its sender loses nothing by holding it a little longer), so
// its message-sent, reported on acknowledgement, comes no sooner than
// 200 ms after it was sent; and a requester that closes at once still
// acknowledges it: the answerer reports it sent, not undelivered.
func TestAnswerAcknowledgedLateAndAtClose(t *testing.T) {
	sent := &typeSink{typ: protocol.EvtMessageSent}
	routers, f := mockPairWith(t, func(i int) []protocol.Option {
		if i == 1 {
			return []protocol.Option{protocol.WithEventSink(sent)}
		}
		return nil
	})
	env, _ := f.New("a0", "a1", envelope.TypeRequest, []byte(`"late"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		if len(sentOf(sent, envelope.TypeResponse)) == 0 {
			return errors.New("the answer is not acknowledged")
		}
		return nil
	})
	if ev := sentOf(sent, envelope.TypeResponse)[0]; ev.Latency < 200*time.Millisecond {
		t.Fatalf("answer acknowledged %v after it was sent, want 200 ms or more", ev.Latency)
	}

	env, _ = f.New("a0", "a1", envelope.TypeRequest, []byte(`"then close"`))
	if _, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := routers[0].Close(); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		if n := len(sentOf(sent, envelope.TypeResponse)); n != 2 {
			return fmt.Errorf("%d answers acknowledged, want 2", n)
		}
		return nil
	})
}
