package a2ahttp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/nova-node/nova-node/internal/localhttp"
)

// Config configures a [Gateway]. Start from [DefaultConfig]; in New, a zero
// numeric or duration field means its default.
type Config struct {
	// BaseURL is the URL clients reach the gateway at, without a trailing
	// slash ("https://node.example:4712"). Cards name their endpoints from
	// it. If empty, each card is built from the request it answers (scheme
	// and Host header).
	BaseURL string

	// RequireAuth makes bearer tokens mandatory: the node sets it whenever
	// the gateway listens on anything but loopback. With RequireAuth and no
	// TokenHashes, New fails. Whenever TokenHashes is not empty every
	// JSON-RPC request needs a valid token (cards and /healthz stay public).
	RequireAuth bool
	// TokenHashes are the accepted bearer tokens, each as the hex SHA-256
	// of the token ([HashToken]); the tokens themselves are never stored.
	TokenHashes []string
	// LocalToken is one more accepted bearer token, held in memory only:
	// the node passes its local token (<datadir>/local.token), which its
	// owner's clients read. It does not satisfy RequireAuth.
	LocalToken string
	// JWT, when set, also accepts OAuth 2.0 access tokens (JWTs) of one
	// issuer, checked against its JWKS, whose scopes open agents and
	// methods ([JWTConfig]). It satisfies RequireAuth. Static tokens keep
	// opening everything.
	JWT *JWTConfig
	// AuthAll makes every request need a token, the cards and /healthz
	// included, not only JSON-RPC (CORS preflights of the cards excepted:
	// browsers send them without credentials, and they carry no data).
	// The node sets it when the gateway listens on loopback only: there
	// it is a local face, for the data dir's owner alone. Off loopback
	// the cards stay public, so that A2A clients can discover the agents
	// and the auth scheme they ask for.
	AuthAll bool
	// AuthHint is told to a client refused for want of a valid token
	// (where the token is), in the "hint" of the 401's JSON body.
	AuthHint string

	// DB is the node's bbolt database; the gateway uses its own buckets
	// (a2ahttp.*) and does not close it. If nil, DBPath is opened (and
	// closed by Close). One of the two is required.
	DB     *bbolt.DB
	DBPath string

	// MaxTasks caps the stored tasks (default 1000). Terminal tasks are
	// pruned oldest first; active ones never.
	MaxTasks int
	// TaskTimeout is how long a task may stay working (default 5 min):
	// then it fails with "Task timed out".
	TaskTimeout time.Duration

	// MaxBodyBytes caps a JSON-RPC request body (default 1 MiB, the mesh's
	// payload size); larger requests get 413.
	MaxBodyBytes int64
	// MaxConcurrentRequests caps JSON-RPC requests in progress, streams
	// included (default 64); more get 503 with Retry-After.
	MaxConcurrentRequests int
	// MaxConcurrentCalls caps calls into the mesh in progress (default
	// 16); tasks beyond it wait (within their timeout) for a slot.
	MaxConcurrentCalls int
	// StreamWriteTimeout bounds every write to a stream (default 30 s): a
	// client that stops reading is cut off.
	StreamWriteTimeout time.Duration
	// KeepAliveInterval is the idle time after which a stream gets an SSE
	// comment, so that proxies keep it open (default 15 s).
	KeepAliveInterval time.Duration
	// StreamGrace is how long a task started by a stream keeps running
	// once no stream follows it (default 5 s): a client may resubscribe
	// within it; then, unless a push config is set for the task, the task
	// is canceled.
	StreamGrace time.Duration

	// PushEnabled turns push notifications on (DefaultConfig: true).
	PushEnabled bool
	// PushSecret is the HMAC-SHA256 key of webhook signatures. If empty,
	// each push config's token is its key (and a config without a token
	// gets unsigned deliveries).
	PushSecret []byte
	// PushAllowHosts lists webhook hosts that may be on loopback, link-local
	// or private networks: IP addresses, CIDR networks, host names and
	// "*.domain" wildcards. Everything else must be a public address.
	PushAllowHosts []string
	// PushMaxAttempts is how many times one notification is tried
	// (default 5); PushBackoff the first wait between tries (default 1 s,
	// doubling up to 30 s); PushTimeout the limit of one try (default 10 s).
	PushMaxAttempts int
	PushBackoff     time.Duration
	PushTimeout     time.Duration

	// NodeName, NodeDescription and NodeVersion describe the node's
	// aggregate card (defaults "nova-node", a generic description,
	// "0.1.0").
	NodeName        string
	NodeDescription string
	NodeVersion     string
	// ProviderOrganization and ProviderURL fill the cards' provider field
	// when ProviderOrganization is set.
	ProviderOrganization string
	ProviderURL          string

	// Now is the clock (default time.Now); tests replace it.
	Now func() time.Time
}

