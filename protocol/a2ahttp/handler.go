package a2ahttp

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/push"
)

// route is what the gateway knows about one HTTP request. It travels in the
// context through a2a-go (whose executions keep the request context's
// values) to the executor and the stores.
type route struct {
	agent     string // canonical address of the mesh agent ("" at the node endpoint until resolved)
	agentID   string // its id (the name before the @)
	name      string // the agent as the URL names it
	base      string // URL prefix of the cards (Gateway.base)
	version   string // Version03 or Version10
	node      bool   // request to the node endpoint /a2a/
	blocking  bool   // message/send waiting for the result
	streaming bool   // message/stream
	// client is the request context of a streaming send: done when its
	// stream has ended (follow.go).
	client context.Context
}

type routeKey struct{}

func withRoute(ctx context.Context, r *route) context.Context {
	return context.WithValue(ctx, routeKey{}, r)
}

func routeFrom(ctx context.Context) *route {
	r, _ := ctx.Value(routeKey{}).(*route)
	return r
}

// routed wraps a2a-go's request handler with what the gateway adds on both
// wire versions: agent routing at the node endpoint, the send mode for the
// executor, checks a2a-go leaves out (push configs of unknown tasks, empty
// messages), subscribe semantics of the spec, historyLength on send
// results, and error codes a2a-go gets wrong.
type routed struct {
	inner a2asrv.RequestHandler
	g     *Gateway
}

var _ a2asrv.RequestHandler = (*routed)(nil)

// prepare resolves the agent of a send and records the send mode. It
// returns a context carrying a copy of the route.
func (h *routed) prepare(ctx context.Context, params *a2a.MessageSendParams, streaming bool) (context.Context, error) {
	if params == nil || params.Message == nil {
		return ctx, fmt.Errorf("message is required: %w", a2a.ErrInvalidParams)
	}
	if len(params.Message.Parts) == 0 {
		return ctx, fmt.Errorf("message has no parts: %w", a2a.ErrInvalidParams)
	}
	rt := routeFrom(ctx)
	if rt == nil {
		return ctx, fmt.Errorf("a2ahttp: request without route: %w", a2a.ErrInternalError)
	}
	r := *rt
	r.streaming = streaming
	if streaming {
		r.client = ctx
	}
	r.blocking = !streaming && (params.Config == nil || params.Config.Blocking == nil || *params.Config.Blocking)
	if r.node && r.agent == "" {
		switch {
		case params.Message.TaskID != "":
			rec, err := h.g.store.record(params.Message.TaskID)
			if err != nil {
				return ctx, err
			}
			r.agent = rec.Agent
		default:
			name, _ := params.Message.Metadata["agent"].(string)
			if name == "" {
				return ctx, fmt.Errorf("the node endpoint needs message.metadata.agent (or use /a2a/<agent>/): %w", a2a.ErrInvalidParams)
			}
			card, err := h.g.mesh.Resolve(ctx, name)
			if err != nil {
				return ctx, fmt.Errorf("agent %q: %v: %w", name, err, a2a.ErrInvalidParams)
			}
			r.agent = card.Address()
		}
	}
	return withRoute(ctx, &r), nil
}

func (h *routed) OnSendMessage(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	ctx, err := h.prepare(ctx, params, false)
	if err != nil {
		return nil, err
	}
	var res a2a.SendMessageResult
	for try := 0; ; try++ {
		res, err = h.inner.OnSendMessage(ctx, params)
		if !busy(err) || !h.settle(ctx, params.Message.TaskID, try) {
			break
		}
	}
	if err != nil {
		return nil, fixError(err)
	}
	if t, ok := res.(*a2a.Task); ok && params.Config != nil {
		trimHistory(t, params.Config.HistoryLength)
	}
	return res, nil
}

func (h *routed) OnSendMessageStream(ctx context.Context, params *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		ctx, err := h.prepare(ctx, params, true)
		if err != nil {
			yield(nil, err)
			return
		}
		for try := 0; ; try++ {
			first := true
			retry := false
			for ev, err := range h.inner.OnSendMessageStream(ctx, params) {
				if first && busy(err) && h.settle(ctx, params.Message.TaskID, try) {
					retry = true
					break
				}
				first = false
				if !yield(ev, fixError(err)) {
					return
				}
			}
			if !retry {
				return
			}
		}
	}
}

// busy reports a2a-go's refusal to start an execution for a task that has
// one in progress (its error is internal to a2a-go, so it is matched by
// text).
func busy(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "execution is already in progress") || strings.Contains(s, "cancelation is in progress")
}

