package a2ahttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
)

// The A2A v1.0 HTTP+JSON (REST) binding. Each route becomes the v1.0
// method it stands for, with the JSON-RPC params built from the path, the
// query and the body, and runs through callV1: the methods, their checks
// and their errors have one home for both bindings. What differs is only
// the framing: plain JSON results, google.rpc.Status errors with the HTTP
// status of the spec's table, and SSE events carrying bare StreamResponse
// objects.
//
// Routes are relative to the REST interface of a card: <base>/v1 for the
// node (like its JSON-RPC endpoint /a2a/, it routes a new message by
// message.metadata.agent) and <base>/a2a/<agent>/v1 for one agent.

// restRoute is one parsed REST request: the v1.0 method and its params.
type restRoute struct {
	method string
	params map[string]any // from the path and the query
	body   bool           // the request body is (part of) the params
}

// parseREST maps method and path (relative to the interface, escaped) to
// a v1.0 method. status is 404 or 405 when nothing matches.
func parseREST(httpMethod, path string, query url.Values) (rr restRoute, status int, err error) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, s := range segs {
		if segs[i], err = url.PathUnescape(s); err != nil || segs[i] == "" {
			return rr, http.StatusNotFound, fmt.Errorf("no REST route %s", path)
		}
	}
	want := func(methods ...string) (int, error) {
		for _, m := range methods {
			if httpMethod == m {
				return 0, nil
			}
		}
		return http.StatusMethodNotAllowed, fmt.Errorf("%s %s: use %s", httpMethod, path, strings.Join(methods, " or "))
	}
	switch {
	case len(segs) == 1 && segs[0] == "message:send":
		rr = restRoute{method: "SendMessage", body: true}
		status, err = want(http.MethodPost)
	case len(segs) == 1 && segs[0] == "message:stream":
		rr = restRoute{method: "SendStreamingMessage", body: true}
		status, err = want(http.MethodPost)
	case len(segs) == 1 && segs[0] == "extendedAgentCard":
		rr = restRoute{method: "GetExtendedAgentCard"}
		status, err = want(http.MethodGet)
	case len(segs) == 1 && segs[0] == "tasks":
		rr = restRoute{method: "ListTasks"}
		status, err = want(http.MethodGet)
	case len(segs) == 2 && segs[0] == "tasks":
		id, verb := segs[1], ""
		// A task id with a colon: the verb is after the last one.
		if i := strings.LastIndexByte(segs[1], ':'); i >= 0 {
			id, verb = segs[1][:i], segs[1][i+1:]
		}
		switch verb {
		case "":
			id = segs[1]
			rr = restRoute{method: "GetTask"}
			status, err = want(http.MethodGet)
		case "cancel":
			rr = restRoute{method: "CancelTask", body: true}
			status, err = want(http.MethodPost)
		case "subscribe":
			// The spec's proto says GET, its prose and @a2a-js/sdk POST.
			rr = restRoute{method: "SubscribeToTask"}
			status, err = want(http.MethodGet, http.MethodPost)
		default:
			// Not a verb: the id itself holds a colon.
			id = segs[1]
			rr = restRoute{method: "GetTask"}
			status, err = want(http.MethodGet)
		}
		rr.params = map[string]any{"id": id}
	case len(segs) == 3 && segs[0] == "tasks" && segs[2] == "pushNotificationConfigs":
		switch httpMethod {
		case http.MethodPost:
			rr = restRoute{method: "CreateTaskPushNotificationConfig", body: true}
		default:
			rr = restRoute{method: "ListTaskPushNotificationConfigs"}
			status, err = want(http.MethodGet, http.MethodPost)
		}
		rr.params = map[string]any{"taskId": segs[1]}
	case len(segs) == 4 && segs[0] == "tasks" && segs[2] == "pushNotificationConfigs":
		switch httpMethod {
		case http.MethodDelete:
			rr = restRoute{method: "DeleteTaskPushNotificationConfig"}
		default:
			rr = restRoute{method: "GetTaskPushNotificationConfig"}
			status, err = want(http.MethodGet, http.MethodDelete)
		}
		rr.params = map[string]any{"taskId": segs[1], "id": segs[3]}
	default:
		return rr, http.StatusNotFound, fmt.Errorf("no REST route %s (the A2A v1.0 HTTP+JSON binding; tenants are not served)", path)
	}
	if err != nil {
		return rr, status, err
	}
	if rr.params == nil {
		rr.params = map[string]any{}
	}
	if err := queryParams(rr.params, query); err != nil {
		return rr, http.StatusBadRequest, err
	}
	return rr, 0, nil
}

