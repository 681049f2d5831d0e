package protocol

import (
	"time"

	"github.com/nova-node/nova-node/internal/clock"
)

// deadline keeps a stream deadline about one timeout ahead, re-arming it
// only once half the timeout has passed: on a yamux stream each
// SetReadDeadline or SetWriteDeadline arms a new timer, too dear for every
// frame or flush.
type deadline struct{ until time.Time }

// writeTimeout bounds one write (a flush) on a nova stream.
const writeTimeout = 30 * time.Second

// extend calls set with a deadline timeout from now, unless the one set
// last is still more than half the timeout away.
func (d *deadline) extend(timeout time.Duration, set func(time.Time) error) {
	now := clock.Now()
	if now.Add(timeout / 2).Before(d.until) {
		return
	}
	d.until = now.Add(timeout)
	_ = set(d.until)
}
