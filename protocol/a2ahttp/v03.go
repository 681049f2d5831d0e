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
	target, streaming, known := v03Params(req.Method)
	if !known {
		writeRPCError(w, req.ID, fmt.Errorf("%w: %s", a2a.ErrMethodNotFound, req.Method), false)
		return
	}
	if target != nil {
		if err := decodeParams(req.Params, target); err != nil {
			writeRPCError(w, req.ID, err, false)
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if streaming {
		g.stream(w, func(sw *streamWriter) { g.v03.ServeHTTP(sw, r) })
		return
	}
	jw := &jsonWriter{w: w}
	g.v03.ServeHTTP(jw, r)
	if !jw.wrote && req.Method == "tasks/pushNotificationConfig/delete" {
		writeRPC(w, &rpcResponse{ID: req.ID, Result: json.RawMessage("null")})
	}
}

// v03Params returns a value to decode the params of a v0.3 method into
// (nil when the method takes none), whether it streams, and whether the
// method exists.
func v03Params(method string) (target any, streaming, known bool) {
	switch method {
	case "message/send":
		return new(a2a.MessageSendParams), false, true
	case "message/stream":
		return new(a2a.MessageSendParams), true, true
	case "tasks/get":
		return new(a2a.TaskQueryParams), false, true
	case "tasks/cancel":
		return new(a2a.TaskIDParams), false, true
	case "tasks/resubscribe":
		return new(a2a.TaskIDParams), true, true
	case "tasks/pushNotificationConfig/set":
		return new(a2a.TaskPushConfig), false, true
	case "tasks/pushNotificationConfig/get":
		return new(a2a.GetTaskPushConfigParams), false, true
	case "tasks/pushNotificationConfig/list":
		return new(a2a.ListTaskPushConfigParams), false, true
	case "tasks/pushNotificationConfig/delete":
		return new(a2a.DeleteTaskPushConfigParams), false, true
	case "agent/getAuthenticatedExtendedCard":
		return nil, false, true
	}
	return nil, false, false
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
