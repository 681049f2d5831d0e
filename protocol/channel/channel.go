// Package channel is the sender side of one A2A channel (one local agent to
// one remote agent) as a pure state machine, in the style of raft's RawNode:
// events go in, actions come out, and one owner performs them. It has no
// goroutines, no clock and no I/O, so the lifecycle, ordering, ack and retry
// rules are tested exhaustively without a network.
//
// # Lifecycle (the seed's ChannelStatus, property 10)
//
//	connecting --Connected--> open --TransportLost--> reconnecting --Connected--> open
//	connecting/reconnecting --DialFailed x(Retries+1)--> closed   (every pending item fails: DELIVERY_FAILED)
//	any --Close--> closed                                          (every pending item fails: CHANNEL_CLOSED)
//
// With [Config.Park], a channel whose redials are spent while items are
// pending does not fail them: the peer is away (a laptop asleep, a node
// restarting), so the channel parks and its items wait.
//
//	connecting/reconnecting --DialFailed x(Retries+1), items pending--> away
//	away --RetryDue--> away, dialling --Connected--> open
//	away --DialFailed--> away                                      (the next poll is scheduled, twice as late, up to AwayMax)
//	away --Wake--> reconnecting                                    (a dial now, then the redials; spent, away again)
//	any but closed --Expire--> same                                (the named items fail: DELIVERY_FAILED; away with none left: closed)
//
// Parked items fail only when their owner says their time to live is over
// (Expire): the machine has no clock.
//
// Any other event in a state is an invalid transition: Step returns an
// error and changes nothing.
//
// # Ordering and acknowledgement (properties 11, 12)
//
// Each enqueued item gets the next sequence number (1, 2, ...). While open,
// items are transmitted in sequence order; the receiver acknowledges
// cumulatively (Ack{Seq: n} settles every item <= n) and may refuse one item
// (Nack). On (re)connection the receiver states its watermark (the highest
// sequence it has taken); items at or below it are settled and the rest are
// retransmitted in order, so the receiver sees each exactly once and in order.
//
// Retries: after a transport loss, redial after Base, then 2*Base, 4*Base, ...
// (each delay double the previous) up to Retries times; if every redial fails,
// the channel closes and each pending item fails exactly once. An item
// enqueued while the channel redials with nothing pending restarts the count:
// like the first item of a new channel, it gets the dial under way (or one
// its owner brings forward) and then Retries redials of its own. One enqueued behind pending items shares
// their remaining redials (it goes on the same connection, after them).
package channel

import (
	"errors"
	"fmt"
	"time"
)

// State is the channel status.
type State uint8

// States.
const (
	Connecting State = iota
	Open
	Reconnecting
	Closed
	Away
)

func (s State) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Open:
		return "open"
	case Reconnecting:
		return "reconnecting"
	case Closed:
		return "closed"
	case Away:
		return "away"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Failure reasons carried by Failed actions.
const (
	ReasonDeliveryFailed = "DELIVERY_FAILED"
	ReasonChannelClosed  = "CHANNEL_CLOSED"
)

// ErrInvalidTransition is returned by Step for an event the state does not accept.
var ErrInvalidTransition = errors.New("channel: invalid transition")

// Config sets the retry schedule.
type Config struct {
	Retries int           // redials after a loss before giving up (default 3)
	Base    time.Duration // first redial delay; each next one doubles (default 500ms)
	// Park keeps pending items when the redials are spent (state Away)
	// instead of failing them.
	Park bool
	// AwayMax caps the delay between two dials of a parked channel
	// (default 30s); the first is Base << Retries.
	AwayMax time.Duration
}

func (c Config) withDefaults() Config {
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.Retries == 0 && c.Base == 0 {
		c.Retries = 3
	}
	if c.Base <= 0 {
		c.Base = 500 * time.Millisecond
	}
	if c.AwayMax <= 0 {
		c.AwayMax = 30 * time.Second
	}
	return c
}

// Item is one enqueued message; Data is opaque to the machine.
type Item struct {
	Seq  uint64
	Data any
}

// Event is an input to Step.
type Event interface{ isEvent() }

