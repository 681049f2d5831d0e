package frame_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/nova-node/nova-node/internal/frame"
	"pgregory.net/rapid"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	bodies := [][]byte{{}, []byte("a"), bytes.Repeat([]byte{0xAB}, 300), bytes.Repeat([]byte("x"), 70000)}
	for _, b := range bodies {
		if err := frame.Write(&buf, b); err != nil {
			t.Fatal(err)
		}
	}
	r := frame.NewReader(&buf, 0)
	for i, want := range bodies {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: got %d bytes, want %d", i, len(got), len(want))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after last frame: got %v, want io.EOF", err)
	}
}

// countingReader counts the bytes handed out, to prove a large announced
// length is refused before its body is read (or allocated).
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestOversizedRefusedBeforeReading(t *testing.T) {
	announce := binary.AppendUvarint(nil, 1<<40)
	src := &countingReader{r: io.MultiReader(bytes.NewReader(announce), neverEnding{})}
	r := frame.NewReader(bufio.NewReaderSize(src, 16), 1024)
	_, err := r.Next()
	var se *frame.SizeError
	if !errors.As(err, &se) || !errors.Is(err, frame.ErrTooLarge) {
		t.Fatalf("got %v, want SizeError", err)
	}
	if se.Size != 1<<40 || se.Max != 1024 {
		t.Fatalf("size error fields: %+v", se)
	}
	if src.n > 16 {
		t.Fatalf("read %d bytes before refusing; want at most the 16-byte buffer", src.n)
	}
	allocs := testing.AllocsPerRun(100, func() {
		r := frame.NewReader(bytes.NewReader(announce), 1024)
		_, _ = r.Next()
	})
	if allocs > 6 {
		t.Fatalf("%v allocations to refuse an oversized frame", allocs)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'z'
	}
	return len(p), nil
}

func TestMalformed(t *testing.T) {
	cases := map[string][]byte{
		"non-minimal prefix":     {0x80, 0x00},
		"prefix cut short":       {0x80},
		"body cut short":         {0x05, 'a', 'b'},
		"prefix overflow":        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"prefix eleven bytes":    {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"max uint64 over limit":  {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"exactly over the limit": binary.AppendUvarint(nil, 1025),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := frame.NewReader(bytes.NewReader(in), 1024).Next()
			if !errors.Is(err, frame.ErrMalformed) && !errors.Is(err, frame.ErrTooLarge) {
				t.Fatalf("got %v, want ErrMalformed or ErrTooLarge", err)
			}
		})
	}
}

// A peer that announces a full-size frame and sends one byte must not make
// the reader allocate the announced size: the buffer grows as bytes arrive.
func TestAnnouncedLengthDoesNotSizeMemory(t *testing.T) {
	in := append(binary.AppendUvarint(nil, frame.DefaultMaxSize), 'x')
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var err error
	for range runs {
		_, err = frame.NewReader(bytes.NewReader(in), frame.DefaultMaxSize).Next()
	}
	runtime.ReadMemStats(&after)
	if !errors.Is(err, frame.ErrMalformed) {
		t.Fatalf("got %v, want ErrMalformed for a body cut short", err)
	}
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per >= 64<<10 {
		t.Fatalf("%d bytes allocated per reader for a 1-byte body announced as 1 MiB; want < 64 KiB", per)
	}
}

// A body cut short fails the same way whether the stream ends inside the
// first buffer or after it has grown.
func TestTruncatedBodyError(t *testing.T) {
	for _, size := range []int{5, 40 << 10, 300 << 10, frame.DefaultMaxSize} {
		for _, have := range []int{0, 1, size / 2, size - 1} {
			in := append(binary.AppendUvarint(nil, uint64(size)), make([]byte, have)...)
			_, err := frame.NewReader(bytes.NewReader(in), 0).Next()
			if !errors.Is(err, frame.ErrMalformed) {
				t.Fatalf("%d of %d bytes: got %v, want ErrMalformed", have, size, err)
			}
		}
	}
}

// A transport error in the middle of a growing body is returned as is.
func TestTransportErrorMidBody(t *testing.T) {
	boom := errors.New("boom")
	in := append(binary.AppendUvarint(nil, 200<<10), make([]byte, 100<<10)...)
	r := frame.NewReader(io.MultiReader(bytes.NewReader(in), iotest.ErrReader(boom)), 0)
	if _, err := r.Next(); err != boom {
		t.Fatalf("got %v, want the transport's error", err)
	}
}

