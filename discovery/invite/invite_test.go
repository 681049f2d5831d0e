package invite_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/discovery/invite"
)

const (
	pid1 = "12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"
	pid2 = "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"
)

func sample(t testing.TB) invite.Token {
	secret, err := invite.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return invite.Token{
		Swarm:  "home-lab",
		Secret: secret,
		Bootstrap: []string{
			"/ip4/192.0.2.10/tcp/4001/p2p/" + pid1,
			"/ip6/2001:db8::1/udp/4001/quic-v1/p2p/" + pid1,
			"/dns4/node.example.org/tcp/443/wss/p2p/" + pid2,
		},
		Relays: []string{"/ip4/198.51.100.7/tcp/4001/p2p/" + pid2},
	}
}

func TestRoundTrip(t *testing.T) {
	for name, tok := range map[string]invite.Token{
		"full":         sample(t),
		"name only":    {Swarm: "default"},
		"no secret":    {Swarm: "a", Bootstrap: []string{"/ip4/127.0.0.1/tcp/1/p2p/" + pid1}},
		"relayed addr": {Swarm: "a", Bootstrap: []string{"/ip4/198.51.100.7/tcp/4001/p2p/" + pid2 + "/p2p-circuit/p2p/" + pid1}},
		"authority":    {Swarm: "a", Authority: []byte(mustPeer(t, pid1))},
		"admin invite": withIdentity(sample(t)),
	} {
		s, err := tok.Encode()
		if err != nil {
			t.Fatalf("%s: Encode: %v", name, err)
		}
		if !strings.HasPrefix(s, invite.Prefix) || strings.ToLower(s) != s {
			t.Fatalf("%s: token %q", name, s)
		}
		got, err := invite.Decode(s)
		if err != nil || !got.Equal(tok) {
			t.Fatalf("%s: Decode = %+v, %v; want %+v", name, got, err, tok)
		}
		// Case, spaces and line breaks from copying do not matter.
		h := len(s) / 2
		messy := "  " + strings.ToUpper(s[:h]) + "\n" + s[h:h+4] + " \t" + s[h+4:] + "\n"
		if got, err := invite.Decode(messy); err != nil || !got.Equal(tok) {
			t.Fatalf("%s: Decode(messy) = %v", name, err)
		}
	}
}

// encodeRaw builds a token around arbitrary CBOR, with a valid checksum.
func encodeRaw(payload []byte) string {
	sum := sha256.Sum256(append([]byte(invite.Prefix), payload...))
	return invite.Prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(append(payload, sum[:4]...)))
}

