package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
)

// The local control API: the server side of package localapi's contract
// (see its doc), HTTP/1.1 over a Unix socket in the data dir (mode 0600 in
// a 0700 directory), so only the user who owns the node can reach it.

type apiServer struct {
	srv  *http.Server
	ln   net.Listener
	path string
	done chan struct{}
	stop context.CancelCauseFunc // ends every request's context, with errNodeStopping
}

// errNodeStopping is the cause of a request context that ended because the
// node is stopping (apiServer.close), rather than because its client went
// away.
var errNodeStopping = errors.New("node: stopping")

func startAPI(n *Node, path string) (*apiServer, error) {
	if len(path) > 100 {
		return nil, fmt.Errorf("node: API socket path %q is too long for a Unix socket; set apiSocket in config.yaml to a shorter path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// A socket file left by a killed node: remove it if nobody answers.
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("node: another nova-node is serving %s; stop it or use another --data-dir", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("node: local API: %w", err)
	}
	if runtime.GOOS != "windows" {
		if err := os.Chmod(path, 0o600); err != nil {
			ln.Close()
			return nil, fmt.Errorf("node: local API: %w", err)
		}
	}
	// Every request's context derives from base, which close ends before
	// it shuts the server down: a handler that waits for its client (a
	// followed events stream, a watched document, a followed swarm) returns
	// at once instead of holding Shutdown until its deadline.
	base, stop := context.WithCancelCause(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/id", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, n.Info()) })
	mux.HandleFunc("GET /v1/agents", func(w http.ResponseWriter, r *http.Request) {
		var cards []agentcard.Card
		switch r.URL.Query().Get("origin") {
		case "local":
			cards = n.reg.Local()
		case "remote":
			cards = n.reg.Remote()
		default:
			cards = n.reg.List()
		}
		if cards == nil {
			cards = []agentcard.Card{}
		}
		writeJSON(w, 200, cards)
	})
	mux.HandleFunc("POST /v1/send", func(w http.ResponseWriter, r *http.Request) {
		var req localapi.SendRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, localapi.MaxSendRequest)).Decode(&req); err != nil {
			msg := "request body: " + err.Error()
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				msg = fmt.Sprintf("request body over %d bytes: the payload is too large", localapi.MaxSendRequest)
			}
			writeJSON(w, 400, localapi.SendResult{Error: &localapi.APIError{Code: envelope.CodeInvalidEnvelope, Message: msg}})
			return
		}
		writeJSON(w, 200, n.SendFromAPI(r.Context(), req))
	})
	mux.HandleFunc("POST /v1/connect", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Addr string `json:"addr"`
		}
		if !readRequest(w, r, &req) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		defer cancel()
		p, err := n.Connect(ctx, req.Addr)
		if err != nil {
			writeJSON(w, 502, &localapi.APIError{Code: protocol.CodeDeliveryFailed, Message: err.Error()})
			return
		}
		writeJSON(w, 200, map[string]string{"peerId": p.String()})
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		n.serveEvents(w, r)
	})
	mux.HandleFunc("GET /v1/agents/find", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		cards, err := n.FindAgents(r.Context(), q.Get("name"), q.Get("capability"), q.Get("tier"), q.Get("as"))
		if err != nil {
			writeJSON(w, 404, apiErr(err))
			return
		}
		writeJSON(w, 200, cards)
	})
	mux.HandleFunc("POST /v1/ping", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Target string `json:"target"`
			Count  int    `json:"count"`
		}
		if !readRequest(w, r, &req) {
			return
		}
		res, err := n.Ping(r.Context(), req.Target, req.Count)
		if err != nil {
			writeJSON(w, 502, apiErr(err))
			return
		}
		writeJSON(w, 200, res)
	})
	n.registerDocRoutes(mux)
	n.registerTaskRoutes(mux)
	n.registerMCPRoutes(mux)
	mux.HandleFunc("GET /v1/channels", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, n.Status().Channels)
	})
	mux.HandleFunc("POST /v1/channels/{id}/close", func(w http.ResponseWriter, r *http.Request) {
		info, err := n.CloseChannel(r.PathValue("id"))
		if err != nil {
			writeJSON(w, 404, apiErr(err))
			return
		}
		writeJSON(w, 200, info)
	})
	mux.HandleFunc("GET /v1/authority", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, n.AuthorityStatus()) })
	mux.HandleFunc("POST /v1/authority/grants", func(w http.ResponseWriter, r *http.Request) {
		var req localapi.GrantRequest
		if readRequest(w, r, &req) {
			res, err := n.IssueGrant(req)
			writeResult(w, res, err)
		}
	})
	mux.HandleFunc("POST /v1/authority/admissions", func(w http.ResponseWriter, r *http.Request) {
		var req localapi.GrantRequest
		if readRequest(w, r, &req) {
			res, err := n.Admit(req)
			writeResult(w, res, err)
		}
	})
	mux.HandleFunc("POST /v1/authority/revocations", func(w http.ResponseWriter, r *http.Request) {
		var req localapi.RevokeRequest
		if readRequest(w, r, &req) {
			res, err := n.Revoke(req.Serial, req.Reason)
			writeResult(w, res, err)
		}
	})
	mux.HandleFunc("POST /v1/authority/admins", func(w http.ResponseWriter, r *http.Request) {
		var req localapi.AdminsRequest
		if readRequest(w, r, &req) {
			res, err := n.ChangeAdmins(req)
			writeResult(w, res, err)
		}
	})
	mux.HandleFunc("POST /v1/trust", func(w http.ResponseWriter, r *http.Request) {
		var req localapi.TrustRequest
		if readRequest(w, r, &req) {
			res, err := n.SetTrust(req)
			writeResult(w, res, err)
		}
	})
	mux.HandleFunc("DELETE /v1/trust", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		res, err := n.RemoveTrust(q.Get("peer"), q.Get("agent"), q.Get("all") == "1")
		writeResult(w, res, err)
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, n.Status())
	})
	mux.HandleFunc("POST /v1/metrics/reset", func(w http.ResponseWriter, r *http.Request) {
		n.obs.Reset()
		writeJSON(w, 200, n.obs.Metrics())
	})
	mux.HandleFunc("GET /v1/metrics", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, n.obs.Metrics())
	})
	s := &apiServer{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
			BaseContext: func(net.Listener) context.Context { return base }},
		ln:   ln,
		path: path,
		done: make(chan struct{}),
		stop: stop,
	}
	go func() { // owned by apiServer: close() waits on done
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// close ends every request in progress (see errNodeStopping), then shuts
// the server down, waiting up to 5 s for the handlers to return.
func (s *apiServer) close() error {
	s.stop(errNodeStopping)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	_ = os.Remove(s.path)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// CloseChannel closes outbound channel id (status lists them): what waits
// on it for acknowledgement fails with CHANNEL_CLOSED, its outbox entry
// goes, and it stops redialling; the next envelope between its two agents
// opens a new channel. An unknown id is a *protocol.NoChannelError
// (CHANNEL_NOT_FOUND).
func (n *Node) CloseChannel(id string) (protocol.ChannelInfo, error) {
	return n.router.CloseChannel(id)
}

// connAddrs are the remote addresses of conns, each once (two QUIC
// connections to a peer, one dialled each way, share one address), and
// whether one of them is relayed.
func connAddrs(conns []network.Conn) (addrs []string, isRelayed bool) {
	for _, c := range conns {
		if a := c.RemoteMultiaddr().String(); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
		if relayed(c) {
			isRelayed = true
		}
	}
	return addrs, isRelayed
}

// Status gathers peers, channels, counters and recent errors.
func (n *Node) Status() localapi.Status {
	st := localapi.Status{IDInfo: n.Info(), PeerList: []localapi.PeerStatus{}, Channels: []protocol.ChannelInfo{}, RecentErrors: []localapi.Event{}, Metrics: n.obs.Metrics()}
	st.Reach = n.reach()
	h := n.host
	for _, p := range h.Network().Peers() {
		ps := localapi.PeerStatus{PeerID: p.String(), Agents: []string{}}
		conns := h.Network().ConnsToPeer(p)
		ps.Addrs, _ = connAddrs(conns)
		path, _ := connPath(conns) // direct once a hole punch succeeded, beside the lingering relayed connection
		ps.Relayed = path == "relayed"
		var bases []string
		for _, c := range n.reg.Remote() {
			if c.Host == p.String() {
				ps.Agents = append(ps.Agents, c.ID)
				s := c.Standing()
				if b := string(s.Basis); !slices.Contains(bases, b) {
					bases = append(bases, b)
				}
				if !s.Expires.IsZero() && (ps.Expires.IsZero() || s.Expires.Before(ps.Expires)) {
					ps.Expires = s.Expires
				}
			}
		}
		slices.Sort(bases)
		ps.Basis = strings.Join(bases, "+")
		st.PeerList = append(st.PeerList, ps)
	}
	st.Channels = n.router.Channels()
	for _, e := range n.obs.Recent(0) {
		if e.Type == protocol.EvtErrorRaised || e.Type == protocol.EvtSecurityRaised {
			st.RecentErrors = append(st.RecentErrors, e)
		}
	}
	if k := len(st.RecentErrors); k > 10 {
		st.RecentErrors = st.RecentErrors[k-10:]
	}
	return st
}

// serveEvents writes the last ?limit= recent events (default 50; 0: all
// the node keeps; negative: none) as JSON lines, then, with ?follow=1,
// every new event until the client goes away or the node stops; in the
// latter case the last line is a [localapi.EvtNodeStopped] event and the
// stream ends cleanly.
func (n *Node) serveEvents(w http.ResponseWriter, r *http.Request) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		fmt.Sscan(v, &limit)
	}
	var stream ndjsonStream[localapi.Event]
	if limit >= 0 {
		stream.first = n.obs.Recent(limit)
	}
	if r.URL.Query().Get("follow") == "1" {
		sub := n.obs.Subscribe(1024)
		defer sub.Close()
		stopped := false
		stream.next = func() (localapi.Event, bool) {
			if stopped { // the node-stopped line is the last
				return localapi.Event{}, false
			}
			select {
			case <-r.Context().Done():
				if context.Cause(r.Context()) == errNodeStopping {
					stopped = true
					return localapi.Event{Type: localapi.EvtNodeStopped, Time: time.Now(), Success: true,
						Detail: "the node is stopping", SourceTier: -1, TargetTier: -1}, true
				}
				return localapi.Event{}, false
			case e, ok := <-sub.C:
				return e, ok
			}
		}
		stream.ready = func() bool { return len(sub.C) > 0 }
	}
	serveNDJSON(w, stream)
}

