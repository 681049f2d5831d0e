package localhttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// CodeUnauthorized is the code of a request refused for want of a valid
// bearer token.
const CodeUnauthorized = "UNAUTHORIZED"

// Tokens are the bearer tokens a listener accepts, kept as SHA-256 sums
// only. The zero value accepts none.
type Tokens struct {
	sums [][sha256.Size]byte
}

// NewTokens accepts each token of tokens and each hex SHA-256 of hashes
// (configured token hashes: the tokens themselves are never stored). Empty
// entries are skipped; a hash that is not 64 hex digits is an error.
func NewTokens(tokens, hashes []string) (Tokens, error) {
	var t Tokens
	for _, tok := range tokens {
		if tok != "" {
			t.sums = append(t.sums, sha256.Sum256([]byte(tok)))
		}
	}
	for i, h := range hashes {
		if h == "" {
			continue
		}
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return Tokens{}, fmt.Errorf("localhttp: token hash %d is not a hex SHA-256 (64 hex digits)", i)
		}
		t.sums = append(t.sums, [sha256.Size]byte(b))
	}
	return t, nil
}

// HashToken returns the hex SHA-256 of a bearer token: the form in which
// [NewTokens] takes configured tokens.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Len is how many tokens are accepted.
func (t Tokens) Len() int { return len(t.sums) }

// Check reports whether r carries "Authorization: Bearer <token>" with an
// accepted token, and whether it carries an Authorization header at all.
// The token's hash is compared with every accepted one in constant time,
// so neither the time taken nor an early exit tells which one was close.
func (t Tokens) Check(r *http.Request) (ok, presented bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, found := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if !found || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return false, h != ""
	}
	sum := sha256.Sum256([]byte(tok))
	match := 0
	for i := range t.sums {
		match |= subtle.ConstantTimeCompare(sum[:], t.sums[i][:])
	}
	return match == 1, true
}

// Require returns h behind a bearer token check: a request without an
// accepted token gets [Unauthorized] with hint, unless skip (if not nil)
// reports that it needs none.
func (t Tokens) Require(h http.Handler, hint string, skip func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if skip == nil || !skip(r) {
			if ok, presented := t.Check(r); !ok {
				Unauthorized(w, presented, hint)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TokenHint is what a client refused by a node's local face is told: where
// the token is.
func TokenHint(dataDir string) string {
	return "the token is in " + TokenPath(dataDir) + " (readable only by the node's owner); send it as \"Authorization: Bearer <token>\""
}

// Unauthorized answers 401 with a WWW-Authenticate challenge (RFC 6750;
// error="invalid_token" when a credential was presented) and the JSON
// object {"error", "code": "UNAUTHORIZED", "hint"}.
func Unauthorized(w http.ResponseWriter, presented bool, hint string) {
	v := `Bearer realm="nova-node"`
	msg := "a bearer token is required"
	if presented {
		v += `, error="invalid_token"`
		msg = "the bearer token is not valid here"
	}
	w.Header().Set("WWW-Authenticate", v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	body := map[string]string{"error": msg, "code": CodeUnauthorized}
	if hint != "" {
		body["hint"] = hint
	}
	_ = json.NewEncoder(w).Encode(body)
}