func TestDecodeErrors(t *testing.T) {
	good, err := sample(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	typo := []byte(good)
	if typo[30] == 'a' {
		typo[30] = 'b'
	} else {
		typo[30] = 'a'
	}
	cborOf := func(v any) []byte {
		em, _ := cbor.CoreDetEncOptions().EncMode()
		b, err := em.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, tc := range map[string]struct {
		in   string
		want error
		says string
	}{
		"empty":          {"", invite.ErrBadPrefix, "nova1"},
		"other format":   {"hello world", invite.ErrBadPrefix, "nova1"},
		"future version": {"nova2" + good[5:], invite.ErrBadPrefix, "version"},
		"typo":           {string(typo), invite.ErrBadChecksum, "checksum"},
		"cut short":      {good[:len(good)-3], invite.ErrBadChecksum, ""},
		"not base32":     {good[:20] + "!" + good[21:], invite.ErrBadChecksum, "position 20"},
		"too long":       {invite.Prefix + strings.Repeat("a", invite.MaxTokenLen), invite.ErrInvalid, "characters"},
		"not cbor":       {encodeRaw([]byte{0xff, 0x00}), invite.ErrMalformed, ""},
		"unknown field":  {encodeRaw(cborOf(map[int]any{1: "a", 9: "x"})), invite.ErrMalformed, ""},
		"non-canonical":  {encodeRaw([]byte{0xa1, 0x01, 0x78, 0x01, 'a'}), invite.ErrMalformed, "canonical"},
		"empty secret":   {encodeRaw(cborOf(map[int]any{1: "a", 2: []byte{}})), invite.ErrMalformed, "canonical"},
		"short secret":   {encodeRaw(cborOf(map[int]any{1: "a", 2: make([]byte, 16)})), invite.ErrInvalid, "secret is 16 bytes"},
		"bad swarm":      {encodeRaw(cborOf(map[int]any{1: "Home Lab"})), invite.ErrInvalid, "swarm"},
		"bad multiaddr":  {encodeRaw(cborOf(map[int]any{1: "a", 3: []string{"/ip4/300.1.1.1/tcp/1/p2p/" + pid1}})), invite.ErrInvalid, "bootstrap[0]"},
		"no /p2p":        {encodeRaw(cborOf(map[int]any{1: "a", 4: []string{"/ip4/10.0.0.1/tcp/1"}})), invite.ErrInvalid, "relays[0]"},
		"big authority":  {encodeRaw(cborOf(map[int]any{1: "a", 5: make([]byte, invite.MaxAuthorityLen+1)})), invite.ErrInvalid, "authority is"},
		"lone identity":  {encodeRaw(cborOf(map[int]any{1: "a", 5: []byte{1}, 6: []byte{1}})), invite.ErrInvalid, "together"},
		"no authority":   {encodeRaw(cborOf(map[int]any{1: "a", 6: []byte{1}, 7: []byte{1}})), invite.ErrInvalid, "without an authority"},
		"empty grant":    {encodeRaw(cborOf(map[int]any{1: "a", 7: []byte{}})), invite.ErrMalformed, "canonical"},
		"authority text": {encodeRaw(cborOf(map[int]any{1: "a", 5: "12D3"})), invite.ErrMalformed, ""},
	} {
		_, err := invite.Decode(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Decode = %v, want %v", name, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: error %q does not say %q", name, err, tc.says)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := sample(t)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := func(f func(*invite.Token)) invite.Token {
		tok := sample(t)
		f(&tok)
		return tok
	}
	for name, tok := range map[string]invite.Token{
		"empty swarm":     bad(func(t *invite.Token) { t.Swarm = "" }),
		"upper swarm":     bad(func(t *invite.Token) { t.Swarm = "Lab" }),
		"long swarm":      bad(func(t *invite.Token) { t.Swarm = strings.Repeat("a", 64) }),
		"31-byte secret":  bad(func(t *invite.Token) { t.Secret = t.Secret[:31] }),
		"ip6 zone":        bad(func(t *invite.Token) { t.Bootstrap = []string{"/ip6/fe80::1%eth0/tcp/1/p2p/" + pid1} }),
		"ip4 as ip6":      bad(func(t *invite.Token) { t.Bootstrap = []string{"/ip6/1.2.3.4/tcp/1/p2p/" + pid1} }),
		"port too big":    bad(func(t *invite.Token) { t.Bootstrap = []string{"/ip4/1.2.3.4/tcp/65536/p2p/" + pid1} }),
		"bad peer id":     bad(func(t *invite.Token) { t.Bootstrap = []string{"/ip4/1.2.3.4/tcp/1/p2p/12D3KooWnotreally"} }),
		"unknown proto":   bad(func(t *invite.Token) { t.Relays = []string{"/ip4/1.2.3.4/sctp/1/p2p/" + pid1} }),
		"trailing slash":  bad(func(t *invite.Token) { t.Relays = []string{"/ip4/1.2.3.4/tcp/1/p2p/" + pid1 + "/"} }),
		"no leading /":    bad(func(t *invite.Token) { t.Relays = []string{"ip4/1.2.3.4/tcp/1/p2p/" + pid1} }),
		"too many addrs":  bad(func(t *invite.Token) { t.Relays = make([]string, invite.MaxAddrs+1) }),
		"dns with slash?": bad(func(t *invite.Token) { t.Bootstrap = []string{"/dns/a_b/tcp/1/p2p/" + pid1} }),
		"big identity":    bad(func(t *invite.Token) { *t = withIdentity(*t); t.Identity = make([]byte, invite.MaxIdentityLen+1) }),
		"big grant":       bad(func(t *invite.Token) { *t = withIdentity(*t); t.Grant = make([]byte, invite.MaxGrantLen+1) }),
		"grant alone":     bad(func(t *invite.Token) { *t = withIdentity(*t); t.Identity = nil }),
		"no authority":    bad(func(t *invite.Token) { *t = withIdentity(*t); t.Authority = nil }),
	} {
		if err := tok.Validate(); !errors.Is(err, invite.ErrInvalid) {
			t.Errorf("%s: Validate = %v", name, err)
		}
		if _, err := tok.Encode(); err == nil {
			t.Errorf("%s: Encode accepted an invalid token", name)
		}
	}
}

func TestGenerateSecret(t *testing.T) {
	a, err := invite.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := invite.GenerateSecret()
	if len(a) != invite.SecretLen || bytes.Equal(a, b) {
		t.Fatalf("secrets %x and %x", a, b)
	}
}

// genToken draws a valid token.
func genToken(t *rapid.T) invite.Token {
	peers := []string{pid1, pid2}
	addr := rapid.Custom(func(t *rapid.T) string {
		var b strings.Builder
		switch rapid.IntRange(0, 2).Draw(t, "host") {
		case 0:
			b.WriteString("/ip4/" + strings.Join([]string{
				rapid.StringMatching(`25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]`).Draw(t, "a"), "0", "0",
				rapid.StringMatching(`[1-9]`).Draw(t, "d")}, "."))
		case 1:
			b.WriteString("/ip6/2001:db8::" + rapid.StringMatching(`[0-9a-f]{1,4}`).Draw(t, "v6"))
		default:
			b.WriteString("/dns4/" + rapid.StringMatching(`[a-z][a-z0-9-]{0,20}\.example`).Draw(t, "dns"))
		}
		b.WriteString(rapid.SampledFrom([]string{"/tcp/", "/udp/"}).Draw(t, "proto"))
		b.WriteString(rapid.StringMatching(`[1-9][0-9]{0,3}`).Draw(t, "port"))
		b.WriteString("/p2p/" + rapid.SampledFrom(peers).Draw(t, "peer"))
		return b.String()
	})
	tok := invite.Token{Swarm: rapid.StringMatching(`[a-z0-9][a-z0-9-]{0,62}`).Draw(t, "swarm")}
	if rapid.Bool().Draw(t, "secret") {
		tok.Secret = rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "bytes")
	}
	if n := rapid.IntRange(0, 4).Draw(t, "nboot"); n > 0 {
		tok.Bootstrap = rapid.SliceOfN(addr, n, n).Draw(t, "bootstrap")
	}
	if n := rapid.IntRange(0, 2).Draw(t, "nrelay"); n > 0 {
		tok.Relays = rapid.SliceOfN(addr, n, n).Draw(t, "relays")
	}
	if rapid.Bool().Draw(t, "authority") {
		tok.Authority = rapid.SliceOfN(rapid.Byte(), 1, invite.MaxAuthorityLen).Draw(t, "auth")
		if rapid.Bool().Draw(t, "identity") {
			tok.Identity = rapid.SliceOfN(rapid.Byte(), 1, invite.MaxIdentityLen).Draw(t, "key")
			tok.Grant = rapid.SliceOfN(rapid.Byte(), 1, 600).Draw(t, "grant")
		}
	}
	return tok
}

func mustPeer(t testing.TB, s string) peer.ID {
	p, err := peer.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withIdentity is tok as an admin's invite: authority, a joiner's key
// (68 bytes, as libp2p marshals Ed25519) and a grant of a realistic size.
func withIdentity(tok invite.Token) invite.Token {
	p, _ := peer.Decode(pid1)
	tok.Authority = []byte(p)
	tok.Identity = bytes.Repeat([]byte{3}, 68)
	tok.Grant = bytes.Repeat([]byte{5}, 400)
	return tok
}

// TestPropertyTokenRoundTrip: every valid token encodes, decodes to an
// equal token, and has exactly one spelling.
func TestPropertyTokenRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tok := genToken(t)
		s, err := tok.Encode()
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		got, err := invite.Decode(s)
		if err != nil || !got.Equal(tok) {
			t.Fatalf("Decode = %+v, %v; want %+v", got, err, tok)
		}
		again, err := got.Encode()
		if err != nil || again != s {
			t.Fatalf("re-encoding gave %q, want %q", again, s)
		}
	})
}