// ndjsonStream is one stream of JSON lines of the local API: the events, a
// document's changes, a swarm's progress (see serveNDJSON).
type ndjsonStream[T any] struct {
	// first are the lines written at once.
	first []T
	// next blocks until the next line, and returns false when the stream
	// ends; it must return false once the request's context has ended. A
	// nil next ends the stream after first.
	next func() (T, bool)
	// ready, if not nil, reports that another line is ready at once: the
	// flush waits for it, so that a burst goes out in one write.
	ready func() bool
}

// serveNDJSON answers a request with s, as application/x-ndjson: status
// 200 and the first lines, flushed at once (the client's request returns
// as soon as the node took it, even with no first line), then one JSON
// value a line, each flushed as it is written, until s ends or a write
// fails (the client went away).
func serveNDJSON[T any](w http.ResponseWriter, s ndjsonStream[T]) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	enc := json.NewEncoder(w)
	for _, v := range s.first {
		if enc.Encode(v) != nil {
			return
		}
	}
	flush()
	if s.next == nil {
		return
	}
	for {
		v, ok := s.next()
		if !ok {
			return
		}
		if enc.Encode(v) != nil {
			return
		}
		if s.ready == nil || !s.ready() {
			flush()
		}
	}
}

// Info describes the node.
func (n *Node) Info() localapi.IDInfo {
	info := localapi.IDInfo{PeerID: n.id.String(), Version: Version, Swarm: n.cfg.Swarm, DataDir: n.cfg.DataDir, Addrs: []string{}, Agents: []string{}}
	for _, a := range n.Addrs() {
		info.Addrs = append(info.Addrs, a.String())
	}
	for _, c := range n.reg.Local() {
		info.Agents = append(info.Agents, c.Address())
	}
	info.Peers = len(n.host.Network().Peers())
	info.MetricsURL = n.MetricsURL()
	if info.MetricsURL != "" {
		info.MCPURL = strings.TrimSuffix(info.MetricsURL, "/metrics") + "/mcp"
	}
	info.A2AURL = n.A2AURL()
	return info
}

