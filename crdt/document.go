package crdt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
)

// maxHeld bounds the deltas a document keeps while it waits for a catch-up.
const maxHeld = 1024

// Doc is one replicated document. Its state has one owner, mu.
type Doc struct {
	m      *Manager
	name   string
	topic  *pubsub.Topic
	sub    *pubsub.Subscription
	dtopic *pubsub.Topic
	dsub   *pubsub.Subscription

	mu       sync.Mutex
	d        *delta.Doc
	held     []held
	watchers map[*Watch]struct{}
	stopped  bool
	logged   int               // deltas in the store's log since the last snapshot
	aheadBy  map[peer.ID]claim // what each peer's latest digest showed this node lacking (see claim)
	catching map[peer.ID]bool  // catch-ups under way, and whether one more was asked for (see catchUpFrom)
}

type held struct {
	clock delta.VersionVector
	x     *delta.Delta
	src   string
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
	return d.d.Get(path)
}

// Values returns every concurrent value at path, the winner first.
func (d *Doc) Values(path string) []json.RawMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.d.Values(path)
}

// JSON returns the whole document.
func (d *Doc) JSON() json.RawMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.d.JSON()
}

// Clock returns the document's vector clock.
func (d *Doc) Clock() delta.VersionVector {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.d.Clock()
}

// Set writes value (JSON) at path, on behalf of agent.
func (d *Doc) Set(ctx context.Context, agent, path string, value json.RawMessage) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) { return d.d.Set(path, value) })
}

// Delete removes path and everything below it.
func (d *Doc) Delete(ctx context.Context, agent, path string) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) { return d.d.Delete(path) })
}

// SetAdd adds elem to the set at path. A path that holds something other
// than a set is refused with a *KindError.
func (d *Doc) SetAdd(ctx context.Context, agent, path string, elem json.RawMessage) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) {
		if err := d.checkKindLocked("add", path); err != nil {
			return nil, err
		}
		return d.d.SetAdd(path, elem)
	})
}

// SetRemove removes elem from the set at path. A path that holds something
// other than a set is refused with a *KindError.
func (d *Doc) SetRemove(ctx context.Context, agent, path string, elem json.RawMessage) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) {
		if err := d.checkKindLocked("remove", path); err != nil {
			return nil, err
		}
		return d.d.SetRemove(path, elem)
	})
}

// Incr adds by (negative: subtracts) to the counter at path. A path that
// holds something other than an integer is refused with a *KindError.
func (d *Doc) Incr(ctx context.Context, agent, path string, by int64) error {
	return d.mutate(ctx, agent, func() (*delta.Delta, error) {
		if err := d.checkKindLocked("incr", path); err != nil {
			return nil, err
		}
		return d.d.Incr(path, by)
	})
}

// mutate makes one update: join, persist, notify, then publish. f runs
// under d.mu, so a rule it checks (checkKindLocked) holds for the state it
// changes.
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
	d.d.Join(x)
	if err := d.persistLocked(x); err != nil {
		d.mu.Unlock()
		return err
	}
	clock := d.d.Clock()
	d.notifyLocked(Change{Doc: d.name, Source: agent, Paths: x.Paths(), Clock: clock})
	msg, err := delta.NewSyncMessage(agent, clock, x, time.Now().UnixMilli())
	var data []byte
	if err == nil {
		data, err = delta.EncodeSyncMessage(msg)
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	if err := d.topic.Publish(ctx, data); err != nil {
		// Stored locally; peers will get it by catch-up.
		d.m.log.Debugw("publish failed; peers will catch up", "doc", d.name, "err", err)
	}
	return nil
}

