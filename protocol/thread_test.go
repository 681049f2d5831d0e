package protocol_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
)

// threadPayload returns the payload the thread index of r shows for id.
func threadPayload(t *testing.T, thread []*envelope.Envelope, id string) string {
	t.Helper()
	for _, e := range thread {
		if e.ID == id {
			return string(e.Payload)
		}
	}
	t.Fatalf("%s not in its thread", id)
	return ""
}

// The thread index shows what was sent and received, whoever touches
// their own copy afterwards: the caller its buffer, the handler the
// envelope it got, a reader what Thread gave it, the requester the answer.
func TestThreadIndexKeepsWhatWasSent(t *testing.T) {
	routers, f := mockPair(t)
	routers[1].Handle("a1", func(_ context.Context, env *envelope.Envelope) (any, error) {
		copy(env.Payload, `"XXXXX"`) // the handler's own copy
		return "ok", nil
	})
	buf := []byte(`"hello"`)
	env, _ := f.New("a0", "a1", envelope.TypeRequest, nil)
	env.Payload = buf
	resp, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, `"HACKD"`)       // the caller reuses its buffer
	copy(resp.Payload, `"NO"`) // the answer is the requester's
	for _, r := range routers {
		thread := r.Thread(env.ID)
		if p := threadPayload(t, thread, env.ID); p != `"hello"` {
			t.Errorf("thread index shows the request as %s, sent \"hello\"", p)
		}
		copy(thread[0].Payload, `"ZZ"`) // a reader scribbles on what it got
	}
	for i, r := range routers {
		if p := threadPayload(t, r.Thread(env.ID), resp.ID); p != `"ok"` {
			t.Errorf("router %d: thread index shows the answer as %s, want \"ok\"", i, p)
		}
		if p := threadPayload(t, r.Thread(env.ID), env.ID); p != `"hello"` {
			t.Errorf("router %d: a reader's scribble reached the index: %s", i, p)
		}
	}
}

// Local requests and answers with a reader of their thread running
// alongside: no data race (run with -race).
func TestThreadReadDuringLocalRequests(t *testing.T) {
	routers, f := mockPair(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	ids := make(chan string, 1000)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case id := <-ids:
				for _, e := range routers[0].Thread(id) {
					_ = string(e.Payload)
				}
			}
		}
	})
	for range 200 {
		env, _ := f.New("a0", "a0", envelope.TypeRequest, []byte(`"x"`))
		ids <- env.ID
		if _, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

// The same envelope asked twice while the first waits: the second is
// refused at once (its answer could not be told apart), and the first
// still ends at its own deadline.
func TestRequestWithAnIDAlreadyWaiting(t *testing.T) {
	routers, f := mockPair(t)
	block := make(chan struct{})
	defer close(block)
	handling := make(chan struct{}, 1)
	routers[1].Handle("a1", func(context.Context, *envelope.Envelope) (any, error) {
		select {
		case handling <- struct{}{}:
		default:
		}
		<-block
		return nil, nil
	})
	env, _ := f.New("a0", "a1", envelope.TypeRequest, nil)
	first := make(chan error, 1)
	go func() {
		// Long enough to be waiting still when the second request comes,
		// however slow the machine.
		_, _, err := routers[0].RequestWithin(context.Background(), env, 2*time.Second)
		first <- err
	}()
	<-handling // the first request waits for its answer
	if _, _, err := routers[0].RequestWithin(context.Background(), env, 300*time.Millisecond); !errors.Is(err, envelope.ErrInvalid) {
		t.Fatalf("second request with the waiting one's id: %v, want INVALID_MESSAGE", err)
	}
	select {
	case err := <-first:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("first request: %v, want a deadline error", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the first request still waits 3 s after its 2 s timeout")
	}
}

// A peer's large requests do not fill the receiving node's memory through
// its thread index: it holds at most envelope.DefaultThreadBytes of them.
func TestThreadIndexBoundedByBytes(t *testing.T) {
	routers, f := mockPair(t)
	routers[1].Handle("a1", func(context.Context, *envelope.Envelope) (any, error) { return "ok", nil })
	big := []byte(`"` + strings.Repeat("x", 400<<10) + `"`) // 400 KiB
	root, _ := f.New("a0", "a1", envelope.TypeRequest, big)
	if _, _, err := routers[0].RequestWithin(t.Context(), root, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		env, _ := f.New("a0", "a1", envelope.TypeRequest, big)
		env.CorrelationID = root.ID // all in one thread
		if _, _, err := routers[0].RequestWithin(t.Context(), env, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range routers {
		held, bytes := 0, 0
		for _, e := range r.Thread(root.ID) {
			if len(e.Payload) == len(big) {
				held++
				bytes += len(e.Payload)
			}
		}
		if bytes > envelope.DefaultThreadBytes || held < 2 {
			t.Errorf("router %d: thread holds %d large requests, %d bytes of payload (bound %d)", i, held, bytes, envelope.DefaultThreadBytes)
		}
	}
}
