package discovery_test

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/multiformats/go-multihash"

	"github.com/nova-node/nova-node/discovery"
)

func TestKeys(t *testing.T) {
	if got := discovery.NameKey("lab", "venus"); got != "nova/lab/agent/venus" {
		t.Errorf("NameKey = %q", got)
	}
	if got := discovery.CapabilityKey("lab", "codegen.react"); got != "nova/lab/cap/codegen.react" {
		t.Errorf("CapabilityKey = %q", got)
	}
	c := discovery.KeyCID("nova/lab/agent/venus")
	dm, err := multihash.Decode(c.Hash())
	sum := sha256.Sum256([]byte("nova/lab/agent/venus"))
	if err != nil || dm.Code != multihash.SHA2_256 || !bytes.Equal(dm.Digest, sum[:]) || c.Prefix().Codec != 0x55 || c.Version() != 1 {
		t.Errorf("KeyCID = %s (%v)", c, err)
	}
	if discovery.KeyCID("a") == discovery.KeyCID("b") {
		t.Error("distinct keys, same CID")
	}
	if got := discovery.ServiceName("lab"); got != "_nova-lab._udp" {
		t.Errorf("ServiceName = %q", got)
	}
	long := strings.Repeat("a", 60) + "-x"
	long2 := strings.Repeat("a", 60) + "-y"
	s1, s2 := discovery.ServiceName(long), discovery.ServiceName(long2)
	if label := strings.TrimSuffix(s1, "._udp"); len(label) > 63 || s1 == s2 || !strings.HasPrefix(s1, "_nova-") {
		t.Errorf("ServiceName of a long swarm = %q (%d), other %q", s1, len(label), s2)
	}
	for _, bad := range []string{"", "Lab", "-lab", "a/b", strings.Repeat("a", 64)} {
		if discovery.ValidateSwarm(bad) == nil {
			t.Errorf("ValidateSwarm(%q) accepted", bad)
		}
	}
}

func TestPSK(t *testing.T) {
	secret := bytes.Repeat([]byte{1}, 32)
	a, err := discovery.PSK("lab", secret)
	if err != nil || len(a) != 32 {
		t.Fatalf("PSK = %x, %v", a, err)
	}
	b, _ := discovery.PSK("lab", secret)
	c, _ := discovery.PSK("other", secret)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) || bytes.Equal(a, secret) {
		t.Fatal("PSK is not a deterministic, swarm-bound derivation")
	}
	if _, err := discovery.PSK("lab", secret[:16]); err == nil {
		t.Fatal("16-byte secret accepted")
	}
}

func TestParseAddrs(t *testing.T) {
	const p1 = "12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"
	ais, err := discovery.ParseAddrs([]string{
		"/ip4/127.0.0.1/tcp/1/p2p/" + p1,
		"/ip4/127.0.0.1/tcp/2/p2p/QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N",
		"/ip4/127.0.0.1/udp/1/quic-v1/p2p/" + p1,
	})
	if err != nil || len(ais) != 2 || len(ais[0].Addrs) != 2 || ais[0].ID.String() != p1 {
		t.Fatalf("ParseAddrs = %v, %v", ais, err)
	}
	for _, bad := range []string{"nonsense", "/ip4/127.0.0.1/tcp/1"} {
		if _, err := discovery.ParseAddrs([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseAddrs(%q) = %v", bad, err)
		}
	}
}

func TestIndexRecord(t *testing.T) {
	k, id := genKey(t)
	ix := discovery.Index{LastSeenAt: 5, Agents: []discovery.IndexEntry{{ID: "venus", Revision: 2, Capabilities: []string{"echo"}}}}
	b, err := discovery.SealIndex(ix, k)
	if err != nil {
		t.Fatal(err)
	}
	got, err := discovery.OpenIndex(b)
	if err != nil || got.Host != id || got.LastSeenAt != 5 || len(got.Agents) != 1 || got.Agents[0].Revision != 2 {
		t.Fatalf("OpenIndex = %+v, %v", got, err)
	}
	if e, ok := got.Entry("venus"); !ok || e.Capabilities[0] != "echo" {
		t.Fatal("Entry(venus) missing")
	}
	for name, bad := range map[string]discovery.Index{
		"duplicate id":     {Agents: []discovery.IndexEntry{{ID: "a"}, {ID: "a"}}},
		"bad id":           {Agents: []discovery.IndexEntry{{ID: "a b"}}},
		"address as id":    {Agents: []discovery.IndexEntry{{ID: "a@" + id.String()}}},
		"empty capability": {Agents: []discovery.IndexEntry{{ID: "a", Capabilities: []string{""}}}},
		"negative time":    {LastSeenAt: -1},
		"another host":     {Host: "12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"},
	} {
		if _, err := discovery.SealIndex(bad, k); err == nil {
			t.Errorf("%s: sealed", name)
		}
	}
}
