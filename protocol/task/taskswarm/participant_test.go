package taskswarm_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// posts records what a Participant posts.
type posts struct {
	mu   sync.Mutex
	envs []*envelope.Envelope
}

func (p *posts) post(_ context.Context, e *envelope.Envelope) error {
	p.mu.Lock()
	p.envs = append(p.envs, e)
	p.mu.Unlock()
	return nil
}

func (p *posts) all() []*envelope.Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*envelope.Envelope(nil), p.envs...)
}

func request(t *testing.T, task taskswarm.Task, thread string) *envelope.Envelope {
	t.Helper()
	env, err := envelope.NewFactory().New("sun@n1", "mars@n2", envelope.TypeRequest, task)
	if err != nil {
		t.Fatal(err)
	}
	env.CorrelationID = thread
	return env
}

func TestParticipantRunsOnceAndResends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out posts
		var runs atomic.Int32
		gate := make(chan struct{})
		p, err := taskswarm.NewParticipant(taskswarm.ParticipantConfig{Post: out.post,
			Work: func(ctx context.Context, agent string, task taskswarm.Task) (json.RawMessage, error) {
				runs.Add(1)
				<-gate
				if task.Thread != "thread-1" || task.From != "sun@n1" || agent != "mars@n2" {
					return nil, errors.New("bad task context")
				}
				return json.RawMessage(`{"summary": "done"}`), nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		task := taskswarm.Task{SwarmID: "s1", SubTaskID: "st-1", Attempt: 1, Description: "do it", RequiredCapabilities: []string{"code.write"}}
		for range 2 { // delivered twice while running
			handled, err := p.Handle(t.Context(), request(t, task, "thread-1"))
			if !handled || err != nil {
				t.Fatalf("Handle = %v, %v", handled, err)
			}
		}
		synctest.Wait()
		if p.InFlight() != 1 {
			t.Fatalf("in flight %d", p.InFlight())
		}
		close(gate)
		synctest.Wait()
		// Once more after the answer: the cached answer is sent again.
		if _, err := p.Handle(t.Context(), request(t, task, "thread-1")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := runs.Load(); n != 1 {
			t.Fatalf("Work ran %d times", n)
		}
		got := out.all()
		if len(got) != 2 || got[0].ID == got[1].ID {
			t.Fatalf("answers %v", got)
		}
		for _, e := range got {
			r, err := taskswarm.DecodeResult(e.Payload)
			if e.Type != envelope.TypeResponse || err != nil || string(r.Result) != `{"summary":"done"}` ||
				e.CorrelationID != "thread-1" || e.Sender != "mars@n2" || e.Recipient != "sun@n1" || r.Attempt != 1 {
				t.Fatalf("answer %+v %s: %v", e, e.Payload, err)
			}
		}
		// A new attempt runs again.
		task.Attempt = 2
		if _, err := p.Handle(t.Context(), request(t, task, "thread-1")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := runs.Load(); n != 2 {
			t.Fatalf("Work ran %d times after a new attempt", n)
		}
	})
}

func TestParticipantErrorsAndBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out posts
		block := make(chan struct{})
		p, _ := taskswarm.NewParticipant(taskswarm.ParticipantConfig{Post: out.post, Workers: 1, QueueSize: 1,
			Work: func(ctx context.Context, agent string, task taskswarm.Task) (json.RawMessage, error) {
				switch task.SubTaskID {
				case "panic":
					panic("boom")
				case "block":
					<-block
				}
				return nil, errors.New("cannot do " + task.SubTaskID)
			}})
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		mk := func(id string) *envelope.Envelope {
			return request(t, taskswarm.Task{SwarmID: "s1", SubTaskID: id, Attempt: 1, Description: "x"}, "th")
		}
		p.Handle(t.Context(), mk("panic"))
		synctest.Wait()
		p.Handle(t.Context(), mk("block")) // the worker takes it
		synctest.Wait()
		p.Handle(t.Context(), mk("queued")) // fills the queue
		p.Handle(t.Context(), mk("busy"))   // no room: BUSY at once
		synctest.Wait()
		close(block)
		synctest.Wait()
		codes := map[string]string{}
		for _, e := range out.all() {
			r, err := taskswarm.DecodeResult(e.Payload)
			if e.Type != envelope.TypeError || err != nil || r.Error == "" {
				t.Fatalf("answer %s %s: %v", e.Type, e.Payload, err)
			}
			codes[r.SubTaskID] = r.Code
		}
		want := map[string]string{"panic": taskswarm.CodeTaskFailed, "block": taskswarm.CodeTaskFailed, "queued": taskswarm.CodeTaskFailed, "busy": taskswarm.CodeBusy}
		for k, v := range want {
			if codes[k] != v {
				t.Errorf("%s answered with code %q, want %q (all: %v)", k, codes[k], v, codes)
			}
		}
		// Not ours: a request without a sub-task payload.
		plain, _ := envelope.NewFactory().New("a", "b", envelope.TypeRequest, map[string]string{"q": "hi"})
		if handled, _ := p.Handle(t.Context(), plain); handled {
			t.Fatal("plain request taken")
		}
	})
}

func TestParticipantLifecycle(t *testing.T) {
	if _, err := taskswarm.NewParticipant(taskswarm.ParticipantConfig{}); err == nil {
		t.Fatal("no Post, no Work accepted")
	}
	p, _ := taskswarm.NewParticipant(taskswarm.ParticipantConfig{Post: (&posts{}).post,
		Work: func(context.Context, string, taskswarm.Task) (json.RawMessage, error) { return nil, nil }})
	_ = p.Close()
	env, _ := envelope.NewFactory().New("a", "b", envelope.TypeRequest, taskswarm.Task{SwarmID: "s", SubTaskID: "t", Attempt: 1, Description: "d"})
	if _, err := p.Handle(t.Context(), env); !errors.Is(err, taskswarm.ErrClosed) {
		t.Fatalf("Handle after Close: %v", err)
	}
	if err := p.Start(t.Context()); err == nil {
		t.Fatal("Start after Close")
	}
}
