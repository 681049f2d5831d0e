// Package demo is `nova-node demo`: four nodes in one process on loopback,
// the 21 planetary agents, one swarm task end to end, printed live.
package demo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/planets"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/tiers"
)

// Summary is what the demo found (what `nova-node demo --json` prints).
type Summary struct {
	OK     bool       `json:"ok"`
	Error  string     `json:"error,omitempty"`
	Nodes  []demoNode `json:"nodes"`
	Agents int        `json:"agents"`
	// Refusals are the tier rules shown refusing a message.
	Refusals []demoRefusal `json:"refusals"`
	// Escalation is the justified L3 -> L0 proposal, accepted.
	Escalation *demoProposal `json:"escalation,omitempty"`
	Swarm      *demoSwarm    `json:"swarm,omitempty"`
	Messages   uint64        `json:"messagesSent"`
	// DataDir was the demo's temporary data dir, removed at exit.
	DataDir    string `json:"dataDir"`
	DurationMs int64  `json:"durationMs"`
}

type demoNode struct {
	Name   string   `json:"name"`
	PeerID string   `json:"peerId"`
	Agents []string `json:"agents"`
	Sees   int      `json:"agentsKnown"`
}

type demoRefusal struct {
	From string `json:"from"`
	To   string `json:"to"`
	Type string `json:"type"`
	Code string `json:"code"`
}

type demoProposal struct {
	ID     string `json:"proposalId"`
	From   string `json:"from"`
	To     string `json:"to"`
	Status string `json:"status"`
}

type demoSwarm struct {
	ID           string                     `json:"id"`
	Status       taskswarm.Status           `json:"status"`
	Creator      string                     `json:"creator"`
	Proposed     int                        `json:"proposed"`
	Accepted     int                        `json:"accepted"`
	Released     int                        `json:"released"`
	Participants []string                   `json:"participants"`
	SubTasks     int                        `json:"subTasks"`
	Reassigned   []demoReassign             `json:"reassigned"`
	Results      map[string]json.RawMessage `json:"results"`
	Document     string                     `json:"document"`
	SharedStatus taskswarm.Status           `json:"sharedStatus"`
	ReadOn       string                     `json:"sharedReadOn"`
	DurationMs   int64                      `json:"durationMs"`
}

type demoReassign struct {
	SubTask string `json:"subTask"`
	From    string `json:"from"`
	To      string `json:"to"`
	Reason  string `json:"reason"`
}

// demoRun holds the running demo: its nodes and how to name things.
type demoRun struct {
	w      io.Writer
	nodes  []*node.Node
	names  map[string]string // peer ID -> "node N"
	tiers  map[string]string // agent id -> tier
	events chan taskswarm.Event
	mu     sync.Mutex
	lost   int
}

// NodeCount is the number of nodes the demo starts.
const NodeCount = 4

