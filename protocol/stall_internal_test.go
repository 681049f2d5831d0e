package protocol

import (
	"bufio"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/protocol/frame"
)

// A receiver that accepts a channel and then stops reading blocks the
// sender posting to it (that is the backpressure), but nothing else: the
// channel's state is readable (status) and the persister writes its
// unacknowledged envelopes while the sender waits. Before, the blocked
// write held the channel's lock, and both waited for the 30 s write
// deadline, keeping the envelopes in memory only.
func TestStalledReceiverBlocksOnlyItsSender(t *testing.T) {
	store := NewMemStore()
	tg := rvNewTarget(t, WithStore(store))
	m := rvNewMallory(t, tg)
	stop := make(chan struct{})
	m.h.SetStreamHandler(IDA2A, func(st network.Stream) {
		fr := frame.NewReader(st, 0)
		bw := bufio.NewWriter(st)
		for {
			b, err := fr.Next()
			if err != nil {
				return
			}
			msg, err := decodeMsg(b)
			if err != nil || msg.Kind != kindOpen {
				continue
			}
			ok, _ := encodeMsg(&wireMsg{Kind: kindOpened, Ch: msg.Ch})
			_ = frame.Write(bw, ok)
			_ = bw.Flush()
			<-stop // and never read again
			_ = st.Reset()
			return
		}
	})
	t.Cleanup(func() { close(stop) }) // runs before the hosts close
	m.stream(tg, "m").drain()         // the target learns agent m from this hello
	to := m.addr("m")
	if !rvWait(t, 5*time.Second, func() bool { _, ok := tg.reg.Get(to); return ok }) {
		t.Fatal("the target never learned Mallory's card")
	}

	f := envelope.NewFactory()
	payload := []byte(`"` + strings.Repeat("x", 254) + `"`)
	var posted atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { // blocked in Post once the stream's windows are full; Close ends it
		for ctx.Err() == nil {
			env, err := f.New("a0", to, envelope.TypeNotification, payload)
			if err != nil {
				return
			}
			if _, err := tg.r.Post(ctx, env); err != nil {
				return
			}
			posted.Add(1)
		}
	}()
	// Wait until Post blocks: no progress for 300 ms.
	last := int64(-1)
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatalf("the sender never blocked (%d posted)", posted.Load())
		}
		time.Sleep(300 * time.Millisecond)
		if n := posted.Load(); n == last && n > 0 {
			break
		} else {
			last = n
		}
	}

	got := make(chan []ChannelInfo, 1)
	go func() { got <- tg.r.Channels() }()
	select {
	case cs := <-got:
		if len(cs) != 1 || cs[0].Pending < int(last) {
			t.Fatalf("channels %+v, want one with >= %d pending", cs, last)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Channels() waits for the blocked sender")
	}
	if !rvWait(t, 5*time.Second, func() bool {
		chs, _ := store.LoadOutbox()
		return len(chs) == 1 && len(chs[0].Items) >= int(last)
	}) {
		chs, _ := store.LoadOutbox()
		n := 0
		for _, c := range chs {
			n += len(c.Items)
		}
		t.Fatalf("%d of %d posted envelopes written to the outbox while the sender is blocked", n, last)
	}
}