// FuzzDecode: Decode never panics, every error matches one of the
// package's sentinels, and an accepted token is valid, re-encodes to the
// input without case and whitespace, and holds only addresses that
// go-multiaddr parses and that end in /p2p/<peerID>.
func FuzzDecode(f *testing.F) {
	tok := sample(f)
	tok.Secret = bytes.Repeat([]byte{7}, 32)
	for _, t := range []invite.Token{tok, {Swarm: "default"}, withIdentity(tok)} {
		s, err := t.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s)
		f.Add(strings.ToUpper(s))
		f.Add(s[:len(s)-1])
	}
	f.Add("")
	f.Add("nova1")
	f.Add("nova2aaaa")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := invite.Decode(s)
		if err != nil {
			n := 0
			for _, e := range []error{invite.ErrBadPrefix, invite.ErrBadChecksum, invite.ErrMalformed, invite.ErrInvalid} {
				if errors.Is(err, e) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error %v matches %d sentinels, want 1", err, n)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("accepted an invalid token: %v", err)
		}
		enc, err := got.Encode()
		if err != nil {
			t.Fatalf("accepted token does not encode: %v", err)
		}
		if want := strings.ToLower(strings.Join(strings.Fields(s), "")); enc != want {
			t.Fatalf("Encode(Decode(s)) = %q, want %q", enc, want)
		}
		again, err := invite.Decode(enc)
		if err != nil || !again.Equal(got) {
			t.Fatalf("round trip: %v", err)
		}
		for _, a := range append(append([]string{}, got.Bootstrap...), got.Relays...) {
			m, err := multiaddr.NewMultiaddr(a)
			if err != nil {
				t.Fatalf("accepted %q, which go-multiaddr refuses: %v", a, err)
			}
			if _, err := peer.AddrInfoFromP2pAddr(m); err != nil {
				t.Fatalf("accepted %q without a usable /p2p: %v", a, err)
			}
		}
	})
}

