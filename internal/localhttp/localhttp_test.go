package localhttp_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/localhttp"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })

// at returns a request that arrived on the server address local.
func at(local, method, host, origin, contentType string) *http.Request {
	r := httptest.NewRequest(method, "/x", strings.NewReader("{}"))
	r.Host = host
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if local != "" {
		addr, _ := net.ResolveTCPAddr("tcp", local)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
	}
	return r
}

func TestGuard(t *testing.T) {
	g := localhttp.Guard{
		Hosts:  []string{"node.example:8443"},
		Public: func(r *http.Request) bool { return r.URL.Path == "/x" && r.Method == http.MethodGet },
	}.Wrap(ok)
	for _, tc := range []struct {
		name                               string
		local, method, host, origin, ctype string
		want                               int
	}{
		{"loopback, own Host", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "", "application/json", 418},
		{"loopback, localhost", "127.0.0.1:4712", "POST", "LOCALHOST:4712", "http://localhost:4712", "", 418},
		{"loopback, [::1]", "[::1]:4712", "POST", "[::1]:4712", "http://[::1]:4712", "", 418},
		{"loopback, mapped address", "[::ffff:127.0.0.1]:4712", "GET", "127.0.0.1:4712", "", "", 418},
		{"loopback, base URL host", "127.0.0.1:4712", "POST", "node.example:8443", "https://node.example:8443", "", 418},
		{"loopback, other port", "127.0.0.1:4712", "GET", "127.0.0.1:80", "", "", 421},
		{"loopback, no port", "127.0.0.1:4712", "GET", "localhost", "", "", 421},
		{"loopback, foreign Host", "127.0.0.1:4712", "GET", "evil.example:4712", "", "", 421},
		{"loopback, empty Host", "127.0.0.1:4712", "GET", "", "", "", 421},
		{"loopback, foreign Origin", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "http://evil.example", "", 403},
		{"loopback, null Origin", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "null", "", 403},
		{"loopback, Origin of another port", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "http://127.0.0.1:3000", "", 403},
		{"loopback, public read from any origin", "127.0.0.1:4712", "GET", "127.0.0.1:4712", "http://evil.example", "", 418},
		{"loopback, text/plain", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "", "text/plain;charset=UTF-8", 415},
		{"loopback, form", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "", "multipart/form-data; boundary=x", 415},
		{"loopback, a2a+json", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "", "application/a2a+json", 418},
		{"loopback, text/x+json", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "", "text/x+json", 415},
		{"loopback, JSON with charset", "127.0.0.1:4712", "POST", "127.0.0.1:4712", "", "Application/JSON; charset=utf-8", 418},
		{"loopback, GET with any type", "127.0.0.1:4712", "GET", "127.0.0.1:4712", "", "text/plain", 418},
		{"elsewhere, any Host", "192.0.2.7:4712", "POST", "node.lan:4712", "", "application/json", 418},
		{"elsewhere, same origin", "192.0.2.7:4712", "POST", "node.lan:4712", "http://node.lan:4712", "", 418},
		{"elsewhere, foreign Origin", "192.0.2.7:4712", "POST", "node.lan:4712", "http://evil.example", "", 403},
		{"elsewhere, text/plain", "192.0.2.7:4712", "POST", "node.lan:4712", "", "text/plain", 415},
		{"no connection", "", "POST", "example.com", "", "", 418},
	} {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, at(tc.local, tc.method, tc.host, tc.origin, tc.ctype))
		if rec.Code != tc.want {
			t.Errorf("%s: %d, want %d: %s", tc.name, rec.Code, tc.want, rec.Body)
		}
		if rec.Code != 418 && (rec.Header().Get("Content-Type") != "application/json" || !strings.HasPrefix(rec.Body.String(), `{"error":`)) {
			t.Errorf("%s: refusal %q %q is not a JSON error", tc.name, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
}
