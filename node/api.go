package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol"
)

// The local control API: HTTP/1.1 over a Unix socket in the data dir (mode
// 0600 in a 0700 directory), so only the user who owns the node can reach
// it. The CLI is its client; see Client.

// APIError is an error as the API reports it.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error is the message and the code, once: a peer's refusal names its
// code already.
func (e *APIError) Error() string {
	if strings.HasSuffix(e.Message, "("+e.Code+")") {
		return e.Message
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// Is matches the sentinel of the same seed code.
func (e *APIError) Is(target error) bool {
	s := protocol.SentinelFor(e.Code)
	return s != nil && s == target
}

// IDInfo describes the running node.
type IDInfo struct {
	PeerID     string   `json:"peerId"`
	Addrs      []string `json:"addrs"`
	Version    string   `json:"version"`
	Swarm      string   `json:"swarm"`
	DataDir    string   `json:"dataDir"`
	Agents     []string `json:"agents"`
	Peers      int      `json:"connectedPeers"`
	MetricsURL string   `json:"metricsUrl,omitempty"`
	// MCPURL is the streamable HTTP MCP face; A2AURL the A2A gateway.
	MCPURL string `json:"mcpUrl,omitempty"`
	A2AURL string `json:"a2aUrl,omitempty"`
}

// SendRequest asks the node to send an envelope from one of its agents.
type SendRequest struct {
	From          string          `json:"from,omitempty"` // default: the node's first agent
	To            string          `json:"to"`
	Type          envelope.Type   `json:"type"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	CorrelationID string          `json:"correlationId,omitempty"`
	Capability    bool            `json:"capability,omitempty"` // To is a capability id
	Justification string          `json:"escalationJustification,omitempty"`
	NoWait        bool            `json:"noWait,omitempty"` // do not wait for the answer of a request
}

// MaxSendRequest is the largest SendRequest the API takes, in bytes of
// JSON: payload included. (An envelope must also fit Config.MaxFrameSize.)
const MaxSendRequest = 2 << 20

// SendResult is what happened to a SendRequest.
type SendResult struct {
	Sent     *envelope.Envelope     `json:"sent,omitempty"`
	Result   protocol.RoutingResult `json:"result"`
	Response *envelope.Envelope     `json:"response,omitempty"`
	// RoundTripMs is, for a request that waited for its answer, the time
	// from sending to the answer (or failure). Result.LatencyMs is only the
	// routing decision: a request is routed once queued on its channel,
	// which may be long before it is delivered.
	RoundTripMs float64   `json:"roundTripMs,omitempty"`
	Error       *APIError `json:"error,omitempty"`
}

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

// EvtNodeStopped is the type of the last event of a followed events stream
// (GET /v1/events?follow=1) when it ends because the node is stopping. It
// is never in the ring, sent to subscribers or audited.
const EvtNodeStopped = "node-stopped"

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
		var req SendRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxSendRequest)).Decode(&req); err != nil {
			msg := "request body: " + err.Error()
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				msg = fmt.Sprintf("request body over %d bytes: the payload is too large", MaxSendRequest)
			}
			writeJSON(w, 400, SendResult{Error: &APIError{Code: envelope.CodeInvalidEnvelope, Message: msg}})
			return
		}
		writeJSON(w, 200, n.SendFromAPI(r.Context(), req))
	})
	mux.HandleFunc("POST /v1/connect", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Addr string `json:"addr"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
			writeJSON(w, 400, &APIError{Code: "INVALID_REQUEST", Message: err.Error()})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		defer cancel()
		p, err := n.Connect(ctx, req.Addr)
		if err != nil {
			writeJSON(w, 502, &APIError{Code: protocol.CodeDeliveryFailed, Message: err.Error()})
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
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
			writeJSON(w, 400, &APIError{Code: "INVALID_REQUEST", Message: err.Error()})
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

// PeerStatus describes one connected peer.
type PeerStatus struct {
	PeerID  string   `json:"peerId"`
	Addrs   []string `json:"addrs"`
	Relayed bool     `json:"relayed"`
	Agents  []string `json:"agents"`
}

// Status is what `nova-node status` shows.
type Status struct {
	IDInfo
	PeerList     []PeerStatus           `json:"peers"`
	Channels     []protocol.ChannelInfo `json:"channels"`
	Metrics      Metrics                `json:"metrics"`
	RecentErrors []protocol.Event       `json:"recentErrors"`
}

// CloseChannel closes outbound channel id (status lists them): what waits
// on it for acknowledgement fails with CHANNEL_CLOSED, its outbox entry
// goes, and it stops redialling; the next envelope between its two agents
// opens a new channel. An unknown id is a *protocol.NoChannelError
// (CHANNEL_NOT_FOUND).
func (n *Node) CloseChannel(id string) (protocol.ChannelInfo, error) {
	r := n.Router()
	if r == nil {
		return protocol.ChannelInfo{}, &protocol.NoChannelError{ID: id}
	}
	return r.CloseChannel(id)
}

// Status gathers peers, channels, counters and recent errors.
func (n *Node) Status() Status {
	st := Status{IDInfo: n.Info(), PeerList: []PeerStatus{}, Channels: []protocol.ChannelInfo{}, RecentErrors: []protocol.Event{}, Metrics: n.obs.Metrics()}
	if h := n.Host(); h != nil {
		for _, p := range h.Network().Peers() {
			ps := PeerStatus{PeerID: p.String(), Agents: []string{}}
			for _, c := range h.Network().ConnsToPeer(p) {
				ps.Addrs = append(ps.Addrs, c.RemoteMultiaddr().String())
				if c.Stat().Limited {
					ps.Relayed = true
				}
			}
			for _, c := range n.reg.Remote() {
				if c.Host == p.String() {
					ps.Agents = append(ps.Agents, c.ID)
				}
			}
			st.PeerList = append(st.PeerList, ps)
		}
	}
	if r := n.Router(); r != nil {
		st.Channels = r.Channels()
	}
	for _, e := range n.obs.Recent(0) {
		if e.Type == protocol.EventError || e.Type == protocol.EventSecurity {
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
// latter case the last line is an [EvtNodeStopped] event and the stream
// ends cleanly.
func (n *Node) serveEvents(w http.ResponseWriter, r *http.Request) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		fmt.Sscan(v, &limit)
	}
	var recent []protocol.Event
	if limit >= 0 {
		recent = n.obs.Recent(limit)
	}
	follow := r.URL.Query().Get("follow") == "1"
	var sub *Subscription
	if follow {
		sub = n.obs.Subscribe(1024)
		defer sub.Close()
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, e := range recent {
		if enc.Encode(e) != nil {
			return
		}
	}
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	if !follow {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			if context.Cause(r.Context()) == errNodeStopping {
				_ = enc.Encode(protocol.Event{Type: EvtNodeStopped, Time: time.Now(), Success: true,
					Detail: "the node is stopping", SourceTier: -1, TargetTier: -1})
			}
			return
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			if enc.Encode(e) != nil {
				return
			}
			if fl != nil && len(sub.C) == 0 {
				fl.Flush()
			}
		}
	}
}

// Info describes the node.
func (n *Node) Info() IDInfo {
	info := IDInfo{PeerID: n.id.String(), Version: Version, Swarm: n.cfg.Swarm, DataDir: n.cfg.DataDir, Addrs: []string{}, Agents: []string{}}
	for _, a := range n.Addrs() {
		info.Addrs = append(info.Addrs, a.String())
	}
	for _, c := range n.reg.Local() {
		info.Agents = append(info.Agents, c.Address())
	}
	if h := n.Host(); h != nil {
		info.Peers = len(h.Network().Peers())
	}
	info.MetricsURL = n.MetricsURL()
	if info.MetricsURL != "" && n.MCP() != nil {
		info.MCPURL = strings.TrimSuffix(info.MetricsURL, "/metrics") + "/mcp"
	}
	info.A2AURL = n.A2AURL()
	return info
}

// SendFromAPI carries out a SendRequest: requests wait for their answer
// unless NoWait; other types report the routing result. A broadcast of a
// type that asks for an answer is refused (envelope.CheckBroadcastType).
func (n *Node) SendFromAPI(ctx context.Context, req SendRequest) SendResult {
	if req.To == envelope.Broadcast {
		if err := envelope.CheckBroadcastType(req.Type); err != nil {
			return SendResult{Error: apiErr(err)}
		}
	}
	from := req.From
	if from == "" {
		local := n.reg.Local()
		sort.Slice(local, func(i, j int) bool { return local[i].ID < local[j].ID })
		if len(local) == 0 {
			return SendResult{Error: &APIError{Code: agentcard.CodeAgentNotFound, Message: "this node hosts no agent to send from; declare one in config.yaml"}}
		}
		from = local[0].ID
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
		return SendResult{Error: apiErr(err)}
	}
	env.CorrelationID = req.CorrelationID
	if req.Capability || req.Justification != "" {
		env.Metadata = &envelope.Metadata{EscalationJustification: req.Justification}
		if req.Capability {
			env.Metadata.RoutingHint = envelope.RoutingHintCapability
		}
	}
	out := SendResult{Sent: env}
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

func apiErr(err error) *APIError {
	var re *protocol.RemoteError
	if errors.As(err, &re) {
		return &APIError{Code: re.Code(), Message: err.Error()}
	}
	return &APIError{Code: protocol.CodeOf(err), Message: err.Error()}
}

// Client talks to a running node's local API.
type Client struct {
	hc   *http.Client
	path string
}

// ErrNoNode means no node answers on the data dir's socket.
var ErrNoNode = errors.New("node: no running nova-node on this data dir")

// NewClient returns a client of the node whose API socket is path
// (Config.APISocketPath()).
func NewClient(path string) *Client {
	return &Client{path: path, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}}
}

// APISocketPath is where the node's local API listens.
func (c Config) APISocketPath() string { return c.apiSocket() }

// noNode is err from a request to the node's socket, as ErrNoNode when
// nothing listens there.
func (c *Client) noNode(err error) error {
	var ne *net.OpError
	if errors.As(err, &ne) && ne.Op == "dial" {
		return fmt.Errorf("%w (socket %s): start one with `nova-node run`", ErrNoNode, c.path)
	}
	return err
}

// openStream sends a GET for a stream of JSON values (events, a
// document's changes, a swarm's progress) and returns the response once
// the node answered it with success; a refusal is the node's APIError.
func (c *Client) openStream(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://nova"+url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.noNode(err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var ae APIError
		if json.Unmarshal(b, &ae) == nil && ae.Code != "" {
			return nil, &ae
		}
		return nil, fmt.Errorf("node API %s: HTTP %d: %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp, nil
}

func (c *Client) do(ctx context.Context, method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://nova"+url, rd)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.noNode(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var ae APIError
		if json.Unmarshal(b, &ae) == nil && ae.Code != "" {
			return &ae
		}
		var sr SendResult
		if json.Unmarshal(b, &sr) == nil && sr.Error != nil {
			return sr.Error
		}
		return fmt.Errorf("node API %s: HTTP %d: %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}

// ID returns the node's identity and addresses.
func (c *Client) ID(ctx context.Context) (IDInfo, error) {
	var v IDInfo
	return v, c.do(ctx, "GET", "/v1/id", nil, &v)
}

// Agents lists cards; origin is "", "local" or "remote".
func (c *Client) Agents(ctx context.Context, origin string) ([]agentcard.Card, error) {
	var v []agentcard.Card
	u := "/v1/agents"
	if origin != "" {
		u += "?origin=" + origin
	}
	return v, c.do(ctx, "GET", u, nil, &v)
}

// Send asks the node to send an envelope.
func (c *Client) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	var v SendResult
	return v, c.do(ctx, "POST", "/v1/send", req, &v)
}

// Status returns the node's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var v Status
	return v, c.do(ctx, "GET", "/v1/status", nil, &v)
}

// Channels lists the node's outbound channels.
func (c *Client) Channels(ctx context.Context) ([]protocol.ChannelInfo, error) {
	var v []protocol.ChannelInfo
	return v, c.do(ctx, "GET", "/v1/channels", nil, &v)
}

// CloseChannel closes one of the node's outbound channels (see
// Node.CloseChannel) and returns it as it was.
func (c *Client) CloseChannel(ctx context.Context, id string) (protocol.ChannelInfo, error) {
	var v protocol.ChannelInfo
	return v, c.do(ctx, "POST", "/v1/channels/"+url.PathEscape(id)+"/close", nil, &v)
}

// ResetMetrics zeroes the node's message metrics.
func (c *Client) ResetMetrics(ctx context.Context) (Metrics, error) {
	var v Metrics
	return v, c.do(ctx, "POST", "/v1/metrics/reset", nil, &v)
}

// Events calls fn for the last limit recent events (0: all the node keeps;
// negative: none) and, with follow, for every new one until ctx ends, fn returns an error, or the node stops: fn
// then gets an [EvtNodeStopped] event last and Events returns nil. A stream
// cut without it (the node was killed) is an error.
func (c *Client) Events(ctx context.Context, limit int, follow bool, fn func(protocol.Event) error) error {
	u := fmt.Sprintf("/v1/events?limit=%d", limit)
	if follow {
		u += "&follow=1"
	}
	resp, err := c.openStream(ctx, u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var e protocol.Event
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return &streamBrokenError{path: c.path, err: err}
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// streamBrokenError is an events stream cut off without the node saying it
// stops. When the connection ended mid-stream (the node was killed or
// crashed), it is also an [ErrNoNode]: no node runs there any more.
type streamBrokenError struct {
	path string
	err  error
}

func (e *streamBrokenError) Error() string {
	return fmt.Sprintf("node: the events stream from %s broke off (was the node killed?): %v", e.path, e.err)
}

func (e *streamBrokenError) Unwrap() []error {
	if errors.Is(e.err, io.ErrUnexpectedEOF) || errors.Is(e.err, syscall.ECONNRESET) {
		return []error{e.err, ErrNoNode}
	}
	return []error{e.err}
}

// FindAgents asks the node to find agents by name, capability or tier.
func (c *Client) FindAgents(ctx context.Context, name, capability, tier, as string) ([]agentcard.Card, error) {
	q := url.Values{}
	for k, v := range map[string]string{"name": name, "capability": capability, "tier": tier, "as": as} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var v []agentcard.Card
	return v, c.do(ctx, "GET", "/v1/agents/find?"+q.Encode(), nil, &v)
}

// Ping measures round trips to a peer or to the host of an agent.
func (c *Client) Ping(ctx context.Context, target string, count int) (PingResult, error) {
	var v PingResult
	return v, c.do(ctx, "POST", "/v1/ping", map[string]any{"target": target, "count": count}, &v)
}

// Connect asks the node to dial a peer.
func (c *Client) Connect(ctx context.Context, addr string) (string, error) {
	var v map[string]string
	err := c.do(ctx, "POST", "/v1/connect", map[string]string{"addr": addr}, &v)
	return v["peerId"], err
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
