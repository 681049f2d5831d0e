package crdt

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/streamscope"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// Catch-up: the asker sends one request frame, {doc, what it holds per
// replica (highest dot, digest of its updates' hashes)}; the server answers
// with one frame per signed update the asker lacks (docLog.since), in the
// order the server applied them (so each arrives after what it names),
// then an end frame. Every update is verified and checked against the
// write rule as if it came by gossip.
type catchupReq struct {
	Doc     string        `cbor:"d"`
	Holding []summaryWire `cbor:"h,omitempty"`
	// Pending are the hashes of updates the asker holds already but
	// cannot apply yet (it lacks what they name): not to be sent again.
	Pending [][]byte `cbor:"p,omitempty"`
}

type summaryWire struct {
	_       struct{} `cbor:",toarray"`
	Replica string
	Last    uint64
	Digest  []byte
	Head    []byte
	Forked  bool
}

type catchupFrame struct {
	Update []byte `cbor:"u,omitempty"`
	End    bool   `cbor:"z,omitempty"`
	Err    string `cbor:"e,omitempty"`
}

// The catch-up frames' size caps: a request is a document name and a
// summary of at most delta.MaxClockEntries replicas; an answer frame is
// one signed update; an answer holds at most catchupMaxUpdates frames.
const (
	catchupRequestMax = 8 << 20
	catchupFrameMax   = MaxUpdateSize + 64
	catchupMaxUpdates = 1 << 20
	catchupReadWindow = 1 << 20
)

var errBadDocName = errors.New("crdt: bad document name")

// readCatchupRequest reads one catch-up request from r (a peer's stream)
// and checks it: size, CBOR limits, a valid document name, a summary
// sorted by replica with valid ids, seqs and digests.
func readCatchupRequest(r io.Reader) (catchupReq, error) {
	body, err := frame.NewReader(r, catchupRequestMax).Next()
	if err != nil {
		return catchupReq{}, err
	}
	return decodeCatchupRequest(body)
}

func decodeCatchupRequest(body []byte) (catchupReq, error) {
	var req catchupReq
	if err := decMode.Unmarshal(body, &req); err != nil {
		return catchupReq{}, err
	}
	if !ValidName(req.Doc) {
		return catchupReq{}, errBadDocName
	}
	if len(req.Holding) > delta.MaxClockEntries {
		return catchupReq{}, errors.New("crdt: catch-up request names too many replicas")
	}
	if len(req.Pending) > maxPending {
		return catchupReq{}, errors.New("crdt: catch-up request names too many pending updates")
	}
	for _, h := range req.Pending {
		if len(h) != len(Hash{}) {
			return catchupReq{}, errors.New("crdt: bad pending hash in catch-up request")
		}
	}
	for i, h := range req.Holding {
		if (i > 0 && req.Holding[i-1].Replica >= h.Replica) || h.Replica == "" || len(h.Replica) > maxReplicaLen ||
			h.Last > MaxSeq || len(h.Digest) != len(Hash{}) || len(h.Head) != len(Hash{}) {
			return catchupReq{}, errors.New("crdt: bad catch-up request summary")
		}
	}
	return req, nil
}

func (req catchupReq) summary() []replicaSummary {
	out := make([]replicaSummary, len(req.Holding))
	for i, h := range req.Holding {
		out[i] = replicaSummary{Replica: h.Replica, Last: h.Last, Forked: h.Forked}
		copy(out[i].Digest[:], h.Digest)
		copy(out[i].Head[:], h.Head)
	}
	return out
}

func summaryToWire(s []replicaSummary) []summaryWire {
	out := make([]summaryWire, len(s))
	for i, r := range s {
		out[i] = summaryWire{Replica: r.Replica, Last: r.Last, Digest: bytes.Clone(r.Digest[:]), Head: bytes.Clone(r.Head[:]), Forked: r.Forked}
	}
	return out
}

// answerReader reads a catch-up answer's frames.
type answerReader struct {
	fr *frame.Reader
	n  int
}

func newAnswerReader(r io.Reader) *answerReader {
	return &answerReader{fr: frame.NewReader(r, catchupFrameMax)}
}

// next returns the next signed update of the answer, or done at its end.
func (a *answerReader) next() (update []byte, done bool, err error) {
	body, err := a.fr.Next()
	if err != nil {
		return nil, false, err
	}
	f, err := decodeCatchupFrame(body)
	if err != nil {
		return nil, false, err
	}
	switch {
	case f.Err != "":
		return nil, true, nil
	case f.End:
		return nil, true, nil
	}
	if a.n++; a.n > catchupMaxUpdates {
		return nil, false, undecodable{errors.New("too many updates in one answer")}
	}
	return f.Update, false, nil
}

