package protocol

import (
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/internal/streamscope"
)

// deadline is a stream deadline kept one timeout ahead (the rule lives in
// streamscope.Deadline, shared with the other nova stream handlers).
type deadline struct{ streamscope.Deadline }

// writeTimeout bounds one write (a flush) on a nova stream.
const writeTimeout = 30 * time.Second

// firstFrameTimeout bounds the wait for an inbound stream's first frame:
// the opener writes its hello as soon as the stream is open.
const firstFrameTimeout = 30 * time.Second

// extend calls set with a deadline timeout from now, unless the one set
// last is still more than half the timeout away.
func (d *deadline) extend(timeout time.Duration, set func(time.Time) error) {
	d.Extend(timeout, set)
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
