package taskswarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Defaults of [ParticipantConfig].
const (
	DefaultWorkers   = 4
	DefaultQueueSize = 64
	DefaultCacheSize = 1024
)

// ParticipantConfig configures a [Participant]. Post and Work are required.
type ParticipantConfig struct {
	// Post routes an envelope from a local agent (the router's Post).
	Post func(ctx context.Context, env *envelope.Envelope) error
	// Factory builds the answers; nil means envelope.NewFactory().
	Factory *envelope.Factory
	// Work does one sub-task as local agent `agent` and returns its result
	// (JSON, at most MaxResultSize bytes; empty means null) or an error
	// (its Code, if it has one, travels with it). It runs on the
	// Participant's goroutines under a context that ends at Close or after
	// TaskTimeout.
	Work func(ctx context.Context, agent string, task Task) (json.RawMessage, error)
	// Workers is how many sub-tasks run at once; zero means DefaultWorkers.
	Workers int
	// QueueSize bounds the sub-tasks waiting for a worker; when full a
	// request is answered at once with an error of code BUSY (the
	// coordinator reassigns it). Zero means DefaultQueueSize.
	QueueSize int
	// CacheSize bounds the answers kept to re-send when the same attempt
	// is requested again; zero means DefaultCacheSize.
	CacheSize int
	// TaskTimeout bounds one Work call; zero means no bound.
	TaskTimeout time.Duration
	// Emit receives every [Event] synchronously; it must not block.
	Emit func(Event)
	// Now is the clock of events; nil means time.Now.
	Now func() time.Time
}

// job is one sub-task attempt waiting for a worker.
type job struct {
	key  string
	req  *envelope.Envelope
	task Task
}

// answer is a sub-task attempt's outcome, cached to be re-sent.
type answer struct {
	typ envelope.Type
	res Result
}

// Participant does the sub-tasks that coordinators send to the local agents
// of one node: it takes their "request" envelopes, runs Work on a bounded
// set of goroutines it owns, and answers each with a "response" (the
// result) or an "error" envelope, from the agent, in the request's thread.
// The same (agent, swarm, sub-task, attempt) delivered twice runs once; a
// repeat after the answer gets the cached answer again, in a new envelope.
//
// It is safe for concurrent use; Start starts the workers and Close stops
// and waits for them.
type Participant struct {
	cfg  ParticipantConfig
	jobs chan job
	wg   sync.WaitGroup

	mu       sync.Mutex
	state    state
	cancel   context.CancelFunc
	inflight map[string]bool
	done     map[string]answer
	order    []string // keys of done, oldest first
}

// NewParticipant returns a Participant; it starts nothing.
func NewParticipant(cfg ParticipantConfig) (*Participant, error) {
	switch {
	case cfg.Post == nil:
		return nil, errors.New("swarm: ParticipantConfig.Post is required: pass the router's Post")
	case cfg.Work == nil:
		return nil, errors.New("swarm: ParticipantConfig.Work is required: it does the sub-tasks")
	case cfg.Workers < 0 || cfg.QueueSize < 0 || cfg.CacheSize < 0 || cfg.TaskTimeout < 0:
		return nil, errors.New("swarm: negative limit in ParticipantConfig")
	}
	if cfg.Factory == nil {
		cfg.Factory = envelope.NewFactory()
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Participant{
		cfg: cfg, jobs: make(chan job, cfg.QueueSize),
		inflight: map[string]bool{}, done: map[string]answer{},
	}, nil
}

// Start starts the workers; they run until Close or until ctx ends. Start
// may be called once.
func (p *Participant) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateNew {
		return errors.New("swarm: Participant.Start called twice or after Close")
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.state = stateRunning
	for range p.cfg.Workers {
		p.wg.Go(func() { p.work(ctx) })
	}
	return nil
}

// Close stops the workers and waits for them; a Work call in progress sees
// its context end and its answer is not sent (the coordinator re-sends the
// request when it resumes, or reassigns it). Close is idempotent and safe
// before Start.
func (p *Participant) Close() error {
	p.mu.Lock()
	p.state = stateClosed
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	p.wg.Wait()
	return nil
}

// InFlight returns the number of sub-task attempts queued or running.
func (p *Participant) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inflight)
}

func taskKey(agent string, t Task) string {
	return agent + "\x00" + t.SwarmID + "\x00" + t.SubTaskID + "\x00" + strconv.Itoa(t.Attempt)
}