// A full-size frame trickling in one byte per read is read whole.
func TestLargeFrameOneByteReads(t *testing.T) {
	body := make([]byte, frame.DefaultMaxSize)
	for i := range body {
		body[i] = byte(i * 7)
	}
	in := frame.Append(frame.Append(nil, body), []byte("next"))
	r := frame.NewReader(iotest.OneByteReader(bytes.NewReader(in)), 0)
	got, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("1 MiB frame read one byte at a time came back different")
	}
	if got, err := r.Next(); err != nil || string(got) != "next" {
		t.Fatalf("frame after the large one: %q, %v", got, err)
	}
}

// endless replays one byte slice forever, filling every read: the next
// frame has always arrived.
type endless struct {
	b   []byte
	off int
}

func (r *endless) Read(p []byte) (int, error) {
	for n := 0; n < len(p); {
		m := copy(p[n:], r.b[r.off:])
		r.off = (r.off + m) % len(r.b)
		n += m
	}
	return len(p), nil
}

// Once grown, the body buffer serves later frames of the same size without
// allocating, as long as they keep coming (the next one is buffered when a
// frame ends); an idle Reader gives its buffers back (lazy_internal_test.go).
func TestLargeBufferReused(t *testing.T) {
	r := frame.NewReader(&endless{b: frame.Append(nil, make([]byte, 300<<10))}, 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per reused large frame", allocs)
	}
}

func TestAppendMatchesWrite(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		body := rapid.SliceOfN(rapid.Byte(), 0, 5000).Draw(t, "body")
		var w bytes.Buffer
		if err := frame.Write(&w, body); err != nil {
			t.Fatal(err)
		}
		if got := frame.Append(nil, body); !bytes.Equal(got, w.Bytes()) {
			t.Fatalf("Append and Write differ")
		}
	})
}

// FuzzReader: arbitrary bytes never panic; every accepted frame re-encodes to
// exactly the bytes it was read from, and is within the limit.
func FuzzReader(f *testing.F) {
	f.Add(frame.Append(nil, []byte("hello")))
	f.Add(frame.Append(frame.Append(nil, []byte{}), []byte{1, 2, 3}))
	f.Add([]byte{0x80, 0x00})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 4096
		r := frame.NewReader(bytes.NewReader(in), max)
		var consumed []byte
		for {
			body, err := r.Next()
			if err != nil {
				break
			}
			if len(body) > max {
				t.Fatalf("accepted %d > %d", len(body), max)
			}
			consumed = frame.Append(consumed, body)
		}
		if !bytes.HasPrefix(in, consumed) {
			t.Fatalf("accepted frames do not re-encode to their input")
		}
	})
}

// readAll reads frames until the first error and reports the bodies and
// that error's text.
func readAll(r io.Reader, max int) ([][]byte, string) {
	fr := frame.NewReader(r, max)
	var bodies [][]byte
	for {
		body, err := fr.Next()
		if err != nil {
			return bodies, err.Error()
		}
		bodies = append(bodies, bytes.Clone(body))
	}
}

// FuzzReaderShortReads: with a limit above the size a body is allocated
// whole, reading the input in one-byte pieces gives exactly the frames and
// the error that reading it at once does.
func FuzzReaderShortReads(f *testing.F) {
	f.Add(frame.Append(nil, []byte("hello")))
	f.Add(frame.Append(frame.Append(nil, []byte{}), []byte{1, 2, 3}))
	f.Add(append(binary.AppendUvarint(nil, 40<<10), 'x'))
	f.Add(binary.AppendUvarint(nil, frame.DefaultMaxSize+1))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, wholeErr := readAll(bytes.NewReader(in), frame.DefaultMaxSize)
		short, shortErr := readAll(iotest.OneByteReader(bytes.NewReader(in)), frame.DefaultMaxSize)
		if wholeErr != shortErr {
			t.Fatalf("errors differ: %q at once, %q in one-byte reads", wholeErr, shortErr)
		}
		if len(whole) != len(short) {
			t.Fatalf("%d frames at once, %d in one-byte reads", len(whole), len(short))
		}
		var consumed []byte
		for i := range whole {
			if !bytes.Equal(whole[i], short[i]) {
				t.Fatalf("frame %d differs", i)
			}
			consumed = frame.Append(consumed, whole[i])
		}
		if !bytes.HasPrefix(in, consumed) {
			t.Fatalf("accepted frames do not re-encode to their input")
		}
	})
}

func BenchmarkWriteRead256(b *testing.B) {
	body := bytes.Repeat([]byte{7}, 256)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	r := frame.NewReader(&buf, 0)
	for b.Loop() {
		_ = frame.Write(w, body)
		_ = w.Flush()
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
