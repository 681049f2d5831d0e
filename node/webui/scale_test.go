package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/node/webui"
	"github.com/nova-node/nova-node/protocol"
)

// bigSource is a Source with many peers and agents, for the scale test.
type bigSource struct {
	mu      sync.Mutex
	snap    webui.Snapshot
	events  chan localapi.Event
	changes chan any
}

func newBigSource(peers, agentsPerPeer int) *bigSource {
	s := &bigSource{events: make(chan localapi.Event, 4096), changes: make(chan any, 1)}
	s.snap = webui.Snapshot{Self: webui.Self{PeerID: "12D3KooWSelf000000000000000000000000000000000000000"},
		Channels: []protocol.ChannelInfo{}, Swarms: []json.RawMessage{}, Docs: []json.RawMessage{}}
	for p := range peers {
		id := fmt.Sprintf("12D3KooWPeer%039d", p)
		s.snap.Peers = append(s.snap.Peers, webui.Peer{PeerID: id, LatencyMs: float64(p%40) + 0.5, Relayed: p%7 == 0, Basis: "grant"})
		for a := range agentsPerPeer {
			s.snap.Agents = append(s.snap.Agents, webui.Agent{Address: fmt.Sprintf("agent%d-%d@%s", p, a, id), Name: fmt.Sprintf("agent%d-%d", p, a),
				Host: id, Tier: 3, ClaimedTier: 3, Basis: "grant", Grant: "serial 7 by 12D3KooWAdmin", Capabilities: []string{"echo", fmt.Sprintf("cap.%d", a)}})
		}
	}
	return s
}

func (s *bigSource) Snapshot() webui.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}
func (s *bigSource) Metrics() localapi.Metrics         { return localapi.Metrics{} }
func (s *bigSource) Recent(limit int) []localapi.Event { return nil }
func (s *bigSource) Subscribe() (<-chan localapi.Event, <-chan any, func()) {
	return s.events, s.changes, func() {}
}
func (s *bigSource) Send(context.Context, localapi.SendRequest) localapi.SendResult {
	return localapi.SendResult{}
}
func (s *bigSource) Propose(context.Context, localapi.ProposeRequest) (any, error) { return nil, nil }
func (s *bigSource) ReadDoc(context.Context, string, string) (localapi.DocView, error) {
	return localapi.DocView{}, nil
}
func (s *bigSource) ApplyDocOp(context.Context, string, localapi.DocOp) (localapi.DocView, error) {
	return localapi.DocView{}, nil
}

// addPeer adds a peer with one agent and signals the change.
func (s *bigSource) addPeer(id string) {
	s.mu.Lock()
	s.snap.Peers = append(append([]webui.Peer{}, s.snap.Peers...), webui.Peer{PeerID: id})
	s.snap.Agents = append(append([]webui.Agent{}, s.snap.Agents...), webui.Agent{Address: "late@" + id, Name: "late", Host: id, Capabilities: []string{}})
	s.mu.Unlock()
	s.changes <- struct{}{}
}

// With 100 peers and 1,000 agents the page keeps a few dozen rows in the
// DOM per list, scrolls to the last agent, shows a change, and takes a
// burst of 5,000 events. How long a change takes to show is logged, not
// asserted: the bounds below are for a machine under the whole suite's
// load, where headless Chromium may render its lists a second late.
func TestPageWith100PeersAnd1000Agents(t *testing.T) {
	chromium(t)
	src := newBigSource(100, 10)
	srv := webui.New(src, webui.Options{})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	p := openURL(t, hs.URL+webui.Prefix+"#token=unused")
	p.waitText("#agent-count", "1000", 5*time.Second)
	p.waitText("#peer-count", "100 peers", 10*time.Second)
	p.wait("the lists rendered", has(`#agents .vrow`)+` && `+has(`#peers .vrow`), 10*time.Second)

	rows := eval[int](p, "count rows", `document.querySelectorAll('.vrow').length`)
	t.Logf("rows in the DOM for 100 peers, 1,100 agent rows and their groups: %d", rows)
	if rows > 150 {
		t.Errorf("%d rows in the DOM: the lists are not virtualised", rows)
	}
	p.run("scroll to the last agent", chromedp.Evaluate[chromedp.Void](`(() => { const l = document.querySelector('#agents'); l.scrollTop = l.scrollHeight; })()`))
	p.wait("the last agent rendered", has(`#agents .vrow[data-key^="agent99-9@"]:not([hidden])`), 10*time.Second)

	start := time.Now()
	src.addPeer("12D3KooWLate0000000000000000000000000000000000000000")
	p.wait("a new peer shows", has(`#peers .vrow[data-key="12D3KooWLate0000000000000000000000000000000000000000"]`)+` || document.querySelector('#peer-count').textContent === '101 peers'`, 10*time.Second)
	t.Logf("a change with 1,000 agents reached the page in %v", time.Since(start).Round(time.Millisecond))

	for i := range 5000 {
		src.events <- localapi.Event{Type: protocol.EvtMessageSent, Time: time.Now(), Sender: "a", Recipient: fmt.Sprintf("agent%d", i), Success: true}
	}
	p.waitText("#event-count", "2000", 5*time.Second)
	rows = eval[int](p, "count event rows", `document.querySelectorAll('#events .vrow').length`)
	if rows > 40 {
		t.Errorf("%d event rows in the DOM", rows)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
