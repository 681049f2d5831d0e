package protocol

import (
	"context"
	"time"

	"github.com/nova-node/nova-node/internal/clock"
)

// handlerCtx is the context of one handler call: context.WithTimeout of
// the Router's context, except that its timer and Done channel are made
// only when something first asks for Done. Most handlers never do, and a
// timer per envelope was a visible share of a message's cost. Err and
// Deadline need no timer: Err reads the clock and the parent.
type handlerCtx struct {
	parent   context.Context
	deadline time.Time

	mu    orderedMutex[lockHandlerCtx]
	done  chan struct{}  // made by the first Done
	err   error          // set once: the deadline, the parent's end or release
	stops [2]func() bool // the deadline timer and the parent watch, once made
}

// newHandlerCtx returns the context of a handler call whose timeout runs
// from start (when its envelope arrived, or now).
func newHandlerCtx(parent context.Context, start time.Time, timeout time.Duration) *handlerCtx {
	dl := start.Add(timeout)
	if pd, ok := parent.Deadline(); ok && pd.Before(dl) {
		dl = pd
	}
	return &handlerCtx{parent: parent, deadline: dl}
}

func (c *handlerCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *handlerCtx) Value(key any) any { return c.parent.Value(key) }

func (c *handlerCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errLocked()
}

// errLocked settles err from the parent and the clock if nothing has yet.
func (c *handlerCtx) errLocked() error {
	if c.err == nil {
		if err := c.parent.Err(); err != nil {
			c.endLocked(err)
		} else if !clock.Now().Before(c.deadline) {
			c.endLocked(context.DeadlineExceeded)
		}
	}
	return c.err
}

func (c *handlerCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err != nil { // ended before anyone asked for Done
		close(c.done)
		return c.done
	}
	if c.errLocked() != nil {
		return c.done // closed by endLocked
	}
	c.stops[0] = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) }).Stop
	c.stops[1] = context.AfterFunc(c.parent, func() { c.end(c.parent.Err()) })
	return c.done
}

func (c *handlerCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(err)
}

// endLocked ends the context once. The stop functions never wait for
// their callbacks, which would block on c.mu and then find err set.
func (c *handlerCtx) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	for _, stop := range c.stops {
		if stop != nil {
			stop()
		}
	}
}

// release ends the context when its handler returns, as the cancel of
// context.WithTimeout does.
func (c *handlerCtx) release() { c.end(context.Canceled) }

func (c *handlerCtx) String() string { return "protocol.handlerCtx" }
