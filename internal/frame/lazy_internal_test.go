package frame

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	"pgregory.net/rapid"
)

// eagerReader is the Reader as it was before it gave its buffers back
// when idle: a bufio.Reader of 4 KiB and a body buffer kept for the
// stream's life. It is the model the lazy Reader must agree with.
type eagerReader struct {
	r   *bufio.Reader
	max uint64
	buf []byte
}

func (fr *eagerReader) next() ([]byte, error) {
	n, err := eagerUvarint(fr.r)
	if err != nil {
		return nil, err
	}
	if n > fr.max {
		return nil, &SizeError{Size: n, Max: fr.max}
	}
	size := int(n)
	if cap(fr.buf) < size && size <= growStep {
		fr.buf = make([]byte, size)
	}
	body := fr.buf[:0]
	for len(body) < size {
		if len(body) == cap(body) {
			grown := make([]byte, len(body), min(max(2*cap(body), growStep), size))
			copy(grown, body)
			body, fr.buf = grown, grown
		}
		m, err := io.ReadFull(fr.r, body[len(body):min(cap(body), size)])
		body = body[:len(body)+m]
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: body cut short after %d-byte length prefix", ErrMalformed, n)
			}
			return nil, err
		}
	}
	return body, nil
}

// eagerUvarint reads a length prefix as the Reader must: binary.ReadUvarint,
// with the Reader's errors, and a non-minimal encoding (a last byte of
// zero after the first) refused. It is written apart from the Reader's
// own loop, so that the two check each other.
func eagerUvarint(r io.ByteReader) (uint64, error) {
	c := &lastByte{r: r}
	x, err := binary.ReadUvarint(c)
	switch {
	case err == io.EOF:
		return 0, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return 0, fmt.Errorf("%w: length prefix cut short", ErrMalformed)
	case err != nil && c.err != nil:
		return 0, c.err // the transport's own error
	case err != nil:
		return 0, fmt.Errorf("%w: length prefix overflows 64 bits", ErrMalformed)
	case c.n > 1 && c.last == 0:
		return 0, fmt.Errorf("%w: non-minimal length prefix", ErrMalformed)
	}
	return x, nil
}

// lastByte counts the bytes read through it and keeps the last one.
type lastByte struct {
	r    io.ByteReader
	n    int
	last byte
	err  error
}

func (c *lastByte) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err != nil {
		if err != io.EOF {
			c.err = err
		}
		return b, err
	}
	c.n++
	c.last = b
	return b, nil
}

// chunked hands out in in pieces of the given sizes (the last size
// repeats), then fails with end for ever; withLast hands end out with the
// last bytes already.
type chunked struct {
	in       []byte
	sizes    []int
	end      error
	withLast bool
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, c.end
	}
	size := c.sizes[0]
	if len(c.sizes) > 1 {
		c.sizes = c.sizes[1:]
	}
	n := copy(p, c.in[:min(size, len(c.in))])
	c.in = c.in[n:]
	if len(c.in) == 0 && c.withLast {
		return n, c.end
	}
	return n, nil
}

var errTransport = errors.New("transport failed")

