package a2ahttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
)

// Status texts the gateway writes itself.
const (
	textTimedOut    = "Task timed out"
	textClosed      = "Task interrupted: the gateway closed"
	textCanceled    = "Task canceled"
	textAbandoned   = "Task canceled: no client follows it"
	metaErrorCode   = "nova.errorCode"
	artifactDefault = "response"
)

// executor is the a2a-go AgentExecutor of the gateway: one Execute per A2A
// message, which forwards it to the mesh agent of the request's route and
// turns the answer into task events. a2a-go runs each Execute on its own
// goroutine; the gateway tracks them (live, wg) and Close ends them.
type executor struct{ g *Gateway }

var _ a2asrv.AgentExecutor = (*executor)(nil)

// Execute writes, for a new task: the task (submitted), a working status,
// then the outcome; for a task that continues (after input-required): the
// task (working), then the outcome. The outcome is artifacts and a final
// status. For a blocking message/send starting a new task the mesh is
// called first, so that an answer asking for a direct Message reply can
// get one.
func (e *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	g := e.g
	rt := routeFrom(ctx)
	if rt == nil || rt.agent == "" {
		return fmt.Errorf("a2ahttp: execution without an agent: %w", a2a.ErrInternalError)
	}
	if !g.enter(rc.TaskID) {
		return e.finishAfter(ctx, q, rc, true, a2a.TaskStateFailed, textClosed, nil)
	}
	defer g.leave(rc.TaskID)
	err := e.execute(ctx, rt, rc, q)
	if err == nil {
		// a2a-go ends ctx once it has applied the final event (stored the
		// task): wait for that, so that Close never closes the store under
		// a task's last save.
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return err
}

func (e *executor) execute(ctx context.Context, rt *route, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	g := e.g

	// callCtx ends with the execution (cancel), when the gateway closes,
	// or, for a task started by a stream, when no stream has followed it
	// for the grace period (follow.go).
	callCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	unhook := context.AfterFunc(g.ctx, func() { stop(nil) })
	defer unhook()
	if rt.streaming && rt.client != nil {
		defer g.followStream(rc.TaskID, rt.client, func() { stop(errAbandoned) })()
	}

	callFirst := rc.StoredTask == nil && rt.blocking && !rt.streaming
	if !callFirst {
		if err := e.start(ctx, rc, q); err != nil {
			return err
		}
	}

	var history []*a2a.Message
	if rc.StoredTask != nil {
		history = rc.StoredTask.History
	}
	payload, err := json.Marshal(newRequest(rc.Message, rc.TaskID, rc.ContextID, history))
	if err != nil {
		return e.finishAfter(ctx, q, rc, callFirst, a2a.TaskStateFailed, "cannot encode the request: "+err.Error(), nil)
	}

	tctx, cancel := context.WithTimeout(callCtx, g.cfg.TaskTimeout)
	defer cancel()
	raw, err := g.call(tctx, rt.agent, payload)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil // a2a-go ended the execution (canceled, or already finished)
	case g.ctx.Err() != nil:
		return e.finishAfter(ctx, q, rc, callFirst, a2a.TaskStateFailed, textClosed, nil)
	case errors.Is(context.Cause(callCtx), errAbandoned):
		return e.finishAfter(ctx, q, rc, callFirst, a2a.TaskStateCanceled, textAbandoned, nil)
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		return e.finishAfter(ctx, q, rc, callFirst, a2a.TaskStateFailed, textTimedOut, nil)
	default:
		code := codeOf(err)
		state := a2a.TaskStateFailed
		switch code {
		case "TIER_VIOLATION", "SANDBOX_VIOLATION", "ESCALATION_REQUIRED":
			state = a2a.TaskStateRejected
		}
		text := err.Error()
		if code != "" {
			text = code + ": " + text
		}
		var meta map[string]any
		if code != "" {
			meta = map[string]any{metaErrorCode: code}
		}
		return e.finishAfter(ctx, q, rc, callFirst, state, text, meta)
	}

	ans, err := DecodeAnswer(raw)
	if err != nil {
		return e.finishAfter(ctx, q, rc, callFirst, a2a.TaskStateFailed, "invalid agent answer: "+err.Error(),
			map[string]any{metaErrorCode: "INVALID_ANSWER"})
	}
	if callFirst && ans.Reply == "message" && ans.State == StateCompleted {
		msg := &a2a.Message{
			ID:        a2a.NewMessageID(),
			Role:      a2a.MessageRoleAgent,
			ContextID: rc.ContextID,
			Parts:     partsToA2A(ans.contentParts()),
			Metadata:  ans.Metadata,
		}
		if len(msg.Parts) == 0 {
			msg.Parts = a2a.ContentParts{a2a.TextPart{Text: ""}}
		}
		return q.Write(ctx, msg)
	}
	if callFirst {
		if err := e.start(ctx, rc, q); err != nil {
			return err
		}
	}
	return e.outcome(ctx, q, rc, ans)
}

