package invite

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// argKind is what follows a multiaddr protocol name.
type argKind int

const (
	argNone argKind = iota
	argIP4
	argIP6
	argHost
	argPort
	argPeer
)

// protocols are the multiaddr protocols a token may use: enough for TCP,
// QUIC, WebSocket, TLS and relayed addresses. Anything else is refused, so
// that whatever a token holds also parses with go-multiaddr.
var protocols = map[string]argKind{
	"ip4": argIP4, "ip6": argIP6,
	"dns": argHost, "dns4": argHost, "dns6": argHost, "dnsaddr": argHost, "sni": argHost,
	"tcp": argPort, "udp": argPort,
	"quic-v1": argNone, "ws": argNone, "wss": argNone, "tls": argNone, "p2p-circuit": argNone,
	"p2p": argPeer,
}

// checkAddr checks a multiaddr in text form ("/ip4/192.0.2.1/tcp/4001/p2p/12D3…")
// with the protocols above, ending in /p2p/<peerID>.
func checkAddr(a string) error {
	if len(a) > MaxAddrLen {
		return fmt.Errorf("multiaddr of %d bytes, more than %d", len(a), MaxAddrLen)
	}
	if !strings.HasPrefix(a, "/") {
		return fmt.Errorf("multiaddr %.80q must start with '/'", a)
	}
	parts := strings.Split(a[1:], "/")
	last := ""
	for i := 0; i < len(parts); i++ {
		name := parts[i]
		kind, ok := protocols[name]
		if !ok {
			return fmt.Errorf("multiaddr %.80q: unsupported protocol %.40q", a, name)
		}
		last = name
		if kind == argNone {
			continue
		}
		i++
		if i == len(parts) {
			return fmt.Errorf("multiaddr %.80q: /%s needs a value", a, name)
		}
		if err := checkArg(kind, parts[i]); err != nil {
			return fmt.Errorf("multiaddr %.80q: /%s: %v", a, name, err)
		}
	}
	if last != "p2p" {
		return fmt.Errorf("multiaddr %.80q must end in /p2p/<peerID>", a)
	}
	return nil
}

func checkArg(kind argKind, v string) error {
	switch kind {
	case argIP4, argIP6:
		ip, err := netip.ParseAddr(v)
		if err != nil || ip.Zone() != "" || (kind == argIP4) != ip.Is4() {
			return fmt.Errorf("bad IP address %.60q", v)
		}
	case argHost:
		if v == "" || len(v) > 253 || strings.ContainsFunc(v, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-')
		}) {
			return fmt.Errorf("bad host name %.60q", v)
		}
	case argPort:
		if _, err := strconv.ParseUint(v, 10, 16); err != nil {
			return fmt.Errorf("bad port %.20q", v)
		}
	case argPeer:
		return checkPeerID(v)
	}
	return nil
}

// checkPeerID accepts a peer ID in base58btc: a sha2-256 multihash
// ("Qm…") or an identity multihash of at most 42 bytes ("12D3Koo…" for
// Ed25519 keys).
func checkPeerID(s string) error {
	if !strings.HasPrefix(s, "Qm") && !strings.HasPrefix(s, "1") {
		return fmt.Errorf("peer ID %.60q must be base58 (Qm… or 12D3Koo…)", s)
	}
	b, err := base58(s)
	if err != nil {
		return fmt.Errorf("peer ID %.60q: %v", s, err)
	}
	if len(b) < 2 || int(b[1]) != len(b)-2 || b[1] >= 0x80 {
		return fmt.Errorf("peer ID %.60q is not a multihash", s)
	}
	switch {
	case b[0] == 0x12 && b[1] == 32: // sha2-256
	case b[0] == 0x00 && b[1] >= 1 && b[1] <= 42: // identity
	default:
		return fmt.Errorf("peer ID %.60q is not a sha2-256 or identity multihash", s)
	}
	return nil
}

const b58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// base58 decodes base58btc text of at most 128 characters.
func base58(s string) ([]byte, error) {
	if s == "" || len(s) > 128 {
		return nil, errors.New("base58 text must be 1 to 128 characters")
	}
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	var num []byte // big-endian
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(b58Alphabet, s[i])
		if d < 0 {
			return nil, fmt.Errorf("character %q is not base58", s[i])
		}
		carry := d
		for j := len(num) - 1; j >= 0; j-- {
			carry += int(num[j]) * 58
			num[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			num = append([]byte{byte(carry)}, num...)
			carry >>= 8
		}
	}
	return append(make([]byte, zeros), num...), nil
}

// isLoopback reports whether the multiaddr a is on a loopback IP address
// (/ip4/127.x.x.x or /ip6/::1).
func isLoopback(a string) bool {
	parts := strings.Split(a, "/")
	if len(parts) < 3 || (parts[1] != "ip4" && parts[1] != "ip6") {
		return false
	}
	ip, err := netip.ParseAddr(parts[2])
	return err == nil && ip.IsLoopback()
}

// ForOtherDevices is addrs without the loopback ones, which reach only the
// machine they are used on; all of addrs when there is nothing else (a
// node that listens on loopback only, for a token used on its own
// machine). Order is kept.
func ForOtherDevices(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if !isLoopback(a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return addrs
	}
	return out
}
