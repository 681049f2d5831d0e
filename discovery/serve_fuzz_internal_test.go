package discovery

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/nova-node/nova-node/agentcard"
)

// answer encodes an answer on RecordsProtocol as serveRecords writes it.
func answer(recs ...[]byte) []byte {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	_, _ = w.Write(binary.AppendUvarint(nil, uint64(len(recs))))
	for _, r := range recs {
		_ = writeFrame(w, r)
	}
	_ = w.Flush()
	return buf.Bytes()
}

// FuzzReadRecords feeds arbitrary answers to readRecords, the decoder of
// what a peer serves on RecordsProtocol. It never panics, never returns
// more than the bounds allow, and asks grow for every byte it keeps.
func FuzzReadRecords(f *testing.F) {
	f.Add(answer([]byte("index"), []byte("card-1"), []byte("card-2")))
	f.Add(answer([]byte("index")))
	f.Add(answer())
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add(binary.AppendUvarint([]byte{1}, MaxIndexSize+1)) // an index said to be past its bound
	f.Fuzz(func(t *testing.T, b []byte) {
		granted := 0
		grow := func(n int) error { granted += n; return nil }
		index, cards, err := readRecords(bufio.NewReader(bytes.NewReader(b)), grow)
		if err != nil {
			return
		}
		if len(index) > MaxIndexSize || len(cards) > maxServedCards {
			t.Fatalf("index of %d bytes and %d cards accepted", len(index), len(cards))
		}
		total := len(index)
		for _, c := range cards {
			if len(c) > agentcard.MaxSignedCardSize {
				t.Fatalf("card of %d bytes accepted", len(c))
			}
			total += len(c)
		}
		if total > maxServedBytes || total != granted {
			t.Fatalf("%d bytes kept, %d reserved, at most %d allowed", total, granted, maxServedBytes)
		}
	})
}

// An answer is refused past its bounds, and when the stream's memory
// reservation refuses a record.
func TestReadRecordsBounds(t *testing.T) {
	read := func(b []byte, grow func(int) error) error {
		_, _, err := readRecords(bufio.NewReader(bytes.NewReader(b)), grow)
		return err
	}
	ok := func(int) error { return nil }
	if err := read(answer([]byte("index"), []byte("card")), ok); err != nil {
		t.Fatalf("a well-formed answer: %v", err)
	}
	recs := make([][]byte, maxServedCards+2)
	for i := range recs {
		recs[i] = []byte("r")
	}
	if err := read(answer(recs...), ok); err == nil {
		t.Error("more records than the bound were read")
	}
	if err := read(answer(make([]byte, MaxIndexSize+1)), ok); err == nil {
		t.Error("an index past MaxIndexSize was read")
	}
	big := make([][]byte, 1, maxServedCards+1)
	big[0] = []byte("index")
	for len(big) < maxServedCards+1 {
		big = append(big, make([]byte, agentcard.MaxSignedCardSize))
	}
	if err := read(answer(big...), ok); err == nil && agentcard.MaxSignedCardSize*maxServedCards > maxServedBytes {
		t.Error("an answer past maxServedBytes was read")
	}
	refused := errors.New("reservation refused")
	if err := read(answer([]byte("index")), func(int) error { return refused }); !errors.Is(err, refused) {
		t.Errorf("a refused reservation: %v", err)
	}
}