// start writes the opening events of an execution.
func (e *executor) start(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	now := e.g.now()
	if rc.StoredTask == nil {
		t := &a2a.Task{
			ID:        rc.TaskID,
			ContextID: rc.ContextID,
			Status:    a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &now},
			History:   []*a2a.Message{rc.Message},
		}
		if err := q.Write(ctx, t); err != nil {
			return err
		}
		return q.Write(ctx, e.status(rc, a2a.TaskStateWorking, nil, false))
	}
	// A task that continues: keep the agent's last status message (its
	// question) in the history before the client's new message, which
	// a2a-go has already appended.
	t := *rc.StoredTask
	if m := t.Status.Message; m != nil && len(t.History) > 0 {
		last := t.History[len(t.History)-1]
		t.History = append(append(t.History[:len(t.History)-1:len(t.History)-1], m), last)
	}
	t.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now}
	if err := q.Write(ctx, &t); err != nil {
		return err
	}
	// a2a-go v0.3.3 keeps the Task event it broadcast as its working copy
	// and appends artifacts to it in place, racing with the subscribers
	// that encode the event; a status update makes it work on a copy.
	return q.Write(ctx, e.status(rc, a2a.TaskStateWorking, nil, false))
}

func (e *executor) status(rc a2a.TaskInfoProvider, state a2a.TaskState, msg *a2a.Message, final bool) *a2a.TaskStatusUpdateEvent {
	ev := a2a.NewStatusUpdateEvent(rc, state, msg)
	now := e.g.now()
	ev.Status.Timestamp = &now
	ev.Final = final
	return ev
}

// outcome writes the artifacts and final status of an answer.
func (e *executor) outcome(ctx context.Context, q eventqueue.Queue, rc *a2asrv.RequestContext, ans *Answer) error {
	state := a2a.TaskState(ans.State)
	content := ans.contentParts()
	if state == a2a.TaskStateCompleted {
		arts := ans.Artifacts
		if len(arts) == 0 && len(content) > 0 {
			arts = []AnswerArtifact{{Name: artifactDefault, Parts: content}}
		}
		for _, a := range arts {
			ev := a2a.NewArtifactEvent(rc, partsToA2A(a.Parts)...)
			ev.Artifact.Name, ev.Artifact.Description = a.Name, a.Description
			ev.LastChunk = true
			if err := q.Write(ctx, ev); err != nil {
				return err
			}
		}
		var msg *a2a.Message
		if ans.Text != "" {
			msg = agentText(rc, ans.Text)
		}
		ev := e.status(rc, state, msg, true)
		ev.Metadata = ans.Metadata
		return q.Write(ctx, ev)
	}
	var msg *a2a.Message
	if len(content) > 0 {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, partsToA2A(content)...)
	}
	ev := e.status(rc, state, msg, true)
	ev.Metadata = ans.Metadata
	return q.Write(ctx, ev)
}

// finishAfter ends an execution with a final status; in call-first mode it
// writes the opening events first.
func (e *executor) finishAfter(ctx context.Context, q eventqueue.Queue, rc *a2asrv.RequestContext, callFirst bool, state a2a.TaskState, text string, meta map[string]any) error {
	if callFirst {
		if err := e.start(ctx, rc, q); err != nil {
			return err
		}
	}
	return e.finish(ctx, q, rc, state, text, meta)
}

func (e *executor) finish(ctx context.Context, q eventqueue.Queue, rc *a2asrv.RequestContext, state a2a.TaskState, text string, meta map[string]any) error {
	ev := e.status(rc, state, agentText(rc, text), true)
	ev.Metadata = meta
	return q.Write(ctx, ev)
}

// Cancel writes the canceled status. a2a-go applies it to the task (and, if
// the task is running, ends its execution, which cancels the mesh call).
func (e *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return q.Write(ctx, e.status(rc, a2a.TaskStateCanceled, agentText(rc, textCanceled), true))
}

// call forwards one request to the mesh within the concurrency limit.
func (g *Gateway) call(ctx context.Context, agent string, payload json.RawMessage) (json.RawMessage, error) {
	select {
	case g.calls <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-g.calls }()
	return g.mesh.Call(ctx, agent, payload)
}

// sweepInterval is how often the sweeper looks for stale tasks.
func sweepInterval(timeout time.Duration) time.Duration {
	d := timeout / 4
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	if d < 10*time.Millisecond {
		d = 10 * time.Millisecond
	}
	return d
}
