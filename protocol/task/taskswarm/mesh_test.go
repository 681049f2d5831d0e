package taskswarm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/tiers"
)

type pair struct{ from, to string }

// mesh imitates a set of nodes joined by the router: Post resolves the
// recipient (address or bare name), applies tiers.DefaultRules().Check with
// the router's reply rule (an answer in the thread of a proposal or request
// delivered the other way), canonicalises sender and recipient and queues
// the envelope; one goroutine owned by the mesh delivers the queue in order
// to the recipient node's Negotiator, Coordinator and Participant Handle
// functions, then to its inbox. A node can be taken down: Post to it fails
// and queued envelopes to it are dropped.
// fataler is the part of testing.TB and *rapid.T the mesh uses.
type fataler interface{ Fatal(args ...any) }

type mesh struct {
	t     fataler
	rules tiers.Rules
	wake  chan struct{}
	wg    sync.WaitGroup
	stop  context.CancelFunc

	mu         sync.Mutex
	cards      map[string]agentcard.Card // by address
	nodes      map[string]*node
	answerable map[string]pair
	queue      []*envelope.Envelope
	log        []*envelope.Envelope
	down       map[string]bool
	dup        func(*envelope.Envelope) bool // deliver twice
	herrs      []error
}

// node is one node of the mesh.
type node struct {
	id    string
	m     *mesh
	store *negotiation.MemKV
	neg   *negotiation.Negotiator
	coord *taskswarm.Coordinator
	part  *taskswarm.Participant

	mu    sync.Mutex
	inbox []*envelope.Envelope // envelopes no Handle took
	work  func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error)
}

