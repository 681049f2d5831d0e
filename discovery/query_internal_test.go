package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/peer"
)

// fakePeer is how a peer of fakeDHT answers GET_PROVIDERS: after delay,
// with the providers it holds and the peers it names as closer; a peer
// that never answers holds the request until its context ends.
type fakePeer struct {
	delay  time.Duration
	never  bool
	provs  []peer.ID
	closer []peer.ID
}

// fakeDHT answers a provider query's requests on fake time.
type fakeDHT map[peer.ID]fakePeer

func (f fakeDHT) ask(ctx context.Context, p peer.ID) ([]*peer.AddrInfo, []*peer.AddrInfo, error) {
	fp, ok := f[p]
	if !ok {
		return nil, nil, errors.New("no such peer")
	}
	if fp.never {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}
	t := time.NewTimer(fp.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return infoPtrs(fp.provs), infoPtrs(fp.closer), nil
}

func infoPtrs(ids []peer.ID) []*peer.AddrInfo {
	out := make([]*peer.AddrInfo, len(ids))
	for i, id := range ids {
		out[i] = &peer.AddrInfo{ID: id}
	}
	return out
}

// names returns the fake IDs as the strings they were made from.
func names(ids []peer.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

func infos(ids ...peer.ID) []peer.AddrInfo {
	out := make([]peer.AddrInfo, len(ids))
	for i, id := range ids {
		out[i] = peer.AddrInfo{ID: id}
	}
	return out
}

// fakeIDs returns n peer IDs sorted closest to the key mh first (any bytes
// name a point in Kademlia's key space).
func fakeIDs(prefix string, n int, mh []byte) []peer.ID {
	ids := make([]peer.ID, n)
	for i := range ids {
		ids[i] = peer.ID(fmt.Sprintf("%s-%d", prefix, i))
	}
	return kb.SortClosestPeers(ids, kb.ConvertKey(string(mh)))
}

// quickQuery runs the quick phase of a provider query of mh from self on
// fake time and returns the providers it reported, sorted, and how long
// it took.
func quickQuery(t *testing.T, net fakeDHT, self peer.ID, mh []byte, quorum int, local []peer.AddrInfo, start []peer.ID) ([]peer.ID, time.Duration) {
	t.Helper()
	q := newProviderQuery(t.Context(), self, mh, quorum, local, start, net.ask, func(peer.AddrInfo) {})
	defer q.close()
	var got []peer.ID
	began := time.Now()
	q.run(t.Context(), func(ai peer.AddrInfo) { got = append(got, ai.ID) })
	took := time.Since(began)
	slices.Sort(got)
	return got, took
}

// TestProviderQueryStopRules checks when the quick phase of a provider
// query may stop: a quorum of answers that name providers besides this
// node, from peers among the K closest heard of, that agree. Each case
// sets a swarm in which stopping earlier would miss a provider.
func TestProviderQueryStopRules(t *testing.T) {
	mh := []byte("nova/s/cap/echo")
	self := peer.ID("self")
	a, b, x := peer.ID("provider-a"), peer.ID("provider-b"), peer.ID("provider-x")
	all := []peer.ID{a, b, x}

	t.Run("own store first, slow peers", func(t *testing.T) {
		// This node's store holds itself and a; b's and x's provides did
		// not reach it. The peers answer after 300 ms, as on a loaded
		// machine: the store's answer, which took no time, must not start
		// a grace that ends before any peer has answered.
		synctest.Test(t, func(t *testing.T) {
			peers := fakeIDs("p", 10, mh)
			net := fakeDHT{}
			for _, p := range peers {
				net[p] = fakePeer{delay: 300 * time.Millisecond, provs: append([]peer.ID{self}, all...)}
			}
			got, _ := quickQuery(t, net, self, mh, capabilityQuorum, infos(self, a), peers)
			if !slices.Equal(got, all) {
				t.Fatalf("found %q, want %q", names(got), names(all))
			}
		})
	})

	t.Run("own store holds only this node", func(t *testing.T) {
		// A store that names only this node says nothing about the
		// others: it is no answer with providers.
		synctest.Test(t, func(t *testing.T) {
			peers := fakeIDs("p", 10, mh)
			net := fakeDHT{}
			for _, p := range peers {
				net[p] = fakePeer{delay: 300 * time.Millisecond, provs: []peer.ID{self, x}}
			}
			got, _ := quickQuery(t, net, self, mh, capabilityQuorum, infos(self), peers)
			if !slices.Equal(got, []peer.ID{x}) {
				t.Fatalf("found %q, want [%q]", names(got), string(x))
			}
		})
	})

	t.Run("answers disagree", func(t *testing.T) {
		// x's provide reached only some of the closest peers: the five
		// fastest answers do not all name the same providers, so the
		// query asks the other closest peers too.
		synctest.Test(t, func(t *testing.T) {
			peers := fakeIDs("p", 10, mh)
			net := fakeDHT{}
			for i, p := range peers {
				switch {
				case i < 4:
					net[p] = fakePeer{delay: 10 * time.Millisecond, provs: []peer.ID{a}}
				case i == 4:
					net[p] = fakePeer{delay: 10 * time.Millisecond, provs: []peer.ID{a, b}}
				default:
					net[p] = fakePeer{delay: 50 * time.Millisecond, provs: []peer.ID{a, b, x}}
				}
			}
			got, _ := quickQuery(t, net, self, mh, capabilityQuorum, nil, peers)
			if !slices.Equal(got, all) {
				t.Fatalf("found %q, want %q", names(got), names(all))
			}
		})
	})

	t.Run("answers from peers that are not the closest", func(t *testing.T) {
		// The routing table knows only far peers, which hold a provider
		// record that a bounded first provide left with them; their
		// answers name the 20 closest peers, which hold every provider.
		// Answers from peers outside the K closest heard of do not count.
		synctest.Test(t, func(t *testing.T) {
			ids := fakeIDs("p", 30, mh)
			closest, far := ids[:queryK], ids[queryK:]
			net := fakeDHT{}
			for _, p := range closest {
				net[p] = fakePeer{delay: 10 * time.Millisecond, provs: all, closer: closest}
			}
			for _, p := range far {
				net[p] = fakePeer{delay: 10 * time.Millisecond, provs: []peer.ID{a}, closer: closest}
			}
			got, _ := quickQuery(t, net, self, mh, capabilityQuorum, nil, far)
			if !slices.Equal(got, all) {
				t.Fatalf("found %q, want %q", names(got), names(all))
			}
		})
	})

	t.Run("answers agree", func(t *testing.T) {
		// The common case stays as fast as before: the first five answers
		// of the closest peers agree, and the query stops at them.
		synctest.Test(t, func(t *testing.T) {
			peers := fakeIDs("p", 10, mh)
			net := fakeDHT{}
			for i, p := range peers {
				net[p] = fakePeer{delay: time.Duration(10+i) * time.Millisecond, provs: []peer.ID{self, a, b}}
			}
			got, took := quickQuery(t, net, self, mh, capabilityQuorum, infos(self, a, b), peers)
			if !slices.Equal(got, []peer.ID{a, b}) {
				t.Fatalf("found %q, want [%q %q]", names(got), string(a), string(b))
			}
			// This node's store and four answers: the fourth fastest peer's.
			if want := 13 * time.Millisecond; took != want {
				t.Fatalf("took %v, want %v", took, want)
			}
		})
	})

	t.Run("a closest peer never answers", func(t *testing.T) {
		// Six of the ten closest peers never answer (laptops asleep): the
		// query waits for the rest of its quorum for the grace, not for
		// the requests' timeout.
		synctest.Test(t, func(t *testing.T) {
			peers := fakeIDs("p", 10, mh)
			net := fakeDHT{}
			for i, p := range peers {
				if i < 6 {
					net[p] = fakePeer{never: true}
				} else {
					net[p] = fakePeer{delay: 20 * time.Millisecond, provs: []peer.ID{a}}
				}
			}
			got, took := quickQuery(t, net, self, mh, capabilityQuorum, nil, peers)
			if !slices.Equal(got, []peer.ID{a}) {
				t.Fatalf("found %q, want [%q]", names(got), string(a))
			}
			if want := 20*time.Millisecond + quorumGrace; took != want {
				t.Fatalf("took %v, want %v (the first answer, then the grace)", took, want)
			}
		})
	})
}
