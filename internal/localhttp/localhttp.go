// Package localhttp guards the node's HTTP listeners against web pages: a
// page in a browser on the same machine can send requests to a loopback
// port (a "simple" cross-origin POST needs no preflight), and by DNS
// rebinding can even read the answers. [Guard] refuses what only a browser
// driven by a foreign page sends.
package localhttp

import (
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Guard wraps a handler with three checks, in order:
//
//   - Host: a request that reached the server on a loopback address must
//     name that address in its Host header (127.0.0.1, [::1], localhost or
//     the address itself, with the listener's port), or one of Hosts:
//     else 421 (DNS rebinding). Requests on other addresses are not
//     checked: there the server is reached by whatever name the network
//     gives it, and tokens guard it.
//   - Origin: a request with an Origin header must come from the server's
//     own origin (an allowed Host above; off loopback, the request's own
//     Host): else 403. Browsers send Origin with every cross-origin fetch
//     and POST; curl, the CLI and the A2A and MCP clients send none.
//   - Content-Type: a POST that declares a Content-Type must declare
//     JSON, application/json or a media type with the +json suffix (the
//     A2A REST binding's application/a2a+json): else 415. This refuses
//     what an HTML form or a preflight-free fetch can send (form
//     encodings, text/plain); a browser sends a JSON type only after a
//     CORS preflight, which this server does not answer.
//
// Every refusal is a JSON object {"error": "..."}.
type Guard struct {
	// Hosts are further names ("host" or "host:port") the server is reached
	// at: the host of a configured public base URL, say.
	Hosts []string
	// Public, if set, reports requests any origin may make (documents
	// served with CORS "*"): they skip the Origin check, not the others.
	Public func(*http.Request) bool
}

// Wrap returns h behind the guard.
func (g Guard) Wrap(h http.Handler) http.Handler {
	extra := make([]hostPort, 0, len(g.Hosts))
	for _, host := range g.Hosts {
		if host != "" {
			extra = append(extra, splitHost(host, ""))
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port, loopback := localPort(r)
		// hostOK reports whether host (defPort if it names none) is this
		// server's.
		hostOK := func(host, defPort string) bool {
			hp := splitHost(host, defPort)
			for _, e := range extra {
				if hp.host == e.host && (e.port == "" || e.port == hp.port) {
					return true
				}
			}
			if !loopback || hp.port != port {
				return false
			}
			a, err := netip.ParseAddr(hp.host)
			return hp.host == "localhost" || (err == nil && a.Unmap().IsLoopback())
		}
		scheme, defPort := "http", "80"
		if r.TLS != nil {
			scheme, defPort = "https", "443"
		}
		if loopback && !hostOK(r.Host, defPort) {
			refuse(w, http.StatusMisdirectedRequest, "Host "+strconv.Quote(r.Host)+" is not this server's loopback address")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && (g.Public == nil || !g.Public(r)) {
			if !sameOrigin(o, scheme, r.Host, loopback, hostOK) {
				refuse(w, http.StatusForbidden, "cross-origin request refused: Origin "+strconv.Quote(o))
				return
			}
		}
		if r.Method == http.MethodPost {
			if ct := r.Header.Get("Content-Type"); ct != "" {
				if mt, _, err := mime.ParseMediaType(ct); err != nil || !isJSON(mt) {
					refuse(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json, not "+strconv.Quote(ct))
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// localPort returns the port of the server address the request reached,
// and whether that address is loopback. A request not read from a
// connection (a handler test) has none.
func localPort(r *http.Request) (port string, loopback bool) {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return "", false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return "", false
	}
	return strconv.Itoa(int(ap.Port())), ap.Addr().Unmap().IsLoopback()
}

// sameOrigin reports whether origin names the server: an allowed host on
// loopback, the request's own Host elsewhere.
func sameOrigin(origin, scheme, reqHost string, loopback bool, hostOK func(host, defPort string) bool) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	defPort := "80"
	if u.Scheme == "https" {
		defPort = "443"
	}
	if hostOK(u.Host, defPort) {
		return true
	}
	return !loopback && u.Scheme == scheme && strings.EqualFold(u.Host, reqHost)
}

// hostPort is a Host header's parts: the host lower-cased, without
// brackets.
type hostPort struct{ host, port string }

// splitHost splits "host[:port]", with defPort when no port is given.
func splitHost(s, defPort string) hostPort {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		h, p = s, defPort
	}
	return hostPort{strings.ToLower(strings.Trim(h, "[]")), p}
}

func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// isJSON reports whether media type mt is JSON: application/json or an
// application type with the +json structured syntax suffix (RFC 6839).
func isJSON(mt string) bool {
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
