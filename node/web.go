package node

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/node/webui"
)

// The web view (package webui) reads the node through webSource: the
// methods the local API calls, so that the page's actions keep the CLI's
// rules and error codes.

// webUI returns the web view of the node, for the loopback HTTP listener.
func (n *Node) webUI() *webui.Server { return webui.New(webSource{n}, webui.Options{}) }

// WebURL is the address of the node's web view ("" when the loopback
// HTTP listener is off or not started). The page needs the local token:
// see [ReadLocalToken] and `nova-node open`.
func (n *Node) WebURL() string {
	u := n.MetricsURL()
	if u == "" {
		return ""
	}
	return strings.TrimSuffix(u, "/metrics") + webui.Prefix
}

// webSource is the node as package webui sees it.
type webSource struct{ n *Node }

func (s webSource) Snapshot() webui.Snapshot {
	n := s.n
	st := n.Status()
	snap := webui.Snapshot{
		Self:     webui.Self{PeerID: st.PeerID, Version: st.Version, Swarm: st.Swarm, Addrs: st.Addrs},
		Peers:    make([]webui.Peer, 0, len(st.PeerList)),
		Channels: st.Channels,
		Metrics:  st.Metrics,
		Swarms:   []json.RawMessage{},
		Docs:     []json.RawMessage{},
	}
	ps := n.host.Peerstore()
	for _, p := range st.PeerList {
		wp := webui.Peer{PeerID: p.PeerID, Addrs: p.Addrs, Relayed: p.Relayed, Basis: p.Basis, Expires: p.Expires}
		if id, err := peer.Decode(p.PeerID); err == nil {
			wp.LatencyMs = float64(ps.LatencyEWMA(id).Microseconds()) / 1000
		}
		snap.Peers = append(snap.Peers, wp)
	}
	slices.SortFunc(snap.Peers, func(a, b webui.Peer) int { return strings.Compare(a.PeerID, b.PeerID) })
	cards := n.reg.List()
	snap.Agents = make([]webui.Agent, 0, len(cards))
	for _, c := range cards {
		sd := c.Standing()
		a := webui.Agent{Address: c.Address(), Name: c.Name, Host: c.Host, Tier: int(c.Tier), ClaimedTier: int(sd.ClaimedTier),
			Sandbox: c.SandboxID, Basis: string(sd.Basis), Grant: sd.Grant, Expires: sd.Expires, Note: sd.Note,
			Capabilities: make([]string, 0, len(c.Capabilities))}
		for _, cp := range c.Capabilities {
			a.Capabilities = append(a.Capabilities, cp.ID)
		}
		snap.Agents = append(snap.Agents, a)
	}
	slices.SortFunc(snap.Agents, func(a, b webui.Agent) int {
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		return strings.Compare(a.Address, b.Address)
	})
	if swarms, err := n.Swarms(); err == nil {
		for _, sw := range swarms {
			if b, err := json.Marshal(sw); err == nil {
				snap.Swarms = append(snap.Swarms, b)
			}
		}
	}
	infos := make([]crdt.Info, 0, len(n.docs.Docs()))
	for _, d := range n.docs.Docs() {
		infos = append(infos, d.Info())
	}
	slices.SortFunc(infos, func(a, b crdt.Info) int { return strings.Compare(a.Name, b.Name) })
	for _, in := range infos {
		if b, err := json.Marshal(in); err == nil {
			snap.Docs = append(snap.Docs, b)
		}
	}
	return snap
}

func (s webSource) Metrics() localapi.Metrics { return s.n.obs.Metrics() }

func (s webSource) Recent(limit int) []localapi.Event { return s.n.obs.Recent(limit) }

func (s webSource) Subscribe() (<-chan localapi.Event, <-chan any, func()) {
	sub := s.n.obs.Subscribe(1024)
	bus, err := s.n.host.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged), eventbus.Name("nova web view"), eventbus.BufSize(16))
	if err != nil { // cannot happen: the type is a valid event
		return sub.C, nil, sub.Close
	}
	// libp2p's event bus blocks its emitter while a subscriber's buffer is
	// full, and a page's stream stops reading while its client is slow:
	// so a goroutine drains the bus into one slot, which holds "peers
	// changed" however many times they did.
	changes := make(chan any, 1)
	done := make(chan struct{})
	go func() { // owned by the stop func below: it closes bus, which ends Out, and waits on done
		defer close(done)
		for range bus.Out() {
			select {
			case changes <- struct{}{}:
			default:
			}
		}
	}()
	return sub.C, changes, func() { sub.Close(); _ = bus.Close(); <-done }
}

func (s webSource) Send(ctx context.Context, req localapi.SendRequest) localapi.SendResult {
	return s.n.SendFromAPI(ctx, req)
}

func (s webSource) Propose(ctx context.Context, req localapi.ProposeRequest) (any, error) {
	rec, err := s.n.ProposeTask(ctx, req)
	if err != nil {
		return nil, apiErr(err)
	}
	return rec, nil
}

func (s webSource) ReadDoc(ctx context.Context, doc, path string) (localapi.DocView, error) {
	v, err := s.n.ReadDoc(ctx, doc, path)
	if err != nil {
		return v, apiErr(err)
	}
	return v, nil
}

func (s webSource) ApplyDocOp(ctx context.Context, doc string, op localapi.DocOp) (localapi.DocView, error) {
	v, err := s.n.ApplyDocOp(ctx, doc, op)
	if err != nil {
		return v, apiErr(err)
	}
	return v, nil
}
