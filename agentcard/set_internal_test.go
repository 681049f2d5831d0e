package agentcard

import (
	"fmt"
	"maps"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"pgregory.net/rapid"
)

// A set holds what a map would, through adds, deletes and walks that
// delete as they go, on both sides of the slice-to-map change.
func TestSetActsAsAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s set
		model := map[key]*entry{}
		keyGen := rapid.Custom(func(t *rapid.T) key {
			return key{host: peer.ID(fmt.Sprint("h", rapid.IntRange(0, 3).Draw(t, "host"))), id: fmt.Sprint("a", rapid.IntRange(0, 5).Draw(t, "id"))}
		})
		for range rapid.IntRange(0, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				k := keyGen.Draw(t, "add")
				e := &entry{addr: k.id + "@" + string(k.host)}
				s.add(k, e)
				model[k] = e
			case 1:
				k := keyGen.Draw(t, "del")
				s.del(k)
				delete(model, k)
			case 2: // walk, deleting some entries as they come
				seen := map[key]*entry{}
				for k, e := range s.all() {
					if _, dup := seen[k]; dup {
						t.Fatalf("%v yielded twice", k)
					}
					seen[k] = e
					if rapid.Bool().Draw(t, "delete it") {
						s.del(k)
						delete(model, k)
					}
				}
				for k, e := range model { // what the walk left
					if seen[k] != e {
						t.Fatalf("%v not yielded", k)
					}
				}
			}
			got := map[key]*entry{}
			for k, e := range s.all() {
				got[k] = e
			}
			if !maps.Equal(got, model) || s.len() != len(model) {
				t.Fatalf("set holds %v (len %d), want %v", got, s.len(), model)
			}
		}
	})
}

func TestNilSetIsEmpty(t *testing.T) {
	var s *set
	if s.len() != 0 {
		t.Fatal("nil set has entries")
	}
	for range s.all() {
		t.Fatal("nil set yielded")
	}
}
