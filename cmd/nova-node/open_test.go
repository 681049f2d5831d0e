package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// open prints the web view's URL with the local token in its fragment;
// with --json, that URL and the page's; the page's API takes that token.
func TestOpenPrintsTheWebViewURL(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir)
	out, errOut, code := runCLI(t, "--data-dir", dir, "open")
	if code != 0 {
		t.Fatalf("open: exit %d: %s", code, errOut)
	}
	u := strings.TrimSpace(out)
	page, frag, ok := strings.Cut(u, "#token=")
	if !ok || page != n.WebURL() || !strings.HasPrefix(page, "http://127.0.0.1:") {
		t.Fatalf("open printed %q, want %s#token=...", u, n.WebURL())
	}
	tok, err := url.QueryUnescape(frag)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", page+"api/send", strings.NewReader(`{"to":"a0","payload":{"text":"hi"}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the page's API with the printed token: HTTP %d", resp.StatusCode)
	}

	out, errOut, code = runCLI(t, "--data-dir", dir, "open", "--json")
	var res struct{ URL, Page string }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.URL != u || res.Page != page {
		t.Errorf("open --json: exit %d, %q %s", code, out, errOut)
	}
}

// Without a running node, open fails with NO_NODE, as every client
// command does.
func TestOpenWithoutANode(t *testing.T) {
	out, _, code := runCLI(t, "--data-dir", t.TempDir(), "open", "--json")
	if code != 1 || !strings.Contains(out, `"NO_NODE"`) {
		t.Errorf("open without a node: exit %d, %s", code, out)
	}
}
