package a2ahttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	golog "github.com/ipfs/go-log/v2"
	"go.etcd.io/bbolt"

	"github.com/nova-node/nova-node/internal/localhttp"
)

// Gateway is the standard A2A HTTP front of the mesh: an http.Handler that
// serves every mesh agent at /a2a/<agent>/ (JSON-RPC, v0.3 and v1.0), its
// cards under /a2a/<agent>/.well-known/, the node's aggregate card at
// /.well-known/agent-card.json and readiness at /healthz.
//
// Mount it at the root of its listener, or route at least /a2a/,
// /.well-known/ and /healthz to it without stripping prefixes.
type Gateway struct {
	cfg    Config
	mesh   Mesh
	store  *taskStore
	guard  *urlGuard
	pusher *pusher
	tokens localhttp.Tokens
	jwt    *jwtVerifier // nil without Config.JWT

	handler a2asrv.RequestHandler // routed, around a2a-go's handler
	v03     http.Handler          // a2a-go's JSON-RPC handler
	guarded http.Handler          // route behind localhttp's guard

	reqs  chan struct{} // JSON-RPC requests in progress
	calls chan struct{} // mesh calls in progress

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // sweeper; request goroutines (keep-alives)

	// mu guards the fields below. Lock order: mu may be held while the
	// store runs a bbolt transaction (the sweeper does), never the reverse.
	mu      sync.Mutex
	started bool
	closed  bool
	live    map[a2a.TaskID]int        // tasks with an execution in progress
	follow  map[a2a.TaskID]*followers // streamed tasks' executions (follow.go)
	running int                       // executions in progress
	idle    *sync.Cond                // signalled when running drops to 0
}

var log = golog.Logger("nova/a2ahttp")

// New builds a gateway in front of mesh. It opens the task store (creating
// its buckets) but starts nothing: call Start. Zero fields of cfg take
// their defaults; New fails when cfg is invalid.
func New(mesh Mesh, cfg Config) (*Gateway, error) {
	if mesh == nil {
		return nil, errors.New("a2ahttp: New needs a Mesh")
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	guard, err := newURLGuard(cfg.PushAllowHosts)
	if err != nil {
		return nil, err
	}
	db, owns := cfg.DB, false
	if db == nil {
		db, err = bbolt.Open(cfg.DBPath, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
		if err != nil {
			return nil, fmt.Errorf("a2ahttp: open %s: %w", cfg.DBPath, err)
		}
		owns = true
	}
	store, err := openStore(db, owns, cfg.MaxTasks, cfg.Now)
	if err != nil {
		if owns {
			_ = db.Close()
		}
		return nil, err
	}
	g := &Gateway{
		cfg:    cfg,
		mesh:   mesh,
		store:  store,
		guard:  guard,
		reqs:   make(chan struct{}, cfg.MaxConcurrentRequests),
		calls:  make(chan struct{}, cfg.MaxConcurrentCalls),
		live:   map[a2a.TaskID]int{},
		follow: map[a2a.TaskID]*followers{},
	}
	g.idle = sync.NewCond(&g.mu)
	if g.tokens, err = localhttp.NewTokens([]string{cfg.LocalToken}, cfg.TokenHashes); err != nil {
		return nil, err // Validate checked the hashes
	}
	if cfg.JWT != nil {
		g.jwt = newJWTVerifier(*cfg.JWT, cfg.Now)
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	opts := []a2asrv.RequestHandlerOption{
		a2asrv.WithTaskStore(store),
		a2asrv.WithLogger(slog.New(golog.SlogHandler()).With("logger", "nova/a2ahttp/a2a-go")),
	}
	if cfg.PushEnabled {
		g.pusher = newPusher(store, guard, &cfg)
		opts = append(opts, a2asrv.WithPushNotifications(&pushStore{s: store, guard: guard}, g.pusher))
	}
	g.handler = &routed{inner: a2asrv.NewHandler(&executor{g: g}, opts...), g: g}
	g.v03 = a2asrv.NewJSONRPCHandler(g.handler)
	// Web pages must not drive the gateway (see localhttp): the cards stay
	// readable from any origin, as their CORS "*" says.
	web := localhttp.Guard{Public: func(r *http.Request) bool { return isCardPath(r.URL.Path) }}
	if u, err := url.Parse(cfg.BaseURL); err == nil && u.Host != "" {
		web.Hosts = []string{u.Host}
	}
	var routed http.Handler = http.HandlerFunc(g.route)
	if cfg.AuthAll {
		routed = g.requireAuth(routed)
	}
	g.guarded = web.Wrap(routed)
	return g, nil
}

// Start starts the timeout sweeper and the push workers. Requests before
// Start get 503.
func (g *Gateway) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return errors.New("a2ahttp: gateway closed")
	case g.started:
		return nil
	}
	g.started = true
	if g.pusher != nil {
		g.pusher.start()
	}
	g.wg.Go(g.sweep)
	log.Infow("A2A gateway started", "maxTasks", g.cfg.MaxTasks, "taskTimeout", g.cfg.TaskTimeout, "auth", g.authOn(), "jwt", g.jwt != nil, "authAll", g.cfg.AuthAll)
	return nil
}

// Close stops the gateway: new requests get 503, running tasks fail with
// "Task interrupted: the gateway closed" (their mesh calls are canceled),
// and Close waits for them, the sweeper and the push workers, then closes
// the store (and the database if the gateway opened it). It is idempotent
// and safe before Start. Streams still open are ended when their tasks
// end; the node's http.Server.Shutdown waits for the handlers.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.cancel()
	for g.running > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
	g.wg.Wait()
	if g.pusher != nil {
		g.pusher.close()
	}
	return g.store.close()
}

