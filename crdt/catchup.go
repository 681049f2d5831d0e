package crdt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt/delta"
	"github.com/nova-node/nova-node/protocol/frame"
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

var (
	encMode, _ = cbor.CoreDetEncOptions().EncMode()
	decMode, _ = cbor.DecOptions{MaxNestedLevels: 8, MaxArrayElements: 1 << 16, MaxMapPairs: 1 << 16,
		DupMapKey: cbor.DupMapKeyEnforcedAPF, IndefLength: cbor.IndefLengthForbidden, TagsMd: cbor.TagsForbidden}.DecMode()
)

// catchUp asks p for what this document lacks and joins it.
func (d *Doc) catchUp(ctx context.Context, p peer.ID) error {
	if p == d.m.h.ID() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	s, err := d.m.h.NewStream(ctx, p, ID)
	if err != nil {
		return err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(15 * time.Second))
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
	body, err := frame.NewReader(bufio.NewReader(s), delta.MaxEncodedSize).Next()
	if err != nil {
		s.Reset()
		return fmt.Errorf("crdt: catch-up answer from %s: %w", p, err)
	}
	var resp catchupResp
	if err := decMode.Unmarshal(body, &resp); err != nil {
		s.Reset()
		d.m.rejected.Add(1)
		return fmt.Errorf("crdt: %s: catch-up answer from %s: %w", CodeDeserializationFailed, p, err)
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
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(15 * time.Second))
	body, err := frame.NewReader(bufio.NewReader(s), 1<<20).Next()
	if err != nil {
		s.Reset()
		return
	}
	var req catchupReq
	if err := decMode.Unmarshal(body, &req); err != nil || !ValidName(req.Doc) {
		m.log.Debugw("bad catch-up request", "peer", s.Conn().RemotePeer(), "err", err)
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
	if err := frame.Write(s, out); err != nil {
		s.Reset()
	}
}