func newMesh(t fataler) *mesh {
	m := &mesh{
		t: t, rules: tiers.DefaultRules(), wake: make(chan struct{}, 1),
		cards: map[string]agentcard.Card{}, nodes: map[string]*node{}, answerable: map[string]pair{}, down: map[string]bool{},
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	m.wg.Go(func() { m.deliverLoop(ctx) })
	return m
}

func (m *mesh) close() {
	m.mu.Lock()
	nodes := make([]*node, 0, len(m.nodes))
	for _, n := range m.nodes {
		nodes = append(nodes, n)
	}
	m.mu.Unlock()
	for _, n := range nodes {
		n.stop()
	}
	m.stop()
	m.wg.Wait()
}

// addAgent registers a card for agent name on node id.
func (m *mesh) addAgent(name, nodeID string, tier tiers.Tier, caps ...string) string {
	c := agentcard.Card{ID: name, Name: name, Tier: tier, Host: nodeID, Capabilities: []agentcard.Capability{}}
	for _, cp := range caps {
		c.Capabilities = append(c.Capabilities, agentcard.Capability{ID: cp, Name: cp})
	}
	m.mu.Lock()
	m.cards[c.Address()] = c
	m.mu.Unlock()
	return c.Address()
}

// Capable implements taskswarm.Directory: every card with the capability
// (including cards of nodes that are down: directories lag).
func (m *mesh) Capable(_ context.Context, _ string, capability string) ([]agentcard.Card, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []agentcard.Card
	for _, c := range m.cards {
		if c.HasCapability(capability) {
			out = append(out, c.Clone())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address() < out[j].Address() })
	if len(out) == 0 {
		return nil, &agentcard.CapabilityNotFoundError{Capability: capability}
	}
	return out, nil
}

func (m *mesh) post(nodeID string) func(context.Context, *envelope.Envelope) error {
	return func(_ context.Context, in *envelope.Envelope) error {
		if err := in.Validate(); err != nil {
			return err
		}
		env := in.Clone()
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.down[nodeID] {
			return fmt.Errorf("mesh: node %s is down", nodeID)
		}
		from, err := m.resolveLocked(env.Sender)
		if err != nil || from.Host != nodeID {
			return fmt.Errorf("mesh: sender %q is not an agent of %s", env.Sender, nodeID)
		}
		to, err := m.resolveLocked(env.Recipient)
		if err != nil {
			return err
		}
		if m.down[to.Host] {
			return fmt.Errorf("mesh: DELIVERY_FAILED: node %s is unreachable", to.Host)
		}
		just := ""
		if env.Metadata != nil {
			just = env.Metadata.EscalationJustification
		}
		reply := isAnswer(env.Type) && env.CorrelationID != "" &&
			m.answerable[env.CorrelationID] == pair{from: to.Address(), to: from.Address()}
		if err := m.rules.Check(tiers.Message{Source: from.Tier, Target: to.Tier, Type: string(env.Type),
			Justification: just, Reply: reply}); err != nil {
			return err
		}
		env.Sender, env.Recipient = from.Address(), to.Address()
		env.Metadata = &envelope.Metadata{Tier: uint8(from.Tier), EscalationJustification: just}
		if env.Type == envelope.TypeTaskProposal || env.Type == envelope.TypeRequest {
			m.answerable[env.ThreadID()] = pair{from: from.Address(), to: to.Address()}
		}
		m.log = append(m.log, env.Clone())
		m.queue = append(m.queue, env)
		if m.dup != nil && m.dup(env) {
			m.queue = append(m.queue, env.Clone())
		}
		select {
		case m.wake <- struct{}{}:
		default:
		}
		return nil
	}
}

func isAnswer(t envelope.Type) bool {
	switch t {
	case envelope.TypeTaskAccept, envelope.TypeTaskReject, envelope.TypeResponse, envelope.TypeError:
		return true
	}
	return false
}

func (m *mesh) resolveLocked(addr string) (agentcard.Card, error) {
	if c, ok := m.cards[addr]; ok {
		return c, nil
	}
	var found []agentcard.Card
	for _, c := range m.cards {
		if c.ID == addr {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		return agentcard.Card{}, fmt.Errorf("mesh: AGENT_NOT_FOUND %q (%d matches)", addr, len(found))
	}
	return found[0], nil
}

func (m *mesh) deliverLoop(ctx context.Context) {
	for {
		m.mu.Lock()
		var env *envelope.Envelope
		var n *node
		if len(m.queue) > 0 {
			env = m.queue[0]
			m.queue = m.queue[1:]
			host := env.Recipient[strings.IndexByte(env.Recipient, '@')+1:]
			if !m.down[host] {
				n = m.nodes[host]
			}
		}
		m.mu.Unlock()
		if env == nil {
			select {
			case <-ctx.Done():
				return
			case <-m.wake:
			}
			continue
		}
		if n != nil {
			n.deliver(ctx, env)
		}
	}
}

func (n *node) deliver(ctx context.Context, env *envelope.Envelope) {
	n.mu.Lock()
	neg, coord, part := n.neg, n.coord, n.part
	n.mu.Unlock()
	for _, h := range []func(context.Context, *envelope.Envelope) (bool, error){
		handleOf(neg), handleOf(coord), handleOf(part),
	} {
		if h == nil {
			continue
		}
		handled, err := h(ctx, env.Clone())
		if err != nil && !errors.Is(err, taskswarm.ErrClosed) && !errors.Is(err, negotiation.ErrClosed) {
			n.m.mu.Lock()
			n.m.herrs = append(n.m.herrs, err)
			n.m.mu.Unlock()
		}
		if handled {
			return
		}
	}
	n.mu.Lock()
	n.inbox = append(n.inbox, env)
	n.mu.Unlock()
}

func handleOf[T interface {
	Handle(context.Context, *envelope.Envelope) (bool, error)
}](x T) func(context.Context, *envelope.Envelope) (bool, error) {
	var zero T
	if any(x) == any(zero) {
		return nil
	}
	return x.Handle
}

// addNode creates a node with a Negotiator (auto-deciding with decide) and
// a Participant running work; coordinator adds a Coordinator.
func (m *mesh) addNode(id string, decide negotiation.ProposalHandler) *node {
	n := &node{id: id, m: m, store: negotiation.NewMemKV()}
	m.mu.Lock()
	m.nodes[id] = n
	m.mu.Unlock()
	n.startNegotiator(decide)
	n.startParticipant()
	return n
}

func (n *node) startNegotiator(decide negotiation.ProposalHandler) {
	neg, err := negotiation.New(negotiation.Config{Post: n.m.post(n.id), Store: n.store})
	if err != nil {
		n.m.t.Fatal(err)
	}
	if decide != nil {
		neg.OnProposalReceived(decide)
	}
	n.install(neg.Start, func() { n.neg = neg })
}

func (n *node) startParticipant() {
	p, err := taskswarm.NewParticipant(taskswarm.ParticipantConfig{Post: n.m.post(n.id), Workers: 2,
		Work: func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
			n.mu.Lock()
			w := n.work
			n.mu.Unlock()
			if w != nil {
				return w(ctx, agent, t)
			}
			return defaultWork(agent, t), nil
		}})
	if err != nil {
		n.m.t.Fatal(err)
	}
	n.install(p.Start, func() { n.part = p })
}

// install starts a component and makes it n's (set) in one step, with n.mu
// held. deliver reads n's components under n.mu, so an envelope for n waits
// until the component is both running and installed, as the node's router
// waits for the task Service to have started and published all of them
// (tasknode.Service.components). Setting the field only after Start returned let
// an answer to something the component sent from its own goroutine right
// after Start (a resumed Coordinator sends its running attempts again at
// once) reach n while the field was still nil: deliver then left it in
// the inbox and the answer was lost.
func (n *node) install(start func(context.Context) error, set func()) {
	n.mu.Lock()
	err := start(context.Background())
	if err == nil {
		set()
	}
	n.mu.Unlock()
	if err != nil {
		n.m.t.Fatal(err)
	}
}

func defaultWork(agent string, t taskswarm.Task) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"agent": agent, "subTask": t.SubTaskID, "attempt": t.Attempt})
	return b
}

