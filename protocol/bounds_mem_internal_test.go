package protocol

import (
	"crypto/rand"
	"fmt"
	"runtime"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// channelHeapBound is the documented bound (docs/security.md, "Bounds") on
// the heap the inbound channel table and the remembered watermarks take
// when full: maxInChannels channels and maxMarks watermarks.
const channelHeapBound = 48 << 20

// 1,000 peers open 100 channels each, every channel with a watermark (as
// if an envelope had been handled and persisted), and go idle: the router
// holds at most maxInChannels channels and maxMarks watermarks, and the
// heap they take stays under channelHeapBound. Slow (~10 s with -race):
// skipped with -short; run with
// go test -race -run TestChannelTablesMemoryBounded ./protocol/
func TestChannelTablesMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("memory bound: 100,000 channel opens")
	}
	const peers, perPeer = 1000, 100
	store := NewMemStore()
	h := loopbackHost(t)
	r, reg := startRouter(t, h, []string{"a0"}, WithStore(store))
	ids := make([]peer.ID, peers)
	for i := range ids {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ids[i], _ = peer.IDFromPrivateKey(k)
		c := agentcard.Card{ID: "m", Name: "m", Version: "1.0.0", Tier: tiers.L3, Capabilities: []agentcard.Capability{}, Host: ids[i].String()}
		if _, err := reg.MergeRemote(c); err != nil {
			t.Fatal(err)
		}
	}
	before := heapInUse()
	refused := 0
	for i := range perPeer {
		for _, p := range ids {
			pStr := p.String()
			m := &inMsg{Kind: kindOpen, Ch: fmt.Sprintf("c%05d", i), From: "m@" + pStr, To: "a0"}
			if _, _, err := r.openIn(p, pStr, m, nil); err != nil {
				refused++
				continue
			}
			r.mu.Lock()
			ic := r.inChans[pStr+"/"+m.Ch]
			r.mu.Unlock()
			ic.mu.Lock()
			ic.watermark = uint64(i + 1)
			ic.mu.Unlock()
		}
	}
	r.mu.Lock()
	live, marks, entries := len(r.inChans), len(r.watermarks), len(r.inByPeer)
	r.mu.Unlock()
	used := heapInUse() - before
	runtime.KeepAlive(r)
	t.Logf("%d opens from %d peers: %d refused; %d channels live, %d watermarks remembered, %d peer entries; heap +%.1f MiB",
		peers*perPeer, peers, refused, live, marks, entries, float64(used)/(1<<20))
	if live > maxInChannels || marks > maxMarks {
		t.Errorf("%d channels and %d watermarks held; bounds %d and %d", live, marks, maxInChannels, maxMarks)
	}
	if live < maxInChannels/2 || marks < maxMarks/2 {
		t.Errorf("only %d channels and %d watermarks: the test did not fill the tables", live, marks)
	}
	if used > channelHeapBound {
		t.Errorf("the channel tables take %d MiB of heap; documented bound %d MiB", used>>20, channelHeapBound>>20)
	}
}
