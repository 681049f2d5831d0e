package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/localhttp"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/node/webui"
	"github.com/nova-node/nova-node/protocol"
)

// promMetrics are the node's Prometheus series. Each node has its own
// registry (several nodes can share a process), which libp2p's own metrics
// (swarm, identify, resource manager, ...) join.
type promMetrics struct {
	reg      *prometheus.Registry
	sent     *prometheus.CounterVec
	received *prometheus.CounterVec
	errs     *prometheus.CounterVec
	security *prometheus.CounterVec
	latency  prometheus.Histogram

	// The vectors' children by label values, so that observe, called for
	// every router event, does not hash and check label values
	// (WithLabelValues) each time. Filled on first use, so that a series
	// still appears in /metrics only once it has counted something. Only
	// observe touches them, under the Observer's mutex.
	sentBy     []prometheus.Counter                 // by index in promTypes
	receivedBy [][len(promPaths)]prometheus.Counter // by index in promTypes, then in promPaths
	errsBy     codeCounters
	securityBy codeCounters
}

// promTypes and promPaths are the label values of message types and routing
// paths: fixed sets, as the router emits events only for envelopes that
// passed envelope.Validate (on Send, and on decoding a peer's).
var (
	promTypes = envelope.Types()
	promPaths = [...]string{protocol.PathLocal, protocol.PathRemote, protocol.PathBroadcast}
)

func promTypeIndex(t envelope.Type) int {
	for i, pt := range promTypes {
		if pt == t {
			return i
		}
	}
	return -1
}

func promPathIndex(p string) int {
	for i, pp := range promPaths {
		if pp == p {
			return i
		}
	}
	return -1
}

// Error and security codes are not a fixed set: a remote error's code is
// whatever the peer wrote in its nack or its agent in an error payload, so
// a peer could mint one series per message. The wire codes this node knows
// always get their own series; up to maxExtraCodeLabels others do too (an
// application's own codes); any further one, or one that is not a
// short UTF-8 string (WithLabelValues would panic on invalid UTF-8), is
// counted as otherCodeLabel.
const (
	maxExtraCodeLabels = 64
	maxCodeLabelLen    = 64
	otherCodeLabel     = "OTHER"
)

var knownCodes = func() map[string]bool {
	m := map[string]bool{"": true}
	for _, c := range protocol.Codes() {
		m[c] = true
	}
	return m
}()

// codeCounters are a code-labelled vector's children, bounded as above.
type codeCounters struct {
	vec   *prometheus.CounterVec
	by    map[string]prometheus.Counter
	extra int // codes in by that are not knownCodes
}

func newCodeCounters(vec *prometheus.CounterVec) codeCounters {
	return codeCounters{vec: vec, by: map[string]prometheus.Counter{}}
}

func (cc *codeCounters) counter(code string) prometheus.Counter {
	if c, ok := cc.by[code]; ok {
		return c
	}
	if !knownCodes[code] {
		if cc.extra >= maxExtraCodeLabels || len(code) > maxCodeLabelLen || !utf8.ValidString(code) {
			code = otherCodeLabel
			if c, ok := cc.by[code]; ok {
				return c
			}
		}
		cc.extra++
	}
	c := cc.vec.WithLabelValues(code)
	cc.by[code] = c
	return c
}