// Run runs the demo, printing to w, and returns its summary: four nodes on
// loopback in a temporary data dir hosting the 21 planetary agents, one swarm
// task end to end. Everything it starts is stopped and removed before it
// returns.
func Run(ctx context.Context, w io.Writer) (sum Summary, err error) {
	start := time.Now()
	defer func() {
		sum.DurationMs = time.Since(start).Milliseconds()
		sum.OK = err == nil
		if err != nil {
			sum.Error = err.Error()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "nova-demo-")
	if err != nil {
		return sum, err
	}
	defer os.RemoveAll(dir)
	sum.DataDir = dir
	d := &demoRun{w: w, names: map[string]string{}, tiers: map[string]string{}, events: make(chan taskswarm.Event, 4096)}
	defer d.close()

	fmt.Fprintf(w, "nova-node demo: %d nodes on 127.0.0.1 host the 21 planetary agents and run one swarm task.\n", NodeCount)
	fmt.Fprintf(w, "Each node is a full nova-node (libp2p host, router, DHT, CRDT documents); data in %s, removed at exit.\n", dir)

	// 1. Nodes and discovery.
	d.heading("1. Nodes and discovery: every node learns every agent's signed Agent Card")
	if err := d.start(ctx, dir); err != nil {
		return sum, err
	}
	t0 := time.Now()
	if err := d.mesh(ctx); err != nil {
		return sum, err
	}
	for i, n := range d.nodes {
		dn := demoNode{Name: d.names[n.ID().String()], PeerID: n.ID().String(), Sees: len(n.Registry().List())}
		var hosted []string
		for _, c := range n.Registry().Local() {
			dn.Agents = append(dn.Agents, c.ID)
		}
		slices.Sort(dn.Agents)
		for _, a := range planets.Agents() {
			if slices.Contains(dn.Agents, a.ID) {
				hosted = append(hosted, fmt.Sprintf("%s %s", a.ID, a.Tier))
			}
		}
		sum.Nodes = append(sum.Nodes, dn)
		fmt.Fprintf(w, "  node %d  %s  hosts %s\n", i+1, shortPeer(n.ID().String()), strings.Join(hosted, ", "))
	}
	sum.Agents = len(planets.Agents())
	fmt.Fprintf(w, "  connected in a full mesh: each node now knows all %d agents (%s, cards signed by their node's key)\n",
		sum.Agents, time.Since(t0).Round(time.Millisecond))

	// 2. Tier rules.
	d.heading("2. Tier rules: the node that receives a message checks its tiers (L0 > L1 > L2 > L3)")
	if err := d.tiers2(ctx, &sum); err != nil {
		return sum, err
	}

	// 3. The swarm.
	d.heading("3. A swarm: sun (L0) needs code.write, code.review, test.write and docs.write")
	s, err := d.swarm(ctx, &sum)
	if err != nil {
		return sum, err
	}

	// 4. Shared state.
	d.heading("4. Shared state: a replicated document every node can read and watch")
	if err := d.shared(ctx, s, &sum); err != nil {
		return sum, err
	}

	// 5. Final aggregate.
	d.heading("5. Final aggregate, reported to sun")
	for _, st := range s.SubTasks {
		fmt.Fprintf(w, "  %s [%s] %s\n", st.ID, strings.Join(st.RequiredCapabilities, ","), ResultText(s.Results[st.ID]))
	}
	for _, n := range d.nodes {
		sum.Messages += n.Observer().Metrics().TotalMessagesSent
	}
	fmt.Fprintf(w, "\nDone in %s: %d nodes, %d agents, %d envelopes delivered, 1 swarm %s.\n",
		time.Since(start).Round(10*time.Millisecond), NodeCount, sum.Agents, sum.Messages, s.Status)
	fmt.Fprintf(w, `
The same on your own nodes: nova-node swarm create|status|list, nova-node tasks
propose|pending|accept|reject, nova-node events --follow, nova-node crdt watch <swarm id>.
docs/tasks.md walks through it.
`)
	return sum, nil
}

func (d *demoRun) heading(s string) { fmt.Fprintf(d.w, "\n%s\n", s) }

// start creates the nodes, registers the agents (agent i on node i mod 4)
// and starts them.
func (d *demoRun) start(ctx context.Context, dir string) error {
	hosted := make([][]planets.Agent, NodeCount)
	for i, a := range planets.Agents() {
		hosted[i%NodeCount] = append(hosted[i%NodeCount], a)
		d.tiers[a.ID] = a.Tier.String()
	}
	grants, admin, err := demoGrants(dir, hosted)
	if err != nil {
		return err
	}
	for i := range NodeCount {
		cfg := node.DefaultConfig()
		cfg.DataDir = filepath.Join(dir, fmt.Sprintf("n%d", i+1))
		cfg.Authority = admin.String()
		cfg.Grants = grants[i]
		cfg.Swarm = "demo"
		cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
		cfg.Agents = nil
		cfg.MDNS = false
		cfg.MetricsListen = "off"
		cfg.RetryDelay = 100 * time.Millisecond
		cfg.RequestTimeout = 10 * time.Second
		cfg.LogLevel = "error"
		n, err := node.New(cfg)
		if err != nil {
			return err
		}
		d.nodes = append(d.nodes, n)
		d.names[n.ID().String()] = fmt.Sprintf("node %d", i+1)
		for _, a := range hosted[i] {
			c := a.Card()
			c.Endpoints = []agentcard.Endpoint{{Transport: "libp2p", Address: string(protocol.IDA2A)}}
			if _, err := n.RegisterAgent(c, planets.Answer); err != nil {
				return fmt.Errorf("register %s: %w", a.ID, err)
			}
		}
		o := node.TaskOptions{
			Decide:         planets.Decide,
			Work:           planets.FailingOnce("mars"), // the injected fault: mars fails every first attempt
			RecruitTimeout: 10 * time.Second,
		}
		if i == 0 { // sun's node coordinates: follow its swarm events
			o.OnSwarmEvent = d.onEvent
		}
		n.ConfigureTasks(o)
		if err := n.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (d *demoRun) onEvent(ev taskswarm.Event) {
	select {
	case d.events <- ev:
	default:
		d.mu.Lock()
		d.lost++
		d.mu.Unlock()
	}
}

func (d *demoRun) close() {
	for i := len(d.nodes) - 1; i >= 0; i-- {
		_ = d.nodes[i].Close()
	}
}

// mesh connects every pair and waits until each node knows all agents.
func (d *demoRun) mesh(ctx context.Context) error {
	for i, a := range d.nodes {
		for _, b := range d.nodes[i+1:] {
			if _, err := a.Connect(ctx, b.Addrs()[0].String()); err != nil {
				return err
			}
		}
	}
	want := len(planets.Agents())
	return waitFor(ctx, 15*time.Second, func() error {
		for i, n := range d.nodes {
			if got := len(n.Registry().List()); got < want {
				return fmt.Errorf("node %d knows %d of %d agents", i+1, got, want)
			}
		}
		return nil
	})
}

// waitFor polls f until it returns nil, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// nodeOf returns the node hosting agent id.
func (d *demoRun) nodeOf(id string) *node.Node {
	for _, n := range d.nodes {
		if _, ok := n.Registry().Get(id); ok {
			if c, _ := n.Registry().Get(id); c.Origin == agentcard.OriginLocal {
				return n
			}
		}
	}
	return nil
}

// label names an agent address for humans: "mars (L2, node 2)".
func (d *demoRun) label(addr string) string {
	name, host, _ := strings.Cut(addr, "@")
	where := d.names[host]
	if where == "" {
		return fmt.Sprintf("%s (%s)", name, d.tiers[name])
	}
	return fmt.Sprintf("%s (%s, %s)", name, d.tiers[name], where)
}

func shortPeer(p string) string {
	if len(p) < 12 {
		return p
	}
	return p[:8] + "…" + p[len(p)-4:]
}

// tiers2 shows two refusals and one justified escalation.
func (d *demoRun) tiers2(ctx context.Context, sum *Summary) error {
	w := d.w
	callisto := d.nodeOf("callisto")
	req := localapi.ProposeRequest{From: "callisto", To: "sun", Task: "sign off the v2 documentation", Capabilities: []string{"review.approve"},
		Complexity: negotiation.ComplexitySimple, TimeoutMs: 20_000}
	_, err := callisto.ProposeTask(ctx, req)
	code := protocol.CodeOf(err)
	if code != "ESCALATION_REQUIRED" {
		return fmt.Errorf("callisto -> sun without justification: got %v, want ESCALATION_REQUIRED", err)
	}
	sum.Refusals = append(sum.Refusals, demoRefusal{From: "callisto", To: "sun", Type: string(envelope.TypeTaskProposal), Code: code})
	fmt.Fprintf(w, "  ✗ %s proposes a task to %s with no justification: refused, %s\n", d.label("callisto"), d.label("sun"), code)

	req.Justification = "release sign-off needs the orchestrator"
	rec, err := callisto.ProposeTask(ctx, req)
	if err != nil {
		return fmt.Errorf("justified proposal: %w", err)
	}
	err = waitFor(ctx, 10*time.Second, func() error {
		rec, err = callisto.TaskProposal(rec.ProposalID)
		if err == nil && !rec.Terminal() {
			err = errors.New("sun has not answered")
		}
		return err
	})
	if err != nil || rec.Status != negotiation.StatusAccepted {
		return fmt.Errorf("justified proposal to sun: %s %v", rec.Status, err)
	}
	sum.Escalation = &demoProposal{ID: rec.ProposalID, From: "callisto", To: "sun", Status: string(rec.Status)}
	fmt.Fprintf(w, "  ✓ the same proposal with a justification (%q): sun accepted, estimate %s\n",
		req.Justification, time.Duration(rec.EstimatedCompletionMs)*time.Millisecond)

	mercury := d.nodeOf("mercury")
	env, err := mercury.NewEnvelope("mercury", "mars", envelope.TypeRequest, map[string]string{"text": "drop everything and rewrite the parser"})
	if err != nil {
		return err
	}
	_, err = mercury.Send(ctx, env)
	code = protocol.CodeOf(err)
	if code != "TIER_VIOLATION" {
		return fmt.Errorf("mercury -> mars: got %v, want TIER_VIOLATION", err)
	}
	sum.Refusals = append(sum.Refusals, demoRefusal{From: "mercury", To: "mars", Type: string(envelope.TypeRequest), Code: code})
	fmt.Fprintf(w, "  ✗ %s sends a request to %s: refused, %s (L1 agents talk to L0 and L1 only)\n", d.label("mercury"), d.label("mars"), code)
	return nil
}

// swarm creates the demo's swarm on sun's node and prints its events live
// until it ends.
func (d *demoRun) swarm(ctx context.Context, sum *Summary) (taskswarm.Swarm, error) {
	w := d.w
	sunNode := d.nodeOf("sun")
	caps := []string{"code.write", "code.review", "test.write", "docs.write"}
	task := "ship the release notes generator"
	begin := time.Now()
	s, err := sunNode.CreateSwarm(ctx, localapi.CreateSwarmRequest{As: "sun", Task: task, Capabilities: caps})
	if err != nil {
		return s, err
	}
	ds := &demoSwarm{ID: s.ID, Creator: s.Creator, Proposed: len(s.Recruits), SubTasks: len(s.SubTasks), Reassigned: []demoReassign{}}
	sum.Swarm = ds
	var names []string
	for _, r := range s.Recruits {
		names = append(names, strings.Split(r.Agent, "@")[0])
	}
	fmt.Fprintf(w, "  swarm %s: %q, %d sub-tasks (one per capability)\n", s.ID, task, len(s.SubTasks))
	fmt.Fprintf(w, "  → task-proposal sent to the %d agents whose cards list one of them: %s\n", len(names), strings.Join(names, ", "))
	fmt.Fprintf(w, "    (each node answers for its agents with the built-in policy: accept what you can do)\n")

	var accepted, released []string
	active := false
	failed := map[string]demoReassign{}
	flushRecruits := func() {
		if len(accepted) > 0 {
			fmt.Fprintf(w, "  ✓ %d accepted: %s\n", len(accepted), strings.Join(accepted, ", "))
			ds.Accepted += len(accepted)
			accepted = nil
		}
		if len(released) > 0 {
			fmt.Fprintf(w, "  ↩ %d acceptors released, not needed for %d sub-tasks: %s\n", len(released), len(s.SubTasks), strings.Join(released, ", "))
			ds.Released += len(released)
			released = nil
		}
	}
	for {
		var ev taskswarm.Event
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("the swarm did not finish: %w", ctx.Err())
		case ev = <-d.events:
		}
		if ev.SwarmID != s.ID {
			continue
		}
		name := strings.Split(ev.Agent, "@")[0]
		switch ev.Type {
		case taskswarm.EvtRecruitAnswered:
			switch {
			case active && strings.HasPrefix(ev.Detail, string(taskswarm.RecruitAccepted)):
				ds.Accepted++
				fmt.Fprintf(w, "  ✓ %s accepted a proposal to take over the failed sub-task\n", d.label(ev.Agent))
			case strings.HasPrefix(ev.Detail, string(taskswarm.RecruitAccepted)):
				accepted = append(accepted, name)
			default:
				fmt.Fprintf(w, "  ✗ %s: %s\n", d.label(ev.Agent), ev.Detail)
			}
		case taskswarm.EvtAgentReleased:
			released = append(released, name)
		case taskswarm.EvtSwarmStatusChanged:
			flushRecruits()
			active = active || ev.To == taskswarm.StatusActive
			fmt.Fprintf(w, "  status %s → %s\n", ev.From, ev.To)
		case taskswarm.EvtSubTaskAssigned:
			flushRecruits()
			fmt.Fprintf(w, "  → %s assigned to %s: %s\n", ev.SubTaskID, d.label(ev.Agent), ev.Detail)
		case taskswarm.EvtSubTaskFailed:
			failed[ev.SubTaskID] = demoReassign{SubTask: ev.SubTaskID, From: name, Reason: ev.Detail}
			why := Clip(ev.Detail, 90)
			if strings.HasPrefix(ev.Detail, planets.CodeSimulatedFailure) {
				why = planets.CodeSimulatedFailure + ", the demo's injected fault"
			}
			fmt.Fprintf(w, "  ✗ %s failed on %s, attempt %d: %s\n", ev.SubTaskID, d.label(ev.Agent), ev.Attempt, why)
		case taskswarm.EvtSubTaskReassigned:
			r := failed[ev.SubTaskID]
			r.SubTask, r.To = ev.SubTaskID, name
			ds.Reassigned = append(ds.Reassigned, r)
			fmt.Fprintf(w, "  ↻ %s reassigned to %s, attempt %d\n", ev.SubTaskID, d.label(ev.Agent), ev.Attempt)
		case taskswarm.EvtSubTaskCompleted:
			fmt.Fprintf(w, "  ✓ %s done by %s\n", ev.SubTaskID, d.label(ev.Agent))
		case taskswarm.EvtSubTaskEscalated:
			fmt.Fprintf(w, "  ! %s escalated to the L0 agent: %s\n", ev.SubTaskID, ev.Detail)
		case taskswarm.EvtSwarmReported:
			fmt.Fprintf(w, "  ⇒ outcome reported to %s: %s\n", d.label(ev.Agent), ev.Detail)
		}
		if ev.Type == taskswarm.EvtSwarmReported {
			cur, _ := sunNode.Coordinator().Get(s.ID)
			if cur.Status.Terminal() {
				s = cur
				break
			}
		}
	}
	ds.Status, ds.Results, ds.DurationMs = s.Status, s.Results, time.Since(begin).Milliseconds()
	ds.Participants = s.Participants
	if s.Status != taskswarm.StatusCompleted {
		return s, fmt.Errorf("swarm %s: %s", s.Status, s.Error)
	}
	if len(ds.Reassigned) == 0 {
		return s, errors.New("no sub-task was reassigned: the injected failure of mars did not happen")
	}
	return s, nil
}

// shared reads the swarm's document on a node that does not coordinate it.
func (d *demoRun) shared(ctx context.Context, s taskswarm.Swarm, sum *Summary) error {
	w := d.w
	reader := d.nodes[len(d.nodes)-1]
	var view taskswarm.Swarm
	err := waitFor(ctx, 10*time.Second, func() error {
		var err error
		view, err = reader.Swarm(ctx, s.ID)
		if err == nil && (view.Status != s.Status || len(view.Results) != len(s.Results)) {
			err = fmt.Errorf("the document shows %s with %d results", view.Status, len(view.Results))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("shared state on %s: %w", d.names[reader.ID().String()], err)
	}
	doc, err := reader.ReadDoc(ctx, node.SwarmDocName("", s.ID), "")
	if err != nil {
		return err
	}
	sum.Swarm.Document, sum.Swarm.SharedStatus, sum.Swarm.ReadOn = doc.Doc, view.Status, d.names[reader.ID().String()]
	fmt.Fprintf(w, "  document %q, written by sun's node, read on %s (which coordinates nothing):\n", doc.Doc, d.names[reader.ID().String()])
	var parts []string
	for _, p := range view.Participants {
		parts = append(parts, strings.Split(p, "@")[0])
	}
	fmt.Fprintf(w, "    /status        %s\n    /sharedState   progress %s\n    /participants  %s\n", view.Status, view.SharedState["progress"], strings.Join(parts, ", "))
	for _, st := range view.SubTasks {
		fmt.Fprintf(w, "    /subTasks/%-4s %s by %s, attempt %d", st.ID, st.Status, strings.Split(st.AssignedAgent, "@")[0], st.Attempts)
		if len(st.Tried) > 0 {
			var tried []string
			for _, t := range st.Tried {
				tried = append(tried, strings.Split(t, "@")[0])
			}
			fmt.Fprintf(w, " (failed before: %s)", strings.Join(tried, ", "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  (on a real node: nova-node crdt watch %s, or nova-node swarm status %s)\n", doc.Doc, s.ID)
	return nil
}

// Clip shortens s to n runes on one line, ending in "…" when cut (shared
// with the CLI's task and swarm listings).
func Clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// ResultText is the readable part of a sub-task result: its summary, done,
// result or text field, else the JSON itself.
func ResultText(r json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(r, &m) == nil {
		for _, k := range []string{"summary", "done", "result", "text"} {
			if s, ok := m[k].(string); ok {
				return s
			}
		}
	}
	return string(r)
}

// demoGrants makes node 1 the founder of the demo swarm's authority and
// signs, with its key, each other node's grant: the most privileged tier
// of the agents it hosts and their sandboxes, so that every node holds the
// planetary agents at their seed tiers. Node 1 needs none: its key is the
// authority's, which every node holds at its claims.
func demoGrants(dir string, hosted [][]planets.Agent) (grants [][]string, admin peer.ID, err error) {
	keys := make([]crypto.PrivKey, NodeCount)
	for i := range NodeCount {
		if keys[i], _, err = node.EnsureIdentity(filepath.Join(dir, fmt.Sprintf("n%d", i+1))); err != nil {
			return nil, "", err
		}
	}
	if admin, err = peer.IDFromPrivateKey(keys[0]); err != nil {
		return nil, "", err
	}
	grants = make([][]string, NodeCount)
	for i := 1; i < NodeCount; i++ {
		id, err := peer.IDFromPrivateKey(keys[i])
		if err != nil {
			return nil, "", err
		}
		g := authority.Grant{Authority: admin, Serial: uint64(i), Peer: id, MaxTier: tiers.L3}
		for _, a := range hosted[i] {
			g.MaxTier = min(g.MaxTier, a.Tier)
			if sb := a.Card().SandboxID; sb != "" && !slices.Contains(g.Sandboxes, sb) {
				g.Sandboxes = append(g.Sandboxes, sb)
			}
		}
		b, err := authority.SealGrant(g, keys[0])
		if err != nil {
			return nil, "", err
		}
		grants[i] = []string{base64.RawURLEncoding.EncodeToString(b)}
	}
	return grants, admin, nil
}