// queryParams adds the query's known parameters to params with their JSON
// types; unknown ones are ignored, as ProtoJSON ignores unknown fields.
func queryParams(params map[string]any, q url.Values) error {
	for k, vs := range q {
		if len(vs) == 0 {
			continue
		}
		v := vs[len(vs)-1]
		switch k {
		case "historyLength", "pageSize":
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%w: query %s=%q is not an integer", a2a.ErrInvalidParams, k, v)
			}
			params[k] = n
		case "includeArtifacts":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%w: query %s=%q is not true or false", a2a.ErrInvalidParams, k, v)
			}
			params[k] = b
		case "contextId", "status", "pageToken":
			params[k] = v
		}
	}
	return nil
}

// restParams merges the request body (a JSON object, or empty) under the
// route's params: a path parameter wins over the same field in the body.
func restParams(rr restRoute, body []byte) (json.RawMessage, error) {
	merged := map[string]json.RawMessage{}
	if b := bytes.TrimSpace(body); rr.body && len(b) > 0 {
		if b[0] != '{' {
			return nil, fmt.Errorf("%w: the body must be a JSON object", a2a.ErrInvalidParams)
		}
		if err := json.Unmarshal(b, &merged); err != nil {
			return nil, fmt.Errorf("%w: body: %v", a2a.ErrParseError, err)
		}
	}
	for k, v := range rr.params {
		raw, _ := json.Marshal(v)
		merged[k] = raw
	}
	return json.Marshal(merged)
}

// serveREST is the REST endpoint of agent name ("" for the node), path
// relative to its interface: auth before anything is read, then the
// route, limits, version, agent, scopes, and the method.
func (g *Gateway) serveREST(w http.ResponseWriter, r *http.Request, name, path string) {
	who, err := g.authenticate(r)
	if err != nil {
		g.writeAuthError(w, err)
		return
	}
	r = r.WithContext(withCaller(r.Context(), who))
	if !g.serving() {
		w.Header().Set("Retry-After", "1")
		writeRESTStatus(w, http.StatusServiceUnavailable, "gateway not running", "")
		return
	}
	rr, status, err := parseREST(r.Method, path, r.URL.Query())
	if err != nil {
		if status == http.StatusBadRequest {
			writeRESTError(w, err)
			return
		}
		writeRESTStatus(w, status, err.Error(), "")
		return
	}
	select {
	case g.reqs <- struct{}{}:
		defer func() { <-g.reqs }()
	default:
		w.Header().Set("Retry-After", "1")
		writeRESTStatus(w, http.StatusServiceUnavailable, "gateway busy: too many concurrent requests", "")
		return
	}
	body, err := g.readBody(r)
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			writeRESTStatus(w, http.StatusRequestEntityTooLarge, err.Error(), "")
			return
		}
		writeRESTStatus(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	version, ok := wireVersion(r.Header.Get(VersionHeader))
	if r.Header.Get(VersionHeader) == "" {
		version, ok = Version10, true // the only REST version served
	}
	if !ok || version != Version10 {
		writeRESTError(w, fmt.Errorf("A2A-Version %q is not served over HTTP+JSON; supported: %s (v0.3 clients: use JSON-RPC): %w",
			r.Header.Get(VersionHeader), Version10, errVersionNotSupported))
		return
	}
	rt := &route{version: Version10, node: name == "", base: g.base(r)}
	if name != "" {
		c, err := g.mesh.Resolve(r.Context(), name)
		if err != nil {
			msg := fmt.Sprintf("agent %q: %v", name, err)
			if code := codeOf(err); code != "" {
				msg = code + ": " + msg
			}
			writeRESTStatus(w, http.StatusNotFound, msg, "")
			return
		}
		rt.agent, rt.agentID, rt.name = c.Address(), c.ID, name
	}
	if err := g.permit(who, rr.method, rt.agentID, rt.agent); err != nil {
		var pe *permissionError
		if errors.As(err, &pe) {
			b, _ := json.Marshal(restStatusBody(http.StatusForbidden, pe.Error(), "INSUFFICIENT_SCOPE"))
			writeForbidden(w, pe, b)
			return
		}
	}
	params, err := restParams(rr, body)
	if err != nil {
		writeRESTError(w, err)
		return
	}
	ctx := withRoute(r.Context(), rt)
	res, stream, err := g.callV1(ctx, rr.method, params)
	switch {
	case err != nil:
		writeRESTError(w, err)
	case stream != nil:
		g.streamREST(w, stream)
	default:
		if raw, ok := res.(json.RawMessage); ok && string(raw) == "null" {
			res = struct{}{} // google.protobuf.Empty
		}
		b, err := json.Marshal(res)
		if err != nil {
			writeRESTError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(b, '\n'))
	}
}

