package a2ahttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
)

// The v0.3 binding is a2a-go's JSON-RPC handler. serveV03 works around its
// known bugs (a2a-go v0.3.3):
//
//   - a request whose params do not decode gets -32700 (parse error)
//     instead of -32602 (invalid params): params are decoded here first;
//   - responses have no Content-Type: it is set here;
//   - tasks/pushNotificationConfig/delete answers with an empty body: a
//     {"result": null} response is written here;
//   - errors of streaming methods arrive as an SSE event even before the
//     stream starts: validation errors are answered here as plain JSON.
func (g *Gateway) serveV03(w http.ResponseWriter, r *http.Request, body []byte) {
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeRPCError(w, nil, fmt.Errorf("%w: %v", a2a.ErrParseError, err), false)
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" || !validID(req.ID) {
		writeRPCError(w, req.ID, fmt.Errorf("%w: not a JSON-RPC 2.0 request", a2a.ErrInvalidRequest), false)
		return
	}
	m, known := v03Methods[req.Method]
	if !known {
		writeRPCError(w, req.ID, fmt.Errorf("%w: %s", a2a.ErrMethodNotFound, req.Method), false)
		return
	}
	if !g.permitRPC(w, r, m.v1) {
		return
	}
	if m.params != nil {
		if err := decodeParams(req.Params, m.params()); err != nil {
			writeRPCError(w, req.ID, err, false)
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if m.streaming {
		g.stream(w, func(sw *streamWriter) { g.v03.ServeHTTP(sw, r) })
		return
	}
	jw := &jsonWriter{w: w}
	g.v03.ServeHTTP(jw, r)
	if !jw.wrote && req.Method == "tasks/pushNotificationConfig/delete" {
		writeRPC(w, &rpcResponse{ID: req.ID, Result: json.RawMessage("null")})
	}
}

// v03Method is what the gateway knows of one v0.3 method.
type v03Method struct {
	params    func() any // a value to decode its params into (nil: it takes none)
	streaming bool
	v1        string // the v1.0 method it is, for scopes
}

var v03Methods = map[string]v03Method{
	"message/send":                        {func() any { return new(a2a.MessageSendParams) }, false, "SendMessage"},
	"message/stream":                      {func() any { return new(a2a.MessageSendParams) }, true, "SendStreamingMessage"},
	"tasks/get":                           {func() any { return new(a2a.TaskQueryParams) }, false, "GetTask"},
	"tasks/cancel":                        {func() any { return new(a2a.TaskIDParams) }, false, "CancelTask"},
	"tasks/resubscribe":                   {func() any { return new(a2a.TaskIDParams) }, true, "SubscribeToTask"},
	"tasks/pushNotificationConfig/set":    {func() any { return new(a2a.TaskPushConfig) }, false, "CreateTaskPushNotificationConfig"},
	"tasks/pushNotificationConfig/get":    {func() any { return new(a2a.GetTaskPushConfigParams) }, false, "GetTaskPushNotificationConfig"},
	"tasks/pushNotificationConfig/list":   {func() any { return new(a2a.ListTaskPushConfigParams) }, false, "ListTaskPushNotificationConfigs"},
	"tasks/pushNotificationConfig/delete": {func() any { return new(a2a.DeleteTaskPushConfigParams) }, false, "DeleteTaskPushNotificationConfig"},
	"agent/getAuthenticatedExtendedCard":  {nil, false, "GetExtendedAgentCard"},
}

// decodeParams decodes JSON-RPC params, which must be an object, into v;
// every failure is invalid params.
func decodeParams(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return fmt.Errorf("%w: params must be an object", a2a.ErrInvalidParams)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %v", a2a.ErrInvalidParams, err)
	}
	return nil
}
