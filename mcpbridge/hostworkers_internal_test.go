package mcpbridge

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"pgregory.net/rapid"
)

// hostWorkers runs every call handed to it exactly once, keeps at most
// maxIdleHostWorkers goroutines waiting, and ends them all with its
// session (synctest fails a test whose goroutines outlive it).
func TestHostWorkers(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		waves := rapid.SliceOfN(rapid.IntRange(1, 12), 1, 6).Draw(rt, "waves")
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			w := &hostWorkers{ctx: ctx}
			var ran atomic.Int64
			want := 0
			for _, n := range waves {
				var wg sync.WaitGroup
				for range n {
					wg.Add(1)
					w.run(func() { ran.Add(1); wg.Done() })
				}
				want += n
				wg.Wait()
				synctest.Wait()
				w.mu.Lock()
				idle := len(w.idle)
				w.mu.Unlock()
				if idle > maxIdleHostWorkers {
					t.Fatalf("%d goroutines waiting, at most %d", idle, maxIdleHostWorkers)
				}
			}
			cancel()
			// a call handed over as the session ends still runs
			done := make(chan struct{})
			w.run(func() { ran.Add(1); close(done) })
			<-done
			want++
			synctest.Wait()
			if got := ran.Load(); got != int64(want) {
				t.Fatalf("%d calls ran, want %d", got, want)
			}
		})
	})
}
