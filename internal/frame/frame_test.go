package frame_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

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
