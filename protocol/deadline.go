package protocol

import (
	"time"

	"github.com/libp2p/go-libp2p/core/network"

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

// deadlineWriter writes to a stream with its write deadline extended
// before every write, so the writes a bufio.Writer makes on its own (its
// buffer full) meet a live deadline too, not only explicit flushes: after
// a quiet spell longer than writeTimeout, a write the buffer started would
// fail at once on the expired deadline (an inbound stream then stopped
// acknowledging for good). Used under the stream's write lock, like dl.
type deadlineWriter struct {
	st network.Stream
	dl *deadline
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	w.dl.extend(writeTimeout, w.st.SetWriteDeadline)
	return w.st.Write(p)
}