// streamREST answers a streaming method: an error before the first event is
// a plain error response; then each event is an SSE event whose data is a
// StreamResponse, and an error after the first event is an SSE event named
// "error" whose data is the error body.
func (g *Gateway) streamREST(w http.ResponseWriter, events iter.Seq2[a2a.Event, error]) {
	next, stop := iter.Pull2(events)
	defer stop()
	ev, err, ok := next()
	if ok && err != nil {
		writeRESTError(w, err)
		return
	}
	g.stream(w, func(sw *streamWriter) {
		setSSEHeaders(sw.Header())
		sw.WriteHeader(http.StatusOK)
		sw.Flush()
		for ok {
			var frame []byte
			if err == nil {
				var sr *v1StreamResponse
				if sr, err = eventToV1(ev); err == nil {
					data, _ := json.Marshal(sr)
					frame = sseEvent(data)
				}
			}
			if err != nil {
				_, body := restError(err)
				data, _ := json.Marshal(body)
				frame = append([]byte("event: error\n"), sseEvent(data)...)
			}
			if _, werr := sw.Write(frame); werr != nil {
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

// restStatus is google.rpc.Status, the error body of the REST binding.
type restStatus struct {
	Code    int              `json:"code"`
	Status  string           `json:"status"`
	Message string           `json:"message"`
	Details []map[string]any `json:"details,omitempty"`
}

// httpStatusNames are the google.rpc.Code names of the HTTP statuses the
// gateway answers with.
var httpStatusNames = map[int]string{
	http.StatusBadRequest:            "INVALID_ARGUMENT",
	http.StatusUnauthorized:          "UNAUTHENTICATED",
	http.StatusForbidden:             "PERMISSION_DENIED",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusMethodNotAllowed:      "UNIMPLEMENTED",
	http.StatusRequestEntityTooLarge: "OUT_OF_RANGE",
	http.StatusInternalServerError:   "INTERNAL",
	http.StatusServiceUnavailable:    "UNAVAILABLE",
}

func restStatusBody(code int, msg, reason string) map[string]restStatus {
	st := restStatus{Code: code, Status: httpStatusNames[code], Message: msg}
	if st.Status == "" {
		st.Status = "UNKNOWN"
	}
	if reason != "" {
		st.Details = []map[string]any{{
			"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org",
		}}
	}
	return map[string]restStatus{"error": st}
}

// restError maps err to the REST binding's HTTP status and body, from the
// same table as the JSON-RPC codes (rpcCodes).
func restError(err error) (int, map[string]restStatus) {
	e := lookupRPCCode(err)
	if e == nil {
		return http.StatusInternalServerError, restStatusBody(http.StatusInternalServerError, "internal error", "")
	}
	body := restStatusBody(e.http, err.Error(), e.reason)
	if e.grpc != "" {
		st := body["error"]
		st.Status = e.grpc
		body["error"] = st
	}
	return e.http, body
}

func writeRESTError(w http.ResponseWriter, err error) {
	status, body := restError(err)
	writeRESTBody(w, status, body)
}

func writeRESTStatus(w http.ResponseWriter, status int, msg, reason string) {
	writeRESTBody(w, status, restStatusBody(status, msg, reason))
}

func writeRESTBody(w http.ResponseWriter, status int, body any) {
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// errBodyTooLarge is a request body over MaxBodyBytes.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads r's body up to MaxBodyBytes: the one home of the size
// cap of both bindings.
func (g *Gateway) readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, g.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, errors.New("cannot read the request body")
	}
	if int64(len(body)) > g.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, g.cfg.MaxBodyBytes)
	}
	return body, nil
}