// SendFromAPI carries out a SendRequest: requests wait for their answer
// unless NoWait; other types report the routing result. A broadcast of a
// type that asks for an answer is refused (envelope.CheckBroadcastType).
func (n *Node) SendFromAPI(ctx context.Context, req localapi.SendRequest) localapi.SendResult {
	if req.To == envelope.Broadcast {
		if err := envelope.CheckBroadcastType(req.Type); err != nil {
			return localapi.SendResult{Error: apiErr(err)}
		}
	}
	from := req.From
	if from == "" {
		c, ok := n.defaultAgent()
		if !ok {
			return localapi.SendResult{Error: &localapi.APIError{Code: agentcard.CodeAgentNotFound, Message: "this node hosts no agent to send from; declare one in config.yaml"}}
		}
		from = c.ID
	}
	if req.Type == "" {
		req.Type = envelope.TypeRequest
	}
	payload := req.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	env, err := n.NewEnvelope(from, req.To, req.Type, payload)
	if err != nil {
		return localapi.SendResult{Error: apiErr(err)}
	}
	env.CorrelationID = req.CorrelationID
	if req.Capability || req.Justification != "" {
		env.Metadata = &envelope.Metadata{EscalationJustification: req.Justification}
		if req.Capability {
			env.Metadata.RoutingHint = envelope.RoutingHintCapability
		}
	}
	out := localapi.SendResult{Sent: env}
	if env.Type == envelope.TypeRequest && !req.NoWait && req.To != envelope.Broadcast {
		start := time.Now()
		resp, res, err := n.Request(ctx, env)
		out.Result, out.Response = res, resp
		out.RoundTripMs = float64(time.Since(start).Microseconds()) / 1000
		if err != nil {
			out.Error = apiErr(err)
		}
		return out
	}
	res, err := n.Send(ctx, env)
	out.Result = res
	if err != nil {
		out.Error = apiErr(err)
	}
	return out
}

