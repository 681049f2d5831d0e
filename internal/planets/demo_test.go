package planets_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/planets"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/tiers"
)

// demoNet hosts the 21 planetary agents on 4 in-memory nodes, with the
// seed's tier rules, the way `nova-node demo` wires them: one Negotiator
// (planets.Decide), one Participant (Work) per node, a Coordinator on the
// sun's node, and planets.Answer for plain requests.
type demoNet struct {
	mu         sync.Mutex
	cards      map[string]agentcard.Card
	handlers   map[string][]func(context.Context, *envelope.Envelope) (bool, error)
	answerable map[string][2]string
	queue      []*envelope.Envelope
	wake       chan struct{}
	inbox      []*envelope.Envelope
}

func (d *demoNet) Capable(_ context.Context, _ string, capability string) ([]agentcard.Card, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []agentcard.Card
	for _, c := range d.cards {
		if c.HasCapability(capability) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b agentcard.Card) int { return strings.Compare(a.Address(), b.Address()) })
	return out, nil
}

func (d *demoNet) post(_ context.Context, env *envelope.Envelope) error {
	env = env.Clone()
	d.mu.Lock()
	defer d.mu.Unlock()
	from, ok1 := d.cards[env.Sender]
	to, ok2 := d.cards[env.Recipient]
	if !ok1 || !ok2 {
		return fmt.Errorf("AGENT_NOT_FOUND: %s -> %s", env.Sender, env.Recipient)
	}
	just := ""
	if env.Metadata != nil {
		just = env.Metadata.EscalationJustification
	}
	answer := env.Type == envelope.TypeTaskAccept || env.Type == envelope.TypeTaskReject ||
		env.Type == envelope.TypeResponse || env.Type == envelope.TypeError
	reply := answer && d.answerable[env.CorrelationID] == [2]string{to.Address(), from.Address()}
	if err := tiers.DefaultRules().Check(tiers.Message{Source: from.Tier, Target: to.Tier, Type: string(env.Type), Justification: just, Reply: reply}); err != nil {
		return err
	}
	if env.Type == envelope.TypeTaskProposal || env.Type == envelope.TypeRequest {
		d.answerable[env.ThreadID()] = [2]string{from.Address(), to.Address()}
	}
	d.queue = append(d.queue, env)
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return nil
}

func (d *demoNet) run(ctx context.Context) {
	for {
		d.mu.Lock()
		var env *envelope.Envelope
		if len(d.queue) > 0 {
			env, d.queue = d.queue[0], d.queue[1:]
		}
		var hs []func(context.Context, *envelope.Envelope) (bool, error)
		if env != nil {
			hs = d.handlers[d.cards[env.Recipient].Host]
		}
		d.mu.Unlock()
		if env == nil {
			select {
			case <-ctx.Done():
				return
			case <-d.wake:
			}
			continue
		}
		handled := false
		for _, h := range hs {
			if ok, _ := h(ctx, env); ok {
				handled = true
				break
			}
		}
		if !handled {
			if env.Type == envelope.TypeRequest {
				if r, err := planets.Answer(ctx, env); err == nil {
					resp, _ := envelope.NewFactory().ReplyAs(env.Recipient, env, envelope.TypeResponse, r)
					_ = d.post(ctx, resp)
				}
			}
			d.mu.Lock()
			d.inbox = append(d.inbox, env)
			d.mu.Unlock()
		}
	}
}

func TestDemoSwarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &demoNet{cards: map[string]agentcard.Card{}, handlers: map[string][]func(context.Context, *envelope.Envelope) (bool, error){},
			answerable: map[string][2]string{}, wake: make(chan struct{}, 1)}
		hosts := []string{"nodeA", "nodeB", "nodeC", "nodeD"}
		for i, a := range planets.Agents() {
			c := a.Card()
			c.Host = hosts[i%len(hosts)]
			d.cards[c.Address()] = c
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { d.run(ctx) })
		var closers []func() error
		defer func() {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
			cancel()
			wg.Wait()
		}()
		var coord *taskswarm.Coordinator
		var mu sync.Mutex
		var evs []taskswarm.Event
		for _, h := range hosts {
			neg, _ := negotiation.New(negotiation.Config{Post: d.post})
			neg.OnProposalReceived(planets.Decide)
			if err := neg.Start(ctx); err != nil {
				t.Fatal(err)
			}
			closers = append(closers, neg.Close)
			part, _ := taskswarm.NewParticipant(taskswarm.ParticipantConfig{Post: d.post, Work: planets.FailingOnce("mars")})
			if err := part.Start(ctx); err != nil {
				t.Fatal(err)
			}
			closers = append(closers, part.Close)
			hs := []func(context.Context, *envelope.Envelope) (bool, error){neg.Handle}
			if h == "nodeA" { // sun's node coordinates
				c, err := taskswarm.New(taskswarm.Config{Negotiator: neg, Post: d.post, Directory: d,
					L0:   func() string { return "sun@nodeA" },
					Emit: func(e taskswarm.Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() }})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
				closers = append(closers, c.Close)
				coord = c
				hs = append(hs, c.Handle)
			}
			d.handlers[h] = append(hs, part.Handle)
		}

		s, err := coord.Create(ctx, "sun@nodeA", "ship the release notes generator",
			[]string{"code.write", "code.review", "test.write", "docs.write"}, taskswarm.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		s, _ = coord.Get(s.ID)
		mu.Lock()
		defer mu.Unlock()
		var log strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&log, "%s %s#%d %s %s->%s %s\n", e.Type, e.SubTaskID, e.Attempt, e.Agent, e.From, e.To, e.Detail)
		}
		if s.Status != taskswarm.StatusCompleted || len(s.Results) != 4 {
			t.Fatalf("status %s %s\n%s", s.Status, s.Error, &log)
		}
		// mars fails its first attempt (FailingOnce); its sub-task moves on.
		reassigned := 0
		for _, e := range evs {
			if e.Type == taskswarm.EvtSubTaskReassigned {
				reassigned++
			}
		}
		moved := 0
		for _, st := range s.SubTasks {
			if slices.Contains(st.Tried, "mars@nodeB") {
				moved++
				if st.Attempts < 2 || st.Status != taskswarm.SubTaskCompleted || st.AssignedAgent == "mars@nodeB" {
					t.Fatalf("mars's sub-task %+v", st)
				}
			}
		}
		if moved != 1 || reassigned != 1 {
			t.Fatalf("%d sub-tasks moved from mars, %d reassignments\n%s", moved, reassigned, &log)
		}
		var report []taskswarm.Notice
		d.mu.Lock()
		for _, e := range d.inbox {
			if n, err := taskswarm.DecodeNotice(e.Payload); err == nil && n.Kind == taskswarm.NoticeCompleted {
				report = append(report, n)
			}
		}
		d.mu.Unlock()
		if len(report) != 1 || len(report[0].Results) != 4 {
			t.Fatalf("report %+v", report)
		}
		for id, r := range report[0].Results {
			if !strings.Contains(string(r), `"summary"`) {
				t.Fatalf("result %s: %s", id, r)
			}
		}
	})
}
