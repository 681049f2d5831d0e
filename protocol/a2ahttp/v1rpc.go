package a2ahttp

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strconv"

	"github.com/a2aproject/a2a-go/a2a"
)

// serveV1 is the A2A v1.0 JSON-RPC binding (methods SendMessage,
// SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask,
// Create/Get/List/DeleteTaskPushNotificationConfig(s),
// GetExtendedAgentCard) over the same handler, executor and store as v0.3.
func (g *Gateway) serveV1(w http.ResponseWriter, r *http.Request, body []byte) {
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeRPCError(w, nil, fmt.Errorf("%w: %v", a2a.ErrParseError, err), true)
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" || !validID(req.ID) {
		writeRPCError(w, req.ID, fmt.Errorf("%w: not a JSON-RPC 2.0 request", a2a.ErrInvalidRequest), true)
		return
	}
	if !g.permitRPC(w, r, req.Method) {
		return
	}
	ctx := r.Context()
	res, stream, err := g.callV1(ctx, req.Method, req.Params)
	switch {
	case err != nil:
		writeRPCError(w, req.ID, err, true)
	case stream != nil:
		g.streamV1(w, req.ID, stream)
	default:
		writeRPCResult(w, req.ID, res)
	}
}

// callV1 runs one v1.0 method: a result, or a stream of events.
func (g *Gateway) callV1(ctx context.Context, method string, params json.RawMessage) (any, iter.Seq2[a2a.Event, error], error) {
	h := g.handler
	switch method {
	case "SendMessage", "SendStreamingMessage":
		var p v1SendRequest
		if err := decodeParams(params, &p); err != nil {
			return nil, nil, err
		}
		sp, err := p.toA2A()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
		}
		if method == "SendStreamingMessage" {
			return nil, h.OnSendMessageStream(ctx, sp), nil
		}
		res, err := h.OnSendMessage(ctx, sp)
		if err != nil {
			return nil, nil, err
		}
		switch v := res.(type) {
		case *a2a.Task:
			return &v1StreamResponse{Task: taskToV1(v)}, nil, nil
		case *a2a.Message:
			return &v1StreamResponse{Message: messageToV1(v)}, nil, nil
		}
		return nil, nil, fmt.Errorf("unexpected result %T", res)

	case "GetTask", "CancelTask", "SubscribeToTask":
		var p v1TaskRequest
		if err := decodeParams(params, &p); err != nil {
			return nil, nil, err
		}
		if p.ID == "" {
			return nil, nil, fmt.Errorf("%w: id is required", a2a.ErrInvalidParams)
		}
		switch method {
		case "GetTask":
			t, err := h.OnGetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(p.ID), HistoryLength: p.HistoryLength})
			if err != nil {
				return nil, nil, err
			}
			return taskToV1(t), nil, nil
		case "CancelTask":
			t, err := h.OnCancelTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(p.ID), Metadata: p.Metadata})
			if err != nil {
				return nil, nil, err
			}
			return taskToV1(t), nil, nil
		}
		return nil, h.OnResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(p.ID)}), nil

	case "ListTasks":
		var p v1ListTasksRequest
		if err := decodeParams(params, &p); err != nil {
			return nil, nil, err
		}
		res, err := g.listTasks(ctx, &p)
		return res, nil, err

	case "CreateTaskPushNotificationConfig":
		var p v1PushConfig
		if err := decodeParams(params, &p); err != nil {
			return nil, nil, err
		}
		if p.TaskID == "" || p.URL == "" {
			return nil, nil, fmt.Errorf("%w: taskId and url are required", a2a.ErrInvalidParams)
		}
		c, err := h.OnSetTaskPushConfig(ctx, p.toA2A())
		if err != nil {
			return nil, nil, err
		}
		return pushConfigToV1(c), nil, nil

	case "GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig", "ListTaskPushNotificationConfigs":
		var p v1PushRequest
		if err := decodeParams(params, &p); err != nil {
			return nil, nil, err
		}
		if p.TaskID == "" {
			return nil, nil, fmt.Errorf("%w: taskId is required", a2a.ErrInvalidParams)
		}
		tid := a2a.TaskID(p.TaskID)
		switch method {
		case "GetTaskPushNotificationConfig":
			c, err := h.OnGetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: tid, ConfigID: p.ID})
			if err != nil {
				return nil, nil, err
			}
			return pushConfigToV1(c), nil, nil
		case "DeleteTaskPushNotificationConfig":
			if err := h.OnDeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: tid, ConfigID: p.ID}); err != nil {
				return nil, nil, err
			}
			return json.RawMessage("null"), nil, nil
		}
		cs, err := h.OnListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: tid})
		if err != nil {
			return nil, nil, err
		}
		out := v1ListPushResponse{Configs: make([]v1PushConfig, 0, len(cs))}
		for _, c := range cs {
			out.Configs = append(out.Configs, pushConfigToV1(c))
		}
		return &out, nil, nil

	case "GetExtendedAgentCard":
		ci, err := g.extendedInfo(ctx)
		if err != nil {
			return nil, nil, err
		}
		return ci.v1(), nil, nil
	}
	return nil, nil, fmt.Errorf("%w: %s", a2a.ErrMethodNotFound, method)
}