// defaultAgent is the local agent that acts when a request names none: the
// one with the smallest id. It is the one rule for every default of the
// node: the sender of a send, the writer of a document change, the
// proposer of a task, the creator of a swarm, and the caller of the MCP
// faces when mcp.as is not set (see mcpAs). The smallest id rather than
// the first agent of config.yaml, because it also covers the agents
// registered from Go (RegisterAgent), which no configuration lists, and
// because it reads the registry, not a configuration a reload replaces.
// ok is false when the node hosts no agent.
func (n *Node) defaultAgent() (c agentcard.Card, ok bool) {
	return n.reg.FirstLocal()
}

// maxRequest bounds the JSON body of the API's small requests (all but
// send's, which carries a payload).
const maxRequest = 64 << 10

// readRequest decodes a JSON request body of at most [maxRequest] bytes
// into v, or answers 400 INVALID_REQUEST and reports false.
func readRequest(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequest)).Decode(v); err != nil {
		msg := "request body: " + err.Error()
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			msg = fmt.Sprintf("request body over %d bytes: shorten the longest value (a note, a reason, a list)", maxRequest)
		}
		writeJSON(w, 400, &localapi.APIError{Code: "INVALID_REQUEST", Message: msg})
		return false
	}
	return true
}

// writeResult answers v, or err with its code: 403 for NOT_ADMIN, 400 for
// a request or record that is refused, 500 otherwise.
func writeResult(w http.ResponseWriter, v any, err error) {
	if err == nil {
		writeJSON(w, 200, v)
		return
	}
	status := 500
	switch protocol.CodeOf(err) {
	case localapi.CodeNotAdmin:
		status = 403
	case "INVALID_REQUEST", authority.CodeInvalidGrant:
		status = 400
	}
	writeJSON(w, status, apiErr(err))
}

func apiErr(err error) *localapi.APIError {
	var re *protocol.RemoteError
	if errors.As(err, &re) {
		return &localapi.APIError{Code: re.Code(), Message: err.Error()}
	}
	return &localapi.APIError{Code: protocol.CodeOf(err), Message: err.Error()}
}

// APISocketPath is where the node's local API listens.
func (c Config) APISocketPath() string { return c.apiSocket() }