func (n *node) setWork(w func(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error)) {
	n.mu.Lock()
	n.work = w
	n.mu.Unlock()
}

// startCoordinator adds (or restarts) a Coordinator on n.
func (n *node) startCoordinator(cfg taskswarm.Config) *taskswarm.Coordinator {
	cfg.Negotiator, cfg.Post, cfg.Store = n.neg, n.m.post(n.id), n.store
	if cfg.Directory == nil {
		cfg.Directory = n.m
	}
	c, err := taskswarm.New(cfg)
	if err != nil {
		n.m.t.Fatal(err)
	}
	n.install(c.Start, func() { n.coord = c })
	return c
}

// stopCoordinator closes the Coordinator and the Negotiator of n (a restart
// of the coordinating node's swarm services; the store survives).
func (n *node) stopCoordinator() {
	n.mu.Lock()
	c, neg := n.coord, n.neg
	n.coord, n.neg = nil, nil
	n.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	if neg != nil {
		_ = neg.Close()
	}
}

func (n *node) stop() {
	n.stopCoordinator()
	n.mu.Lock()
	p := n.part
	n.part = nil
	n.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
}

// notices returns the swarm notices n's agents received, of one kind ("" for all).
func (n *node) notices(kind string) []taskswarm.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []taskswarm.Notice
	for _, e := range n.inbox {
		if e.Type != envelope.TypeNotification {
			continue
		}
		if no, err := taskswarm.DecodeNotice(e.Payload); err == nil && (kind == "" || no.Kind == kind) {
			out = append(out, no)
		}
	}
	return out
}

func (m *mesh) setDown(nodeID string) {
	m.mu.Lock()
	m.down[nodeID] = true
	m.mu.Unlock()
}

func (m *mesh) delivered(t envelope.Type) []*envelope.Envelope {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*envelope.Envelope
	for _, e := range m.log {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

func (m *mesh) handlerErrors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.herrs)
}

// acceptAll accepts every proposal.
func acceptAll(context.Context, negotiation.Record) *negotiation.Decision {
	return negotiation.AcceptWith(1000)
}

// recorder collects events and shared publications.
type recorder struct {
	mu        sync.Mutex
	evs       []taskswarm.Event
	published []taskswarm.Swarm
	escalated []string // "swarmID/subTaskID"
}

func (r *recorder) emit(ev taskswarm.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

// Publish implements taskswarm.Shared.
func (r *recorder) Publish(_ context.Context, s taskswarm.Swarm) error {
	r.mu.Lock()
	r.published = append(r.published, s)
	r.mu.Unlock()
	return nil
}

func (r *recorder) escalate(_ context.Context, s taskswarm.Swarm, st taskswarm.SubTask, _ string) {
	r.mu.Lock()
	r.escalated = append(r.escalated, s.ID+"/"+st.ID)
	r.mu.Unlock()
}

func (r *recorder) of(t taskswarm.EventType) []taskswarm.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []taskswarm.Event
	for _, ev := range r.evs {
		if ev.Type == t {
			out = append(out, ev)
		}
	}
	return out
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, ev := range r.evs {
		fmt.Fprintf(&b, "%s %s %s %s#%d %s->%s %s %s\n", ev.Time.Format("15:04:05.000"), ev.Type, ev.SwarmID,
			ev.SubTaskID, ev.Attempt, ev.From, ev.To, ev.Agent, ev.Detail)
	}
	return b.String()
}

func (r *recorder) coordinatorConfig() taskswarm.Config {
	return taskswarm.Config{Emit: r.emit, Shared: r, Escalate: r.escalate, RecruitTimeout: 10 * time.Second}
}
