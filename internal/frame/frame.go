// Package frame reads and writes the length-prefixed frames of nova's stream
// protocols (/nova/a2a/1.0.0, /nova/crdt/1.0.0): an unsigned varint (the body
// length in bytes) followed by the body.
//
// The length is checked against the reader's maximum BEFORE any buffer is
// allocated, so a peer that announces a 4 GiB frame costs us ten bytes of
// reading, not four gigabytes of memory. Within the limit, the body buffer
// grows as bytes arrive: a peer that announces 1 MiB and sends one byte
// costs 32 KiB, not 1 MiB. Between frames a Reader holds no buffer (see
// Reader): its buffers come from pools shared by all Readers.
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
	"sync"
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
// body up to this size gets a buffer of this size, a larger one grows by
// doubling from it as it is read.
const growStep = 32 << 10

// readSize is the size of the read buffer; a frame body up to this size is
// returned from it, without a copy.
const readSize = 4 << 10

// smallSize is the size of the array an idle Reader reads into: enough for
// a length prefix and the small frames (acknowledgements) that make most
// of a quiet stream's traffic, which are then read without the read buffer.
const smallSize = 64

// maxEmptyReads is how many reads returning nothing, and no error, the
// Reader accepts in a row before it fails with io.ErrNoProgress (as
// bufio.Reader does).
const maxEmptyReads = 100

// The buffers a Reader holds only while a frame is being read: the read
// buffer, and the body buffer of frames over readSize up to growStep.
var (
	readPool = sync.Pool{New: func() any { return new([readSize]byte) }}
	bodyPool = sync.Pool{New: func() any { return new([growStep]byte) }}
)

// Reader reads frames from a stream.
//
// A Reader on an idle stream holds no buffer: when a call to Next finds
// nothing buffered, the read buffer and the body buffer go back to their
// pools, and the Reader waits for the next frame by reading into a 64-byte
// array of its own (a small frame is read whole from it). When a frame
// needs more it takes a read buffer from the pool again, so a node with
// thousands of idle peers holds no read buffer per stream.
// While bytes stay buffered (a burst) it keeps its buffers and reads on
// from them without touching the pools. The last bytes of a large body are
// read through the read buffer, which also takes in whatever of the next
// frame has already arrived: a stream that is still busy after a frame
// keeps its grown body buffer for the next one.
type Reader struct {
	src io.Reader
	br  *bufio.Reader // src, when it is one: its buffered bytes count in Buffered
	max uint64

	buf  []byte          // the bytes read: buf[r:w] are not consumed yet; small[:] or rbuf[:]
	rbuf *[readSize]byte // the pooled read buffer, nil while idle
	r, w int
	err  error // the source's error, returned once the bytes before it are consumed

	body  []byte          // the body buffer of a frame larger than readSize, nil while idle
	pbody *[growStep]byte // body's array, when it came from bodyPool

	small [smallSize]byte
}

// NewReader returns a Reader that refuses bodies larger than max bytes
// (DefaultMaxSize when max <= 0). The Reader buffers what it reads from r
// itself; a *bufio.Reader is read like any other source.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxSize
	}
	fr := &Reader{src: r, max: uint64(max)}
	fr.br, _ = r.(*bufio.Reader)
	fr.buf = fr.small[:]
	return fr
}

// Buffered reports how many bytes are already read from the stream and
// waiting; writers use it to decide when to flush (flush when no more input
// is queued).
func (fr *Reader) Buffered() int {
	n := fr.w - fr.r
	if fr.br != nil {
		n += fr.br.Buffered()
	}
	return n
}

// release gives the buffers back to their pools; nothing is buffered.
func (fr *Reader) release() {
	fr.r, fr.w = 0, 0
	if fr.rbuf != nil {
		readPool.Put(fr.rbuf)
		fr.rbuf = nil
		fr.buf = fr.small[:]
	}
	fr.setBody(nil, nil)
}

// setBody makes b (whose array is p, when pooled) the body buffer, giving
// the pooled one it replaces back.
func (fr *Reader) setBody(b []byte, p *[growStep]byte) {
	if fr.pbody != nil && fr.pbody != p {
		bodyPool.Put(fr.pbody)
	}
	fr.body, fr.pbody = b, p
}

