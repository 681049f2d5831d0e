package negotiation_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/tiers"
)

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_767_225_600_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeAgent is one agent of the fake mesh.
type fakeAgent struct {
	addr string // "name@nodeN"
	tier tiers.Tier
	caps []string
	node int
}

type pair struct{ from, to string }

// fakeNet imitates the router: Post resolves the recipient (exact address,
// bare name or capability), applies tiers.DefaultRules().Check with reply
// detection (an answer in the thread of a proposal or request delivered the
// other way), canonicalises sender and recipient, and delivers synchronously
// to the Handle functions of the recipient's node. It never holds its lock
// while delivering.
type fakeNet struct {
	rules tiers.Rules

	mu         sync.Mutex
	agents     map[string]fakeAgent
	nodes      map[int][]func(context.Context, *envelope.Envelope) (bool, error)
	answerable map[string]pair
	log        []*envelope.Envelope
	errs       []error // errors returned by Handle functions
	drop       func(*envelope.Envelope) bool
}

func newFakeNet() *fakeNet {
	return &fakeNet{
		rules: tiers.DefaultRules(), agents: map[string]fakeAgent{},
		nodes: map[int][]func(context.Context, *envelope.Envelope) (bool, error){}, answerable: map[string]pair{},
	}
}

func (f *fakeNet) addAgent(name string, node int, tier tiers.Tier, caps ...string) string {
	addr := fmt.Sprintf("%s@node%d", name, node)
	f.mu.Lock()
	f.agents[addr] = fakeAgent{addr: addr, tier: tier, caps: caps, node: node}
	f.mu.Unlock()
	return addr
}

func (f *fakeNet) setHandlers(node int, hs ...func(context.Context, *envelope.Envelope) (bool, error)) {
	f.mu.Lock()
	f.nodes[node] = hs
	f.mu.Unlock()
}

// post returns the Post function of one node.
func (f *fakeNet) post(node int) func(context.Context, *envelope.Envelope) error {
	return func(ctx context.Context, env *envelope.Envelope) error { return f.send(ctx, node, env) }
}

func isAnswer(t envelope.Type) bool {
	switch t {
	case envelope.TypeTaskAccept, envelope.TypeTaskReject, envelope.TypeResponse, envelope.TypeError:
		return true
	}
	return false
}

func (f *fakeNet) resolveLocked(name string) (fakeAgent, error) {
	if a, ok := f.agents[name]; ok {
		return a, nil
	}
	var found []fakeAgent
	for _, a := range f.agents {
		if negotiation.SameAgent(a.addr, name) {
			found = append(found, a)
		}
	}
	if len(found) != 1 {
		return fakeAgent{}, fmt.Errorf("fake: agent %q not found (%d matches)", name, len(found))
	}
	return found[0], nil
}

func (f *fakeNet) send(ctx context.Context, node int, in *envelope.Envelope) error {
	if err := in.Validate(); err != nil {
		return err
	}
	env := in.Clone()
	f.mu.Lock()
	from, err := f.resolveLocked(env.Sender)
	if err != nil || from.node != node {
		f.mu.Unlock()
		return fmt.Errorf("fake: sender %q is not a local agent of node%d", env.Sender, node)
	}
	just := ""
	if env.Metadata != nil {
		just = env.Metadata.EscalationJustification
	}
	var to fakeAgent
	if env.Metadata != nil && env.Metadata.RoutingHint == envelope.RoutingHintCapability {
		addrs := make([]string, 0, len(f.agents))
		for a := range f.agents {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		found := false
		for _, a := range addrs {
			c := f.agents[a]
			if c.addr != from.addr && slices.Contains(c.caps, env.Recipient) &&
				f.rules.Check(tiers.Message{Source: from.tier, Target: c.tier, Type: string(env.Type), Justification: just}) == nil {
				to, found = c, true
				break
			}
		}
		if !found {
			f.mu.Unlock()
			return fmt.Errorf("fake: no agent with capability %q", env.Recipient)
		}
	} else if to, err = f.resolveLocked(env.Recipient); err != nil {
		f.mu.Unlock()
		return err
	}
	reply := isAnswer(env.Type) && env.CorrelationID != "" &&
		f.answerable[env.CorrelationID] == pair{from: to.addr, to: from.addr}
	if err := f.rules.Check(tiers.Message{
		Source: from.tier, Target: to.tier, Type: string(env.Type), Justification: just, Reply: reply,
	}); err != nil {
		f.mu.Unlock()
		return err
	}
	env.Sender, env.Recipient = from.addr, to.addr
	if env.Metadata == nil {
		env.Metadata = &envelope.Metadata{}
	}
	env.Metadata.Tier, env.Metadata.RoutingHint = uint8(from.tier), ""
	if env.Type == envelope.TypeTaskProposal || env.Type == envelope.TypeRequest {
		f.answerable[env.ThreadID()] = pair{from: from.addr, to: to.addr}
	}
	f.log = append(f.log, env.Clone())
	drop := f.drop != nil && f.drop(env)
	handlers := slices.Clone(f.nodes[to.node])
	f.mu.Unlock()
	if drop {
		return nil
	}
	for _, h := range handlers {
		handled, err := h(ctx, env.Clone())
		if err != nil {
			f.mu.Lock()
			f.errs = append(f.errs, err)
			f.mu.Unlock()
		}
		if handled {
			break
		}
	}
	return nil
}

// delivered returns the envelopes delivered so far.
func (f *fakeNet) delivered() []*envelope.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// thread returns the delivered envelopes of one thread.
func (f *fakeNet) thread(id string) []*envelope.Envelope {
	var out []*envelope.Envelope
	for _, e := range f.delivered() {
		if e.ThreadID() == id {
			out = append(out, e)
		}
	}
	return out
}

// events collects events.
type events struct {
	mu  sync.Mutex
	evs []negotiation.Event
}

func (e *events) emit(ev negotiation.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

func (e *events) of(t negotiation.EventType) []negotiation.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []negotiation.Event
	for _, ev := range e.evs {
		if ev.Type == t {
			out = append(out, ev)
		}
	}
	return out
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, ev := range e.evs {
		fmt.Fprintf(&b, "%s %s %s %s\n", ev.Type, ev.ProposalID, ev.Code, ev.Detail)
	}
	return b.String()
}

// counter returns a factory with counting ids, unique per prefix.
func counter(prefix string, now func() time.Time) *envelope.Factory {
	var mu sync.Mutex
	n := 0
	return &envelope.Factory{Now: now, NewID: func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}}
}