// Events.
type (
	// Enqueue adds a message; it gets the next sequence number.
	Enqueue struct{ Data any }
	// Connected: the receiver accepted the channel; Watermark is the highest
	// sequence it has handled (what settles pending items), Taken the
	// highest it has taken into its queue (at least Watermark; 0 when the
	// receiver does not say).
	Connected struct{ Watermark, Taken uint64 }
	// DialFailed: an attempt to (re)connect failed.
	DialFailed struct{ Err error }
	// RetryDue: the redial delay has elapsed.
	RetryDue struct{}
	// TransportLost: the stream under an open channel failed.
	TransportLost struct{ Err error }
	// Ack settles every item with Seq <= the given one.
	Ack struct{ Seq uint64 }
	// Nack refuses one item for good (e.g. a policy refusal by the receiver).
	Nack struct {
		Seq  uint64
		Code string
		Msg  string
	}
	// Close closes the channel; pending items fail with CHANNEL_CLOSED.
	Close struct{}
	// Wake: the peer of a parked channel was seen again; dial it now.
	Wake struct{}
	// Expire fails the pending items with these sequences (their time to
	// live is over) with DELIVERY_FAILED and Msg.
	Expire struct {
		Seqs []uint64
		Msg  string
	}
)

func (Enqueue) isEvent()       {}
func (Connected) isEvent()     {}
func (DialFailed) isEvent()    {}
func (RetryDue) isEvent()      {}
func (TransportLost) isEvent() {}
func (Ack) isEvent()           {}
func (Nack) isEvent()          {}
func (Close) isEvent()         {}
func (Wake) isEvent()          {}
func (Expire) isEvent()        {}

// Action is an output of Step, to be performed in order by the owner.
type Action interface{ isAction() }

// Actions.
type (
	// Dial: open the transport and send the channel's open request.
	Dial struct{}
	// Transmit: send these items, in order.
	Transmit struct{ Items []Item }
	// Schedule: deliver RetryDue after Delay.
	Schedule struct {
		Delay   time.Duration
		Attempt int // 1-based redial attempt this delay precedes
	}
	// Delivered: these items are settled.
	Delivered struct{ Items []Item }
	// Failed: these items will never be delivered. Remote marks a refusal
	// by the receiver (a Nack) rather than the channel giving up.
	Failed struct {
		Items  []Item
		Code   string
		Msg    string
		Remote bool
	}
	// StateChanged reports a transition.
	StateChanged struct{ From, To State }
)

func (Dial) isAction()         {}
func (Transmit) isAction()     {}
func (Schedule) isAction()     {}
func (Delivered) isAction()    {}
func (Failed) isAction()       {}
func (StateChanged) isAction() {}

// Machine is the channel's state. The zero value is not usable: use New.
type Machine struct {
	cfg     Config
	state   State
	next    uint64 // next sequence number to assign
	pending []Item // unsettled, in Seq order
	sent    uint64 // highest Seq transmitted on the current connection
	attempt int    // redials since the last loss
	dialing bool   // away: a dial is under way
	polls   int    // away: dials since parking
}

// New returns a machine in state connecting, and the Dial action that starts it.
func New(cfg Config) (*Machine, []Action) {
	return &Machine{cfg: cfg.withDefaults(), state: Connecting, next: 1}, []Action{Dial{}}
}

// Restore returns a machine in state connecting holding items persisted by
// an earlier run (in any order; sequences are kept), continuing the sequence
// after next-1.
func Restore(cfg Config, items []Item, next uint64) (*Machine, []Action) {
	m, acts := New(cfg)
	m.pending = append(m.pending, items...)
	sortItems(m.pending)
	for _, it := range m.pending {
		if it.Seq >= next {
			next = it.Seq + 1
		}
	}
	if next > m.next {
		m.next = next
	}
	return m, acts
}

// State returns the current state.
func (m *Machine) State() State { return m.state }

// Pending returns the unsettled items, in order (shared; do not modify).
func (m *Machine) Pending() []Item { return m.pending }

// NextSeq is the sequence the next enqueued item will get.
func (m *Machine) NextSeq() uint64 { return m.next }

// Attempt is the number of redials since the last loss, or since an item
// was enqueued into a reconnecting channel with nothing pending.
func (m *Machine) Attempt() int { return m.attempt }

// Fresh reports whether an item enqueued now would start a new retry
// schedule: the channel is reconnecting with nothing pending. Its owner
// then need not wait out a delay chosen for no item before the next dial.
func (m *Machine) Fresh() bool { return m.state == Reconnecting && len(m.pending) == 0 }

