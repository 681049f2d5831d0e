package node

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/tiers"
)

// mcpState is the node's MCP bridge: the registry of its agents' tools, the
// backends serving them, and the bridge that shares them with the mesh.
type mcpState struct {
	reg      *mcpbridge.Registry
	bridge   *mcpbridge.Bridge
	backends []*mcpbridge.Backend
	kick     chan struct{}
	stop     context.CancelFunc
	wg       sync.WaitGroup
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// buildMCP builds the bridge, its registry and its metrics; it starts
// nothing (startMCP does). Called from build.
func (n *Node) buildMCP(h host.Host) error {
	rules := n.cfg.TierRules
	if rules == nil {
		rules = tiers.DefaultRules()
	}
	st := &mcpState{reg: mcpbridge.NewRegistry(), kick: make(chan struct{}, 1)}
	st.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nova", Name: "mcp_invocations_total",
		Help: "MCP tool calls served or made through this node, by canonical tool and outcome."}, []string{"tool", "success"})
	st.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "nova", Name: "mcp_invocation_seconds",
		Help: "Duration of MCP tool calls, by canonical tool.", Buckets: prometheus.ExponentialBuckets(100e-6, 2, 18)}, []string{"tool"})
	for _, c := range []prometheus.Collector{st.calls, st.duration} {
		if err := n.obs.prom.reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	st.reg.SetInvocationHook(func(rec mcpbridge.InvocationRecord) {
		ok := "true"
		if !rec.Success {
			ok = "false"
		}
		st.calls.WithLabelValues(rec.Tool, ok).Inc()
		st.duration.WithLabelValues(rec.Tool).Observe(rec.DurationMs / 1000)
		ev := localapi.Event{Type: localapi.EvtMCPInvoked, Time: time.UnixMilli(rec.Time), Sender: rec.Agent, Detail: rec.Tool,
			Success: rec.Success, Latency: time.Duration(rec.DurationMs * float64(time.Millisecond)), SourceTier: -1, TargetTier: -1}
		if !rec.Success {
			ev.Code, _, _ = strings.Cut(rec.Error, ":")
			ev.Detail = rec.Tool + ": " + rec.Error
		}
		n.obs.Record(ev)
	})
	pol := &mcpbridge.Policy{Cards: n.reg, Tiers: rules, Sandbox: n.cfg.Sandbox,
		Security: func(code, detail string, p peer.ID) {
			n.obs.Record(localapi.Event{Type: protocol.EvtSecurityRaised, Time: time.Now(), Code: code, Detail: detail, Peer: p, SourceTier: -1, TargetTier: -1})
		}}
	b, err := mcpbridge.New(mcpbridge.Config{Host: h, Registry: st.reg, Policy: pol, As: n.mcpAs, Version: Version,
		OnLocalChange: func() {
			select {
			case st.kick <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		return err
	}
	st.bridge = b
	n.mcp = st
	return nil
}

// startMCP starts the bridge, the configured backends and the tool
// publisher. Called from Start with n.mu held.
func (n *Node) startMCP(ctx context.Context) error {
	st := n.mcp
	st.bridge.Start()
	for _, a := range n.cfg.Agents {
		names := make([]string, 0, len(a.MCPServers))
		for name := range a.MCPServers {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			be, err := mcpbridge.StartBackend(a.Name, name, a.MCPServers[name], st.reg, Version)
			if err != nil {
				return err // closeMCP, on the node's stack, closes those started
			}
			st.backends = append(st.backends, be)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	st.stop = cancel
	st.wg.Go(func() { n.publishTools(cctx, st) })
	return nil
}

// restartBackends replaces the MCP servers of agent with servers (none:
// the agent serves no MCP any more): the old ones are stopped, their
// items leave the registry, the new ones start, and the tool publisher
// brings the agent's card in line (its tools as capabilities, or a plain
// card when it serves nothing). The registry's changes reach peers and
// the face's clients as list_changed. A declaration StartBackend refuses
// is an error, after the servers before it started.
func (n *Node) restartBackends(agent AgentConfig) error {
	st := n.mcp
	n.mu.Lock()
	var keep, stop []*mcpbridge.Backend
	for _, be := range st.backends {
		if be.Status().Agent == agent.Name {
			stop = append(stop, be)
		} else {
			keep = append(keep, be)
		}
	}
	st.backends = keep
	n.mu.Unlock()
	for _, be := range stop {
		be.Close()
	}
	names := make([]string, 0, len(agent.MCPServers))
	for name := range agent.MCPServers {
		names = append(names, name)
	}
	sort.Strings(names)
	var err error
	for _, name := range names {
		be, serr := mcpbridge.StartBackend(agent.Name, name, agent.MCPServers[name], st.reg, Version)
		if serr != nil {
			err = serr
			break
		}
		n.mu.Lock()
		st.backends = append(st.backends, be)
		n.mu.Unlock()
	}
	if len(agent.MCPServers) == 0 {
		if uerr := n.updateCard(agent.Card()); uerr != nil && err == nil {
			err = uerr
		}
	}
	select {
	case st.kick <- struct{}{}:
	default:
	}
	return err
}

// closeMCP stops the backends (their process groups) and the bridge.
func (n *Node) closeMCP() {
	// No n.mu here: Close calls this after its last use of the lock, and
	// Start's failure paths with the lock held.
	st := n.mcp
	if st.stop != nil {
		st.stop()
	}
	st.wg.Wait()
	for _, be := range st.backends {
		be.Close()
	}
	st.bridge.Close()
}

// mcpAs is the address of the local agent the node's own MCP faces (stdio
// relay, /mcp, the tools commands) call as: mcp.as when the configuration
// sets it, else the node's default agent, the one with the smallest id
// (defaultAgent), as for every other default of the node, and not the
// first agent of config.yaml; "" when the node hosts no agent.
func (n *Node) mcpAs() string {
	if n.cfg.MCP.As != "" {
		return n.cfg.MCP.As + "@" + n.id.String()
	}
	c, ok := n.defaultAgent()
	if !ok {
		return ""
	}
	return c.Address()
}

// publishTools keeps each agent's card in line with its MCP tools: a
// capability "agent.tool" per tool, and the /nova/mcp/1.0.0 protocol so
// peers know to list them. Debounced: a server listing many tools yields
// one new card revision.
func (n *Node) publishTools(ctx context.Context, st *mcpState) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.kick:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		byAgent := map[string][]mcpbridge.ToolInfo{}
		for _, t := range st.reg.ListTools() {
			byAgent[t.Agent] = append(byAgent[t.Agent], t)
		}
		serves := map[string]bool{}
		for _, r := range st.reg.ListResources() {
			serves[r.Agent] = true
		}
		for _, p := range st.reg.ListPrompts() {
			serves[p.Agent] = true
		}
		n.mu.Lock() // Reload replaces the agents
		agents := slices.Clone(n.cfg.Agents)
		n.mu.Unlock()
		for _, a := range agents {
			if len(a.MCPServers) == 0 {
				continue
			}
			c := a.Card()
			if len(byAgent[a.Name]) > 0 || serves[a.Name] {
				c.Protocols = append(c.Protocols, mcpbridge.ProtocolID)
			}
			for _, t := range byAgent[a.Name] {
				if !c.HasCapability(t.Canonical) {
					c.Capabilities = append(c.Capabilities, agentcard.Capability{ID: t.Canonical, Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
				}
			}
			if err := n.updateCard(c); err != nil {
				n.log.Warnw("publish MCP tools in the agent card", "agent", a.Name, "err", err)
			}
		}
	}
}

// updateCard registers a changed card of a hosted agent (same handler) and
// announces it; an unchanged card is left alone.
func (n *Node) updateCard(c agentcard.Card) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return protocol.ErrChannelClosed
	}
	if cur, ok := n.reg.Get(c.ID); ok && sameCardContent(cur, c) {
		return nil
	}
	reg, err := n.reg.Register(c)
	if err != nil {
		return err
	}
	if err := n.db.putCard(reg); err != nil {
		return err
	}
	if n.started {
		n.router.Announce()
		n.disc.Announce()
	}
	return nil
}

func sameCardContent(a, b agentcard.Card) bool {
	if !slices.Equal(a.Protocols, b.Protocols) || len(a.Capabilities) != len(b.Capabilities) || a.Description != b.Description || a.Tier != b.Tier || a.SandboxID != b.SandboxID {
		return false
	}
	for i := range a.Capabilities {
		x, y := a.Capabilities[i], b.Capabilities[i]
		if x.ID != y.ID || x.Name != y.Name || x.Description != y.Description || string(x.InputSchema) != string(y.InputSchema) {
			return false
		}
	}
	return true
}

// mcpHTTP is the streamable HTTP face, mounted at /mcp on the loopback
// listener.
func (n *Node) mcpHTTP() http.Handler { return n.mcp.bridge.HTTPHandler() }

// MCP returns the node's MCP bridge; it serves peers from Start on.
func (n *Node) MCP() *mcpbridge.Bridge { return n.mcp.bridge }

// MCPBackends reports the state of the node's MCP servers.
func (n *Node) MCPBackends() []mcpbridge.BackendStatus {
	n.mu.Lock() // Start adds the backends, holding it
	backends := n.mcp.backends
	n.mu.Unlock()
	out := make([]mcpbridge.BackendStatus, 0, len(backends))
	for _, be := range backends {
		out = append(out, be.Status())
	}
	return out
}

// registerMCPRoutes adds the MCP relay (an HTTP Upgrade to newline-delimited
// JSON-RPC on the local socket, what `nova-node mcp` relays stdio to) and
// the backends' status.
func (n *Node) registerMCPRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/mcp/backends", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.MCPBackends())
	})
	mux.HandleFunc("POST /v1/mcp", func(w http.ResponseWriter, r *http.Request) {
		b := n.MCP()
		if !strings.EqualFold(r.Header.Get("Upgrade"), localapi.MCPUpgrade) {
			writeJSON(w, http.StatusBadRequest, &localapi.APIError{Code: "BAD_REQUEST", Message: "send Upgrade: " + localapi.MCPUpgrade})
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			writeJSON(w, http.StatusInternalServerError, &localapi.APIError{Code: "INTERNAL", Message: "connection cannot be upgraded"})
			return
		}
		conn, rw, err := hj.Hijack()
		if err != nil {
			return
		}
		_ = conn.SetDeadline(time.Time{})
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + localapi.MCPUpgrade + "\r\n\r\n")
		if err := rw.Flush(); err != nil {
			conn.Close()
			return
		}
		_ = b.ServeConn(context.Background(), &hijacked{Reader: rw.Reader, Conn: conn})
		conn.Close()
	})
}

// hijacked reads through the server's buffer (it may hold the client's
// first bytes) and writes to the connection.
type hijacked struct {
	*bufio.Reader
	net.Conn
}

func (h *hijacked) Read(p []byte) (int, error) { return h.Reader.Read(p) }
