package delta_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/nova-node/nova-node/crdt/delta"
)

// TestSizeBoundedByLiveData: state is bounded by live data, not by
// history. 20,000 overwrites of the same 100 keys (200 per key: the history
// is far larger than the bound) leave 100 entries and a
// context of one number per replica; deletes and set removals leave no
// tombstones.
func TestSizeBoundedByLiveData(t *testing.T) {
	const keys, writes = 100, 20_000
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() string { return fmt.Sprintf("/k%d", rng.IntN(keys)) }

	t.Run("one replica", func(t *testing.T) {
		d := newDoc(t, "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo") // a peer ID
		for i := range writes {
			apply(t, d)(d.Set(key(), raw(fmt.Sprint(i))))
		}
		b := encodedSize(t, d)
		t.Logf("%d overwrites of %d keys: %d entries, context %v, %d bytes", writes, keys, d.Len(), d.Context(), b)
		if d.Len() != keys || d.Context().Len() != writes || len(d.Context().Clock()) != 1 || b > 4096 {
			t.Errorf("state not bounded: %d entries, %d bytes", d.Len(), b)
		}
	})

	t.Run("three replicas with deletes and sets", func(t *testing.T) {
		docs := []*delta.Doc{newDoc(t, "a"), newDoc(t, "b"), newDoc(t, "c")}
		for i := range writes {
			w := docs[i%3]
			var x *delta.Delta
			var err error
			switch i % 7 {
			case 0:
				x, err = w.Delete(key())
			case 1:
				x, err = w.SetAdd(key()+"/s", raw(fmt.Sprint(i%5)))
			case 2:
				x, err = w.SetRemove(key()+"/s", raw(fmt.Sprint(i%5)))
			case 3:
				x, err = w.Incr(key()+"/n", 1)
			default:
				x, err = w.Set(key(), raw(fmt.Sprintf(`{"v":%d,"w":"x"}`, i)))
			}
			x = apply(t, w)(x, err)
			for _, o := range docs {
				o.Join(x)
			}
		}
		b := encodedSize(t, docs[0])
		t.Logf("%d mixed updates at 3 replicas: %d entries, context %v, %d bytes", writes, docs[0].Len(), docs[0].Context(), b)
		if docs[0].Len() > 4*keys || b > 16384 {
			t.Errorf("state not bounded: %d entries, %d bytes", docs[0].Len(), b)
		}
		if !docs[0].Equal(docs[1]) || !docs[1].Equal(docs[2]) {
			t.Error("not converged")
		}
	})

	t.Run("buffer pruned", func(t *testing.T) {
		var buf delta.Buffer
		d := newDoc(t, "a")
		for i := range 1000 {
			buf.Add(apply(t, d)(d.Set(key(), raw(fmt.Sprint(i)))))
			if i%100 == 99 {
				buf.Prune(buf.Seq()) // every peer acknowledged
			}
		}
		if buf.Len() != 0 {
			t.Errorf("buffer holds %d deltas after every peer acknowledged", buf.Len())
		}
	})
}

func encodedSize(t *testing.T, d *delta.Doc) int {
	t.Helper()
	b, err := delta.EncodeDoc(d)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
