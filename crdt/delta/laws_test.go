package delta_test

import (
	"testing"

	"pgregory.net/rapid"
)

// The join laws, for every type and for documents and deltas: join is
// commutative, associative and idempotent, so a state is a join
// semilattice and replicas converge whatever the order, grouping and
// repetition of what they receive.

func commutative[T any](l lattice[T]) func(*testing.T) {
	return func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			xs := l.gen(t)
			a, b := pick(t, xs, "a"), pick(t, xs, "b")
			ab, ba := l.clone(a), l.clone(b)
			l.join(ab, b)
			l.join(ba, a)
			if !l.equal(ab, ba) {
				t.Fatal("a ⊔ b != b ⊔ a")
			}
		})
	}
}

func associative[T any](l lattice[T]) func(*testing.T) {
	return func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			xs := l.gen(t)
			a, b, c := pick(t, xs, "a"), pick(t, xs, "b"), pick(t, xs, "c")
			left := l.clone(a) // (a ⊔ b) ⊔ c
			l.join(left, b)
			l.join(left, c)
			bc := l.clone(b) // a ⊔ (b ⊔ c)
			l.join(bc, c)
			right := l.clone(a)
			l.join(right, bc)
			if !l.equal(left, right) {
				t.Fatal("(a ⊔ b) ⊔ c != a ⊔ (b ⊔ c)")
			}
		})
	}
}

func idempotent[T any](l lattice[T]) func(*testing.T) {
	return func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			xs := l.gen(t)
			a, b := pick(t, xs, "a"), pick(t, xs, "b")
			aa := l.clone(a)
			l.join(aa, l.clone(a))
			if !l.equal(aa, a) {
				t.Fatal("a ⊔ a != a")
			}
			ab := l.clone(a) // joining b twice is joining it once
			l.join(ab, b)
			abb := l.clone(ab)
			l.join(abb, b)
			if !l.equal(ab, abb) {
				t.Fatal("(a ⊔ b) ⊔ b != a ⊔ b")
			}
		})
	}
}

func TestJoinCommutative(t *testing.T) {
	t.Run("MVRegister", commutative(registerLattice()))
	t.Run("ORSet", commutative(setLattice()))
	t.Run("PNCounter", commutative(counterLattice()))
	t.Run("Doc", commutative(docLattice()))
	t.Run("Delta", commutative(deltaLattice()))
}

func TestJoinAssociative(t *testing.T) {
	t.Run("MVRegister", associative(registerLattice()))
	t.Run("ORSet", associative(setLattice()))
	t.Run("PNCounter", associative(counterLattice()))
	t.Run("Doc", associative(docLattice()))
	t.Run("Delta", associative(deltaLattice()))
}

func TestJoinIdempotent(t *testing.T) {
	t.Run("MVRegister", idempotent(registerLattice()))
	t.Run("ORSet", idempotent(setLattice()))
	t.Run("PNCounter", idempotent(counterLattice()))
	t.Run("Doc", idempotent(docLattice()))
	t.Run("Delta", idempotent(deltaLattice()))
}

// TestDeltaMutatorLawDoc checks, from outside, what the white-box
// TestDeltaMutatorLaw proves against a reference model: a mutator leaves
// the document alone, and its delta joined into the document (X ⊔ mδ(X))
// equals the delta joined into any replica that had already seen X, in
// particular X's full state (m(X) = X ⊔ mδ(X) is the same state wherever
// it is built).
func TestDeltaMutatorLawDoc(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		docs, _ := history(t, 2)
		x := docs[0]
		o := genOp.Draw(t, "op")
		before := x.Clone()
		d, err := o.mutate(x)
		if err != nil {
			t.Skip("invalid at this path")
		}
		if !x.Equal(before) {
			t.Fatal("mutator changed the state")
		}
		// Another replica that has seen X ends equal to X ⊔ mδ(X) once it
		// has joined the delta too.
		other := docs[1].Clone()
		other.JoinDoc(x)
		x.Join(d)
		other.Join(d)
		want := docs[1].Clone()
		want.JoinDoc(x)
		if !other.Equal(want) {
			t.Fatal("delta joined at a replica that saw X differs from joining X ⊔ mδ(X)")
		}
	})
}
