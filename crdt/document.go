package crdt

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
)

// Doc is one replicated document. Its state has one owner, mu.
type Doc struct {
	m      *Manager
	name   string
	topic  *pubsub.Topic
	sub    *pubsub.Subscription
	dtopic *pubsub.Topic
	dsub   *pubsub.Subscription

	ctx    context.Context    // ends when the document stops
	cancel context.CancelFunc //
	wg     sync.WaitGroup     // the document's goroutines (see spawn)
	ready  chan struct{}      // closed when the first catch-up is answered (see startCatchUp)
	// digestNow asks digestLoop for a digest at once: a peer joined the
	// document's digest topic (see followJoins).
	digestNow chan struct{}
	// digestReset tells digestLoop that something disagrees with the
	// digest it last published; heard counts the digests equal to this
	// node's own in the current interval (see digestLoop).
	digestReset chan struct{}
	heard       atomic.Int64
	joins       []*pubsub.TopicEventHandler // peers joining the document's topics (see followJoins)
	probe       bool                        // opened by Lookup alone; under m.mu

	mu        sync.Mutex
	opening   int       // catch-ups of the first round not answered yet
	lastLocal time.Time // when this node last wrote the document
	log       *docLog
	marked    bool // the store holds this document in the signed format
	watchers  map[*Watch]struct{}
	stopped   bool
	aheadBy   map[peer.ID]claim // what each peer's latest digest showed this node lacking (see claim)
	catching  map[peer.ID]bool  // catch-ups under way, and whether one more was asked for (see catchUpFrom)
	gapPeer   peer.ID           // the neighbour that forwarded the last update held for a gap
	unsaved   [][]byte          // received updates applied, not yet in the store (see flush)
	saved     time.Time         // when the first of unsaved was applied
	saveMu    sync.Mutex        // one flush at a time; taken before mu, never under it
}

// takeGapPeer returns and forgets the neighbour that forwarded the last
// update held for a gap.
func (d *Doc) takeGapPeer() peer.ID {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.gapPeer
	d.gapPeer = ""
	return p
}

// Change is what a watcher sees: who changed the document, which paths, and
// the clock after the change.
type Change struct {
	Doc    string              `json:"doc"`
	Source string              `json:"source"`
	Paths  []string            `json:"paths"`
	Clock  delta.VersionVector `json:"clock"`
	Remote bool                `json:"remote"`
}

// Watch receives changes. Its channel is buffered; when the watcher falls
// behind, changes are dropped (never blocking the document) and counted.
type Watch struct {
	C       <-chan Change
	c       chan Change
	d       *Doc
	dropped uint64
}

// Close ends the watch.
func (w *Watch) Close() {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	if _, ok := w.d.watchers[w]; ok {
		delete(w.d.watchers, w)
		close(w.c)
	}
}

// Dropped counts changes the watcher missed.
func (w *Watch) Dropped() uint64 {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.dropped
}

// Watch returns a subscription to the document's changes.
func (d *Doc) Watch(buffer int) *Watch {
	if buffer <= 0 {
		buffer = 256
	}
	c := make(chan Change, buffer)
	w := &Watch{C: c, c: c, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		close(c)
		return w
	}
	d.watchers[w] = struct{}{}
	return w
}

// Name is the document's name.
func (d *Doc) Name() string { return d.name }

// Get returns the value at path (last writer wins), as JSON.
func (d *Doc) Get(path string) (json.RawMessage, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.d.Get(path)
}

// Values returns every concurrent value at path, the winner first.
func (d *Doc) Values(path string) []json.RawMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.d.Values(path)
}

// JSON returns the whole document.
func (d *Doc) JSON() json.RawMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.d.JSON()
}

// Clock returns the document's vector clock.
func (d *Doc) Clock() delta.VersionVector {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.d.Clock()
}

// Set writes value (JSON) at path, on behalf of agent.
func (d *Doc) Set(ctx context.Context, agent, path string, value json.RawMessage) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) { return d.log.d.Set(path, value) })
}

// Delete removes path and everything below it.
func (d *Doc) Delete(ctx context.Context, agent, path string) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) { return d.log.d.Delete(path) })
}

// SetAdd adds elem to the set at path. A path that holds something other
// than a set is refused with a *KindError.
func (d *Doc) SetAdd(ctx context.Context, agent, path string, elem json.RawMessage) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) {
		if err := d.checkKindLocked("add", path); err != nil {
			return nil, err
		}
		return d.log.d.SetAdd(path, elem)
	})
}

