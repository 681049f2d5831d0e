// Package streamscope is the per-stream bookkeeping every nova stream
// handler shares, after go-libp2p's ping handler: the memory a stream's
// buffers hold, reserved in the stream's resource-manager scope so the
// service's limits see it ([Memory]), and read or write deadlines kept
// one timeout ahead without re-arming a timer per read ([Deadline]).
//
// What the caller must do, for each stream it serves or opens:
//
//  1. attach the stream to its service (s.Scope().SetService) before
//     anything is read or reserved, so the reservation counts against the
//     service's limits;
//  2. [Reserve] the buffers it holds from the start, reset the stream if
//     that fails, and [Memory.Grow] the reservation as its buffers grow
//     (a frame, a line), resetting the stream when the growth is refused;
//  3. [Memory.Release] once the stream has ended.
//
// The package imports no nova package and starts no goroutines.
package streamscope

import (
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/internal/clock"
)

// Memory is what one stream's buffers hold, reserved in its scope with
// [network.ReservationPriorityAlways]: a reservation fails only when a
// limit of the stream, its service, its peer or the system would be
// exceeded. Its methods are safe for concurrent use; after Release, Grow
// reserves nothing and fails.
type Memory struct {
	mu    sync.Mutex
	scope network.ResourceScope
	held  int
	done  bool
}

// errReleased is Grow's answer after Release.
var errReleased = network.ErrResourceScopeClosed

// Reserve reserves n bytes in scope.
func Reserve(scope network.ResourceScope, n int) (*Memory, error) {
	if err := scope.ReserveMemory(n, network.ReservationPriorityAlways); err != nil {
		return nil, err
	}
	return &Memory{scope: scope, held: n}, nil
}

// Grow makes the reservation at least n bytes in all.
func (m *Memory) Grow(n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return errReleased
	}
	if n <= m.held {
		return nil
	}
	if err := m.scope.ReserveMemory(n-m.held, network.ReservationPriorityAlways); err != nil {
		return err
	}
	m.held = n
	return nil
}

// Held is the number of bytes reserved.
func (m *Memory) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

// Release gives the reservation back. Safe to call more than once.
func (m *Memory) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	m.done = true
	m.scope.ReleaseMemory(m.held)
	m.held = 0
}

// CountReads returns a reader that grows the reservation by every byte
// read through it, up to max bytes above what is held when it is made:
// for a stream that carries one message, whose reader holds all of it.
// A read whose growth is refused fails with the resource manager's error.
func (m *Memory) CountReads(r io.Reader, max int) io.Reader {
	return &countingReader{r: r, m: m, base: m.Held(), max: max}
}

type countingReader struct {
	r         io.Reader
	m         *Memory
	base, max int
	n         int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += n
		if gerr := c.m.Grow(c.base + min(c.n, c.max)); gerr != nil {
			return n, gerr
		}
	}
	return n, err
}

// Deadline keeps a stream deadline about one timeout ahead, re-arming it
// only once half the timeout has passed: on a yamux stream each
// SetReadDeadline or SetWriteDeadline arms a new timer, too dear for every
// frame, line or flush. A deadline extended before each read therefore
// fires after between half a timeout and a whole one without a read.
// The zero value is ready; it is not safe for concurrent use.
type Deadline struct{ until time.Time }

// Extend calls set with a deadline timeout from now, unless the one set
// last is still more than half the timeout away.
func (d *Deadline) Extend(timeout time.Duration, set func(time.Time) error) {
	now := clock.Now()
	if now.Add(timeout / 2).Before(d.until) {
		return
	}
	d.until = now.Add(timeout)
	_ = set(d.until)
}
