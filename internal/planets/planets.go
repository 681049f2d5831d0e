package planets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
	"github.com/nova-node/nova-node/tiers"
)

// Agent is one planetary agent.
type Agent struct {
	ID           string     // lower-case agent id, also its name
	Name         string     // display name
	Tier         tiers.Tier // the seed's default tier
	Description  string
	Capabilities []string // capability ids, 1 to 3
}

// Capability describes one capability id used by the planetary agents.
type Capability struct {
	ID          string
	Name        string
	Description string
	verb        string // what a result says the agent did
}

var capabilities = []Capability{
	{"plan.decompose", "Decompose", "splits a goal into ordered, independent steps", "broke down"},
	{"plan.roadmap", "Roadmap", "orders work into milestones", "laid out a roadmap for"},
	{"review.approve", "Approve", "signs off on plans and results", "approved"},
	{"arch.design", "Architecture", "designs components and their interfaces", "designed the architecture of"},
	{"code.write", "Write code", "implements features and fixes", "implemented"},
	{"code.review", "Review code", "reviews changes for correctness and style", "reviewed"},
	{"test.write", "Write tests", "writes unit, property and integration tests", "wrote tests for"},
	{"docs.write", "Write docs", "writes guides and reference documentation", "documented"},
	{"design.ui", "UI design", "designs screens and interactions", "designed the interface of"},
	{"security.audit", "Security audit", "looks for vulnerabilities and unsafe defaults", "audited"},
	{"infra.deploy", "Deploy", "builds, ships and operates services", "deployed"},
	{"data.model", "Data model", "designs schemas and storage", "modelled the data of"},
	{"data.analyze", "Analyze data", "measures and explains metrics", "analyzed"},
	{"perf.profile", "Profile", "finds and removes bottlenecks", "profiled"},
	{"debug.trace", "Debug", "reproduces and traces failures", "traced the failures of"},
	{"research.survey", "Research", "surveys prior art and options", "researched"},
}

// Capabilities returns the capabilities the planetary agents declare, in a
// fixed order. The slice is new on every call.
func Capabilities() []Capability { return slices.Clone(capabilities) }

var agents = []Agent{
	{"sun", "Sun", tiers.L0, "the orchestrator: plans the work and approves the results", []string{"plan.decompose", "review.approve"}},
	{"mercury", "Mercury", tiers.L1, "strategist and messenger: quick plans, clear write-ups", []string{"plan.decompose", "docs.write"}},
	{"earth", "Earth", tiers.L1, "product strategist: priorities, milestones and sign-off", []string{"plan.roadmap", "review.approve"}},
	{"jupiter", "Jupiter", tiers.L1, "chief architect: structure, interfaces and plans", []string{"arch.design", "plan.decompose", "plan.roadmap"}},
	{"venus", "Venus", tiers.L2, "interface lead: screens, flows and their code", []string{"design.ui", "code.write"}},
	{"mars", "Mars", tiers.L2, "implementation lead: builds features and reviews code", []string{"code.write", "code.review"}},
	{"pluto", "Pluto", tiers.L2, "security lead: audits and hardening", []string{"security.audit", "code.review"}},
	{"saturn", "Saturn", tiers.L2, "quality lead: tests, reviews and failure analysis", []string{"test.write", "code.review", "debug.trace"}},
	{"titan", "Titan", tiers.L2, "infrastructure lead: builds and deployments", []string{"infra.deploy", "code.write"}},
	{"enceladus", "Enceladus", tiers.L3, "data specialist: schemas and storage code", []string{"data.model", "code.write"}},
	{"ganymede", "Ganymede", tiers.L3, "API specialist: interfaces and their implementation", []string{"arch.design", "code.write"}},
	{"neptune", "Neptune", tiers.L3, "analytics specialist: metrics and reports", []string{"data.analyze", "docs.write"}},
	{"charon", "Charon", tiers.L3, "debugging specialist: reproduces failures and audits fixes", []string{"debug.trace", "test.write", "security.audit"}},
	{"uranus", "Uranus", tiers.L3, "research specialist: surveys and summaries", []string{"research.survey", "docs.write"}},
	{"europa", "Europa", tiers.L3, "mobile specialist: small-screen design and code", []string{"design.ui", "code.write"}},
	{"mimas", "Mimas", tiers.L3, "performance specialist: profiles, benchmarks and tests", []string{"perf.profile", "test.write", "data.analyze"}},
	{"io", "Io", tiers.L3, "real-time specialist: event streams and their operation", []string{"code.write", "infra.deploy", "perf.profile"}},
	{"triton", "Triton", tiers.L3, "CI specialist: pipelines and test suites", []string{"infra.deploy", "test.write"}},
	{"callisto", "Callisto", tiers.L3, "documentation specialist: guides and references", []string{"docs.write", "research.survey"}},
	{"atlas", "Atlas", tiers.L3, "knowledge specialist: data models and research", []string{"data.model", "research.survey"}},
	{"andromeda", "Andromeda", tiers.L3, "ideas specialist: explores options and sketches interfaces", []string{"research.survey", "design.ui"}},
}