func decodeCatchupFrame(body []byte) (catchupFrame, error) {
	var f catchupFrame
	if err := decMode.Unmarshal(body, &f); err != nil {
		return catchupFrame{}, undecodable{err}
	}
	if !f.End && f.Err == "" && len(f.Update) == 0 {
		return catchupFrame{}, undecodable{errors.New("empty frame")}
	}
	return f, nil
}

// undecodable is a frame that arrived whole and does not decode: the
// peer's fault, counted as rejected (a frame cut short may be the
// network's).
type undecodable struct{ err error }

func (e undecodable) Error() string { return CodeDeserializationFailed + ": " + e.err.Error() }
func (e undecodable) Unwrap() error { return e.err }

// The catch-up frames' codec: a request nests three levels (the request,
// its summary, an entry).
var (
	encMode = wirecodec.EncMode()
	decMode = wirecodec.NewDecMode(wirecodec.Limits{MaxNestedLevels: 8, MaxArrayElements: delta.MaxClockEntries, MaxMapPairs: delta.MaxClockEntries})
)

// catchUp asks p for the updates this document lacks and adds each, as
// it arrives, as if it came by gossip: verified, checked against the write
// rule, held until what it names is here. An update that fails those
// checks ends the answer and is reported (the peer sent it).
func (d *Doc) catchUp(ctx context.Context, p peer.ID) error {
	if p == d.m.h.ID() || d.m.distrusted(p) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, catchupTimeout)
	defer cancel()
	s, err := d.m.h.NewStream(ctx, p, ID)
	if err != nil {
		return err
	}
	mem, err := attachCatchup(s)
	if err != nil {
		s.Reset()
		return err
	}
	defer mem.Release()
	defer s.Close()
	d.mu.Lock()
	holding := d.log.summary()
	var pending [][]byte
	for h := range d.log.pending {
		pending = append(pending, bytes.Clone(h[:]))
	}
	d.mu.Unlock()
	req, err := encMode.Marshal(catchupReq{Doc: d.name, Holding: summaryToWire(holding), Pending: pending})
	if err != nil {
		s.Reset()
		return err
	}
	if err := frame.Write(s, req); err != nil {
		s.Reset()
		return err
	}
	_ = s.CloseWrite()
	// The reservation follows what is read, up to catchupReadWindow: the
	// answer is read one frame at a time, most of them small.
	ar := newAnswerReader(mem.CountReads(s, catchupReadWindow))
	var dl streamscope.Deadline
	started := time.Now()
	for {
		if time.Since(started) > catchupMaxDuration {
			s.Reset()
			return fmt.Errorf("crdt: catch-up answer from %s: longer than %v", p, catchupMaxDuration)
		}
		dl.Extend(catchupTimeout, s.SetReadDeadline) // a long answer goes on while frames come
		b, done, err := ar.next()
		if err != nil {
			s.Reset()
			if errors.As(err, new(undecodable)) {
				d.m.rejected.Add(1)
			}
			return fmt.Errorf("crdt: catch-up answer from %s: %w", p, err)
		}
		if done {
			d.flush()
			return nil
		}
		if err := d.addCaughtUp(b, p); err != nil {
			s.Reset()
			return err
		}
	}
}