// fill reads once from the source, after the bytes buffered. An idle
// Reader (no read buffer, nothing buffered) reads into its small array;
// one that has bytes and needs more takes the read buffer first. Callers
// fill only when they need more than is buffered, and never more than
// readSize bytes in all.
func (fr *Reader) fill() {
	if fr.r > 0 {
		fr.w = copy(fr.buf, fr.buf[fr.r:fr.w])
		fr.r = 0
	}
	if fr.rbuf == nil && fr.w > 0 {
		// A frame is arriving: take the read buffer.
		fr.rbuf = readPool.Get().(*[readSize]byte)
		fr.w = copy(fr.rbuf[:], fr.buf[:fr.w])
		fr.buf = fr.rbuf[:]
	}
	dst := fr.buf[fr.w:]
	if fr.br != nil && fr.rbuf == nil && len(dst) > fr.br.Size() {
		// No more than the bufio.Reader would read from its source.
		dst = dst[:fr.br.Size()]
	}
	for range maxEmptyReads {
		n, err := fr.src.Read(dst)
		if n < 0 || n > len(dst) {
			fr.err = errBadRead
			return
		}
		fr.w += n
		if err != nil {
			fr.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	fr.err = io.ErrNoProgress
}

var errBadRead = errors.New("frame: source returned an invalid count from Read")

// readErr returns the source's error once, as bufio.Reader does.
func (fr *Reader) readErr() error {
	err := fr.err
	fr.err = nil
	return err
}

func (fr *Reader) readByte() (byte, error) {
	for fr.r == fr.w {
		if fr.err != nil {
			return 0, fr.readErr()
		}
		fr.fill()
	}
	c := fr.buf[fr.r]
	fr.r++
	return c, nil
}

// read reads into p like bufio.Reader.Read: from the buffered bytes if
// any, else straight into p when p is larger than the read buffer, else
// through the read buffer. A read straight into p leaves p's last byte to
// the read buffer, whose read may take in the next frame's start too.
func (fr *Reader) read(p []byte) (int, error) {
	if fr.r == fr.w {
		if fr.err != nil {
			return 0, fr.readErr()
		}
		if len(p) > readSize {
			n, err := fr.src.Read(p[:len(p)-1])
			if n < 0 || n > len(p)-1 {
				return 0, errBadRead
			}
			return n, err
		}
		fr.fill()
		if fr.r == fr.w {
			return 0, fr.readErr()
		}
	}
	n := copy(p, fr.buf[fr.r:fr.w])
	fr.r += n
	return n, nil
}

// ReadLen reads the length prefix of the next frame and checks it against
// the limit. io.EOF is returned only on a clean end before any byte.
func (fr *Reader) ReadLen() (uint64, error) {
	n, err := fr.readUvarint()
	if err != nil {
		return 0, err
	}
	if n > fr.max {
		return 0, &SizeError{Size: n, Max: fr.max}
	}
	return n, nil
}

// Next returns the body of the next frame. The slice is valid until the
// next call, which reuses its memory (or gives it to another Reader): copy
// what must outlive it. A clean end of stream before a frame starts is
// io.EOF; every other failure wraps ErrMalformed or ErrTooLarge, or is the
// transport's own read error.
func (fr *Reader) Next() ([]byte, error) {
	if fr.r == fr.w {
		fr.release() // idle: wait for the next frame holding no buffer
	}
	n, err := fr.ReadLen()
	if err != nil {
		return nil, err
	}
	size := int(n) // n <= fr.max, which came from an int
	if size > readSize {
		return fr.nextLarge(size)
	}
	for fr.w-fr.r < size {
		if fr.err != nil {
			return nil, fr.cutShort(fr.readErr(), n)
		}
		fr.fill()
	}
	body := fr.buf[fr.r : fr.r+size : fr.r+size]
	fr.r += size
	return body, nil
}

// nextLarge reads a body larger than the read buffer into the body buffer.
func (fr *Reader) nextLarge(size int) ([]byte, error) {
	if cap(fr.body) < size && size <= growStep {
		// Up to growStep, the body gets its buffer in one piece.
		p := bodyPool.Get().(*[growStep]byte)
		fr.setBody(p[:0], p)
	}
	// A larger body is read into a buffer that at most doubles what has
	// arrived so far, so an announced length alone never sizes memory.
	body := fr.body[:0]
	for len(body) < size {
		if len(body) == cap(body) {
			grown := make([]byte, len(body), min(max(2*cap(body), growStep), size))
			copy(grown, body)
			fr.setBody(grown, nil)
			body = grown
		}
		m, err := fr.read(body[len(body):min(cap(body), size)])
		body = body[:len(body)+m]
		if err != nil {
			if len(body) == size {
				fr.err = err // the frame is whole: the error is the next call's
				break
			}
			return nil, fr.cutShort(err, uint64(size))
		}
	}
	// Do not keep a huge buffer around while the stream stays busy with
	// small frames.
	if cap(fr.body) > 64<<10 && size < 4<<10 {
		fr.setBody(nil, nil)
	}
	return body, nil
}

// cutShort is the error of a body the stream ended (or failed) inside.
func (fr *Reader) cutShort(err error, n uint64) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: body cut short after %d-byte length prefix", ErrMalformed, n)
	}
	return err
}

// readUvarint is binary.ReadUvarint that also rejects non-minimal encodings,
// so each length has exactly one wire form.
func (fr *Reader) readUvarint() (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < MaxVarintLen; i++ {
		b, err := fr.readByte()
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
