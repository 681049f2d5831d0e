package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
)

// a2aState is the node's A2A gateway and its listener.
type a2aState struct {
	gw   *a2ahttp.Gateway
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// a2aMesh is what the gateway sees of the node.
type a2aMesh struct{ n *Node }

func (m a2aMesh) Agents(context.Context) []agentcard.Card {
	cards := m.n.reg.List()
	sort.Slice(cards, func(i, j int) bool { return cards[i].Address() < cards[j].Address() })
	return cards
}

func (m a2aMesh) Resolve(_ context.Context, agent string) (agentcard.Card, error) {
	return m.n.reg.Resolve(agent)
}

// Call sends the A2A message as a request from the gateway's agent and
// waits for the answer, as long as ctx allows (the gateway's task timeout).
func (m a2aMesh) Call(ctx context.Context, agent string, payload json.RawMessage) (json.RawMessage, error) {
	r := m.n.router
	env, err := m.n.factory.New(m.n.a2aAs(), agent, envelope.TypeRequest, payload)
	if err != nil {
		return nil, err
	}
	resp, _, err := r.Request(ctx, env)
	if err != nil {
		return nil, err
	}
	return resp.Payload, nil
}

func (m a2aMesh) Ready() bool {
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	return m.n.started && !m.n.closed
}

// a2aAs is the local agent A2A clients' messages come from.
func (n *Node) a2aAs() string {
	if n.cfg.A2A.As != "" {
		return n.cfg.A2A.As
	}
	c, _ := n.defaultAgent()
	return c.ID
}

// startA2A opens the gateway's listener. Called from Start with n.mu held.
func (n *Node) startA2A(ctx context.Context) error {
	addr := n.cfg.A2A.Listen
	if addr == "" || addr == "off" {
		return nil
	}
	cfg := a2ahttp.DefaultConfig()
	cfg.DB = n.db.db
	cfg.BaseURL = n.cfg.A2A.BaseURL
	cfg.TokenHashes = n.cfg.A2A.TokenHashes
	cfg.JWT = n.cfg.A2A.JWT
	cfg.PushAllowHosts = n.cfg.A2A.PushAllowHosts
	if n.cfg.A2A.PushSecret != "" {
		cfg.PushSecret, _ = hex.DecodeString(n.cfg.A2A.PushSecret) // checked by Validate
	}
	cfg.NodeName, cfg.NodeVersion = "nova-node "+shortPeer(n.id.String()), Version
	cfg.NodeDescription = "A nova-node mesh node: every agent of swarm " + n.cfg.Swarm + ", reachable over A2A."
	if n.cfg.A2A.TaskTimeout > 0 {
		cfg.TaskTimeout = n.cfg.A2A.TaskTimeout
	}
	if n.cfg.A2A.MaxTasks > 0 {
		cfg.MaxTasks = n.cfg.A2A.MaxTasks
	}
	host, _, _ := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	cfg.RequireAuth = !(host == "localhost" || (ip != nil && ip.IsLoopback()))
	if cfg.RequireAuth && len(cfg.TokenHashes) == 0 && cfg.JWT == nil {
		return fmt.Errorf("node: a2a.listen %s is not loopback: set a2a.tokenHashes (nova-node a2a token) or a2a.jwt, or listen on 127.0.0.1", addr)
	}
	// Every request needs a token: the data dir's local token, or one of
	// a2a.tokenHashes. On loopback the cards and /healthz too, as the
	// gateway is then a local face, for the data dir's owner alone.
	cfg.LocalToken = n.localToken
	cfg.AuthAll = !cfg.RequireAuth
	cfg.AuthHint = n.localTokenHint()
	gw, err := a2ahttp.New(a2aMesh{n}, cfg)
	if err != nil {
		return fmt.Errorf("node: A2A gateway: %w", err)
	}
	if err := gw.Start(ctx); err != nil {
		gw.Close()
		return fmt.Errorf("node: A2A gateway: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		gw.Close()
		return fmt.Errorf("node: A2A listener %s: %w (set a2a.listen, or \"off\")", addr, err)
	}
	st := &a2aState{gw: gw, ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}}
	go func() { // owned by a2aState: closeA2A waits on done
		defer close(st.done)
		_ = st.srv.Serve(ln)
	}()
	n.a2a = st
	return nil
}

// closeA2A stops the listener, then the gateway.
func (n *Node) closeA2A() {
	// No n.mu here: Close calls this after its last use of the lock, and
	// Start's failure paths with the lock held.
	st := n.a2a
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := st.srv.Shutdown(ctx); err != nil {
		st.srv.Close()
	}
	<-st.done
	st.gw.Close()
}

// A2AURL is the gateway's base URL ("" when off or not started).
func (n *Node) A2AURL() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.a2a == nil {
		return ""
	}
	return "http://" + n.a2a.ln.Addr().String()
}

func shortPeer(s string) string {
	if len(s) > 6 {
		return s[len(s)-6:]
	}
	return s
}

// hostRemoteA2A fetches the card of each agent declared with a2aUrl and
// hosts it: its card is published on the mesh and mesh messages to it are
// forwarded over A2A. It retries until the agent answers or ctx ends.
func (n *Node) hostRemoteA2A(ctx context.Context) {
	client := a2ahttp.NewClient()
	for _, a := range n.cfg.Agents {
		if a.A2AURL == "" {
			continue
		}
		a := a
		n.wg.Go(func() {
			delay := time.Second
			for {
				ra, err := a2ahttp.NewRemoteAgent(ctx, client, a.Name, a.A2AURL, a2ahttp.WithRemoteTier(a.Card().Tier))
				if err == nil {
					c := ra.Card()
					c.ID, c.Name, c.SandboxID = a.Name, a.Name, a.Sandbox
					if a.Description != "" {
						c.Description = a.Description
					}
					if _, err = n.RegisterAgent(c, ra.Handler()); err == nil {
						n.log.Infow("hosting A2A agent", "agent", a.Name, "url", a.A2AURL)
						return
					}
				}
				n.log.Warnw("A2A agent unreachable; retrying", "agent", a.Name, "url", a.A2AURL, "err", err, "in", delay)
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				delay = min(delay*2, time.Minute)
			}
		})
	}
}