// The lazy Reader returns exactly the frames, and the error, that the
// eager one does, whatever pieces the transport hands the input out in:
// well-formed frames of sizes around every buffer boundary, then perhaps
// a frame cut short, garbage, or a length over the limit.
func TestLazyReaderAgreesWithEager(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.SampledFrom([]int{100, readSize, growStep, 200 << 10, DefaultMaxSize}).Draw(t, "limit")
		sizes := rapid.SliceOfN(rapid.OneOf(
			rapid.IntRange(0, 40),
			rapid.IntRange(readSize-20, readSize+20),
			rapid.IntRange(growStep-20, growStep+20),
			rapid.IntRange(0, 150<<10),
		), 0, 12).Draw(t, "sizes")
		var in []byte
		for i, n := range sizes {
			in = Append(in, bytes.Repeat([]byte{byte(i + 1)}, n))
		}
		switch rapid.IntRange(0, 3).Draw(t, "tail") {
		case 1: // a frame cut short
			if len(in) > 0 {
				in = in[:rapid.IntRange(0, len(in)-1).Draw(t, "cut")]
			}
		case 2:
			in = append(in, rapid.SliceOfN(rapid.Byte(), 1, 20).Draw(t, "garbage")...)
		case 3:
			in = binary.AppendUvarint(in, uint64(limit)+1)
		}
		chunks := rapid.SliceOfN(rapid.OneOf(rapid.IntRange(1, 20), rapid.IntRange(1, 9000), rapid.IntRange(1, 100<<10)), 1, 30).Draw(t, "chunks")
		end := rapid.SampledFrom([]error{io.EOF, errTransport}).Draw(t, "end")
		withLast := rapid.Bool().Draw(t, "withLast")

		eager := &eagerReader{r: bufio.NewReaderSize(&chunked{in: in, sizes: chunks, end: end, withLast: withLast}, 4<<10), max: uint64(limit)}
		lazy := NewReader(&chunked{in: in, sizes: chunks, end: end, withLast: withLast}, limit)
		for i := 0; ; i++ {
			want, wantErr := eager.next()
			got, gotErr := lazy.Next()
			if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
				t.Fatalf("frame %d: error %v, want %v", i, gotErr, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("frame %d: %d bytes, want %d", i, len(got), len(want))
			}
			if wantErr != nil {
				return
			}
		}
	})
}

// idleCheck hands out one frame per piece, and records, for each read at
// the start of a piece (the Reader waiting for the next frame), what the
// Reader holds then.
type idleCheck struct {
	fr     *Reader
	pieces [][]byte
	fresh  bool     // the next read starts a piece
	held   []string // at each read starting a piece (and at the end)
}

func (c *idleCheck) Read(p []byte) (int, error) {
	if c.fresh {
		held := ""
		if c.fr.rbuf != nil {
			held += " read buffer;"
		}
		if c.fr.body != nil || c.fr.pbody != nil {
			held += " body buffer;"
		}
		if len(p) > smallSize {
			held += fmt.Sprintf(" a %d-byte read;", len(p))
		}
		c.held = append(c.held, held)
	}
	if len(c.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pieces[0])
	c.fresh = false
	if c.pieces[0] = c.pieces[0][n:]; len(c.pieces[0]) == 0 {
		c.pieces, c.fresh = c.pieces[1:], true
	}
	return n, nil
}

// A Reader waiting for a frame, with nothing buffered, holds no buffer and
// reads into its small array, whatever the frames before it were.
func TestIdleReaderHoldsNoBuffer(t *testing.T) {
	var pieces [][]byte
	for _, n := range []int{0, 10, 3000, readSize + 1, 20 << 10, 100 << 10, 5, 300 << 10, 1} {
		pieces = append(pieces, Append(nil, make([]byte, n)))
	}
	c := &idleCheck{pieces: pieces, fresh: true}
	fr := NewReader(c, 0)
	c.fr = fr
	for {
		if _, err := fr.Next(); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
	}
	if len(c.held) != len(pieces)+1 {
		t.Fatalf("%d reads waiting for a frame, want %d", len(c.held), len(pieces)+1)
	}
	for i, h := range c.held {
		if h != "" {
			t.Errorf("waiting for frame %d the Reader held:%s", i, h)
		}
	}
}

// In a burst, with the next frame already buffered, the Reader keeps its
// read buffer once it took it: no pool traffic between frames.
func TestBurstKeepsReadBuffer(t *testing.T) {
	var in []byte
	for i := range 50 {
		in = Append(in, bytes.Repeat([]byte{byte(i)}, 300))
	}
	fr := NewReader(bytes.NewReader(in), 0)
	var rb *[readSize]byte
	for i := range 50 {
		b, err := fr.Next()
		if err != nil || len(b) != 300 || b[0] != byte(i) {
			t.Fatalf("frame %d: %v", i, err)
		}
		if rb == nil {
			rb = fr.rbuf
		} else if fr.Buffered() > 0 && fr.rbuf != rb {
			t.Fatalf("frame %d: the read buffer changed inside a burst", i)
		}
	}
	if rb == nil {
		t.Fatal("a burst larger than the small array read without the read buffer")
	}
}
