package a2ahttp

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

func fakeDNS(g *urlGuard, table map[string][]string) {
	g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		addrs, ok := table[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

func TestSSRFRefusals(t *testing.T) {
	g, err := newURLGuard([]string{"hooks.lan", "*.internal.example", "10.9.0.0/16", "192.168.7.7"})
	if err != nil {
		t.Fatal(err)
	}
	fakeDNS(g, map[string][]string{
		"public.example":      {"93.184.216.34"},
		"rebind.example":      {"93.184.216.34", "10.0.0.1"}, // one private address is enough to refuse
		"metadata.example":    {"169.254.169.254"},
		"six.example":         {"2606:4700::1111"},
		"six-private.example": {"fd00::1"},
		"hooks.lan":           {"10.1.1.1"},
		"a.internal.example":  {"192.168.1.1"},
		"inside.example":      {"10.9.3.4"},
	})
	refused := []string{
		"http://127.0.0.1/h", "http://127.1.2.3:8080/h", "http://[::1]/h", "http://localhost/h", "http://LOCALHOST./h",
		"http://10.0.0.1/h", "http://172.16.5.4/h", "http://192.168.1.1/h", "http://169.254.169.254/latest/meta-data",
		"http://[fe80::1]/h", "http://[fd12::1]/h", "http://100.64.0.1/h", "http://0.0.0.0/h", "http://[::]/h",
		"http://[::ffff:127.0.0.1]/h", "http://[::ffff:10.0.0.1]/h", "http://[64:ff9b::a00:1]/h", "http://[2002:a00:1::]/h",
		"http://224.0.0.1/h", "http://255.255.255.255/h", "http://198.18.0.1/h",
		"http://rebind.example/h", "http://metadata.example/h", "http://six-private.example/h", "http://unknown.example/h",
		"ftp://public.example/h", "file:///etc/passwd", "http://user:pw@public.example/h", "not a url", "http:///nohost",
	}
	for _, u := range refused {
		if err := g.check(context.Background(), u); !errors.Is(err, ErrURLRefused) {
			t.Errorf("%s: %v, want refused", u, err)
		}
	}
	allowed := []string{
		"https://public.example/h", "http://93.184.216.34:8080/h", "https://six.example/h", "https://[2606:4700::1111]/h",
		"http://hooks.lan/h", "http://a.internal.example/h", "http://inside.example/h", "http://10.9.1.1/h", "http://192.168.7.7/h",
	}
	for _, u := range allowed {
		if err := g.check(context.Background(), u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// The delivery dialer checks the addresses it connects to, so a name that
// resolved to a public address when the config was set and to a private
// one at delivery time is refused.
func TestSSRFDialTimeCheck(t *testing.T) {
	g, _ := newURLGuard(nil)
	fakeDNS(g, map[string][]string{"flip.example": {"127.0.0.1"}})
	_, err := g.dialContext(context.Background(), "tcp", "flip.example:80")
	if !errors.Is(err, ErrURLRefused) {
		t.Fatalf("dial: %v", err)
	}
	_, err = g.dialContext(context.Background(), "tcp", "127.0.0.1:80")
	if !errors.Is(err, ErrURLRefused) {
		t.Fatalf("dial literal: %v", err)
	}
}

func TestWireVersion(t *testing.T) {
	for in, want := range map[string]string{
		"": Version03, " ": Version03, "0.3": Version03, "0.3.0": Version03, "0.9": Version03,
		"1": Version10, "1.0": Version10, "1.0.0": Version10, "1.1": Version10,
	} {
		if got, ok := wireVersion(in); !ok || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"0.2", "0.2.6", "2.0", "x", "1.x", "-1", "1.0.0.0", "+1", "99999"} {
		if got, ok := wireVersion(in); ok {
			t.Errorf("%q accepted as %q", in, got)
		}
	}
}
