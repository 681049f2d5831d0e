package crdt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/internal/streamscope"
	"github.com/nova-node/nova-node/internal/wirecodec"
)

// catch-up frames: one request, one answer, then the stream closes.
type catchupReq struct {
	Doc   string              `cbor:"d"`
	Clock delta.VersionVector `cbor:"c"`
}

type catchupResp struct {
	Delta []byte `cbor:"x,omitempty"`
	Err   string `cbor:"e,omitempty"`
}

// The catch-up frames' size caps: a request is a document name and a
// clock; an answer is a delta, capped as deltas are.
const (
	catchupRequestMax  = 1 << 20
	catchupResponseMax = delta.MaxEncodedSize
)

var errBadDocName = errors.New("crdt: bad document name")

// readCatchupRequest reads one catch-up request from r (a peer's stream)
// and checks it: size, CBOR limits, a valid document name.
func readCatchupRequest(r io.Reader) (catchupReq, error) {
	body, err := frame.NewReader(bufio.NewReader(r), catchupRequestMax).Next()
	if err != nil {
		return catchupReq{}, err
	}
	var req catchupReq
	if err := decMode.Unmarshal(body, &req); err != nil {
		return catchupReq{}, err
	}
	if !ValidName(req.Doc) {
		return catchupReq{}, errBadDocName
	}
	return req, nil
}

// readCatchupResponse reads one catch-up answer from r (a peer's stream),
// up to its delta's bytes, which delta.DecodeDelta checks.
func readCatchupResponse(r io.Reader) (catchupResp, error) {
	body, err := frame.NewReader(bufio.NewReader(r), catchupResponseMax).Next()
	if err != nil {
		return catchupResp{}, err
	}
	var resp catchupResp
	if err := decMode.Unmarshal(body, &resp); err != nil {
		return catchupResp{}, undecodable{err}
	}
	return resp, nil
}

// undecodable is a frame that arrived whole and does not decode: the
// peer's fault, counted as rejected (a frame cut short may be the
// network's).
type undecodable struct{ err error }

func (e undecodable) Error() string { return CodeDeserializationFailed + ": " + e.err.Error() }
func (e undecodable) Unwrap() error { return e.err }

// The catch-up frames' codec: a request nests two levels (the request, its
// clock of at most delta.MaxClockEntries entries), an answer one.
var (
	encMode = wirecodec.EncMode()
	decMode = wirecodec.NewDecMode(wirecodec.Limits{MaxNestedLevels: 8, MaxArrayElements: 1 << 16, MaxMapPairs: delta.MaxClockEntries})
)

// catchUp asks p for what this document lacks and joins it.
func (d *Doc) catchUp(ctx context.Context, p peer.ID) error {
	if p == d.m.h.ID() {
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
	req, err := encMode.Marshal(catchupReq{Doc: d.name, Clock: d.Clock()})
	if err != nil {
		s.Reset()
		return err
	}
	if err := frame.Write(s, req); err != nil {
		s.Reset()
		return err
	}
	_ = s.CloseWrite()
	resp, err := readCatchupResponse(mem.CountReads(s, catchupResponseMax+frame.MaxVarintLen))
	if err != nil {
		s.Reset()
		if errors.As(err, new(undecodable)) {
			d.m.rejected.Add(1)
		}
		return fmt.Errorf("crdt: catch-up answer from %s: %w", p, err)
	}
	if resp.Err != "" || len(resp.Delta) == 0 {
		return nil
	}
	x, err := delta.DecodeDelta(resp.Delta)
	if err != nil {
		d.m.rejected.Add(1)
		return fmt.Errorf("crdt: %s: catch-up delta from %s: %w", CodeDeserializationFailed, p, err)
	}
	// A peer may tell us about our own replica's dots only if we minted them.
	own := d.m.replica
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}
	if x.Context().Max(own) > d.d.Context().Max(own) {
		return errors.New("crdt: catch-up answer claims updates of this replica it never made")
	}
	if c := d.m.replicaCheck; c != nil {
		for _, r := range x.Context().Replicas() {
			if r == own {
				continue
			}
			if err := c(d.name, r); err != nil {
				d.m.log.Debugw("catch-up answer refused", "doc", d.name, "peer", p, "replica", r, "err", err)
				return fmt.Errorf("crdt: catch-up answer from %s refused: %w", p, err)
			}
		}
	}
	// Always join (join is idempotent): a catch-up delta can carry removals
	// and overwrites whose dots this replica has seen, which Seen, looking
	// only at minted dots, would call old news.
	if !x.IsEmpty() {
		before := d.d.Context()
		d.d.Join(x)
		if !d.d.Context().Equal(before) || len(x.Paths()) > 0 {
			if err := d.persistLocked(x); err != nil {
				d.m.log.Errorw("cannot persist a caught-up state", "doc", d.name, "err", err)
			}
			d.notifyLocked(Change{Doc: d.name, Source: "catch-up:" + p.String(), Paths: x.Paths(), Clock: d.d.Clock(), Remote: true})
		}
	}
	d.drainHeldLocked()
	return nil
}

// serve answers one catch-up request: the delta the asker lacks.
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
	resp := catchupResp{}
	if d := m.doc(req.Doc); d == nil {
		resp.Err = "unknown document"
	} else {
		d.mu.Lock()
		x := d.d.DeltaSince(req.Clock.Context())
		d.mu.Unlock()
		if b, err := delta.EncodeDelta(x); err == nil {
			resp.Delta = b
		} else {
			resp.Err = err.Error()
		}
	}
	out, err := encMode.Marshal(resp)
	if err != nil {
		s.Reset()
		return
	}
	if err := mem.Grow(mem.Held() + len(out)); err != nil {
		m.log.Debugw("cannot reserve memory for catch-up answer", "peer", p, "bytes", len(out), "err", err)
		s.Reset()
		return
	}
	if err := frame.Write(s, out); err != nil {
		s.Reset()
	}
}

// ServiceName is the resource-manager service of /nova/crdt/1.0.0
// streams, both the ones a peer opens and the ones this node opens.
const ServiceName = "nova.crdt"

// catchupTimeout bounds a whole catch-up exchange, on either side.
const catchupTimeout = 15 * time.Second

// catchupBuffer is what a catch-up stream holds before its frame arrives:
// the frame reader's buffer (bufio.NewReader's size). The frame's bytes
// and the answer's encoding are reserved as they come.
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