// SetRemove removes elem from the set at path. A path that holds something
// other than a set is refused with a *KindError.
func (d *Doc) SetRemove(ctx context.Context, agent, path string, elem json.RawMessage) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) {
		if err := d.checkKindLocked("remove", path); err != nil {
			return nil, err
		}
		return d.log.d.SetRemove(path, elem)
	})
}

// Incr adds by (negative: subtracts) to the counter at path. A path that
// holds something other than an integer is refused with a *KindError.
func (d *Doc) Incr(ctx context.Context, agent, path string, by int64) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) {
		if err := d.checkKindLocked("incr", path); err != nil {
			return nil, err
		}
		return d.log.d.Incr(path, by)
	})
}

// mutate makes one update: sign, join, persist, notify, then publish. f
// runs under d.mu, so a rule it checks (checkKindLocked) holds for the
// state it changes.
func (d *Doc) mutate(ctx context.Context, agent string, f func() (*delta.Delta, error)) error {
	if d.m.check != nil {
		if err := d.m.check(d.name, agent, d.m.h.ID()); err != nil {
			return err
		}
	}
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return errors.New("crdt: document closed")
	}
	x, err := f()
	if err != nil {
		d.mu.Unlock()
		return err
	}
	u, err := d.log.local(d.m.key, agent, x, time.Now().UnixMilli())
	if err != nil {
		d.mu.Unlock()
		return err
	}
	if err := d.persistLocked(u); err != nil {
		d.mu.Unlock()
		return err
	}
	d.notifyLocked(Change{Doc: d.name, Source: agent, Paths: x.Paths(), Clock: d.log.d.Clock()})
	d.lastLocal = time.Now()
	d.mu.Unlock()
	if err := d.topic.Publish(ctx, u.Raw); err != nil {
		// Stored locally; peers will get it by catch-up.
		d.m.log.Debugw("publish failed; peers will catch up", "doc", d.name, "err", err)
	}
	return nil
}

// persistLocked appends this node's signed update u to the document's
// log in the store, with the received updates not written yet, before u
// is published: a replica's own dots are never published unpersisted.
func (d *Doc) persistLocked(u *Update) error {
	d.unsaved = append(d.unsaved, u.Raw)
	return d.flushLocked()
}

// Received updates are written in batches (flush): at most saveBatch of
// them, or saveEvery after the first, and at the end of each catch-up
// answer, each anti-entropy round and when the document stops. A
// node that crashes loses at most those, which its peers still hold and
// catch-up brings back; one store transaction per received update made
// the store, not the network, the bottleneck of a busy document.
const (
	saveBatch = 256
	saveEvery = 100 * time.Millisecond
)

// queueLocked records a received update applied, to be written by the
// next flush.
func (d *Doc) queueLocked(u *Update) {
	if len(d.unsaved) == 0 {
		d.saved = time.Now()
	}
	d.unsaved = append(d.unsaved, u.Raw)
}

// flushDue reports whether the unsaved updates are due to be written.
func (d *Doc) flushDue() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.unsaved) >= saveBatch || (len(d.unsaved) > 0 && time.Since(d.saved) >= saveEvery)
}

// flushLocked writes the unsaved updates to the store (the first time,
// marking the document as stored in the signed format, which empties
// whatever an older format left).
func (d *Doc) flushLocked() error {
	if len(d.unsaved) == 0 {
		return nil
	}
	if !d.marked {
		if err := d.m.store.SaveDoc(d.name, storeMarker(nil)); err != nil {
			return fmt.Errorf("crdt: persist %s: %w", d.name, err)
		}
		d.marked = true
	}
	if err := d.m.store.AppendDeltas(d.name, d.unsaved); err != nil {
		return fmt.Errorf("crdt: persist %s: %w", d.name, err)
	}
	d.unsaved = nil
	return nil
}

// flush writes the unsaved updates, outside d.mu (a store transaction
// waits for the disk; writers and readers of the document need not).
// saveMu keeps one flush at a time.
func (d *Doc) flush() {
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	d.mu.Lock()
	var err error
	if !d.marked && len(d.unsaved) > 0 {
		// Under mu: marking empties the store's log, which must not race
		// with persistLocked writing this node's own update.
		if err = d.m.store.SaveDoc(d.name, storeMarker(nil)); err == nil {
			d.marked = true
		}
	}
	batch := d.unsaved
	if err == nil {
		d.unsaved = nil
	}
	d.mu.Unlock()
	if err == nil && len(batch) > 0 {
		err = d.m.store.AppendDeltas(d.name, batch)
	}
	if err != nil {
		d.m.log.Errorw("cannot persist joined updates; peers will send them again", "doc", d.name, "err", err)
	}
}

