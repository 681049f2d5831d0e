package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// deadlinePipe is one end of a net.Pipe as a session stream: its writes
// take as long as the other end takes to read them, and one can be
// bounded by a deadline.
type deadlinePipe struct{ net.Conn }

func (p deadlinePipe) writeBy(b []byte, deadline time.Time) (int, error) {
	_ = p.SetWriteDeadline(deadline)
	defer func() { _ = p.SetWriteDeadline(time.Time{}) }()
	return p.Write(b)
}

// cancelledCall starts a call on c, lets peer read its request, cancels it
// and returns the request's id once the call has returned.
func cancelledCall(t *testing.T, c *lineConn, peer *bufio.Reader) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.call(ctx, "tools/call", []byte(`{"name":"a.b"}`))
		errc <- err
	}()
	line, err := peer.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call returned %v", err)
	}
	return req.ID
}

// noticeDone reports, once every goroutine of the test is blocked,
// whether c's cancellation notices have all ended.
func noticeDone(c *lineConn) bool {
	done := make(chan struct{})
	go func() { c.wait(); close(done) }()
	synctest.Wait()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func ended(c *lineConn) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func TestCancelNoticeReachesPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := newLineConn(deadlinePipe{a})
		peer := bufio.NewReader(b)
		id := cancelledCall(t, c, peer)
		line, err := peer.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var n struct {
			Method string `json:"method"`
			Params struct {
				RequestID string `json:"requestId"`
			} `json:"params"`
		}
		if err := json.Unmarshal(line, &n); err != nil || n.Method != "notifications/cancelled" || n.Params.RequestID != id {
			t.Fatalf("peer got %s (%v), want notifications/cancelled for %s", line, err, id)
		}
		if !noticeDone(c) || ended(c) {
			t.Fatal("after its notice, the connection should be open with no notice pending")
		}
		_ = c.Close()
	})
}

// A peer that takes no line: the notice's write is cut at its deadline
// and the notice dropped; nothing of it went out, so the connection stays.
func TestCancelNoticeWriteBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := newLineConn(deadlinePipe{a})
		cancelledCall(t, c, bufio.NewReader(b)) // then b reads nothing
		time.Sleep(cancelNoticeTimeout - time.Millisecond)
		if noticeDone(c) || ended(c) {
			t.Fatal("the notice gave up before its deadline")
		}
		time.Sleep(time.Millisecond)
		if !noticeDone(c) || ended(c) {
			t.Fatal("the notice's write outlived its deadline, or ended the connection")
		}
		_ = c.Close()
	})
}

// partialPipe takes the first half of a write, then blocks until the
// write's deadline: a stream whose peer stopped reading mid-line.
type partialPipe struct {
	deadlinePipe
}

func (p partialPipe) writeBy(b []byte, deadline time.Time) (int, error) {
	n, err := p.deadlinePipe.writeBy(b[:len(b)/2], deadline)
	if err != nil {
		return n, err
	}
	m, err := p.deadlinePipe.writeBy(b[len(b)/2:], deadline)
	return n + m, err
}

// A notice the peer took only part of ends the connection at its
// deadline: the rest of its line would run into the next message.
func TestCancelNoticePartialWriteEndsConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := newLineConn(partialPipe{deadlinePipe{a}})
		peer := bufio.NewReader(b)
		cancelledCall(t, c, peer)
		half := make(chan error, 1)
		go func() { // the peer reads what comes, then stops
			buf := make([]byte, 1)
			_, err := io.ReadAtLeast(peer, buf, 1)
			half <- err
		}()
		if err := <-half; err != nil {
			t.Fatal(err)
		}
		time.Sleep(cancelNoticeTimeout)
		if !noticeDone(c) || !ended(c) {
			t.Fatal("a notice cut mid-line did not end the connection at its deadline")
		}
		_ = c.Close()
	})
}

// A line held by another write the peer does not take: the notice waits
// for it until its deadline, then is dropped, and the connection stays as
// it was; Close ends the stuck write.
func TestCancelNoticeWaitBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := newLineConn(deadlinePipe{a})
		peer := bufio.NewReader(b)
		stuck := make(chan error, 1)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := c.call(ctx, "tools/call", []byte(`{"name":"a.b"}`))
			errc <- err
		}()
		if _, err := peer.ReadBytes('\n'); err != nil {
			t.Fatal(err)
		}
		go func() {
			stuck <- c.writeLine(func(b []byte) []byte { return append(b, `{"jsonrpc":"2.0","method":"ping"}`...) })
		}()
		synctest.Wait() // the ping holds the line
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call returned %v", err)
		}
		time.Sleep(cancelNoticeTimeout - time.Millisecond)
		if noticeDone(c) {
			t.Fatal("the notice gave up waiting for the line before its deadline")
		}
		time.Sleep(time.Millisecond)
		if !noticeDone(c) || ended(c) {
			t.Fatal("the notice still waits for the line after its deadline, or ended the connection")
		}
		_ = c.Close()
		if err := <-stuck; err == nil {
			t.Fatal("the stuck write returned no error after Close")
		}
	})
}

// Close waits for a notice in progress, and a call cancelled after the
// connection ended starts none.
func TestCancelNoticeOwnedByConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := newLineConn(deadlinePipe{a})
		cancelledCall(t, c, bufio.NewReader(b))
		synctest.Wait() // the notice is writing, the peer not reading
		_ = c.Close()   // cuts the write and waits for the notice
		if !noticeDone(c) {
			t.Fatal("Close returned with a notice still running")
		}
		c.notify(func() { t.Error("a notice started on an ended connection") })
		synctest.Wait()
	})
}
