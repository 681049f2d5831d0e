package a2ahttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
)

// JSON-RPC 2.0 envelopes, shared by the v1.0 binding, the v0.3 middleware
// and the outbound client.

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// JSON-RPC error codes of the A2A spec.
const (
	codeParseError           = -32700
	codeInvalidRequest       = -32600
	codeMethodNotFound       = -32601
	codeInvalidParams        = -32602
	codeInternal             = -32603
	codeTaskNotFound         = -32001
	codeTaskNotCancelable    = -32002
	codePushNotSupported     = -32003
	codeUnsupportedOperation = -32004
	codeContentType          = -32005
	codeInvalidAgentResponse = -32006
	codeExtendedCard         = -32007
	codeVersionNotSupported  = -32009
)

// errVersionNotSupported is the error for an A2A-Version the gateway does
// not speak.
var errVersionNotSupported = errors.New("version not supported")

// rpcCode is how one A2A error crosses each binding.
type rpcCode struct {
	err    error
	code   int    // JSON-RPC code
	reason string // google.rpc.ErrorInfo reason (v1.0 JSON-RPC and REST)
	http   int    // REST status (the spec's table)
	grpc   string // google.rpc.Code name in the REST body ("": the status's)
}

var rpcCodes = []rpcCode{
	{a2a.ErrTaskNotFound, codeTaskNotFound, "TASK_NOT_FOUND", http.StatusNotFound, "NOT_FOUND"},
	{a2a.ErrTaskNotCancelable, codeTaskNotCancelable, "TASK_NOT_CANCELABLE", http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrPushNotificationNotSupported, codePushNotSupported, "PUSH_NOTIFICATION_NOT_SUPPORTED", http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrUnsupportedOperation, codeUnsupportedOperation, "UNSUPPORTED_OPERATION", http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrUnsupportedContentType, codeContentType, "CONTENT_TYPE_NOT_SUPPORTED", http.StatusBadRequest, "INVALID_ARGUMENT"},
	{a2a.ErrInvalidAgentResponse, codeInvalidAgentResponse, "INVALID_AGENT_RESPONSE", http.StatusInternalServerError, "INTERNAL"},
	{a2a.ErrAuthenticatedExtendedCardNotConfigured, codeExtendedCard, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", http.StatusBadRequest, "FAILED_PRECONDITION"},
	{errVersionNotSupported, codeVersionNotSupported, "VERSION_NOT_SUPPORTED", http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrInvalidParams, codeInvalidParams, "INVALID_PARAMS", http.StatusBadRequest, "INVALID_ARGUMENT"},
	{a2a.ErrInvalidRequest, codeInvalidRequest, "", http.StatusBadRequest, "INVALID_ARGUMENT"},
	{a2a.ErrMethodNotFound, codeMethodNotFound, "", http.StatusNotFound, "UNIMPLEMENTED"},
	{a2a.ErrParseError, codeParseError, "", http.StatusBadRequest, "INVALID_ARGUMENT"},
}

// lookupRPCCode finds err's row of rpcCodes (nil: an internal error).
func lookupRPCCode(err error) *rpcCode {
	for i := range rpcCodes {
		if errors.Is(err, rpcCodes[i].err) {
			return &rpcCodes[i]
		}
	}
	return nil
}

// toRPCError maps err to a JSON-RPC error. v1 adds the spec's ErrorInfo
// detail; v0.3 uses a2a-go's {"error": "..."} detail. Errors without a
// protocol meaning are internal errors whose text is not disclosed.
func toRPCError(err error, v1 bool) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	if c := lookupRPCCode(err); c != nil {
		out := &rpcError{Code: c.code, Message: err.Error()}
		switch {
		case v1 && c.reason != "":
			out.Data, _ = json.Marshal([]map[string]any{{
				"@type":  "type.googleapis.com/google.rpc.ErrorInfo",
				"reason": c.reason,
				"domain": "a2a-protocol.org",
			}})
		case !v1:
			out.Message = c.err.Error()
			out.Data, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		return out
	}
	return &rpcError{Code: codeInternal, Message: "internal error"}
}

// validID reports whether raw is a JSON-RPC id the gateway accepts: absent,
// null, a string or an integer.
func validID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return true
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false
	}
	switch x := v.(type) {
	case string:
		return true
	case float64:
		return x == float64(int64(x))
	}
	return false
}

func idOrNull(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 || !validID(raw) {
		return json.RawMessage("null")
	}
	return raw
}

// writeRPC writes one JSON-RPC response with status 200.
func writeRPC(w http.ResponseWriter, resp *rpcResponse) {
	resp.JSONRPC = "2.0"
	resp.ID = idOrNull(resp.ID)
	body, err := json.Marshal(resp)
	if err != nil {
		body = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, err error, v1 bool) {
	writeRPC(w, &rpcResponse{ID: id, Error: toRPCError(err, v1)})
}

func writeRPCResult(w http.ResponseWriter, id json.RawMessage, result any) {
	body, err := json.Marshal(result)
	if err != nil {
		writeRPCError(w, id, err, true)
		return
	}
	writeRPC(w, &rpcResponse{ID: id, Result: body})
}