// Stats are the gateway's counters, for the node's metrics.
type Stats struct {
	Tasks         int    // tasks stored
	Running       int    // executions in progress
	PushDelivered uint64 // notifications delivered
	PushFailed    uint64 // notifications given up after their retries
	PushDropped   uint64 // notifications dropped because a queue was full
}

// Stats returns the current counters.
func (g *Gateway) Stats() Stats {
	g.mu.Lock()
	st := Stats{Running: g.running}
	g.mu.Unlock()
	st.Tasks = g.store.count()
	if g.pusher != nil {
		st.PushDelivered = g.pusher.delivered.Load()
		st.PushFailed = g.pusher.failed.Load()
		st.PushDropped = g.pusher.dropped.Load()
	}
	return st
}

// enter records an execution of task id; false when the gateway is closing.
func (g *Gateway) enter(id a2a.TaskID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.running++
	g.live[id]++
	return true
}

func (g *Gateway) leave(id a2a.TaskID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	if g.live[id]--; g.live[id] <= 0 {
		delete(g.live, id)
	}
	if g.running == 0 {
		g.idle.Broadcast()
	}
}

func (g *Gateway) isLive(id a2a.TaskID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.live[id] > 0
}

func (g *Gateway) now() time.Time { return g.cfg.Now() }

// sweep fails tasks that stayed submitted or working past the task timeout
// without an execution in this process (after a restart, say); running
// executions time out on their own.
func (g *Gateway) sweep() {
	t := time.NewTicker(sweepInterval(g.cfg.TaskTimeout))
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		g.sweepOnce()
	}
}

func (g *Gateway) sweepOnce() {
	cutoff := g.now().Add(-g.cfg.TaskTimeout)
	g.store.dropPending(cutoff, g.isLive)
	ids, err := g.store.stale(cutoff)
	if err != nil {
		log.Warnw("task sweep failed", "err", err)
		return
	}
	for _, id := range ids {
		g.mu.Lock()
		if g.live[id] > 0 {
			g.mu.Unlock()
			continue
		}
		t, ok, err := g.store.expire(id, cutoff, textTimedOut)
		g.mu.Unlock()
		if err != nil {
			log.Warnw("task expiry failed", "task", id, "err", err)
			continue
		}
		if ok && g.pusher != nil {
			g.pusher.notifyAll(t)
		}
	}
}

// ServeHTTP routes a request that passes localhttp's guard: on loopback,
// its Host must name the listener; an Origin header must be the gateway's
// own (cards excepted); a POST's Content-Type, if given, JSON (application/json
// or application/a2a+json).
// With AuthAll, every request then needs a token (401 otherwise); without,
// JSON-RPC requests do whenever a token is configured.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.guarded.ServeHTTP(w, r)
}

// isCardPath reports whether p is an agent card's.
func isCardPath(p string) bool {
	if p == "/.well-known/agent-card.json" || p == "/.well-known/agent.json" {
		return true
	}
	rest, ok := strings.CutPrefix(p, "/a2a/")
	if !ok {
		return false
	}
	_, rest, _ = strings.Cut(rest, "/")
	return rest == ".well-known/agent-card.json" || rest == ".well-known/agent.json"
}

func (g *Gateway) route(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/healthz":
		g.serveHealth(w, r)
	case p == "/.well-known/agent-card.json":
		g.serveNodeCard(w, r, false)
	case p == "/.well-known/agent.json":
		g.serveNodeCard(w, r, true)
	case p == "/a2a" || p == "/a2a/":
		g.serveRPC(w, r, "")
	case strings.HasPrefix(p, "/v1/"):
		g.serveREST(w, r, "", strings.TrimPrefix(r.URL.EscapedPath(), "/v1"))
	case strings.HasPrefix(p, "/a2a/"):
		name, rest, _ := strings.Cut(p[len("/a2a/"):], "/")
		switch rest {
		case "":
			g.serveRPC(w, r, name)
		case ".well-known/agent-card.json":
			g.serveAgentCard(w, r, name, false)
		case ".well-known/agent.json":
			g.serveAgentCard(w, r, name, true)
		default:
			if strings.HasPrefix(rest, "v1/") {
				// The escaped path keeps a task id's "/" (%2F) in one segment.
				ep := r.URL.EscapedPath()
				g.serveREST(w, r, name, ep[strings.Index(ep, "/v1/")+len("/v1"):])
				return
			}
			httpError(w, http.StatusNotFound, "not found")
		}
	default:
		httpError(w, http.StatusNotFound, "not found")
	}
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// state reports whether requests may be served.
func (g *Gateway) serving() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started && !g.closed
}