// Agents returns the 21 planetary agents, sun first, in the seed's order.
// The slice and its capability lists are new on every call.
func Agents() []Agent {
	out := slices.Clone(agents)
	for i := range out {
		out[i].Capabilities = slices.Clone(out[i].Capabilities)
	}
	return out
}

// Lookup returns the planetary agent named by id or by an address
// "id@peer", ignoring case.
func Lookup(idOrAddress string) (Agent, bool) {
	id := strings.ToLower(negotiation.AgentName(idOrAddress))
	for _, a := range agents {
		if a.ID == id {
			a.Capabilities = slices.Clone(a.Capabilities)
			return a, true
		}
	}
	return Agent{}, false
}

// Has reports whether the agent declares capability id.
func (a Agent) Has(id string) bool { return slices.Contains(a.Capabilities, id) }

// Card returns the agent's card, without host, revision and endpoints
// (the registering node sets them).
func (a Agent) Card() agentcard.Card {
	c := agentcard.Card{
		ID: a.ID, Name: a.Name, Version: "1.0.0", Description: a.Description, Tier: a.Tier,
		Protocols: []string{"a2a/1.0", "nova-a2a/1.0.0"}, Endpoints: []agentcard.Endpoint{},
		Capabilities: []agentcard.Capability{},
	}
	for _, id := range a.Capabilities {
		cp := capabilityInfo(id)
		c.Capabilities = append(c.Capabilities, agentcard.Capability{ID: cp.ID, Name: cp.Name, Description: cp.Description})
	}
	return c
}

// role names an agent's tier the way the seed does.
func role(t tiers.Tier) string {
	switch t {
	case tiers.L0:
		return "orchestrator"
	case tiers.L1:
		return "strategic"
	case tiers.L2:
		return "operational"
	}
	return "specialist"
}

func capabilityInfo(id string) Capability {
	for _, c := range capabilities {
		if c.ID == id {
			return c
		}
	}
	return Capability{ID: id, Name: id, verb: "worked on"}
}

// ErrUnknownAgent is returned by the handlers for an agent that is not a
// planetary agent. Its Code is AGENT_NOT_FOUND.
var ErrUnknownAgent error = &codedError{agentcard.CodeAgentNotFound, "planets: not a planetary agent: register one of the 21 (see Agents)"}

// CodeSimulatedFailure is the code of [ErrSimulatedFailure].
const CodeSimulatedFailure = "SIMULATED_FAILURE"

// ErrSimulatedFailure is the failure [FailingOnce] injects. Its Code is
// [CodeSimulatedFailure].
var ErrSimulatedFailure error = &codedError{CodeSimulatedFailure, "planets: simulated failure of a first attempt (the demo's injected fault)"}

type codedError struct{ code, msg string }

func (e *codedError) Error() string { return e.msg }

// Code returns the error's code.
func (e *codedError) Code() string { return e.code }

// Result is what [Work] returns, as JSON.
type Result struct {
	Agent      string `json:"agent"`
	Capability string `json:"capability"`
	Summary    string `json:"summary"`
}

// maxQuote bounds how much of a description or request a reply repeats.
const maxQuote = 120

// Work is the built-in sub-task handler of the planetary agents (a
// taskswarm.ParticipantConfig.Work): deterministic, it returns
// {"agent","capability","summary"} where summary says which capability the
// agent applied to the sub-task's description. It fails with
// [ErrUnknownAgent] for an agent that is not planetary and honours ctx.
func Work(ctx context.Context, agent string, task taskswarm.Task) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, ok := Lookup(agent)
	if !ok {
		return nil, fmt.Errorf("planets: work for %q: %w", agent, ErrUnknownAgent)
	}
	use := ""
	for _, c := range task.RequiredCapabilities {
		if a.Has(c) {
			use = c
			break
		}
	}
	if use == "" {
		use = a.Capabilities[0]
	}
	r := Result{
		Agent: a.ID, Capability: use,
		Summary: fmt.Sprintf("%s (%s, %s) %s: %s", a.Name, a.Tier, role(a.Tier), capabilityInfo(use).verb,
			clip(strings.TrimSpace(task.Description), maxQuote)),
	}
	return json.Marshal(r)
}