// DefaultConfig returns the defaults; the caller sets DB or DBPath, and
// RequireAuth and TokenHashes as the listener demands.
func DefaultConfig() Config {
	return Config{
		MaxTasks:              1000,
		TaskTimeout:           5 * time.Minute,
		MaxBodyBytes:          1 << 20,
		MaxConcurrentRequests: 64,
		MaxConcurrentCalls:    16,
		StreamWriteTimeout:    30 * time.Second,
		KeepAliveInterval:     15 * time.Second,
		StreamGrace:           5 * time.Second,
		PushEnabled:           true,
		PushMaxAttempts:       5,
		PushBackoff:           time.Second,
		PushTimeout:           10 * time.Second,
		NodeName:              "nova-node",
		NodeDescription:       "A nova-node peer-to-peer agent mesh node. Each skill is one mesh agent, also reachable at its own URL.",
		NodeVersion:           "0.1.0",
		Now:                   time.Now,
	}
}

// withDefaults fills zero fields with DefaultConfig's values.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxTasks == 0 {
		c.MaxTasks = d.MaxTasks
	}
	if c.TaskTimeout == 0 {
		c.TaskTimeout = d.TaskTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.MaxConcurrentRequests == 0 {
		c.MaxConcurrentRequests = d.MaxConcurrentRequests
	}
	if c.MaxConcurrentCalls == 0 {
		c.MaxConcurrentCalls = d.MaxConcurrentCalls
	}
	if c.StreamWriteTimeout == 0 {
		c.StreamWriteTimeout = d.StreamWriteTimeout
	}
	if c.KeepAliveInterval == 0 {
		c.KeepAliveInterval = d.KeepAliveInterval
	}
	if c.StreamGrace == 0 {
		c.StreamGrace = d.StreamGrace
	}
	if c.PushMaxAttempts == 0 {
		c.PushMaxAttempts = d.PushMaxAttempts
	}
	if c.PushBackoff == 0 {
		c.PushBackoff = d.PushBackoff
	}
	if c.PushTimeout == 0 {
		c.PushTimeout = d.PushTimeout
	}
	if c.NodeName == "" {
		c.NodeName = d.NodeName
	}
	if c.NodeDescription == "" {
		c.NodeDescription = d.NodeDescription
	}
	if c.NodeVersion == "" {
		c.NodeVersion = d.NodeVersion
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	return c
}

// Validate reports every problem of c, naming the fields.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("a2ahttp: config %s: "+format, append([]any{field}, args...)...))
	}
	if c.DB == nil && c.DBPath == "" {
		bad("DB", "one of DB and DBPath is required")
	}
	if c.RequireAuth && len(c.TokenHashes) == 0 && c.JWT == nil {
		bad("TokenHashes", "RequireAuth is set (the gateway is not on loopback) but no token is configured (TokenHashes or JWT)")
	}
	if c.JWT != nil {
		c.JWT.validate(bad)
	}
	for i, h := range c.TokenHashes {
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			bad(fmt.Sprintf("TokenHashes[%d]", i), "must be a hex SHA-256 (64 hex digits); use HashToken")
		}
	}
	if c.BaseURL != "" && !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		bad("BaseURL", "must start with http:// or https:// (got %q)", c.BaseURL)
	}
	pos := []struct {
		name string
		v    int64
	}{
		{"MaxTasks", int64(c.MaxTasks)}, {"TaskTimeout", int64(c.TaskTimeout)},
		{"MaxBodyBytes", c.MaxBodyBytes}, {"MaxConcurrentRequests", int64(c.MaxConcurrentRequests)},
		{"MaxConcurrentCalls", int64(c.MaxConcurrentCalls)}, {"StreamWriteTimeout", int64(c.StreamWriteTimeout)},
		{"KeepAliveInterval", int64(c.KeepAliveInterval)}, {"PushMaxAttempts", int64(c.PushMaxAttempts)},
		{"PushBackoff", int64(c.PushBackoff)}, {"PushTimeout", int64(c.PushTimeout)},
		{"StreamGrace", int64(c.StreamGrace)},
	}
	for _, p := range pos {
		if p.v < 0 {
			bad(p.name, "must not be negative")
		}
	}
	if _, err := newURLGuard(c.PushAllowHosts); err != nil {
		bad("PushAllowHosts", "%v", err)
	}
	return errors.Join(errs...)
}

// HashToken returns the hex SHA-256 of a bearer token, the form
// Config.TokenHashes stores ([localhttp.HashToken]).
func HashToken(token string) string { return localhttp.HashToken(token) }
