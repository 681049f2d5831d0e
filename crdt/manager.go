package crdt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	golog "github.com/ipfs/go-log/v2"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"go.uber.org/zap"
)

var log = golog.Logger("nova/crdt")

// ID is the catch-up protocol.
const ID protocol.ID = "/nova/crdt/2.0.0"

// CodeDeserializationFailed is the seed's code for an undecodable update.
const CodeDeserializationFailed = "CRDT_DESERIALIZATION_FAILED"

// Topic is the GossipSub topic of a document.
func Topic(swarm, doc string) string { return "nova/" + swarm + "/crdt/" + doc }

// DocNamePattern is the rule of a document name, this package's own: a
// name is the last segment of the document's topic ([Topic]), and
// "<sandbox>.<name>" gives a document to a sandbox. It reads
// like the agent-id rule (agentcard.IDPattern) but is not that rule:
// documents are not agents, and either may change without the other.
const DocNamePattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`

var docNameRe = regexp.MustCompile(DocNamePattern)

// ValidName reports whether name is a valid document name
// ([DocNamePattern]).
func ValidName(name string) bool { return docNameRe.MatchString(name) }

// Store persists each document: a state record and a log of the signed
// updates applied since (crdt keeps every signed update, in the order it
// applied them, so it can serve catch-ups that any receiver can verify).
// Calls come under the document's lock, after each join and before
// anything is published.
type Store interface {
	// LoadDoc returns the state record (nil when none) and the entries
	// logged after it, in order.
	LoadDoc(name string) (state []byte, deltas [][]byte, err error)
	// AppendDelta logs one entry: a signed update.
	AppendDelta(name string, delta []byte) error
	// AppendDeltas logs entries in order, in one transaction.
	AppendDeltas(name string, deltas [][]byte) error
	// SaveDoc replaces the state record and empties the log, atomically.
	SaveDoc(name string, state []byte) error
	DocNames() ([]string, error)
	// DeleteDoc removes the document's state record and log (nothing
	// when it holds none).
	DeleteDoc(name string) error
}

// SourceCheck decides whether an update to document doc, made by agent
// source (name@peerID) and published by peer publisher, may be applied. It
// returns nil to accept, ErrUnverifiable when it cannot tell (the source's
// card is unknown here), any other error to refuse. The node checks the
// source's signed card: hosted by the publisher, and allowed to write doc
// under the sandbox rules.
type SourceCheck func(doc, source string, publisher peer.ID) error

// ErrUnverifiable is returned by a SourceCheck that lacks the card it needs.
var ErrUnverifiable = errors.New("crdt: source agent cannot be verified here")

// Option configures a Manager: New applies each to its configuration
// before it builds the Manager.
type Option func(*config) error

// config is what the options set; New fills in the defaults.
type config struct {
	interval time.Duration
	check    SourceCheck
	events   func(SecurityEvent)
	repair   func(doc string) (string, bool)
}

// defaultCatchupInterval is the period of the background anti-entropy round.
const defaultCatchupInterval = 10 * time.Second

// WithCatchupInterval sets the period of the background anti-entropy round
// (default 10 s); it must be positive.
func WithCatchupInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("crdt: catch-up interval %v is not positive", d)
		}
		c.interval = d
		return nil
	}
}

// SecurityEvent is a peer's misbehaviour seen on a document: a forged or
// invalid update (Code CodeForgedUpdate, CodeInvalidUpdate) or a replica
// signing two histories (CodeEquivocation, Replica names it). Peer is the
// peer that sent it (for an equivocation: that sent the second history).
type SecurityEvent struct {
	Code    string
	Doc     string
	Peer    peer.ID
	Replica string
	Detail  string
}

// WithSecurityEvents sets the function told of every SecurityEvent
// (default: none). It is called under a document's lock and must not
// block.
func WithSecurityEvents(f func(SecurityEvent)) Option {
	return func(c *config) error { c.events = f; return nil }
}

// WithLegacyRepair lets the Manager keep a document stored by a version
// without signed updates: agent(doc) names the local agent (name@peer) in
// whose name its content is written again, as one signed update of this
// node (default: none, and such a document is refused with
// CodeLegacyDocument). See docs/security.md.
func WithLegacyRepair(agent func(doc string) (string, bool)) Option {
	return func(c *config) error { c.repair = agent; return nil }
}

// WithSourceCheck sets the check of every update's source agent, local and
// remote (default: the source's host must be the publisher).
func WithSourceCheck(f SourceCheck) Option {
	return func(c *config) error { c.check = f; return nil }
}

// Manager owns the open documents of one node.
type Manager struct {
	h        host.Host
	key      crypto.PrivKey
	ps       *pubsub.PubSub
	swarm    string
	replica  string
	store    Store
	interval time.Duration
	log      *zap.SugaredLogger
	check    SourceCheck
	events   func(SecurityEvent)
	repair   func(doc string) (string, bool)

	mu      sync.Mutex
	docs    map[string]*Doc
	closing map[string]chan struct{} // documents being closed; closed when done (see closeDoc)
	started bool
	closed  bool

	distrusts  map[peer.ID]time.Time // peers not asked for catch-ups until then (see distrust)
	heldKick   chan struct{}         // a document started holding updates (see antiEntropy)
	afterRound func(holding bool)    // tests: called after each anti-entropy round
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	sub        event.Subscription
	rejected   atomic.Uint64
}

// New returns a Manager; it starts nothing. Defaults: anti-entropy every
// 10 s ([WithCatchupInterval]), an update's source must be hosted by its
// publisher ([WithSourceCheck]), no security events ([WithSecurityEvents]),
// no repair of documents stored unsigned ([WithLegacyRepair]). The host's
// private key signs this node's updates.
func New(h host.Host, ps *pubsub.PubSub, swarm string, store Store, opts ...Option) (*Manager, error) {
	if h == nil || ps == nil || store == nil || swarm == "" {
		return nil, errors.New("crdt: New needs a host, a pubsub, a swarm name and a store")
	}
	c := config{interval: defaultCatchupInterval}
	for i, o := range opts {
		if err := o(&c); err != nil {
			return nil, fmt.Errorf("crdt: option %d: %w", i, err)
		}
	}
	key := h.Peerstore().PrivKey(h.ID())
	if key == nil {
		return nil, errors.New("crdt: New needs the host's private key in its peerstore")
	}
	m := &Manager{h: h, key: key, ps: ps, swarm: swarm, replica: h.ID().String(), store: store, interval: c.interval,
		check: c.check, events: c.events, repair: c.repair,
		docs: map[string]*Doc{}, closing: map[string]chan struct{}{}, heldKick: make(chan struct{}, 1), log: log.With("self", h.ID().String()[len(h.ID().String())-6:])}
	return m, nil
}

// Start serves catch-up requests, reopens the documents in the store and
// follows new peers to catch up with them.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started || m.closed {
		m.mu.Unlock()
		return nil
	}
	sub, err := m.h.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
	if err != nil {
		m.mu.Unlock()
		return fmt.Errorf("crdt: %w", err)
	}
	m.sub = sub
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.started = true
	m.h.SetStreamHandler(ID, m.serve)
	m.wg.Go(m.followPeers)
	m.wg.Go(m.antiEntropy)
	m.mu.Unlock()
	names, err := m.store.DocNames()
	if err != nil {
		return fmt.Errorf("crdt: list stored documents: %w", err)
	}
	for _, n := range names {
		if _, err := m.Open(ctx, n); err != nil {
			m.log.Warnw("cannot reopen document", "doc", n, "err", err)
		}
	}
	return nil
}

// Close stops every document (their goroutines, subscriptions and
// catch-ups), stops serving catch-ups and following peers, and waits for
// every goroutine it started. What was received and not stored yet is
// stored first. Idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	started := m.started
	docs := make([]*Doc, 0, len(m.docs))
	for _, d := range m.docs {
		docs = append(docs, d)
	}
	m.mu.Unlock()
	if !started {
		return nil
	}
	m.h.RemoveStreamHandler(ID)
	m.cancel()
	_ = m.sub.Close()
	for _, d := range docs {
		d.stop()
	}
	for _, d := range docs {
		d.wg.Wait()
	}
	m.wg.Wait()
	return nil
}

// Rejected counts updates refused: undecodable (CRDT_DESERIALIZATION_FAILED),
// forged or invalid (CodeForgedUpdate, CodeInvalidUpdate), on gossip and
// in catch-up answers.
func (m *Manager) Rejected() uint64 { return m.rejected.Load() }

// Replica is this node's replica id.
func (m *Manager) Replica() string { return m.replica }

// Open returns the document name, opening it on first use: from the
// store, then a catch-up with every connected peer, sent at once. It
// returns when those peers answered (or after openWait, or when ctx
// ends): whoever opens a document sees it current. The document stays
// open, listed and in sync until Forget or Close.
func (m *Manager) Open(ctx context.Context, name string) (*Doc, error) {
	d, err := m.open(name, false)
	if err != nil {
		return nil, err
	}
	d.waitReady(ctx)
	return d, nil
}

// Watch opens name as Open does and subscribes to its changes before the
// catch-up that opening sends: the watcher sees what it brings.
func (m *Manager) Watch(ctx context.Context, name string, buffer int) (*Doc, *Watch, error) {
	d, err := m.open(name, false)
	if err != nil {
		return nil, nil, err
	}
	w := d.Watch(buffer)
	d.waitReady(ctx)
	return d, w, nil
}

// Lookup returns the document name if this node holds it or, once the
// catch-up that opening sends has been answered, a connected peer does.
// Otherwise it returns a *NotFoundError and leaves nothing behind: the
// document is closed again, nothing was stored, it is not listed. A
// document opened meanwhile by Open or Watch stays open.
func (m *Manager) Lookup(ctx context.Context, name string) (*Doc, error) {
	d, err := m.open(name, true)
	if err != nil {
		return nil, err
	}
	d.waitReady(ctx)
	m.mu.Lock()
	if m.docs[name] != d {
		// Another Lookup found nothing and closed it, or Forget did.
		m.mu.Unlock()
		return nil, &NotFoundError{Doc: name}
	}
	if !d.probe || !d.unknown() {
		d.probe = false
		m.mu.Unlock()
		return d, nil
	}
	delete(m.docs, name)
	done := make(chan struct{})
	m.closing[name] = done
	m.mu.Unlock()
	d.close()
	m.mu.Lock()
	delete(m.closing, name)
	close(done)
	m.mu.Unlock()
	return nil, &NotFoundError{Doc: name}
}

// CodeDocNotFound: no document of that name on this node nor on its
// connected peers (Lookup, Forget).
const CodeDocNotFound = "DOC_NOT_FOUND"

// NotFoundError is a document that neither this node nor, for Lookup, its
// connected peers hold.
type NotFoundError struct{ Doc string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("crdt: no document %q on this node or its connected peers", e.Doc)
}

// Code is CodeDocNotFound.
func (e *NotFoundError) Code() string { return CodeDocNotFound }

// Forget closes the document name on this node and deletes what the node
// stored of it: its goroutines and catch-ups stop, its watchers end, it
// leaves its topics and is no longer listed. The other nodes keep their
// copies; opening it again later catches up from them. A document neither
// open nor stored is a *NotFoundError.
func (m *Manager) Forget(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("crdt: document name %q: letters, digits, '_', '.', '-', at most 64", name)
	}
	m.mu.Lock()
	for {
		if m.closed || !m.started {
			m.mu.Unlock()
			return errors.New("crdt: manager not running")
		}
		done, busy := m.closing[name]
		if !busy {
			break
		}
		m.mu.Unlock()
		<-done
		m.mu.Lock()
	}
	d := m.docs[name]
	delete(m.docs, name)
	done := make(chan struct{})
	m.closing[name] = done
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.closing, name)
		close(done)
		m.mu.Unlock()
	}()
	if d == nil {
		names, err := m.store.DocNames()
		if err != nil {
			return fmt.Errorf("crdt: list stored documents: %w", err)
		}
		if !slices.Contains(names, name) {
			return &NotFoundError{Doc: name}
		}
	} else {
		d.close()
	}
	if err := m.store.DeleteDoc(name); err != nil {
		return fmt.Errorf("crdt: delete %s from the store: %w", name, err)
	}
	return nil
}

// open returns the open document name, or opens it and sends its first
// catch-up. probe marks a document opened by Lookup (see there); any
// other open clears the mark.
func (m *Manager) open(name string, probe bool) (*Doc, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("crdt: document name %q: letters, digits, '_', '.', '-', at most 64", name)
	}
	m.mu.Lock()
	for {
		if m.closed || !m.started {
			m.mu.Unlock()
			return nil, errors.New("crdt: manager not running")
		}
		if d := m.docs[name]; d != nil {
			if !probe {
				d.probe = false
			}
			m.mu.Unlock()
			return d, nil
		}
		done, busy := m.closing[name]
		if !busy {
			break
		}
		// Being forgotten: it leaves its topics first.
		m.mu.Unlock()
		<-done
		m.mu.Lock()
	}
	d, err := m.openLocked(name)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	d.probe = probe
	m.docs[name] = d
	m.mu.Unlock()
	d.startCatchUp()
	return d, nil
}

// openWait bounds how long Open waits for the first catch-up's answers.
const openWait = 2 * time.Second

func (m *Manager) openLocked(name string) (*Doc, error) {
	d, err := m.load(name)
	if err != nil {
		return nil, err
	}
	d.log.allow = func(u *Update) error {
		if m.check == nil {
			return nil
		}
		return m.check(name, u.Agent, u.Signer)
	}
	topic := Topic(m.swarm, name)
	if err := m.ps.RegisterTopicValidator(topic, d.validate); err != nil {
		return nil, fmt.Errorf("crdt: validator for %s: %w", name, err)
	}
	t, err := m.ps.Join(topic)
	if err != nil {
		_ = m.ps.UnregisterTopicValidator(topic)
		return nil, fmt.Errorf("crdt: join %s: %w", topic, err)
	}
	// Rejected updates count against their sender's GossipSub score (when
	// the node scores peers: otherwise this is refused, and ignored).
	_ = t.SetScoreParams(&pubsub.TopicScoreParams{TopicWeight: 1, TimeInMeshQuantum: time.Second,
		InvalidMessageDeliveriesWeight: -100, InvalidMessageDeliveriesDecay: 0.5})
	sub, err := t.Subscribe(pubsub.WithBufferSize(4096))
	if err != nil {
		_ = t.Close()
		_ = m.ps.UnregisterTopicValidator(topic)
		return nil, fmt.Errorf("crdt: subscribe %s: %w", topic, err)
	}
	d.topic, d.sub = t, sub
	d.ctx, d.cancel = context.WithCancel(m.ctx)
	d.wg.Go(d.readLoop)
	if err := d.startDigest(); err != nil {
		m.log.Warnw("no clock digests for this document", "doc", name, "err", err)
	}
	return d, nil
}

// Docs lists the open documents.
func (m *Manager) Docs() []*Doc {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Doc, 0, len(m.docs))
	for _, d := range m.docs {
		out = append(out, d)
	}
	return out
}

// followPeers catches every open document up with each new peer that
// speaks the catch-up protocol.
func (m *Manager) followPeers() {
	for {
		select {
		case <-m.ctx.Done():
			return
		case e, ok := <-m.sub.Out():
			if !ok {
				return
			}
			evt := e.(event.EvtPeerIdentificationCompleted)
			speaks := false
			for _, p := range evt.Protocols {
				speaks = speaks || p == ID
			}
			if !speaks {
				continue
			}
			for _, d := range m.Docs() {
				d.catchUpFrom(evt.Peer)
			}
		}
	}
}

// antiEntropy asks a random topic peer of each document for what it lacks:
// every interval, and every 200 ms while the document holds updates it
// cannot apply yet (a gap its neighbours could not fill at once). It wakes
// only for those rounds: a 200 ms ticker that looked for held updates was
// an idle node's most frequent wake-up.
func (m *Manager) antiEntropy() {
	const fast = 200 * time.Millisecond
	last := time.Now()
	next := last.Add(m.interval)
	t := time.NewTimer(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.heldKick:
			// A document started holding updates: a fast round, unless one
			// comes sooner anyway.
			if soon := time.Now().Add(fast); soon.Before(next) {
				next = soon
				t.Reset(fast)
			}
			continue
		case <-t.C:
		}
		due := time.Since(last) >= m.interval
		if due {
			last = time.Now()
		}
		holding := false
		for _, d := range m.Docs() {
			d.flush()
			h := d.holding()
			if due || h {
				d.recheck()
				h = d.holding()
			}
			holding = holding || h
			if !due && !h {
				continue
			}
			if p := d.takeGapPeer(); h && p != "" && m.h.Network().Connectedness(p) == network.Connected {
				d.catchUpFrom(p)
				continue
			}
			peers := d.topic.ListPeers()
			if len(peers) > 0 {
				d.catchUpFrom(peers[rand.IntN(len(peers))])
			}
		}
		wait := m.interval - time.Since(last)
		if holding {
			wait = min(wait, fast)
		}
		next = time.Now().Add(wait)
		t.Reset(wait)
		if m.afterRound != nil {
			m.afterRound(holding)
		}
	}
}

// kickHeld tells antiEntropy that a document holds updates (see there).
func (m *Manager) kickHeld() {
	select {
	case m.heldKick <- struct{}{}:
	default:
	}
}

func (m *Manager) doc(name string) *Doc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.docs[name]
}