// streamV1 answers a streaming method: an error before the first event is a
// plain JSON-RPC error response; after it, events and any error are SSE
// events, each a JSON-RPC response with the request's id.
func (g *Gateway) streamV1(w http.ResponseWriter, id json.RawMessage, events iter.Seq2[a2a.Event, error]) {
	next, stop := iter.Pull2(events)
	defer stop()
	ev, err, ok := next()
	if ok && err != nil {
		writeRPCError(w, id, err, true)
		return
	}
	g.stream(w, func(sw *streamWriter) {
		setSSEHeaders(sw.Header())
		sw.WriteHeader(http.StatusOK)
		sw.Flush()
		for ok {
			var resp rpcResponse
			if err != nil {
				resp = rpcResponse{ID: id, Error: toRPCError(err, true)}
			} else if sr, cerr := eventToV1(ev); cerr != nil {
				resp = rpcResponse{ID: id, Error: toRPCError(cerr, true)}
				err = cerr
			} else {
				body, _ := json.Marshal(sr)
				resp = rpcResponse{ID: id, Result: body}
			}
			resp.JSONRPC, resp.ID = "2.0", idOrNull(id)
			data, _ := json.Marshal(&resp)
			if _, werr := sw.Write(sseEvent(data)); werr != nil {
				return
			}
			sw.Flush()
			if err != nil {
				return
			}
			ev, err, ok = next()
		}
	})
}

// listTasks is ListTasks over the store: the tasks of the route's agent
// (all tasks at the node endpoint), most recently updated first.
func (g *Gateway) listTasks(ctx context.Context, p *v1ListTasksRequest) (*v1ListTasksResponse, error) {
	size := 50
	if p.PageSize != nil {
		size = *p.PageSize
	}
	if size < 1 || size > 100 {
		return nil, fmt.Errorf("%w: pageSize must be 1..100", a2a.ErrInvalidParams)
	}
	offset := 0
	if p.PageToken != "" {
		n, err := strconv.Atoi(p.PageToken)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: bad pageToken", a2a.ErrInvalidParams)
		}
		offset = n
	}
	var want a2a.TaskState
	if p.Status != "" {
		want = stateFromV1(p.Status)
		if !KnownState(want) {
			return nil, fmt.Errorf("%w: unknown status %q", a2a.ErrInvalidParams, string(p.Status))
		}
	}
	agent := ""
	if rt := routeFrom(ctx); rt != nil {
		agent = rt.agent
	}
	recs, err := g.store.list(agent)
	if err != nil {
		return nil, err
	}
	var tasks []*a2a.Task
	for _, rec := range recs {
		if want != "" && rec.State != want {
			continue
		}
		t, err := rec.task()
		if err != nil {
			continue
		}
		if p.ContextID != "" && t.ContextID != p.ContextID {
			continue
		}
		tasks = append(tasks, t)
	}
	out := &v1ListTasksResponse{Tasks: []v1Task{}, PageSize: size, TotalSize: len(tasks)}
	if offset < len(tasks) {
		end := min(offset+size, len(tasks))
		for _, t := range tasks[offset:end] {
			trimHistory(t, p.HistoryLength)
			if !p.IncludeArtifacts {
				t.Artifacts = nil
			}
			out.Tasks = append(out.Tasks, *taskToV1(t))
		}
		if end < len(tasks) {
			out.NextPageToken = strconv.Itoa(end)
		}
	}
	return out, nil
}
