package localhttp_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/localhttp"
)

func TestEnsureTokenCreatesAndKeeps(t *testing.T) {
	dir := t.TempDir()
	if _, err := localhttp.ReadToken(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadToken before EnsureToken: %v, want fs.ErrNotExist", err)
	}
	tok, err := localhttp.EnsureToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 43 || strings.ContainsAny(tok, "+/=") {
		t.Errorf("token %q: want 43 base64url characters (32 bytes)", tok)
	}
	st, err := os.Stat(localhttp.TokenPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	again, err := localhttp.EnsureToken(dir)
	if err != nil || again != tok {
		t.Errorf("second EnsureToken %q (%v), want the first %q", again, err, tok)
	}
	if read, err := localhttp.ReadToken(dir); err != nil || read != tok {
		t.Errorf("ReadToken %q (%v), want %q", read, err, tok)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("data dir holds %d files, want the token only (no temporary file left)", len(entries))
	}
	other, _ := localhttp.EnsureToken(t.TempDir())
	if other == tok {
		t.Error("two data dirs got the same token")
	}
}

func TestTokenFileRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		mode    os.FileMode
		hint    string
	}{
		{"group readable", strings.Repeat("a", 43), 0o640, "chmod 600"},
		{"world readable", strings.Repeat("a", 43), 0o604, "chmod 600"},
		{"empty", "", 0o600, "delete"},
		{"too short", "abc", 0o600, "delete"},
		{"not a token", strings.Repeat("a", 40) + " b", 0o600, "delete"},
	} {
		if runtime.GOOS == "windows" && tc.mode != 0o600 {
			continue
		}
		dir := t.TempDir()
		path := localhttp.TokenPath(dir)
		if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		for fn, f := range map[string]func(string) (string, error){"ReadToken": localhttp.ReadToken, "EnsureToken": localhttp.EnsureToken} {
			_, err := f(dir)
			var te *localhttp.TokenError
			if !errors.As(err, &te) || te.Code() != "LOCAL_TOKEN_INVALID" || !strings.Contains(te.Hint(), tc.hint) || !strings.Contains(err.Error(), path) {
				t.Errorf("%s, %s: %v, want a TokenError naming %s, hint %q", tc.name, fn, err, path, tc.hint)
			}
		}
		if b, _ := os.ReadFile(path); string(b) != tc.content {
			t.Errorf("%s: the file was changed", tc.name)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(localhttp.TokenPath(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	var te *localhttp.TokenError
	if _, err := localhttp.EnsureToken(dir); !errors.As(err, &te) {
		t.Errorf("a directory as the token file: %v, want a TokenError", err)
	}
}

func TestTokensRequire(t *testing.T) {
	const local, configured = "local-token-0123456789abcdefghijklmnop", "configured-token"
	tokens, err := localhttp.NewTokens([]string{local, ""}, []string{localhttp.HashToken(configured)})
	if err != nil || tokens.Len() != 2 {
		t.Fatalf("NewTokens: %d tokens, %v", tokens.Len(), err)
	}
	if _, err := localhttp.NewTokens(nil, []string{"abc"}); err == nil {
		t.Error("NewTokens accepted a hash that is not a SHA-256")
	}
	h := tokens.Require(ok, "the token is in /d/local.token (readable only by the node's owner)", func(r *http.Request) bool { return r.Method == http.MethodOptions })
	for _, tc := range []struct {
		name, method, auth string
		want               int
		challenge          string
	}{
		{"local token", "GET", "Bearer " + local, 418, ""},
		{"scheme in any case", "GET", "bearer " + local, 418, ""},
		{"configured token", "POST", "Bearer " + configured, 418, ""},
		{"skipped", "OPTIONS", "", 418, ""},
		{"none", "GET", "", 401, `Bearer realm="nova-node"`},
		{"wrong", "GET", "Bearer " + local + "x", 401, `Bearer realm="nova-node", error="invalid_token"`},
		{"hash of the configured token", "GET", "Bearer " + localhttp.HashToken(configured), 401, `Bearer realm="nova-node", error="invalid_token"`},
		{"basic", "GET", "Basic " + local, 401, `Bearer realm="nova-node", error="invalid_token"`},
		{"empty bearer", "GET", "Bearer ", 401, `Bearer realm="nova-node", error="invalid_token"`},
	} {
		r := httptest.NewRequest(tc.method, "/x", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.want)
			continue
		}
		if tc.want != 401 {
			continue
		}
		var body struct{ Error, Code, Hint string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != localhttp.CodeUnauthorized || !strings.Contains(body.Hint, "/d/local.token") || body.Error == "" {
			t.Errorf("%s: body %s, want the UNAUTHORIZED code and the hint", tc.name, rec.Body)
		}
		if got := rec.Header().Get("WWW-Authenticate"); got != tc.challenge {
			t.Errorf("%s: WWW-Authenticate %q, want %q", tc.name, got, tc.challenge)
		}
	}
	var none localhttp.Tokens
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/x", nil)
	r.Header.Set("Authorization", "Bearer "+local)
	none.Require(ok, "", nil).ServeHTTP(rec, r)
	if rec.Code != 401 {
		t.Errorf("no accepted token: %d, want 401", rec.Code)
	}
}

func TestTokenHint(t *testing.T) {
	got := localhttp.TokenHint("/home/u/.nova")
	if want := "the token is in " + filepath.Join("/home/u/.nova", "local.token") + " (readable only by the node's owner)"; !strings.HasPrefix(got, want) {
		t.Errorf("hint %q, want it to start with %q", got, want)
	}
}
