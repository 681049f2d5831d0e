package discovery

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/internal/streamscope"
)

// RecordsProtocol is the stream protocol on which a node serves its own
// signed records to a capability lookup, in one round trip: the lookup
// sends a capability id; the node answers with its signed agent index and
// the signed cards of its agents that offer the capability, exactly as it
// last published them to the DHT. The lookup checks each card as it
// checks a record read from the DHT, and the index likewise but for its
// signature (the connection proves its sender; see "Lookups" in the
// package doc); a node that does not speak the protocol is read with DHT
// GET_VALUE requests instead.
//
// Request: the capability id as a uvarint length and its bytes (1 to 128
// bytes). Response: a uvarint count of records, at most 65, then each
// record as a uvarint length and its bytes: the index first
// ([MaxIndexSize] bytes at most), then the cards (agentcard.MaxSignedCardSize
// bytes at most each), 1 MiB in all at most.
const RecordsProtocol = "/nova/records/1.0.0"

// RecordsService is the resource-manager service of [RecordsProtocol]
// streams, whose limits the node sets (node/limits.go).
const RecordsService = "nova.records"

// recordsBuffer is what a records stream holds from its start: the
// buffered reader and writer of one request or answer. The records read
// are reserved as they come.
const recordsBuffer = 4<<10 + 256

// A response on [RecordsProtocol] holds at most maxServedCards cards and
// maxServedBytes bytes of records in all; a node serves the cards that
// fit, and a lookup reads any others the index lists with GET_VALUE.
const (
	maxServedCards = 64
	maxServedBytes = 1 << 20
)

// served is what this node last published, as it serves it on
// [RecordsProtocol]: immutable once stored.
type served struct {
	index  []byte
	cards  []servedCard
	gossip []byte // the roster message of index and cards (see [WithGossip])
}

type servedCard struct {
	caps   []string
	sealed []byte
}

// serveRecords answers one request on [RecordsProtocol].
func (s *Service) serveRecords(st network.Stream) {
	mem, err := attachRecords(st)
	if err != nil {
		s.log.Debugw("records stream refused", "peer", st.Conn().RemotePeer(), "err", err)
		_ = st.Reset()
		return
	}
	defer mem.Release()
	defer st.Close()
	_ = st.SetDeadline(time.Now().Add(rpcTimeout))
	r := bufio.NewReaderSize(st, 256)
	capID, err := readFrame(r, maxCapIDLen, nil)
	if err != nil || len(capID) == 0 {
		_ = st.Reset()
		return
	}
	recs := [][]byte{}
	if own := s.own.Load(); own != nil {
		recs = append(recs, own.index)
		size := len(own.index)
		// The cards go in the order of the index, up to the first that
		// does not fit: the lookup matches them to the index by position.
		for _, c := range own.cards {
			if !slices.Contains(c.caps, string(capID)) {
				continue
			}
			if len(recs) > maxServedCards || size+len(c.sealed) > maxServedBytes {
				break
			}
			recs = append(recs, c.sealed)
			size += len(c.sealed)
		}
	}
	w := bufio.NewWriter(st)
	_, _ = w.Write(binary.AppendUvarint(nil, uint64(len(recs))))
	for _, rec := range recs {
		_ = writeFrame(w, rec)
	}
	if w.Flush() != nil {
		_ = st.Reset()
		return
	}
	s.stats.served.Add(1)
}

// askRecords asks host for its index and its cards that offer capID on
// [RecordsProtocol] (dialling it when needed) and returns them as sent,
// unchecked: the index first, then at most [maxServedCards] cards.
func (s *Service) askRecords(ctx context.Context, host peer.ID, capID string) (index []byte, cards [][]byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	st, err := s.h.NewStream(ctx, host, RecordsProtocol)
	if err != nil {
		return nil, nil, err
	}
	mem, err := attachRecords(st)
	if err != nil {
		_ = st.Reset()
		return nil, nil, err
	}
	defer mem.Release()
	defer st.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	w := bufio.NewWriter(st)
	if err := writeFrame(w, []byte(capID)); err != nil {
		return nil, nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, nil, err
	}
	_ = st.CloseWrite()
	return readRecords(bufio.NewReaderSize(st, 4<<10), mem.Grow)
}

// attachRecords attaches a records stream to [RecordsService] and
// reserves its buffers in the stream's scope; the caller resets the
// stream on failure and releases the memory once the stream has ended.
func attachRecords(st network.Stream) (*streamscope.Memory, error) {
	if err := st.Scope().SetService(RecordsService); err != nil {
		return nil, fmt.Errorf("discovery: attach records stream to %s: %w", RecordsService, err)
	}
	mem, err := streamscope.Reserve(st.Scope(), recordsBuffer)
	if err != nil {
		return nil, fmt.Errorf("discovery: reserve memory for records stream: %w", err)
	}
	return mem, nil
}

// readRecords reads an answer on [RecordsProtocol] as sent, unchecked:
// the index first, then at most [maxServedCards] cards, [maxServedBytes]
// in all. grow is asked for each record's bytes before they are read
// (the stream's memory reservation); its error ends the read.
func readRecords(r *bufio.Reader, grow func(int) error) (index []byte, cards [][]byte, err error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return nil, nil, errors.New("no index served")
	}
	if n > 1+maxServedCards {
		return nil, nil, fmt.Errorf("%d records served, more than %d", n, 1+maxServedCards)
	}
	if index, err = readFrame(r, MaxIndexSize, grow); err != nil {
		return nil, nil, err
	}
	left := maxServedBytes - len(index)
	for range n - 1 {
		c, err := readFrame(r, min(agentcard.MaxSignedCardSize, left), grow)
		if err != nil {
			return nil, nil, err
		}
		left -= len(c)
		cards = append(cards, c)
	}
	return index, cards, nil
}

// writeFrame writes len(b) as a uvarint, then b.
func writeFrame(w *bufio.Writer, b []byte) error {
	if _, err := w.Write(binary.AppendUvarint(nil, uint64(len(b)))); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readFrame reads a uvarint length of at most limit, then that many
// bytes, after grow (when not nil) reserved them.
func readFrame(r *bufio.Reader, limit int, grow func(int) error) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(limit) {
		return nil, fmt.Errorf("record of %d bytes, more than %d", n, limit)
	}
	if grow != nil {
		if err := grow(int(n)); err != nil {
			return nil, err
		}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