func (m *Machine) invalid(e Event) error {
	return fmt.Errorf("%w: %T in state %s", ErrInvalidTransition, e, m.state)
}

func (m *Machine) to(s State, acts []Action) []Action {
	if s == m.state {
		return acts
	}
	from := m.state
	m.state = s
	return append(acts, StateChanged{From: from, To: s})
}

// Enqueue is Step(Enqueue{Data: data}) for the sender's hot path, without
// allocating the action list: it returns the new item, and transmit is
// true exactly where Step would return Transmit{Items: []Item{it}} (the
// channel is open); otherwise there is nothing to do yet. Property tests
// check that the two agree.
func (m *Machine) Enqueue(data any) (it Item, transmit bool, err error) {
	if m.state == Closed {
		return Item{}, false, m.invalid(Enqueue{Data: data})
	}
	if m.state == Reconnecting && len(m.pending) == 0 {
		// The redials so far were for no item (an idle channel that lost
		// its transport keeps trying, to stay ready): this item gets all
		// its own, rather than the end of that schedule, which gave up on
		// an envelope sent just before the last redial failed without
		// retrying it once. The owner may bring the next redial forward
		// ([Machine.Fresh]).
		m.attempt = 0
	}
	it = Item{Seq: m.next, Data: data}
	m.next++
	m.pending = append(m.pending, it)
	if m.state == Open {
		m.sent = it.Seq
		return it, true, nil
	}
	return it, false, nil
}

// Step applies one event and returns the actions to perform, or an error
// (and no change) for an invalid transition.
func (m *Machine) Step(e Event) ([]Action, error) {
	switch e := e.(type) {
	case Enqueue:
		it, transmit, err := m.Enqueue(e.Data)
		if err != nil || !transmit {
			return nil, err
		}
		return []Action{Transmit{Items: []Item{it}}}, nil

	case Connected:
		if m.state != Connecting && m.state != Reconnecting && !(m.state == Away && m.dialing) {
			return nil, m.invalid(e)
		}
		m.dialing, m.polls = false, 0
		var acts []Action
		if done := m.settle(e.Watermark); len(done) > 0 {
			acts = append(acts, Delivered{Items: done})
		}
		// The receiver took sequences this machine does not know of: a
		// channel restored from the outbox after a crash numbers on from
		// its last written item, and the receiver may have taken later
		// ones that were never written, handled or still in its queue.
		// Reusing their numbers would have the receiver take new envelopes
		// for duplicates, acknowledge them, and drop them; and its acks of
		// them are legitimate.
		taken := max(e.Watermark, e.Taken)
		if taken >= m.next {
			m.next = taken + 1
		}
		m.attempt = 0
		acts = m.to(Open, acts)
		m.sent = taken
		if len(m.pending) > 0 {
			acts = append(acts, Transmit{Items: append([]Item(nil), m.pending...)})
			m.sent = max(taken, m.pending[len(m.pending)-1].Seq)
		}
		return acts, nil

	case DialFailed:
		if m.state == Away && m.dialing {
			m.dialing = false
			m.polls++
			return []Action{Schedule{Delay: m.pollDelay(), Attempt: m.cfg.Retries + m.polls}}, nil
		}
		if m.state != Connecting && m.state != Reconnecting {
			return nil, m.invalid(e)
		}
		if m.attempt >= m.cfg.Retries && m.cfg.Park && len(m.pending) > 0 {
			acts := m.to(Away, nil)
			m.polls = 0
			return append(acts, Schedule{Delay: m.pollDelay(), Attempt: m.cfg.Retries + 1}), nil
		}
		if m.attempt >= m.cfg.Retries {
			msg := "gave up after retries"
			if e.Err != nil {
				msg = fmt.Sprintf("gave up after %d retries: %v", m.cfg.Retries, e.Err)
			}
			return m.closeWith(ReasonDeliveryFailed, msg), nil
		}
		acts := m.to(Reconnecting, nil)
		m.attempt++
		return append(acts, Schedule{Delay: m.delay(m.attempt), Attempt: m.attempt}), nil

	case RetryDue:
		if m.state == Away && !m.dialing {
			m.dialing = true
			return []Action{Dial{}}, nil
		}
		if m.state != Reconnecting {
			return nil, m.invalid(e)
		}
		return []Action{Dial{}}, nil

	case Wake:
		// The peer was seen again, or someone waits: a full schedule of
		// redials, as after a loss, rather than one poll.
		if m.state != Away || m.dialing {
			return nil, m.invalid(e)
		}
		acts := m.to(Reconnecting, nil)
		m.attempt, m.polls = 0, 0
		return append(acts, Dial{}), nil

	case Expire:
		if m.state == Closed {
			return nil, m.invalid(e)
		}
		drop := make(map[uint64]bool, len(e.Seqs))
		for _, s := range e.Seqs {
			drop[s] = true
		}
		var gone []Item
		keep := m.pending[:0]
		for _, it := range m.pending {
			if drop[it.Seq] {
				gone = append(gone, it)
			} else {
				keep = append(keep, it)
			}
		}
		clear(m.pending[len(keep):])
		m.pending = keep
		var acts []Action
		if len(gone) > 0 {
			acts = append(acts, Failed{Items: gone, Code: ReasonDeliveryFailed, Msg: e.Msg})
		}
		if m.state == Away && len(m.pending) == 0 {
			m.dialing = false
			acts = m.to(Closed, acts)
		}
		return acts, nil

	case TransportLost:
		if m.state != Open {
			return nil, m.invalid(e)
		}
		acts := m.to(Reconnecting, nil)
		m.attempt = 1
		return append(acts, Schedule{Delay: m.delay(1), Attempt: 1}), nil

	case Ack:
		if m.state != Open {
			return nil, m.invalid(e)
		}
		if e.Seq > m.sent {
			return nil, fmt.Errorf("%w: ack of %d beyond last sent %d", ErrInvalidTransition, e.Seq, m.sent)
		}
		if done := m.settle(e.Seq); len(done) > 0 {
			return []Action{Delivered{Items: done}}, nil
		}
		return nil, nil

	case Nack:
		if m.state != Open {
			return nil, m.invalid(e)
		}
		for i, it := range m.pending {
			if it.Seq == e.Seq {
				m.pending = append(m.pending[:i:i], m.pending[i+1:]...)
				return []Action{Failed{Items: []Item{it}, Code: e.Code, Msg: e.Msg, Remote: true}}, nil
			}
		}
		return nil, nil // already settled: a late nack changes nothing

	case Close:
		if m.state == Closed {
			return nil, m.invalid(e)
		}
		return m.closeWith(ReasonChannelClosed, "channel closed"), nil
	}
	return nil, fmt.Errorf("%w: unknown event %T", ErrInvalidTransition, e)
}

