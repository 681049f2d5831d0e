package protocol

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// lockRank is a mutex's place in the lock order of the package doc: a
// goroutine may take a mutex only while every mutex it holds ranks lower.
type lockRank uint8

// The ranks, one type per mutex of the package: a mutex declared as
// orderedMutex[lockRouter] is Router.mu. The package doc's table lists them
// in this order (TestLockOrderTableIsTheDocs holds the two together).
type (
	lockChannelSend   struct{} // outChannel.sendMu
	lockChannel       struct{} // outChannel.mu
	lockRouter        struct{} // Router.mu
	lockInStream      struct{} // inStream.mu
	lockInChannel     struct{} // inChannel.mu
	lockOutStream     struct{} // outStream.mu
	lockStreamWrite   struct{} // outStream.wmu
	lockChannelEvents struct{} // outChannel.evMu
	lockRoster        struct{} // Router.rosterMu
	lockPending       struct{} // Router.pmu
	lockBounded       struct{} // bounded.mu
	lockHandlerCtx    struct{} // handlerCtx.mu
	lockMemStore      struct{} // MemStore.mu
)

func (lockChannelSend) rank() lockRank   { return 1 }
func (lockChannel) rank() lockRank       { return 2 }
func (lockRouter) rank() lockRank        { return 3 }
func (lockInStream) rank() lockRank      { return 4 }
func (lockInChannel) rank() lockRank     { return 5 }
func (lockOutStream) rank() lockRank     { return 6 }
func (lockStreamWrite) rank() lockRank   { return 7 }
func (lockChannelEvents) rank() lockRank { return 8 }
func (lockRoster) rank() lockRank        { return 9 }
func (lockPending) rank() lockRank       { return 10 }
func (lockBounded) rank() lockRank       { return 11 }
func (lockHandlerCtx) rank() lockRank    { return 12 }
func (lockMemStore) rank() lockRank      { return 13 }

// lockNames names the mutex of each rank, as the package doc does.
var lockNames = [...]string{
	1:  "outChannel.sendMu",
	2:  "outChannel.mu",
	3:  "Router.mu",
	4:  "inStream.mu",
	5:  "inChannel.mu",
	6:  "outStream.mu",
	7:  "outStream.wmu",
	8:  "outChannel.evMu",
	9:  "Router.rosterMu",
	10: "Router.pmu",
	11: "bounded.mu",
	12: "handlerCtx.mu",
	13: "MemStore.mu",
}

type ranked interface{ rank() lockRank }

// orderedMutex is a sync.Mutex at rank R of the lock order. Its zero value
// is an unlocked mutex. Unless lockOrderChecks is set it is a sync.Mutex
// behind one call (generic methods are not inlined) and the load of a
// flag: no difference the round-trip benchmarks can see.
type orderedMutex[R ranked] struct {
	mu sync.Mutex
}

// lockOrderChecks turns the checker on: every Lock then fails (panics, and
// is recorded for lockOrderViolations) if the goroutine holds a mutex of
// the same or a higher rank. Set by the package's tests (TestMain) and by
// the lockorder build tag (lockorder_on.go), for the tests of other
// packages. It costs a stack walk per Lock: never in production.
var lockOrderChecks atomic.Bool

func (m *orderedMutex[R]) Lock() {
	if lockOrderChecks.Load() {
		m.lockChecked()
		return
	}
	m.mu.Lock()
}

// TryLock never waits, so it is outside the order; what it takes counts
// as held for the Locks that follow.
func (m *orderedMutex[R]) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	if lockOrderChecks.Load() {
		m.held()
	}
	return true
}

// lockUnshared locks a mutex that no other goroutine can reach yet (its
// owner is not published): it cannot wait, so, like TryLock, it may be
// taken whatever the goroutine holds.
func (m *orderedMutex[R]) lockUnshared() {
	m.mu.Lock()
	if lockOrderChecks.Load() {
		m.held()
	}
}

func (m *orderedMutex[R]) Unlock() {
	if lockOrderChecks.Load() {
		lockReleased(&m.mu)
	}
	m.mu.Unlock()
}

func (m *orderedMutex[R]) lockChecked() {
	var r R
	g := goroutineID()
	lockCheck(g, r.rank())
	m.mu.Lock()
	lockHeld(g, r.rank(), &m.mu)
}

func (m *orderedMutex[R]) held() {
	var r R
	lockHeld(goroutineID(), r.rank(), &m.mu)
}

// The checker's state: the mutexes each goroutine holds, in the order it
// took them, the goroutine holding each, and the violations seen.
var lockState struct {
	mu         sync.Mutex
	held       map[uint64][]heldLock
	holder     map[*sync.Mutex]uint64
	violations []string
}

type heldLock struct {
	rank lockRank
	mu   *sync.Mutex
}

// lockOrderOut is where a violation is said as it happens (the panic may
// be recovered: a handler's is).
var lockOrderOut io.Writer = os.Stderr

// lockCheck fails if goroutine g holds a mutex that does not rank below r.
func lockCheck(g uint64, r lockRank) {
	lockState.mu.Lock()
	var bad *heldLock
	for i, h := range lockState.held[g] {
		if h.rank >= r {
			bad = &lockState.held[g][i]
			break
		}
	}
	if bad == nil {
		lockState.mu.Unlock()
		return
	}
	msg := fmt.Sprintf("lock order (see the package doc): taking %s (rank %d) while holding %s (rank %d)\n%s",
		lockNames[r], r, lockNames[bad.rank], bad.rank, debug.Stack())
	lockState.violations = append(lockState.violations, msg)
	lockState.mu.Unlock()
	fmt.Fprintln(lockOrderOut, msg)
	panic(msg)
}

func lockHeld(g uint64, r lockRank, mu *sync.Mutex) {
	lockState.mu.Lock()
	defer lockState.mu.Unlock()
	if lockState.held == nil {
		lockState.held = make(map[uint64][]heldLock)
		lockState.holder = make(map[*sync.Mutex]uint64)
	}
	lockState.held[g] = append(lockState.held[g], heldLock{r, mu})
	lockState.holder[mu] = g
}

// lockReleased forgets mu, which its holder or (as sync.Mutex allows)
// another goroutine unlocks.
func lockReleased(mu *sync.Mutex) {
	lockState.mu.Lock()
	defer lockState.mu.Unlock()
	g, ok := lockState.holder[mu]
	if !ok {
		return
	}
	delete(lockState.holder, mu)
	hs := lockState.held[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].mu == mu {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(lockState.held, g)
	} else {
		lockState.held[g] = hs
	}
}

// lockOrderViolations returns the violations seen since the last call and
// forgets them.
func lockOrderViolations() []string {
	lockState.mu.Lock()
	defer lockState.mu.Unlock()
	v := lockState.violations
	lockState.violations = nil
	return v
}

// goroutineID parses the calling goroutine's id from the first line of its
// stack ("goroutine 42 [running]:"): slow, and for the checker only.
func goroutineID() uint64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	var id uint64
	for _, c := range b[len("goroutine "):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