func TestValidSwarm(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "home-lab": true, "0": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, "Home": false, "a_b": false, "a.b": false, strings.Repeat("a", 64): false, "a\n": false,
	} {
		if got := invite.ValidSwarm(s); got != want {
			t.Errorf("ValidSwarm(%q) = %v", s, got)
		}
	}
}

// A token leaves loopback addresses out unless there are no others: a
// joiner on another device would save addresses that reach itself.
func TestForOtherDevices(t *testing.T) {
	const p = "/p2p/12D3KooWJpzJ3Nn1Z6zNcbcbBv6K3q2bX1ZbtESv5qv7KUT7kqXx"
	lan := "/ip4/192.168.1.20/tcp/4710" + p
	loop := []string{"/ip4/127.0.0.1/tcp/4710" + p, "/ip6/::1/tcp/4710" + p}
	got := invite.ForOtherDevices(append([]string{loop[0], lan}, loop[1]))
	if len(got) != 1 || got[0] != lan {
		t.Errorf("LAN and loopback: %v", got)
	}
	if got := invite.ForOtherDevices(loop); len(got) != 2 {
		t.Errorf("loopback only: %v", got)
	}
	if got := invite.ForOtherDevices([]string{"/dns4/example.org/tcp/4710" + p}); len(got) != 1 {
		t.Errorf("a DNS name: %v", got)
	}
}