// FailingOnce returns a Work that fails the first attempt of every sub-task
// given to one of the named agents with [ErrSimulatedFailure], and is [Work]
// otherwise: the demo's injected fault, so that a reassignment is seen.
func FailingOnce(agentIDs ...string) func(ctx context.Context, agent string, task taskswarm.Task) (json.RawMessage, error) {
	fail := map[string]bool{}
	for _, id := range agentIDs {
		fail[strings.ToLower(id)] = true
	}
	return func(ctx context.Context, agent string, task taskswarm.Task) (json.RawMessage, error) {
		if fail[strings.ToLower(negotiation.AgentName(agent))] && task.Attempt == 1 {
			return nil, fmt.Errorf("planets: %s on sub-task %s: %w", negotiation.AgentName(agent), task.SubTaskID, ErrSimulatedFailure)
		}
		return Work(ctx, agent, task)
	}
}

// Reply is what [Answer] returns.
type Reply struct {
	Agent string `json:"agent"`
	Reply string `json:"reply"`
}

// Answer is the built-in handler of plain requests to a planetary agent
// (the shape of a router handler): deterministic, it says who answered and
// repeats the gist of the request. It fails with [ErrUnknownAgent] when
// env's recipient is not planetary.
func Answer(ctx context.Context, env *envelope.Envelope) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if env == nil {
		return nil, errors.New("planets: answer to a nil envelope")
	}
	a, ok := Lookup(env.Recipient)
	if !ok {
		return nil, fmt.Errorf("planets: answer as %q: %w", env.Recipient, ErrUnknownAgent)
	}
	return Reply{
		Agent: a.ID,
		Reply: fmt.Sprintf("%s (%s, %s; %s) received from %s: %s", a.Name, a.Tier, role(a.Tier),
			strings.Join(a.Capabilities, ", "), negotiation.AgentName(env.Sender), gist(env.Payload)),
	}, nil
}

// gist returns a short readable form of a payload: a string itself, the
// text/message/question/task field of an object, or the compact JSON.
func gist(p json.RawMessage) string {
	var s string
	if len(p) > 0 && p[0] == '"' && json.Unmarshal(p, &s) == nil {
		return clip(s, maxQuote)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) == nil {
		for _, k := range []string{"text", "message", "question", "task", "description"} {
			if json.Unmarshal(m[k], &s) == nil && s != "" {
				return clip(s, maxQuote)
			}
		}
	}
	if len(p) == 0 {
		return "null"
	}
	return clip(string(p), maxQuote)
}

// clip cuts s to at most n bytes at a rune boundary, adding "..." if cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// Estimates of [Decide], by complexity, in milliseconds.
const (
	EstimateSimpleMs  = 30_000
	EstimateMediumMs  = 120_000
	EstimateComplexMs = 600_000
)

// Decide is the built-in proposal policy of the planetary agents (a
// negotiation.ProposalHandler): a planetary target that declares at least
// one of the required capabilities (or any, when none is required) accepts
// with an estimate by complexity; one that declares none rejects with
// CAPABILITY_MISSING and suggests the first planetary agent that declares
// them all (or the most of them). It returns nil (leave pending) for an
// agent that is not planetary.
func Decide(_ context.Context, r negotiation.Record) *negotiation.Decision {
	a, ok := Lookup(r.Target)
	if !ok {
		return nil
	}
	need := r.Proposal.RequiredCapabilities
	if len(need) == 0 || slices.ContainsFunc(need, a.Has) {
		est := int64(EstimateMediumMs)
		switch r.Proposal.EstimatedComplexity {
		case negotiation.ComplexitySimple:
			est = EstimateSimpleMs
		case negotiation.ComplexityComplex:
			est = EstimateComplexMs
		}
		return negotiation.AcceptWith(est)
	}
	return negotiation.RejectWith(negotiation.ReasonCapabilityMissing, Suggest(need, a.ID, negotiation.AgentName(r.Proposer)))
}

// Suggest returns the planetary agent, other than those excluded, that
// declares the most of need (the first in Agents order on a tie), or "" if
// none declares any.
func Suggest(need []string, exclude ...string) string {
	best, bestN := "", 0
	for _, a := range agents {
		if slices.Contains(exclude, a.ID) {
			continue
		}
		n := 0
		for _, c := range need {
			if a.Has(c) {
				n++
			}
		}
		if n > bestN {
			best, bestN = a.ID, n
		}
	}
	return best
}