// Handle takes a "request" envelope delivered to a local agent. A sub-task
// request ([Task] payload) is queued for a worker, or answered from the
// cache, and handled is true; anything else (another request, another type)
// is left to the caller (handled false). It does not block on Work.
func (p *Participant) Handle(ctx context.Context, env *envelope.Envelope) (handled bool, err error) {
	if env == nil || env.Type != envelope.TypeRequest {
		return false, nil
	}
	task, err := DecodeTask(env.Payload)
	if err != nil {
		return false, nil
	}
	task.Thread, task.From = env.ThreadID(), env.Sender
	key := taskKey(env.Recipient, task)
	p.mu.Lock()
	if p.state != stateRunning {
		p.mu.Unlock()
		return true, ErrClosed
	}
	if a, ok := p.done[key]; ok {
		p.mu.Unlock()
		p.emit(EvtTaskDuplicate, env.Recipient, task, "", "answered already: sending the answer again")
		return true, p.send(ctx, env, a)
	}
	if p.inflight[key] {
		p.mu.Unlock()
		p.emit(EvtTaskDuplicate, env.Recipient, task, "", "already queued or running")
		return true, nil
	}
	select {
	case p.jobs <- job{key: key, req: env, task: task}:
		p.inflight[key] = true
		p.mu.Unlock()
		return true, nil
	default:
	}
	p.mu.Unlock()
	busy := answer{typ: envelope.TypeError, res: Result{
		SwarmID: task.SwarmID, SubTaskID: task.SubTaskID, Attempt: task.Attempt, Code: CodeBusy,
		Error:   fmt.Sprintf("%s has %d sub-tasks waiting: try another agent", env.Recipient, p.cfg.QueueSize),
		Message: "participant queue full",
	}}
	return true, p.send(ctx, env, busy)
}

// work is one worker goroutine.
func (p *Participant) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-p.jobs:
			p.do(ctx, j)
		}
	}
}

func (p *Participant) do(ctx context.Context, j job) {
	agent := j.req.Recipient
	p.emit(EvtTaskStarted, agent, j.task, "", j.task.Description)
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if p.cfg.TaskTimeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, p.cfg.TaskTimeout)
	}
	out, werr := p.safeWork(wctx, agent, j.task)
	cancel()
	if ctx.Err() != nil { // closing: no answer; the coordinator re-sends or reassigns
		p.mu.Lock()
		delete(p.inflight, j.key)
		p.mu.Unlock()
		return
	}
	res := Result{SwarmID: j.task.SwarmID, SubTaskID: j.task.SubTaskID, Attempt: j.task.Attempt}
	a := answer{typ: envelope.TypeResponse, res: res}
	if werr == nil {
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		a.res.Result = out
		if err := a.res.Validate(); err != nil {
			werr = fmt.Errorf("swarm: the result of %s is unusable: %w", agent, err)
			a.res.Result = nil
		}
	}
	if werr != nil {
		code := codeOf(werr)
		if code == "" {
			code = CodeTaskFailed
		}
		msg := wirecodec.Truncate(werr.Error(), MaxErrorLen)
		a = answer{typ: envelope.TypeError, res: Result{
			SwarmID: res.SwarmID, SubTaskID: res.SubTaskID, Attempt: res.Attempt, Error: msg, Code: code, Message: msg,
		}}
	}
	p.mu.Lock()
	delete(p.inflight, j.key)
	p.done[j.key] = a
	p.order = append(p.order, j.key)
	for len(p.order) > p.cfg.CacheSize {
		delete(p.done, p.order[0])
		p.order[0] = ""
		p.order = p.order[1:]
	}
	p.mu.Unlock()
	_ = p.send(ctx, j.req, a) // a failure is an event; the coordinator reassigns or re-sends
}

func (p *Participant) safeWork(ctx context.Context, agent string, t Task) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("swarm: Work panicked for %s: %v", agent, r)
		}
	}()
	return p.cfg.Work(ctx, agent, t)
}

// send answers req with a, from req's recipient, in req's thread.
func (p *Participant) send(ctx context.Context, req *envelope.Envelope, a answer) error {
	env, err := p.cfg.Factory.ReplyAs(req.Recipient, req, a.typ, a.res)
	if err == nil {
		err = p.cfg.Post(ctx, env)
	}
	detail := "result sent"
	if a.typ == envelope.TypeError {
		detail = "error sent: " + a.res.Error
	}
	if err != nil {
		err = fmt.Errorf("swarm: answer sub-task %s of %s to %s: %w", a.res.SubTaskID, a.res.SwarmID, req.Sender, err)
		p.emitEvent(Event{Type: EvtSendFailed, Time: p.cfg.Now(), SwarmID: a.res.SwarmID, SubTaskID: a.res.SubTaskID,
			Agent: req.Recipient, Attempt: a.res.Attempt, Code: codeOf(err), Detail: err.Error()})
		return err
	}
	p.emitEvent(Event{Type: EvtTaskAnswered, Time: p.cfg.Now(), SwarmID: a.res.SwarmID, SubTaskID: a.res.SubTaskID,
		Agent: req.Recipient, Attempt: a.res.Attempt, Code: a.res.Code, Detail: detail})
	return nil
}

func (p *Participant) emit(t EventType, agent string, task Task, code, detail string) {
	p.emitEvent(Event{Type: t, Time: p.cfg.Now(), SwarmID: task.SwarmID, SubTaskID: task.SubTaskID,
		Agent: agent, Attempt: task.Attempt, Code: code, Detail: detail})
}

func (p *Participant) emitEvent(ev Event) {
	if p.cfg.Emit != nil {
		p.cfg.Emit(ev)
	}
}