// addCaughtUp verifies and adds one update of a catch-up answer from p.
func (d *Doc) addCaughtUp(b []byte, p peer.ID) error {
	d.mu.Lock()
	known := d.log.has(sha256.Sum256(b))
	d.mu.Unlock()
	if known {
		return nil
	}
	u, err := DecodeUpdate(b)
	if err == nil && u.Doc != d.name {
		err = updateErr(CodeInvalidUpdate, nil, "update of document %q in an answer for %q", u.Doc, d.name)
	}
	if err == nil && d.m.check != nil {
		if cerr := d.m.check(d.name, u.Agent, u.Signer); cerr != nil && !errors.Is(cerr, ErrUnverifiable) {
			d.m.log.Debugw("caught-up update refused by the write rule", "doc", d.name, "source", u.Agent, "peer", p, "err", cerr)
			return nil // not applied; the answer may go on (the server may not enforce the rule)
		}
	}
	if err != nil {
		d.m.refuse(d.name, p, err)
		d.m.distrust(p)
		return fmt.Errorf("crdt: catch-up answer from %s: %w", p, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.addLocked(u, p, true); err != nil {
		d.m.refuse(d.name, p, err)
		d.m.distrust(p)
		return fmt.Errorf("crdt: catch-up answer from %s: %w", p, err)
	}
	return nil
}

// serve answers one catch-up request: the signed updates the asker lacks.
func (m *Manager) serve(s network.Stream) {
	p := s.Conn().RemotePeer()
	mem, err := attachCatchup(s)
	if err != nil {
		m.log.Debugw("catch-up stream refused", "peer", p, "err", err)
		s.Reset()
		return
	}
	defer mem.Release()
	defer s.Close()
	req, err := readCatchupRequest(mem.CountReads(s, catchupRequestMax+frame.MaxVarintLen))
	if err != nil {
		m.log.Debugw("bad catch-up request", "peer", p, "err", err)
		s.Reset()
		return
	}
	var ups []*Update
	end := catchupFrame{End: true}
	if d := m.doc(req.Doc); d == nil {
		end = catchupFrame{Err: "unknown document"}
	} else {
		d.mu.Lock()
		ups = d.log.since(req.summary())
		ahead := askerAhead(req.Holding, d.log.d.Clock())
		d.mu.Unlock()
		if ahead {
			// The question shows what the asker holds: what it has and
			// this node lacks (an update it published before it could
			// reach this node, say) is asked for at once.
			d.catchUpFrom(p)
		}
		if len(req.Pending) > 0 {
			skip := make(map[Hash]bool, len(req.Pending))
			for _, h := range req.Pending {
				skip[Hash(h)] = true
			}
			ups = slices.DeleteFunc(ups, func(u *Update) bool { return skip[u.Hash] })
		}
	}
	held := mem.Held()
	bw := bufio.NewWriterSize(s, 64<<10)
	var dl streamscope.Deadline
	started := time.Now()
	for _, u := range ups {
		if time.Since(started) > catchupMaxDuration {
			s.Reset()
			return
		}
		dl.Extend(catchupTimeout, s.SetWriteDeadline)
		out, err := encMode.Marshal(catchupFrame{Update: u.Raw})
		if err != nil {
			s.Reset()
			return
		}
		if len(out)+bw.Size() > held {
			if err := mem.Grow(len(out) + bw.Size()); err != nil {
				m.log.Debugw("cannot reserve memory for catch-up answer", "peer", p, "bytes", len(out), "err", err)
				s.Reset()
				return
			}
			held = len(out) + bw.Size()
		}
		if err := frame.Write(bw, out); err != nil {
			s.Reset()
			return
		}
	}
	out, _ := encMode.Marshal(end)
	if err := frame.Write(bw, out); err != nil {
		s.Reset()
		return
	}
	if err := bw.Flush(); err != nil {
		s.Reset()
	}
}

// askerAhead reports whether a catch-up request's summary names, for some
// replica, a higher update than clock holds.
func askerAhead(holding []summaryWire, clock delta.VersionVector) bool {
	for _, h := range holding {
		if h.Last > clock[h.Replica] {
			return true
		}
	}
	return false
}

// A peer whose catch-up answer held a forged or invalid update is not
// asked again for distrustFor (its gossip is penalised by GossipSub's
// score). At most maxDistrusted peers are remembered; beyond, the entry
// closest to its end is forgotten.
const (
	distrustFor   = 10 * time.Minute
	maxDistrusted = 1024
)

func (m *Manager) distrust(p peer.ID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.distrusts == nil {
		m.distrusts = map[peer.ID]time.Time{}
	}
	if len(m.distrusts) >= maxDistrusted {
		var soonest peer.ID
		for q, until := range m.distrusts {
			if until.Before(now) {
				delete(m.distrusts, q)
			} else if soonest == "" || until.Before(m.distrusts[soonest]) {
				soonest = q
			}
		}
		if len(m.distrusts) >= maxDistrusted {
			delete(m.distrusts, soonest)
		}
	}
	m.distrusts[p] = now.Add(distrustFor)
}

func (m *Manager) distrusted(p peer.ID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.distrusts[p]
	if ok && time.Now().After(until) {
		delete(m.distrusts, p)
		return false
	}
	return ok
}

// ServiceName is the resource-manager service of /nova/crdt/2.0.0
// streams, both the ones a peer opens and the ones this node opens.
const ServiceName = "nova.crdt"

// catchupTimeout bounds a catch-up's request and each stretch of its
// answer without progress, on either side; catchupMaxDuration bounds the
// whole answer (a 10,000-update document takes about a second).
const (
	catchupTimeout     = 15 * time.Second
	catchupMaxDuration = 5 * time.Minute
)

// catchupBuffer is what a catch-up stream holds before its frame arrives:
// at most the frame reader's read buffer, which it takes from a pool while
// a frame is read. The frame's bytes and the answer's encoding are
// reserved as they come.
const catchupBuffer = 4 << 10

// attachCatchup attaches a catch-up stream to ServiceName, reserves its
// first buffer and sets its deadline. On failure the caller resets s.
func attachCatchup(s network.Stream) (*streamscope.Memory, error) {
	if err := s.Scope().SetService(ServiceName); err != nil {
		return nil, fmt.Errorf("crdt: attach catch-up stream to %s: %w", ServiceName, err)
	}
	mem, err := streamscope.Reserve(s.Scope(), catchupBuffer)
	if err != nil {
		return nil, fmt.Errorf("crdt: reserve memory for catch-up stream: %w", err)
	}
	_ = s.SetDeadline(time.Now().Add(catchupTimeout))
	return mem, nil
}