// persistLocked logs the joined delta x, or writes a snapshot (x == nil,
// or every snapshotEvery deltas) which empties the log.
func (d *Doc) persistLocked(x *delta.Delta) error {
	if x != nil && d.logged < snapshotEvery {
		b, err := delta.EncodeDelta(x)
		if err == nil {
			if err = d.m.store.AppendDelta(d.name, b); err == nil {
				d.logged++
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("crdt: persist %s: %w", d.name, err)
		}
	}
	b, err := delta.EncodeDoc(d.d)
	if err != nil {
		return err
	}
	if err := d.m.store.SaveDoc(d.name, b); err != nil {
		return fmt.Errorf("crdt: persist %s: %w", d.name, err)
	}
	d.logged = 0
	return nil
}

func (d *Doc) notifyLocked(c Change) {
	for w := range d.watchers {
		select {
		case w.c <- c:
		default:
			w.dropped++
		}
	}
}

type incoming struct {
	msg *delta.SyncMessage
	x   *delta.Delta
}

// validate is the topic validator (see the package doc).
func (d *Doc) validate(_ context.Context, _ peer.ID, pm *pubsub.Message) pubsub.ValidationResult {
	publisher := pm.GetFrom()
	msg, err := delta.DecodeSyncMessage(pm.Data)
	var x *delta.Delta
	if err == nil {
		x, err = msg.Delta()
	}
	if err != nil {
		d.m.rejected.Add(1)
		src := "unknown"
		if msg != nil {
			src = msg.SourceAgentID
		}
		d.m.log.Debugw("skipping undecodable update", "code", CodeDeserializationFailed, "doc", d.name, "source", src, "peer", publisher, "err", err)
		return pubsub.ValidationReject
	}
	for _, r := range x.Dots().Replicas() {
		if r != publisher.String() {
			d.m.log.Debugw("update minting another replica's dots refused", "doc", d.name, "peer", publisher, "replica", r)
			return pubsub.ValidationReject
		}
	}
	if _, host, ok := strings.Cut(msg.SourceAgentID, "@"); ok && host != publisher.String() {
		d.m.log.Debugw("update from an agent the publisher does not host refused", "doc", d.name, "source", msg.SourceAgentID, "peer", publisher)
		return pubsub.ValidationReject
	}
	if d.m.check != nil {
		if err := d.m.check(d.name, msg.SourceAgentID, publisher); err != nil {
			if errors.Is(err, ErrUnverifiable) {
				return pubsub.ValidationIgnore
			}
			d.m.log.Debugw("update refused", "doc", d.name, "source", msg.SourceAgentID, "peer", publisher, "err", err)
			return pubsub.ValidationReject
		}
	}
	d.mu.Lock()
	seen := d.d.Seen(x)
	d.mu.Unlock()
	if seen {
		return pubsub.ValidationIgnore
	}
	pm.ValidatorData = incoming{msg: msg, x: x}
	return pubsub.ValidationAccept
}

func (d *Doc) readLoop() {
	for {
		pm, err := d.sub.Next(d.m.ctx)
		if err != nil {
			return
		}
		in, ok := pm.ValidatorData.(incoming)
		if !ok {
			continue
		}
		gap := false
		d.mu.Lock()
		if !d.d.Seen(in.x) {
			if d.d.Ready(in.msg.VectorClock, in.x) {
				d.applyLocked(in.x, in.msg.SourceAgentID, true)
				d.drainHeldLocked()
			} else {
				if len(d.held) < maxHeld {
					d.held = append(d.held, held{clock: in.msg.VectorClock, x: in.x, src: in.msg.SourceAgentID})
				}
				gap = true
			}
		}
		d.mu.Unlock()
		if gap {
			d.m.kickHeld()
			// Ask the neighbour that forwarded the update (it is connected, and
			// has what the update depends on, or will soon), and the publisher
			// too when it is a direct peer.
			for _, p := range []peer.ID{pm.ReceivedFrom, pm.GetFrom()} {
				if p != "" && d.m.h.Network().Connectedness(p) == network.Connected {
					d.catchUpFrom(p)
				}
				if pm.ReceivedFrom == pm.GetFrom() {
					break
				}
			}
		}
	}
}

// applyLocked joins a remote delta, persists and notifies.
func (d *Doc) applyLocked(x *delta.Delta, src string, remote bool) {
	d.d.Join(x)
	if err := d.persistLocked(x); err != nil {
		d.m.log.Errorw("cannot persist a joined update", "doc", d.name, "err", err)
	}
	d.notifyLocked(Change{Doc: d.name, Source: src, Paths: x.Paths(), Clock: d.d.Clock(), Remote: remote})
}

// holding reports whether d holds updates it cannot apply yet.
func (d *Doc) holding() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held) > 0
}

// drainHeldLocked joins held deltas that have become ready.
func (d *Doc) drainHeldLocked() {
	for progress := true; progress; {
		progress = false
		kept := d.held[:0]
		for _, h := range d.held {
			switch {
			case d.d.Seen(h.x):
			case d.d.Ready(h.clock, h.x):
				d.applyLocked(h.x, h.src, true)
				progress = true
			default:
				kept = append(kept, h)
			}
		}
		d.held = kept
	}
}

func (d *Doc) stop() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.stopped = true
	for w := range d.watchers {
		delete(d.watchers, w)
		close(w.c)
	}
	d.mu.Unlock()
	d.sub.Cancel()
	_ = d.m.ps.UnregisterTopicValidator(Topic(d.m.swarm, d.name))
	_ = d.topic.Close()
	if d.dsub != nil {
		d.dsub.Cancel()
		_ = d.dtopic.Close()
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
}

// Info returns the document's summary.
func (d *Doc) Info() Info {
	d.mu.Lock()
	defer d.mu.Unlock()
	clock := d.d.Clock()
	ahead := d.peersAheadLocked(clock, time.Now())
	return Info{Name: d.name, Clock: clock, Peers: len(d.topic.ListPeers()), Held: len(d.held), Paths: len(d.d.Paths()), PeersAhead: ahead}
}
