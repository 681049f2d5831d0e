package a2ahttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// urlGuard keeps webhook deliveries away from the node's own network: a
// push notification URL may not point at loopback, link-local, private,
// shared (CGNAT), multicast or otherwise non-public addresses unless the
// host or address is allowlisted. Host names are resolved and every address
// must pass; the delivery client dials only addresses it has checked itself,
// so a DNS answer that changes between the check and the delivery (DNS
// rebinding) is caught too.
type urlGuard struct {
	hosts    map[string]bool // lower-case host names, exact
	suffixes []string        // ".example.com" for "*.example.com"
	prefixes []netip.Prefix  // allowlisted addresses and networks
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
}

// ErrURLRefused is matched by every refusal of a push notification URL.
var ErrURLRefused = errors.New("a2ahttp: push notification URL refused")

// refusal is the error of a refused URL.
type refusal struct {
	url, reason string
}

func (e *refusal) Error() string {
	return fmt.Sprintf("a2ahttp: push notification URL %q refused: %s", e.url, e.reason)
}

func (e *refusal) Is(target error) bool { return target == ErrURLRefused }

// newURLGuard parses allow entries: an IP address ("127.0.0.1"), a network
// ("10.0.0.0/8"), a host name ("hooks.lan") or a domain wildcard
// ("*.lan").
func newURLGuard(allow []string) (*urlGuard, error) {
	g := &urlGuard{hosts: map[string]bool{}, lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
	for _, a := range allow {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
		case strings.Contains(a, "/"):
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return nil, fmt.Errorf("a2ahttp: push allowlist entry %q: %w", a, err)
			}
			g.prefixes = append(g.prefixes, p.Masked())
		case strings.HasPrefix(a, "*."):
			g.suffixes = append(g.suffixes, strings.ToLower(a[1:]))
		default:
			if ip, err := netip.ParseAddr(strings.Trim(a, "[]")); err == nil {
				ip = ip.Unmap()
				g.prefixes = append(g.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			g.hosts[strings.ToLower(a)] = true
		}
	}
	return g, nil
}

func (g *urlGuard) hostAllowed(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if g.hosts[h] {
		return true
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

func (g *urlGuard) addrAllowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range g.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Special-purpose ranges that are neither loopback, private nor link-local
// in net/netip's terms but are not the public internet either.
var blockedPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"100.64.0.0/10",   // shared address space (CGNAT)
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"240.0.0.0/4",     // reserved, and broadcast
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard
		"2001:db8::/32",   // documentation
		"fec0::/10",       // site-local (deprecated)
		"2001::/32",       // Teredo (tunnels to IPv4 inside)
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

var nat64 = netip.MustParsePrefix("64:ff9b::/96")
var sixToFour = netip.MustParsePrefix("2002::/16")

// forbidden says why ip may not receive webhooks, or "" when it may.
func forbidden(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return "invalid address"
	case ip.IsUnspecified():
		return "unspecified address"
	case ip.IsLoopback():
		return "loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local address"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast address"
	case ip.IsPrivate():
		return "private address"
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return "special-purpose address " + p.String()
		}
	}
	// Addresses with an IPv4 address inside: judge the IPv4 address.
	if nat64.Contains(ip) {
		b := ip.As16()
		return forbidden(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	if sixToFour.Contains(ip) {
		b := ip.As16()
		return forbidden(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	return ""
}

// checkAddr returns a refusal for an address that is neither allowlisted
// nor public.
func (g *urlGuard) checkAddr(raw string, ip netip.Addr) error {
	if g.addrAllowed(ip) {
		return nil
	}
	if why := forbidden(ip); why != "" {
		return &refusal{url: raw, reason: fmt.Sprintf("%s is a %s", ip, why)}
	}
	return nil
}

// check validates a webhook URL: http or https, a host, and every address
// the host resolves to allowed.
func (g *urlGuard) check(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &refusal{url: raw, reason: "not a URL"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return &refusal{url: raw, reason: "scheme must be http or https"}
	}
	host := u.Hostname()
	if host == "" {
		return &refusal{url: raw, reason: "no host"}
	}
	if u.User != nil {
		return &refusal{url: raw, reason: "user information in the URL"}
	}
	_, err = g.resolve(ctx, raw, host)
	return err
}

// resolve returns the checked addresses of host.
func (g *urlGuard) resolve(ctx context.Context, raw, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := g.checkAddr(raw, ip); err != nil {
			return nil, err
		}
		return []netip.Addr{ip.Unmap()}, nil
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") && !g.hostAllowed(host) {
		return nil, &refusal{url: raw, reason: "localhost"}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, &refusal{url: raw, reason: "cannot resolve " + host + ": " + err.Error()}
	}
	if len(addrs) == 0 {
		return nil, &refusal{url: raw, reason: "no address for " + host}
	}
	if g.hostAllowed(host) {
		return addrs, nil
	}
	for _, ip := range addrs {
		if err := g.checkAddr(raw, ip); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// dialContext is the delivery client's dialer: it resolves and checks the
// host itself, then dials the checked addresses only.
func (g *urlGuard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := g.resolve(ctx, "//"+addr, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	var errs []error
	for _, ip := range ips {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}