func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) {
	ready := g.serving() && g.mesh.Ready()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"not ready"}` + "\n"))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ready"}` + "\n"))
}

// base is the URL prefix cards name.
func (g *Gateway) base(r *http.Request) string {
	if g.cfg.BaseURL != "" {
		return strings.TrimSuffix(g.cfg.BaseURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// cardRequest handles what every card endpoint shares; it reports whether
// to go on (GET or HEAD).
func cardRequest(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, A2A-Version")
		w.Header().Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		httpError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
	return false
}

// writeCard answers with the v1.0 card for A2A-Version 1.x, else the v0.3
// card (legacy: without the v1.0 interfaces, for the pre-0.3 path).
func writeCard(w http.ResponseWriter, r *http.Request, ci cardInfo, legacy bool) {
	var v any = ci.v03(!legacy)
	if !legacy {
		if ver, ok := wireVersion(r.Header.Get(VersionHeader)); ok && ver == Version10 {
			v = ci.v1()
		} else if !ok {
			v = ci.v1() // a newer client than us: the newest card we have
		}
	}
	body, err := json.Marshal(v)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "card encoding failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Vary", VersionHeader)
	w.Header().Set("Cache-Control", "public, max-age=60")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func (g *Gateway) serveNodeCard(w http.ResponseWriter, r *http.Request, legacy bool) {
	if !cardRequest(w, r) {
		return
	}
	writeCard(w, r, g.nodeInfo(g.base(r), g.mesh.Agents(r.Context())), legacy)
}

func (g *Gateway) serveAgentCard(w http.ResponseWriter, r *http.Request, name string, legacy bool) {
	if !cardRequest(w, r) {
		return
	}
	c, err := g.mesh.Resolve(r.Context(), name)
	if err != nil {
		httpError(w, http.StatusNotFound, fmt.Sprintf("agent %q: %v", name, err))
		return
	}
	writeCard(w, r, g.agentInfo(g.base(r), name, c), legacy)
}

// serveRPC is the JSON-RPC endpoint of agent name ("" for the node): auth
// before anything is read, then limits, then dispatch by A2A-Version.
func (g *Gateway) serveRPC(w http.ResponseWriter, r *http.Request, name string) {
	who, err := g.authenticate(r)
	if err != nil {
		g.writeAuthError(w, err)
		return
	}
	r = r.WithContext(withCaller(r.Context(), who))
	if !g.serving() {
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "gateway not running")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		httpError(w, http.StatusMethodNotAllowed, "JSON-RPC requests are POSTs")
		return
	}
	select {
	case g.reqs <- struct{}{}:
		defer func() { <-g.reqs }()
	default:
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"gateway busy: too many concurrent requests"}}` + "\n"))
		return
	}
	body, err := g.readBody(r)
	if errors.Is(err, errBodyTooLarge) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request body over %d bytes"}}`+"\n", g.cfg.MaxBodyBytes)
		return
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	version, ok := wireVersion(r.Header.Get(VersionHeader))
	if !ok {
		req, _ := peekRequest(body)
		writeRPCError(w, req.ID, fmt.Errorf("A2A-Version %q is not supported; supported: %s, %s: %w",
			r.Header.Get(VersionHeader), Version03, Version10, errVersionNotSupported), true)
		return
	}
	rt := &route{version: version, node: name == ""}
	if name != "" {
		c, err := g.mesh.Resolve(r.Context(), name)
		if err != nil {
			req, _ := peekRequest(body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			resp := rpcResponse{JSONRPC: "2.0", ID: idOrNull(req.ID), Error: &rpcError{
				Code: codeInvalidRequest, Message: fmt.Sprintf("agent %q: %v", name, err),
			}}
			if code := codeOf(err); code != "" {
				resp.Error.Data, _ = json.Marshal(map[string]string{"code": code})
			}
			_ = json.NewEncoder(w).Encode(&resp)
			return
		}
		rt.agent, rt.agentID, rt.name = c.Address(), c.ID, name
	}
	rt.base = g.base(r)
	ctx := withRoute(r.Context(), rt)
	if version == Version10 {
		g.serveV1(w, r.WithContext(ctx), body)
		return
	}
	g.serveV03(w, r.WithContext(ctx), body)
}

// peekRequest decodes the envelope of a JSON-RPC request.
func peekRequest(body []byte) (rpcRequest, error) {
	var req rpcRequest
	err := json.Unmarshal(body, &req)
	return req, err
}

// stream runs write (which writes a streaming response to sw) with a
// keep-alive goroutine owned by this request.
func (g *Gateway) stream(w http.ResponseWriter, write func(sw *streamWriter)) {
	sw := newStreamWriter(w, g.cfg.StreamWriteTimeout)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { sw.keepAlive(done, g.cfg.KeepAliveInterval) })
	defer wg.Wait()
	defer close(done)
	write(sw)
}