func (m *Machine) delay(attempt int) time.Duration {
	return m.cfg.Base << (attempt - 1)
}

// pollDelay is the wait before a parked channel's next dial: Base <<
// Retries, doubling with each failed dial, at most AwayMax.
func (m *Machine) pollDelay() time.Duration {
	d := m.cfg.Base << m.cfg.Retries
	for i := 0; i < m.polls && d < m.cfg.AwayMax; i++ {
		d *= 2
	}
	return min(d, m.cfg.AwayMax)
}

// Dialing reports whether a parked channel has a dial under way.
func (m *Machine) Dialing() bool { return m.dialing }

func (m *Machine) settle(upTo uint64) []Item {
	i := 0
	for i < len(m.pending) && m.pending[i].Seq <= upTo {
		i++
	}
	if i == 0 {
		return nil
	}
	done := append([]Item(nil), m.pending[:i]...)
	// Advance rather than copy the rest (an ack settles the head of a
	// window that may hold thousands); cleared so the array keeps no data
	// alive, and append reallocates it with only the live items.
	clear(m.pending[:i])
	m.pending = m.pending[i:]
	return done
}

func (m *Machine) closeWith(code, msg string) []Action {
	m.dialing = false
	acts := m.to(Closed, nil)
	if len(m.pending) > 0 {
		acts = append(acts, Failed{Items: m.pending, Code: code, Msg: msg})
		m.pending = nil
	}
	return acts
}

func sortItems(items []Item) {
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && items[j].Seq < items[j-1].Seq; j-- {
			items[j], items[j-1] = items[j-1], items[j]
		}
	}
}
