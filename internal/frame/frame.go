// Package frame reads and writes the length-prefixed frames of nova's stream
// protocols (/nova/a2a/1.0.0, /nova/crdt/1.0.0): an unsigned varint (the body
// length in bytes) followed by the body.
//
// The length is checked against the reader's maximum BEFORE any buffer is
// allocated, so a peer that announces a 4 GiB frame costs us ten bytes of
// reading, not four gigabytes of memory. Within the limit, the body buffer
// grows as bytes arrive: a peer that announces 1 MiB and sends one byte
// costs 32 KiB, not 1 MiB.
//
// The package is pure: it works over io.Reader and io.Writer, imports only the
// standard library, and starts no goroutines.
package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxSize is the default cap on a frame body: 1 MiB.
const DefaultMaxSize = 1 << 20

// MaxVarintLen is the most bytes a length prefix may take.
const MaxVarintLen = binary.MaxVarintLen64

// ErrTooLarge is returned when a frame announces a body larger than allowed.
var ErrTooLarge = errors.New("frame: frame too large")

// ErrMalformed is returned for a length prefix that is not a valid minimal
// unsigned varint, or a body cut short by the end of the stream.
var ErrMalformed = errors.New("frame: malformed frame")

// SizeError reports a frame over the limit. It matches ErrTooLarge.
type SizeError struct {
	Size, Max uint64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("frame: frame of %d bytes exceeds the %d-byte limit", e.Size, e.Max)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *SizeError) Is(target error) bool { return target == ErrTooLarge }

// growStep is the most memory a frame body costs before its bytes arrive: a
// body up to this size is allocated whole, a larger one grows by doubling
// from it as it is read.
const growStep = 32 << 10

// Reader reads frames from a buffered stream.
type Reader struct {
	r   *bufio.Reader
	max uint64
	buf []byte
}

// NewReader returns a Reader that refuses bodies larger than max bytes
// (DefaultMaxSize when max <= 0). r is wrapped in a bufio.Reader unless it
// already is one.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxSize
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 4<<10)
	}
	return &Reader{r: br, max: uint64(max)}
}

// Buffered reports how many bytes are already read from the stream and
// waiting; writers use it to decide when to flush (flush when no more input
// is queued).
func (fr *Reader) Buffered() int { return fr.r.Buffered() }

// ReadLen reads the length prefix of the next frame and checks it against
// the limit. io.EOF is returned only on a clean end before any byte.
func (fr *Reader) ReadLen() (uint64, error) {
	n, err := readUvarint(fr.r)
	if err != nil {
		return 0, err
	}
	if n > fr.max {
		return 0, &SizeError{Size: n, Max: fr.max}
	}
	return n, nil
}

// Next returns the body of the next frame. The slice is reused by the next
// call: copy what must outlive it. A clean end of stream before a frame
// starts is io.EOF; every other failure wraps ErrMalformed or ErrTooLarge, or
// is the transport's own read error.
func (fr *Reader) Next() ([]byte, error) {
	n, err := fr.ReadLen()
	if err != nil {
		return nil, err
	}
	size := int(n) // n <= fr.max, which came from an int
	if cap(fr.buf) < size && size <= growStep {
		// Small frames, the common case, get their buffer in one piece.
		fr.buf = make([]byte, size)
	}
	// A larger body is read into a buffer that at most doubles what has
	// arrived so far, so an announced length alone never sizes memory.
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
	// Do not keep a huge buffer around for the life of the stream.
	if cap(fr.buf) > 64<<10 && n < 4<<10 {
		fr.buf = nil
	}
	return body, nil
}

// readUvarint is binary.ReadUvarint that also rejects non-minimal encodings,
// so each length has exactly one wire form.
func readUvarint(r io.ByteReader) (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < MaxVarintLen; i++ {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				return 0, fmt.Errorf("%w: length prefix cut short", ErrMalformed)
			}
			return 0, err
		}
		if b < 0x80 {
			if i > 0 && b == 0 {
				return 0, fmt.Errorf("%w: non-minimal length prefix", ErrMalformed)
			}
			if i == MaxVarintLen-1 && b > 1 {
				return 0, fmt.Errorf("%w: length prefix overflows 64 bits", ErrMalformed)
			}
			return x | uint64(b)<<s, nil
		}
		x |= uint64(b&0x7f) << s
		s += 7
	}
	return 0, fmt.Errorf("%w: length prefix overflows 64 bits", ErrMalformed)
}

// Append appends one frame (length prefix and body) to dst.
func Append(dst, body []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	return append(dst, body...)
}

// Write writes one frame to w. With a bufio.Writer underneath, many frames
// coalesce into one transport write; the caller flushes.
func Write(w io.Writer, body []byte) error {
	if bw, ok := w.(*bufio.Writer); ok {
		// Straight into the buffer: a prefix array passed to an
		// io.Writer escapes to the heap, once per frame.
		if _, err := bw.Write(binary.AppendUvarint(bw.AvailableBuffer(), uint64(len(body)))); err != nil {
			return err
		}
		_, err := bw.Write(body)
		return err
	}
	var pre [MaxVarintLen]byte
	n := binary.PutUvarint(pre[:], uint64(len(body)))
	if _, err := w.Write(pre[:n]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}