func newPromMetrics() *promMetrics {
	reg := prometheus.NewRegistry()
	m := &promMetrics{
		reg: reg,
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nova", Name: "messages_sent_total",
			Help: "Envelopes sent by local agents and delivered (acknowledged), by message type."}, []string{"type"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nova", Name: "messages_received_total",
			Help: "Envelopes delivered to local agents, by message type and path."}, []string{"type", "path"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nova", Name: "errors_total",
			Help: "Routing and delivery failures, by error code."}, []string{"code"}),
		security: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nova", Name: "security_events_total",
			Help: "Security events (forged cards, unauthorised senders, policy violations), by code."}, []string{"code"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "nova", Name: "routing_latency_seconds",
			Help: "Time from Send to the routing decision, of the messages routed (failures count in nova_errors_total).", Buckets: prometheus.ExponentialBuckets(20e-6, 2, 16)}),
	}
	m.sentBy = make([]prometheus.Counter, len(promTypes))
	m.receivedBy = make([][len(promPaths)]prometheus.Counter, len(promTypes))
	m.errsBy, m.securityBy = newCodeCounters(m.errs), newCodeCounters(m.security)
	reg.MustRegister(m.sent, m.received, m.errs, m.security, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe counts ev, whose message type has index ti in promTypes (-1: not
// there, or not looked up as ev is not a sent or received message). ev is a
// pointer only to spare copying the event. The caller holds the Observer's
// mutex.
func (m *promMetrics) observe(ev *localapi.Event, ti int) {
	switch ev.Type {
	case protocol.EvtMessageSent:
		if ti < 0 { // not a valid type: cannot happen (see promTypes), kept uncached
			m.sent.WithLabelValues(string(ev.MessageType)).Inc()
			return
		}
		c := m.sentBy[ti]
		if c == nil {
			c = m.sent.WithLabelValues(string(ev.MessageType))
			m.sentBy[ti] = c
		}
		c.Inc()
	case protocol.EvtMessageReceived:
		pi := promPathIndex(ev.Path)
		if ti < 0 || pi < 0 { // cannot happen (see promTypes), kept uncached
			m.received.WithLabelValues(string(ev.MessageType), ev.Path).Inc()
			return
		}
		c := m.receivedBy[ti][pi]
		if c == nil {
			c = m.received.WithLabelValues(string(ev.MessageType), ev.Path)
			m.receivedBy[ti][pi] = c
		}
		c.Inc()
	case protocol.EvtRouteDecided:
		if ev.Success { // as AverageRoutingLatencyMs: failures are errors
			m.latency.Observe(ev.Latency.Seconds())
		}
	case protocol.EvtErrorRaised:
		m.errsBy.counter(ev.Code).Inc()
	case protocol.EvtSecurityRaised:
		m.securityBy.counter(ev.Code).Inc()
	}
}

// metricsServer serves /metrics on the node's loopback HTTP listener.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// startMetrics serves /metrics, /healthz and, when faces.mcp is not nil,
// the MCP streamable HTTP face at /mcp on addr (loopback by default). Every
// request must carry faces.token as a bearer token: the listener is for
// the data dir's owner only.
func startMetrics(addr string, reg *prometheus.Registry, channels func() []protocol.ChannelInfo, faces localFaces) (*metricsServer, error) {
	tokens, err := localhttp.NewTokens([]string{faces.token}, nil)
	if err != nil {
		return nil, err
	}
	if tokens.Len() == 0 { // cannot happen: Start loaded the token
		return nil, errors.New("node: metrics listener: no local token")
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nova", Name: "channel_pending_envelopes",
		Help: "Envelopes waiting for acknowledgement on all outbound channels."}, func() float64 {
		n := 0
		for _, c := range channels() {
			n += c.Pending
		}
		return float64(n)
	})
	if err := reg.Register(pending); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node: metrics listener %s: %w (set metricsListen, or \"off\")", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	if faces.mcp != nil {
		mux.Handle("/mcp", faces.mcp)
	}
	var public func(*http.Request) bool
	if faces.ui != nil { // the web view: its page loads without the token, its API needs it
		mux.Handle(webui.Prefix, faces.ui)
		public = webui.Public
	}
	// Web pages must not read metrics or drive /mcp (see localhttp), nor
	// may other users of the machine: the local token.
	h := localhttp.Guard{}.Wrap(tokens.Require(mux, faces.hint, public))
	s := &metricsServer{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan struct{})}
	if faces.ui != nil {
		s.srv.RegisterOnShutdown(faces.ui.Close) // its streams end, so Shutdown need not wait for them
	}
	go func() { // owned by metricsServer: close() waits on done
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

func (s *metricsServer) url() string { return "http://" + s.ln.Addr().String() + "/metrics" }

func (s *metricsServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		// A connection that outlived the wait (an /mcp SSE stream never
		// goes idle): cut it, as closeA2A does, so that its handler sees
		// its request end rather than run on into the MCP bridge, which
		// Close stops next.
		_ = s.srv.Close()
	}
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