func (d *Doc) notifyLocked(c Change) {
	d.resetDigest()
	for w := range d.watchers {
		select {
		case w.c <- c:
		default:
			w.dropped++
		}
	}
}

// validate is the topic validator: Reject what does not decode, is not
// signed by the replica whose dots it mints, breaks a rule of updates
// (DecodeUpdate) or the write rule, or belongs to another document; Ignore
// what this node already holds; Accept (relay) the rest, including what
// the write rule cannot check yet here (the source's card is unknown),
// which is held until it can.
func (d *Doc) validate(_ context.Context, _ peer.ID, pm *pubsub.Message) pubsub.ValidationResult {
	publisher := pm.GetFrom()
	if publisher == d.m.h.ID() && pm.ReceivedFrom == d.m.h.ID() {
		return pubsub.ValidationAccept // this node's own update, made and applied by mutate
	}
	d.mu.Lock()
	known := d.log.has(sha256.Sum256(pm.Data))
	d.mu.Unlock()
	if known {
		return pubsub.ValidationIgnore // before paying for the signature
	}
	u, err := DecodeUpdate(pm.Data)
	if err == nil && u.Doc != d.name {
		err = updateErr(CodeInvalidUpdate, nil, "update of document %q on the topic of %q", u.Doc, d.name)
	}
	if err != nil {
		d.m.refuse(d.name, publisher, err)
		return pubsub.ValidationReject
	}
	if d.m.check != nil {
		// An update whose source's card is unknown here is relayed (nodes
		// that know the card apply it) and held, not applied, until the
		// card arrives (docLog.add).
		if err := d.m.check(d.name, u.Agent, u.Signer); err != nil && !errors.Is(err, ErrUnverifiable) {
			d.m.log.Debugw("update refused by the write rule", "doc", d.name, "source", u.Agent, "peer", publisher, "err", err)
			return pubsub.ValidationReject
		}
	}
	pm.ValidatorData = u
	return pubsub.ValidationAccept
}

func (d *Doc) readLoop() {
	for {
		pm, err := d.sub.Next(d.ctx)
		if err != nil {
			return
		}
		u, ok := pm.ValidatorData.(*Update)
		if !ok {
			continue
		}
		d.mu.Lock()
		gap, err := d.addLocked(u, pm.ReceivedFrom, true)
		d.mu.Unlock()
		if d.flushDue() {
			d.flush()
		}
		if err != nil {
			d.m.refuse(d.name, pm.ReceivedFrom, err)
			continue
		}
		if gap {
			// What the update names is most likely still on its way by
			// gossip: the next fast anti-entropy round (200 ms) asks the
			// neighbour that forwarded it (connected, and holding what it
			// names, or soon) for whatever is still missing then. Asking at
			// once fetched, under load, mostly updates already in flight.
			d.mu.Lock()
			d.gapPeer = pm.ReceivedFrom
			d.mu.Unlock()
		}
	}
}

// addLocked adds a received update to the log, persists and notifies what
// it applied, and reports equivocations; gap reports that it is held
// (it names updates this node lacks). Caller holds d.mu.
func (d *Doc) addLocked(u *Update, from peer.ID, notify bool) (gap bool, err error) {
	if d.stopped {
		return false, nil
	}
	res, err := d.log.add(u, from.String())
	if err != nil {
		return false, err
	}
	d.afterAddLocked(res, from, notify)
	gap = res.pending && !res.duplicate
	if gap {
		d.m.kickHeld() // fast anti-entropy rounds retry it while it waits
	}
	return gap, nil
}

func (d *Doc) afterAddLocked(res addResult, from peer.ID, notify bool) {
	for _, a := range res.applied {
		d.queueLocked(a)
		if notify {
			d.notifyLocked(Change{Doc: d.name, Source: a.Agent, Paths: pathsOf(a), Clock: d.log.d.Clock(), Remote: true})
		}
	}
	for _, r := range res.equivocate {
		d.m.security(SecurityEvent{Code: CodeEquivocation, Doc: d.name, Peer: from, Replica: r,
			Detail: fmt.Sprintf("replica %s signed two updates minting the same dots of %s; both are kept and relayed", r, d.name)})
	}
	if res.dropped > 0 {
		d.m.log.Debugw("pending updates dropped", "doc", d.name, "peer", from, "dropped", res.dropped)
	}
}

// pathsOf returns the paths an applied update wrote.
func pathsOf(u *Update) []string { return u.paths }

// holding reports whether d holds updates it cannot apply yet.
func (d *Doc) holding() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.pendingCount() > 0
}

// recheck retries held updates (a card they wait for may have arrived).
func (d *Doc) recheck() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.afterAddLocked(d.log.recheck(), "", true)
}

