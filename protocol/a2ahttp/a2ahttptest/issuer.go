package a2ahttptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is a local OAuth 2.0 issuer for tests: an ES256 key whose JWKS
// is served on 127.0.0.1, and the access tokens it signs.
type Issuer struct {
	Name string // the tokens' iss
	URL  string // the JWKS URL

	mu      sync.Mutex // guards key and kid
	key     *ecdsa.PrivateKey
	kid     string
	srv     *httptest.Server
	fetches atomic.Int32
	down    atomic.Bool
	body    atomic.Pointer[[]byte]
}

// NewIssuer starts an issuer named name; Close stops it.
func NewIssuer(name string) (*Issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	is := &Issuer{Name: name, key: key, kid: "k1"}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		if is.down.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		if b := is.body.Load(); b != nil {
			_, _ = w.Write(*b)
			return
		}
		is.mu.Lock()
		set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: "ES256", Use: "sig"}}}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	is.URL = is.srv.URL + "/.well-known/jwks.json"
	return is, nil
}

// Rotate replaces the signing key by a new one with a new key id; the JWKS
// serves only the new key.
func (is *Issuer) Rotate() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.key, is.kid = key, is.kid+"'"
	return nil
}

// Close stops the JWKS server.
func (is *Issuer) Close() { is.srv.Close() }

// Fetches is how many times the JWKS was asked for.
func (is *Issuer) Fetches() int { return int(is.fetches.Load()) }

// SetDown makes the JWKS server answer 500 (or serve again).
func (is *Issuer) SetDown(down bool) { is.down.Store(down) }

// Serve makes the JWKS server answer body instead of the keys.
func (is *Issuer) Serve(body []byte) { is.body.Store(&body) }

// Claims are a token's claims; zero fields take valid values (iss the
// issuer's name, sub "client-1", exp in an hour, no nbf).
type Claims struct {
	Issuer, Subject, Scope string
	Audience               []string
	Expiry, NotBefore      time.Time
	// Key and KeyID sign the token (default the issuer's own).
	Key   *ecdsa.PrivateKey
	KeyID string
}

// Token signs an access token (typ at+jwt, ES256) with c.
func (is *Issuer) Token(c Claims) (string, error) {
	if c.Issuer == "" {
		c.Issuer = is.Name
	}
	if c.Subject == "" {
		c.Subject = "client-1"
	}
	if c.Expiry.IsZero() {
		c.Expiry = time.Now().Add(time.Hour)
	}
	is.mu.Lock()
	if c.Key == nil {
		c.Key = is.key
	}
	if c.KeyID == "" {
		c.KeyID = is.kid
	}
	is.mu.Unlock()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: c.Key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader(jose.HeaderKey("kid"), c.KeyID))
	if err != nil {
		return "", err
	}
	std := jwt.Claims{Issuer: c.Issuer, Subject: c.Subject, Audience: c.Audience, Expiry: jwt.NewNumericDate(c.Expiry)}
	if !c.NotBefore.IsZero() {
		std.NotBefore = jwt.NewNumericDate(c.NotBefore)
	}
	return jwt.Signed(sig).Claims(std).Claims(map[string]any{"scope": c.Scope}).Serialize()
}
