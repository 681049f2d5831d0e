package authority_test

import (
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/tiers"
)

// The decoders of the three records see bytes from peers. Whatever they
// accept must be a record the sealers would produce: re-sealed with a fresh
// key and opened again, it is equal but for its Issuer.

// fuzzKeys are the signers of the seed corpus and of the re-sealing.
func fuzzKeys(f *testing.F) (signer, resealer, p ident) {
	return identFrom(f, 900), identFrom(f, 901), identFrom(f, 902)
}

// mutations returns b and a few damaged copies of it.
func mutations(b []byte) [][]byte {
	out := [][]byte{b, b[:len(b)/2], b[:len(b)-1], append(append([]byte{}, b...), 0)}
	for _, i := range []int{0, 5, len(b) / 2, len(b) - 70, len(b) - 1} {
		m := append([]byte{}, b...)
		m[i] ^= 0x01
		out = append(out, m)
	}
	return out
}

func FuzzOpenGrant(f *testing.F) {
	signer, resealer, p := fuzzKeys(f)
	for _, g := range []authority.Grant{
		{Authority: signer.id, Serial: 1, Peer: p.id, MaxTier: tiers.L3},
		{Authority: signer.id, Serial: 42, Peer: p.id, Agent: "io", MaxTier: tiers.L0, Sandboxes: []string{"lab", "edge"},
			Capabilities: []string{"sum"}, NotBefore: t0, Expires: t0.Add(time.Hour)},
		{Authority: signer.id, Serial: 1 << 60, Peer: p.id, MaxTier: tiers.L1, Capabilities: []string{}, Expires: t0},
	} {
		for _, m := range mutations(mustSealGrant(f, g, signer)) {
			f.Add(m)
		}
	}
	f.Add(sealRaw(f, "/nova/grant/1", map[int]any{1: []byte(signer.id), 2: 1, 3: []byte(p.id), 5: 7}, signer))
	f.Add(sealRaw(f, "/nova/grant/1", map[int]any{1: []byte(signer.id), 2: 1, 3: []byte(p.id), 7: []string{"x"}, 8: true}, signer))
	f.Add(sealRaw(f, "/nova/grant/1", map[int]any{1: []byte(signer.id), 2: 1, 3: []byte(p.id), 99: 1}, signer))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := authority.OpenGrant(b)
		if err != nil {
			checkInvalid(t, err, "grant")
			return
		}
		if g.Issuer == "" {
			t.Fatal("an opened grant has no issuer")
		}
		again, err := authority.SealGrant(g, resealer.key)
		if err != nil {
			t.Fatalf("an opened grant does not re-seal: %v\n%+v", err, g)
		}
		g2, err := authority.OpenGrant(again)
		if err != nil {
			t.Fatalf("a re-sealed grant does not open: %v", err)
		}
		if g2.Issuer != resealer.id || !sameGrant(g, g2) {
			t.Fatalf("re-sealed grant differs:\n%+v\n%+v", g, g2)
		}
	})
}

func FuzzOpenRevocation(f *testing.F) {
	signer, resealer, p := fuzzKeys(f)
	for _, r := range []authority.Revocation{
		{Authority: signer.id, Serial: 1},
		{Authority: signer.id, Serial: 42, Peer: p.id, Reason: "key leaked", At: t0},
	} {
		for _, m := range mutations(mustSealRevocation(f, r, signer)) {
			f.Add(m)
		}
	}
	f.Add(sealRaw(f, "/nova/revocation/1", map[int]any{1: []byte(signer.id), 2: 0}, signer))
	f.Add(sealRaw(f, "/nova/revocation/1", map[int]any{1: []byte(signer.id), 2: 1, 3: []byte{}}, signer))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := authority.OpenRevocation(b)
		if err != nil {
			checkInvalid(t, err, "revocation")
			return
		}
		again, err := authority.SealRevocation(r, resealer.key)
		if err != nil {
			t.Fatalf("an opened revocation does not re-seal: %v\n%+v", err, r)
		}
		r2, err := authority.OpenRevocation(again)
		if err != nil {
			t.Fatalf("a re-sealed revocation does not open: %v", err)
		}
		if r2.Issuer != resealer.id || r2.Authority != r.Authority || r2.Serial != r.Serial || r2.Peer != r.Peer ||
			r2.Reason != r.Reason || !r2.At.Equal(r.At) {
			t.Fatalf("re-sealed revocation differs:\n%+v\n%+v", r, r2)
		}
	})
}

func FuzzOpenUpdate(f *testing.F) {
	signer, resealer, p := fuzzKeys(f)
	for _, u := range []authority.Update{
		{Authority: signer.id, Seq: 1, Add: []peer.ID{p.id}},
		{Authority: signer.id, Seq: 2, Prev: authority.Hash([]byte("prev")), Add: []peer.ID{resealer.id}, Remove: []peer.ID{p.id}},
	} {
		s, err := authority.SealUpdate(u, signer.key)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range mutations(s) {
			f.Add(m)
		}
	}
	f.Add(sealRaw(f, "/nova/authority-update/1", map[int]any{1: []byte(signer.id), 2: 1, 5: [][]byte{[]byte(signer.id)}}, signer))
	f.Add(sealRaw(f, "/nova/authority-update/1", map[int]any{1: []byte(signer.id), 2: 2, 3: []byte{1, 2, 3}, 4: [][]byte{[]byte(p.id)}}, signer))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := authority.OpenUpdate(b)
		if err != nil {
			checkInvalid(t, err, "update")
			return
		}
		again, err := authority.SealUpdate(u, resealer.key)
		if err != nil {
			t.Fatalf("an opened update does not re-seal: %v\n%+v", err, u)
		}
		u2, err := authority.OpenUpdate(again)
		if err != nil {
			t.Fatalf("a re-sealed update does not open: %v", err)
		}
		if u2.Issuer != resealer.id || u2.Authority != u.Authority || u2.Seq != u.Seq || u2.Prev != u.Prev ||
			!slices.Equal(u2.Add, u.Add) || !slices.Equal(u2.Remove, u.Remove) {
			t.Fatalf("re-sealed update differs:\n%+v\n%+v", u, u2)
		}
	})
}
