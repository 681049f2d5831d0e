package testnet_test

import (
	"net/http"
	"testing"

	"github.com/nova-node/nova-node/node"
)

// localClient is an HTTP client of n's local faces (the A2A gateway, /mcp,
// /metrics) that sends the data dir's local token with every request, as
// the node owner's clients do.
func localClient(t testing.TB, n *node.Node) *http.Client {
	t.Helper()
	return &http.Client{Transport: bearer{localToken(t, n), http.DefaultTransport}}
}

// localToken is n's local token.
func localToken(t testing.TB, n *node.Node) string {
	t.Helper()
	tok, err := node.ReadLocalToken(n.Config().DataDir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// bearer adds "Authorization: Bearer token" to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
