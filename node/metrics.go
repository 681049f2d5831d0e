package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
			Help: "Time from Send to the routing decision's outcome.", Buckets: prometheus.ExponentialBuckets(20e-6, 2, 16)}),
	}
	reg.MustRegister(m.sent, m.received, m.errs, m.security, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *promMetrics) observe(ev protocol.Event) {
	switch ev.Type {
	case protocol.EventMessageSent:
		m.sent.WithLabelValues(string(ev.MessageType)).Inc()
	case protocol.EventMessageReceived:
		m.received.WithLabelValues(string(ev.MessageType), ev.Path).Inc()
	case protocol.EventRoutingDecision:
		m.latency.Observe(ev.Latency.Seconds())
	case protocol.EventError:
		m.errs.WithLabelValues(ev.Code).Inc()
	case protocol.EventSecurity:
		m.security.WithLabelValues(ev.Code).Inc()
	}
}

// metricsServer serves /metrics on the node's loopback HTTP listener.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// startMetrics serves /metrics, /healthz and, when mcp is not nil, the MCP
// streamable HTTP face at /mcp on addr (loopback by default).
func startMetrics(addr string, reg *prometheus.Registry, channels func() []protocol.ChannelInfo, mcp http.Handler) (*metricsServer, error) {
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
	if mcp != nil {
		mux.Handle("/mcp", mcp)
	}
	s := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan struct{})}
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
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