// settle waits for the previous execution of a task to be cleaned up, when a
// client continues the task right after its last turn ended: a2a-go drops
// the execution a moment after the final event reached the client. It
// reports whether to try again (up to 2 s in all).
func (h *routed) settle(ctx context.Context, id a2a.TaskID, try int) bool {
	if id == "" || try >= 200 {
		return false
	}
	t := time.NewTimer(10 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (h *routed) OnGetTask(ctx context.Context, query *a2a.TaskQueryParams) (*a2a.Task, error) {
	if query == nil {
		return nil, a2a.ErrInvalidParams
	}
	t, err := h.inner.OnGetTask(ctx, query)
	return t, fixError(err)
}

func (h *routed) OnCancelTask(ctx context.Context, params *a2a.TaskIDParams) (*a2a.Task, error) {
	if params == nil || params.ID == "" {
		return nil, fmt.Errorf("missing task id: %w", a2a.ErrInvalidParams)
	}
	if _, err := h.g.store.Get(ctx, params.ID); err != nil {
		return nil, err
	}
	t, err := h.inner.OnCancelTask(ctx, params)
	return t, fixError(err)
}

// OnResubscribeToTask follows the spec: an unknown task is
// TaskNotFound; a task in a terminal state is UnsupportedOperation on v1.0
// and, on v0.3, a stream of one event (the task); otherwise the stream
// starts with the task as it is and follows the live execution, if any.
func (h *routed) OnResubscribeToTask(ctx context.Context, params *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if params == nil || params.ID == "" {
			yield(nil, fmt.Errorf("missing task id: %w", a2a.ErrInvalidParams))
			return
		}
		t, err := h.g.store.Get(ctx, params.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		if t.Status.State.Terminal() {
			if rt := routeFrom(ctx); rt != nil && rt.version == Version10 {
				yield(nil, fmt.Errorf("task %s is %s: %w", t.ID, t.Status.State, a2a.ErrUnsupportedOperation))
				return
			}
			yield(t, nil)
			return
		}
		if !yield(t, nil) {
			return
		}
		if !h.g.isLive(params.ID) {
			return
		}
		defer h.g.followTask(params.ID)()
		for ev, err := range h.inner.OnResubscribeToTask(ctx, params) {
			if errors.Is(err, a2a.ErrTaskNotFound) {
				// The execution ended between our check and a2a-go's:
				// send the final task instead.
				if t, err := h.g.store.Get(ctx, params.ID); err == nil {
					yield(t, nil)
				}
				return
			}
			if !yield(ev, fixError(err)) {
				return
			}
		}
	}
}

// taskExists is the check a2a-go leaves out of the push config methods.
func (h *routed) taskExists(ctx context.Context, id a2a.TaskID) error {
	if id == "" {
		return fmt.Errorf("missing task id: %w", a2a.ErrInvalidParams)
	}
	_, err := h.g.store.Get(ctx, id)
	return err
}

func (h *routed) OnGetTaskPushConfig(ctx context.Context, params *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	if params == nil {
		return nil, a2a.ErrInvalidParams
	}
	if err := h.taskExists(ctx, params.TaskID); err != nil {
		return nil, err
	}
	c, err := h.inner.OnGetTaskPushConfig(ctx, params)
	return c, fixError(err)
}

func (h *routed) OnListTaskPushConfig(ctx context.Context, params *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	if params == nil {
		return nil, a2a.ErrInvalidParams
	}
	if err := h.taskExists(ctx, params.TaskID); err != nil {
		return nil, err
	}
	c, err := h.inner.OnListTaskPushConfig(ctx, params)
	return c, fixError(err)
}

func (h *routed) OnSetTaskPushConfig(ctx context.Context, params *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	if params == nil {
		return nil, a2a.ErrInvalidParams
	}
	if err := h.taskExists(ctx, params.TaskID); err != nil {
		return nil, err
	}
	c, err := h.inner.OnSetTaskPushConfig(ctx, params)
	return c, fixError(err)
}

func (h *routed) OnDeleteTaskPushConfig(ctx context.Context, params *a2a.DeleteTaskPushConfigParams) error {
	if params == nil {
		return a2a.ErrInvalidParams
	}
	if err := h.taskExists(ctx, params.TaskID); err != nil {
		return err
	}
	return fixError(h.inner.OnDeleteTaskPushConfig(ctx, params))
}

// OnGetExtendedAgentCard answers agent/getAuthenticatedExtendedCard (v0.3)
// with the extended card (cards.go), which a2a-go does not build.
func (h *routed) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	ci, err := h.g.extendedInfo(ctx)
	if err != nil {
		return nil, err
	}
	return &ci.v03(false).AgentCard, nil
}

// fixError gives errors a2a-go reports as internal the code the spec
// names: an unknown push config is TaskNotFound (-32001).
func fixError(err error) error {
	if err == nil {
		return nil
	}
	if busy(err) {
		return fmt.Errorf("%w: the task is busy with another message", a2a.ErrUnsupportedOperation)
	}
	if errors.Is(err, push.ErrPushConfigNotFound) {
		return fmt.Errorf("%w: %w", a2a.ErrTaskNotFound, err)
	}
	return err
}

// trimHistory applies a historyLength: nil keeps everything, 0 or less
// drops the history, n keeps the last n messages.
func trimHistory(t *a2a.Task, n *int) {
	if n == nil {
		return
	}
	switch {
	case *n <= 0:
		t.History = nil
	case *n < len(t.History):
		t.History = t.History[len(t.History)-*n:]
	}
}