// spawn runs f as one of the document's goroutines, unless it stopped.
func (d *Doc) spawn(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return false
	}
	d.wg.Go(f)
	return true
}

// startCatchUp sends the document's first catch-up, at once, to every
// connected peer (a peer that does not hold the document answers so at
// once), and closes d.ready when all have answered.
func (d *Doc) startCatchUp() {
	peers := d.m.h.Network().Peers()
	d.mu.Lock()
	d.opening = len(peers)
	d.mu.Unlock()
	for _, p := range peers {
		if !d.spawn(func() {
			_ = d.catchUp(d.ctx, p)
			d.answered()
		}) {
			d.answered()
		}
	}
	if len(peers) == 0 {
		close(d.ready)
	}
}

// answered counts one answer (or failure) of the first catch-up.
func (d *Doc) answered() {
	d.mu.Lock()
	d.opening--
	last := d.opening == 0
	d.mu.Unlock()
	if last {
		close(d.ready)
	}
}

// waitReady waits until the first catch-up is answered, openWait passed
// or ctx ended.
func (d *Doc) waitReady(ctx context.Context) {
	t := time.NewTimer(openWait)
	defer t.Stop()
	select {
	case <-d.ready:
	case <-t.C:
	case <-ctx.Done():
	}
}

// unknown reports whether the document holds nothing: no update applied
// or held, nothing in the store.
func (d *Doc) unknown() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.log.order) == 0 && d.log.pendingCount() == 0 && len(d.unsaved) == 0 && !d.marked
}

// stop ends the document: what was received and not stored yet is stored,
// watchers end, its goroutines and catch-ups are told to stop (close
// waits for them).
func (d *Doc) stop() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.stopped = true
	if err := d.flushLocked(); err != nil {
		d.m.log.Errorw("cannot persist joined updates", "doc", d.name, "err", err)
	}
	for w := range d.watchers {
		delete(d.watchers, w)
		close(w.c)
	}
	d.mu.Unlock()
	d.cancel()
	for _, h := range d.joins {
		h.Cancel()
	}
	d.sub.Cancel()
	_ = d.m.ps.UnregisterTopicValidator(Topic(d.m.swarm, d.name))
	_ = d.topic.Close()
	if d.dsub != nil {
		d.dsub.Cancel()
		_ = d.dtopic.Close()
	}
}

// close stops the document, waits for its goroutines and for a store
// write under way, and leaves its topics, so that it can be opened again.
func (d *Doc) close() {
	d.stop()
	d.wg.Wait()
	d.saveMu.Lock() // a flush that took its batch before stop writes it first
	d.saveMu.Unlock()
	leave(d.sub, d.topic)
	if d.dsub != nil {
		leave(d.dsub, d.dtopic)
	}
}

// leave waits until GossipSub dropped the cancelled subscription sub (its
// channel closes), then closes its topic: a topic with a subscription
// left cannot close, and could not be joined again.
func leave(sub *pubsub.Subscription, t *pubsub.Topic) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, err := sub.Next(ctx); err != nil {
			break
		}
	}
	if err := t.Close(); err != nil {
		log.Debugw("cannot leave document topic", "topic", t.String(), "err", err)
	}
}

// Info summarises a document for listings.
type Info struct {
	Name  string              `json:"name"`
	Clock delta.VersionVector `json:"clock"`
	Peers int                 `json:"peers"`
	Held  int                 `json:"held"` // updates waiting for what they depend on
	Paths int                 `json:"paths"`
	// PeersAhead: a peer's digest shows updates this node has not got yet
	// (a catch-up is under way).
	PeersAhead bool `json:"peersAhead"`
	// Updates is the number of signed updates the document's log holds.
	Updates int `json:"updates"`
	// Equivocating lists replicas seen signing two updates with the same
	// dots (a security event was raised for each).
	Equivocating []string `json:"equivocating,omitempty"`
	// CatchingUp: a catch-up asked of a peer has not been answered yet
	// (the one sent when the document opened, or a later one); until it
	// is, the document may lack what that peer holds.
	CatchingUp bool `json:"catchingUp"`
}

// Info returns the document's summary.
func (d *Doc) Info() Info {
	d.mu.Lock()
	defer d.mu.Unlock()
	clock := d.log.d.Clock()
	ahead := d.peersAheadLocked(clock, time.Now())
	return Info{Name: d.name, Clock: clock, Peers: len(d.topic.ListPeers()), Held: d.log.pendingCount(), Paths: len(d.log.d.Paths()),
		PeersAhead: ahead, Updates: len(d.log.order), Equivocating: d.log.forkedList(), CatchingUp: d.opening > 0 || len(d.catching) > 0}
}
