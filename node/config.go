package node

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
	"go.yaml.in/yaml/v3"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/discovery/invite"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

// Config is everything a node needs, read from <dataDir>/config.yaml, then
// NOVA_* environment variables, then command-line flags (each later source
// overrides the earlier). DefaultConfig gives the embedded defaults; Validate
// names the field that is wrong.
type Config struct {
	// DataDir holds the identity key, config.yaml, the store (nova.db), the
	// local API socket and the audit log. Default: ~/.nova. Env NOVA_DATA_DIR.
	DataDir string `yaml:"-"`

	// Swarm is the name of the swarm this node belongs to. Default "default".
	// Env NOVA_SWARM.
	Swarm string `yaml:"swarm"`

	// Authority is the peer ID of the swarm's authority: the node that
	// founded it (invite --new-secret). Tier and sandbox claims of remote
	// agents count only where a grant signed by one of its admins covers
	// them, or where this node trusts their host (nova-node trust);
	// otherwise they are held at L3 with no sandbox. Empty: the swarm has
	// no authority, and only trusts vouch for peers. Set by invite and join.
	Authority string `yaml:"authority,omitempty"`

	// Grants are signed grants (base64url) for this node, which it
	// presents with its cards: join stores the one an invite carries.
	Grants []string `yaml:"grants,omitempty"`

	// Listen are the multiaddrs to listen on: TCP, QUIC and WebSocket by
	// default, on all interfaces, ports 4710 (TCP and UDP) and 4711 (WS).
	// Use port 0 for a random port. Env NOVA_LISTEN (comma separated), or
	// NOVA_PORT / --port to move the default ports (WS takes port+1).
	Listen []string `yaml:"listen"`

	// Peers are multiaddrs (ending in /p2p/<peerID>) to connect to at start
	// and to reconnect to while the node runs. Env NOVA_PEERS (comma separated).
	Peers []string `yaml:"peers"`

	// Bootstrap are multiaddrs (with /p2p/<peerID>) of swarm members to
	// join the DHT through: the node connects to them at start. From config,
	// NOVA_BOOTSTRAP (comma separated), or an invite token (nova-node join).
	Bootstrap []string `yaml:"bootstrap"`

	// Relays are multiaddrs (with /p2p/<peerID>) of swarm members that relay
	// for this node when it is behind NAT (circuit relay v2): peers reach it
	// through them, then punch through to a direct connection (DCUtR) where
	// the NATs allow. From an invite token (nova-node invite --relay); the
	// bootstrap peers are asked as well. Nodes that AutoNAT v2 finds
	// reachable offer relay service themselves; with a swarm secret only
	// members can connect to them at all.
	Relays []string `yaml:"relays"`

	// MDNS finds swarm members on the local network with zero configuration
	// (service _nova-<swarm>._udp). Default true. Env NOVA_MDNS=false.
	MDNS bool `yaml:"mdns"`

	// SwarmSecret, when set, is the swarm's 32-byte secret as 64 hex digits:
	// the node then runs a libp2p private network (PSK) and outsiders cannot
	// complete a handshake. PSK does not work with QUIC: such a node listens
	// on TCP and WebSocket only. Set by nova-node join. Env NOVA_SWARM_SECRET.
	SwarmSecret string `yaml:"swarmSecret,omitempty"`

	// Agents hosted by this node. An agent with the capability "echo" is
	// answered by the built-in echo handler.
	Agents []AgentConfig `yaml:"agents"`

	// TierRules replaces the seed's default tier rules when set.
	TierRules tiers.Rules `yaml:"tierRules,omitempty"`

	// Sandbox is the sandbox policy: whether sandbox boundaries are enforced
	// and which agents may be reached across them. Default: enforced, no
	// cross-sandbox agents.
	Sandbox sandbox.Policy `yaml:"sandbox"`

	// MaxFrameSize caps one frame on nova's stream protocols, in bytes.
	// Default 1 MiB. Env NOVA_MAX_FRAME_SIZE.
	MaxFrameSize int `yaml:"maxFrameSize"`

	// RequestTimeout bounds a request/response exchange and each agent
	// handler call. Default 30s. Env NOVA_REQUEST_TIMEOUT.
	RequestTimeout time.Duration `yaml:"requestTimeout"`

	// RetryDelay is the first delay before a channel redials a peer it lost;
	// each next delay doubles, Retries times. Defaults 500ms and 3
	// (0.5+1+2 s). Then the peer's node counts as away: requests fail with
	// DELIVERY_FAILED, and everything else waits in the outbox for up to
	// DeliveryTTL from when it was sent (default 24h; 0 fails them too).
	RetryDelay  time.Duration `yaml:"retryDelay"`
	Retries     int           `yaml:"retries"`
	DeliveryTTL time.Duration `yaml:"deliveryTTL"`

	// MetricsListen is the host:port of the HTTP listener serving Prometheus
	// /metrics (nova's and libp2p's series) and /healthz. Default
	// 127.0.0.1:0 (loopback, a free port, shown by `run` and `status`);
	// "off" disables it. Env NOVA_METRICS_LISTEN.
	MetricsListen string `yaml:"metricsListen"`

	// APISocket is the Unix socket of the local control API, reachable only
	// by the user owning the data dir. Default <dataDir>/nova.sock.
	APISocket string `yaml:"apiSocket,omitempty"`

	// ConnectionGater, for Go programs embedding a node (and the testnet's
	// partitions), decides which peers may connect. Not in the config file.
	ConnectionGater connmgr.ConnectionGater `yaml:"-"`

	// Admission, for tests, overrides the connection limits and the
	// connection manager's timing (see Admission). Not in the config file.
	Admission Admission `yaml:"-"`

	// DiscoveryOptions, for Go programs embedding a node (and tests), are
	// applied after the node's own discovery options (bootstrap peers,
	// mDNS, TTL), e.g. discovery.WithRetry for lookups that retry less.
	// Not in the config file.
	DiscoveryOptions []discovery.Option `yaml:"-"`

	// LogLevel is debug, info, warn or error. Default info. Env NOVA_LOG_LEVEL.
	LogLevel string `yaml:"logLevel"`

	// MCP configures the MCP faces of the node.
	MCP MCPConfig `yaml:"mcp,omitempty"`

	// A2A configures the standard A2A gateway (docs/a2a.md).
	A2A A2AConfig `yaml:"a2a,omitempty"`

	// Audit bounds the audit log, audit.jsonl in the data dir.
	Audit AuditConfig `yaml:"audit"`
}

// AuditConfig bounds the audit log: when audit.jsonl would grow past
// MaxSizeMiB it is renamed with the time in its name
// (audit-2006-01-02T15-04-05.000.jsonl, UTC) and a new one started, and
// only the MaxBackups newest renamed files are kept. The disk it takes is
// at most (MaxBackups+1) × MaxSizeMiB. Every file is mode 0600.
type AuditConfig struct {
	// MaxSizeMiB is the size of one file, in MiB, 1 to 1024. Default 32.
	MaxSizeMiB int `yaml:"maxSizeMiB"`
	// MaxBackups is how many rotated files are kept, 1 to 100; the oldest
	// beyond it is deleted. Default 5.
	MaxBackups int `yaml:"maxBackups"`
	// Compress gzips rotated files (audit-<time>.jsonl.gz). Default false.
	Compress bool `yaml:"compress"`
}

// A2AConfig configures the A2A gateway: every mesh agent at
// http://<listen>/a2a/<agent>/, v0.3 and v1.0 JSON-RPC.
type A2AConfig struct {
	// Listen is the gateway's host:port. Default 127.0.0.1:0 (loopback, a
	// free port shown by run and status); "off" disables it. Bound to
	// anything but loopback it requires bearer tokens. Env NOVA_A2A_LISTEN.
	Listen string `yaml:"listen,omitempty"`
	// BaseURL is the URL clients reach the gateway at, if not the listen
	// address (behind a proxy).
	BaseURL string `yaml:"baseURL,omitempty"`
	// TokenHashes are accepted bearer tokens as hex SHA-256 (`nova-node a2a
	// token` makes one); the tokens themselves are never stored.
	TokenHashes []string `yaml:"tokenHashes,omitempty"`
	// JWT accepts OAuth 2.0 access tokens (JWTs) of one issuer, checked
	// against its JWKS, whose scopes open agents and methods: keys
	// issuer, audience, jwksUrl, tokenUrl, scopes [{scope, agents,
	// methods}] (docs/a2a.md, Auth). It satisfies the token requirement
	// beyond loopback.
	JWT *a2ahttp.JWTConfig `yaml:"jwt,omitempty"`
	// As is the local agent that A2A clients' messages come from: its tier
	// and sandbox apply. Default: the node's default agent, the local
	// agent with the smallest id.
	As string `yaml:"as,omitempty"`
	// PushAllowHosts may receive push notifications on private, loopback
	// or link-local addresses (IPs, CIDRs, host names, *.domain).
	PushAllowHosts []string `yaml:"pushAllowHosts,omitempty"`
	// PushSecret (hex, at least 16 bytes) is the HMAC-SHA256 key that
	// signs webhook deliveries (X-Nova-Signature), shared with webhook
	// owners out of band. Without it a delivery is signed with its push
	// config's token, or not at all.
	PushSecret string `yaml:"pushSecret,omitempty"`
	// TaskTimeout fails a task working longer (default 5m); MaxTasks caps
	// stored tasks (default 1000, terminal ones pruned oldest first).
	TaskTimeout time.Duration `yaml:"taskTimeout,omitempty"`
	MaxTasks    int           `yaml:"maxTasks,omitempty"`
}

// AgentConfig declares one agent hosted by the node.
type AgentConfig struct {
	// Name is the agent id, unique on this node: letters, digits, '_', '.',
	// '-', at most 64. Its address in the swarm is name@<peerID>.
	Name string `yaml:"name"`
	// Description is free text shown in listings.
	Description string `yaml:"description,omitempty"`
	// Version of the agent, semver. Default "1.0.0".
	Version string `yaml:"version,omitempty"`
	// Tier L0..L3. Default: the seed's tier for the 21 planetary agents, L3
	// ("remaining agents") for any other name.
	Tier *tiers.Tier `yaml:"tier,omitempty"`
	// Capabilities the agent declares: ids ("echo", "codegen.react") or
	// objects {id, name, description}.
	Capabilities []CapabilityConfig `yaml:"capabilities"`
	// Sandbox the agent runs in; empty for none.
	Sandbox string `yaml:"sandbox,omitempty"`
	// A2AURL makes this agent an existing A2A agent (any framework) at that
	// URL: the node fetches its card, publishes it on the mesh and forwards
	// mesh messages to it.
	A2AURL string `yaml:"a2aUrl,omitempty"`
	// MCPServers are the MCP servers serving this agent, by name, in the
	// mcpServers shape of Claude Desktop: {command, args, env, cwd} for
	// stdio, {type: http, url, headers} for streamable HTTP. Their tools,
	// resources and prompts become the agent's, named agent.tool, callable
	// from every node of the swarm.
	MCPServers map[string]mcpbridge.ServerConfig `yaml:"mcpServers,omitempty"`
}

// MCPConfig configures the node's MCP faces (nova-node mcp, /mcp).
type MCPConfig struct {
	// As is the local agent whose tier and sandbox apply to calls made
	// through the node's MCP faces and the CLI. Default: the node's default
	// agent, the local agent with the smallest id.
	As string `yaml:"as,omitempty"`
}

// CapabilityConfig is a capability id, or an object with more detail.
type CapabilityConfig struct {
	ID          string `yaml:"id"`
	Name        string `yaml:"name,omitempty"`
	Description string `yaml:"description,omitempty"`
}

// UnmarshalYAML accepts a plain string as the id.
func (c *CapabilityConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		c.ID = n.Value
		return nil
	}
	type plain CapabilityConfig
	return n.Decode((*plain)(c))
}

// DefaultPort is the default TCP/QUIC port; WebSocket listens on the next.
const DefaultPort = 4710

// DefaultListen returns the default listen addresses for a base port.
func DefaultListen(port int) []string {
	ws := port + 1
	if port == 0 {
		ws = 0 // ephemeral, like the others (port 1 is not a WebSocket port)
	}
	return []string{
		fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", port),
		fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", port),
		fmt.Sprintf("/ip4/0.0.0.0/tcp/%d/ws", ws),
		fmt.Sprintf("/ip6/::/tcp/%d", port),
		fmt.Sprintf("/ip6/::/udp/%d/quic-v1", port),
	}
}

// DefaultDataDir is ~/.nova (or ./.nova when there is no home directory).
func DefaultDataDir() string {
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".nova")
	}
	return ".nova"
}

// DefaultAgentName is the agent a fresh data dir declares.
const DefaultAgentName = "echo"

// DefaultConfig returns the embedded defaults.
func DefaultConfig() Config {
	return Config{
		DataDir:        DefaultDataDir(),
		Swarm:          "default",
		MDNS:           true,
		Listen:         DefaultListen(DefaultPort),
		Agents:         []AgentConfig{DefaultAgent(DefaultAgentName)},
		Sandbox:        sandbox.Policy{Enforced: true},
		MaxFrameSize:   1 << 20,
		RequestTimeout: 30 * time.Second,
		RetryDelay:     500 * time.Millisecond,
		MetricsListen:  "127.0.0.1:0",
		A2A:            A2AConfig{Listen: "127.0.0.1:0"},
		Retries:        3,
		DeliveryTTL:    24 * time.Hour,
		LogLevel:       "info",
		Audit:          AuditConfig{MaxSizeMiB: 32, MaxBackups: 5},
	}
}

// DefaultAgent declares an agent answering with the built-in echo.
func DefaultAgent(name string) AgentConfig {
	return AgentConfig{
		Name:         name,
		Description:  "answers every request with its own payload",
		Version:      "1.0.0",
		Capabilities: []CapabilityConfig{echoCap},
	}
}

// echoCap is the built-in capability (see Echo).
var echoCap = CapabilityConfig{ID: "echo", Name: "Echo", Description: "replies with the request payload"}

// Validate checks every field and names the first bad one.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, a...)))
	}
	if c.DataDir == "" {
		bad("dataDir", "required")
	}
	if c.Authority != "" {
		if _, err := peer.Decode(c.Authority); err != nil {
			bad("authority", "%q is not a peer ID", c.Authority)
		}
	}
	if !invite.ValidSwarm(c.Swarm) {
		bad("swarm", "%q must be lower-case letters, digits and '-', at most 63", c.Swarm)
	}
	if len(c.Listen) == 0 {
		bad("listen", "at least one address is required")
	}
	for i, a := range c.Listen {
		if _, err := multiaddr.NewMultiaddr(a); err != nil {
			bad(fmt.Sprintf("listen[%d]", i), "%q is not a multiaddr: %v", a, err)
		}
	}
	for i, a := range c.Relays {
		if _, err := parsePeerAddr(a); err != nil {
			bad(fmt.Sprintf("relays[%d]", i), "%v", err)
		}
	}
	for i, a := range c.Bootstrap {
		if _, err := parsePeerAddr(a); err != nil {
			bad(fmt.Sprintf("bootstrap[%d]", i), "%v", err)
		}
	}
	if c.SwarmSecret != "" {
		if b, err := hex.DecodeString(c.SwarmSecret); err != nil || len(b) != 32 {
			bad("swarmSecret", "must be 64 hex digits (32 bytes); get one with `nova-node invite`")
		}
	}
	for i, a := range c.Peers {
		if _, err := parsePeerAddr(a); err != nil {
			bad(fmt.Sprintf("peers[%d]", i), "%v", err)
		}
	}
	seen := map[string]bool{}
	for i, a := range c.Agents {
		f := fmt.Sprintf("agents[%d]", i)
		if !agentcard.ValidID(a.Name) {
			bad(f+".name", "%q must be letters, digits, '_', '.', '-' (at most 64), no '@'", a.Name)
		}
		if seen[a.Name] {
			bad(f+".name", "%q is declared twice", a.Name)
		}
		seen[a.Name] = true
		if a.Tier != nil && !a.Tier.Valid() {
			bad(f+".tier", "must be L0..L3")
		}
		for j, cp := range a.Capabilities {
			if strings.TrimSpace(cp.ID) == "" {
				bad(fmt.Sprintf("%s.capabilities[%d].id", f, j), "required")
			}
		}
		for name, sc := range a.MCPServers {
			if err := sc.Validate(); err != nil {
				bad(fmt.Sprintf("%s.mcpServers.%s", f, name), "%v", err)
			}
			if len(a.MCPServers) > 0 && !mcpbridge.ValidAgentName(a.Name) {
				bad(f+".name", "%q cannot prefix tool names (agent.tool): use letters, digits, '_' and '-'", a.Name)
			}
		}
	}
	if c.A2A.PushSecret != "" {
		if b, err := hex.DecodeString(c.A2A.PushSecret); err != nil || len(b) < 16 {
			bad("a2a.pushSecret", "must be at least 32 hex digits (16 bytes), like the output of `openssl rand -hex 32`")
		}
	}
	if c.A2A.Listen != "" && c.A2A.Listen != "off" {
		if _, _, err := net.SplitHostPort(c.A2A.Listen); err != nil {
			bad("a2a.listen", "%q must be host:port (like 127.0.0.1:4713) or \"off\"", c.A2A.Listen)
		}
	}
	if c.A2A.As != "" && !seen[c.A2A.As] {
		bad("a2a.as", "%q is not an agent of this node", c.A2A.As)
	}
	if c.MCP.As != "" && !seen[c.MCP.As] {
		bad("mcp.as", "%q is not an agent of this node", c.MCP.As)
	}
	if c.TierRules != nil {
		if err := c.TierRules.Validate(); err != nil {
			bad("tierRules", "%v", err)
		}
	}
	if c.MaxFrameSize < 4096 || c.MaxFrameSize > 64<<20 {
		bad("maxFrameSize", "%d must be between 4096 and 67108864 bytes", c.MaxFrameSize)
	}
	if c.MetricsListen != "off" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			bad("metricsListen", "%q must be host:port (like 127.0.0.1:4712) or \"off\"", c.MetricsListen)
		}
	}
	if c.RetryDelay <= 0 || c.RetryDelay > time.Hour {
		bad("retryDelay", "must be between 1ms and 1h, like 500ms")
	}
	if c.Retries < 0 || c.Retries > 20 {
		bad("retries", "%d must be between 0 and 20", c.Retries)
	}
	if c.DeliveryTTL < 0 || c.DeliveryTTL > 30*24*time.Hour {
		bad("deliveryTTL", "%s must be between 0s (no waiting for an away node) and 720h", c.DeliveryTTL)
	}
	if c.RequestTimeout <= 0 {
		bad("requestTimeout", "must be positive, like 30s")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("logLevel", "%q must be debug, info, warn or error", c.LogLevel)
	}
	if c.Audit.MaxSizeMiB < 1 || c.Audit.MaxSizeMiB > 1024 {
		bad("audit.maxSizeMiB", "%d must be between 1 and 1024 (MiB per file)", c.Audit.MaxSizeMiB)
	}
	if c.Audit.MaxBackups < 1 || c.Audit.MaxBackups > 100 {
		bad("audit.maxBackups", "%d must be between 1 and 100 (rotated files kept)", c.Audit.MaxBackups)
	}
	return errors.Join(errs...)
}

// ConfigPath is the config file of a data dir.
func ConfigPath(dataDir string) string { return filepath.Join(dataDir, "config.yaml") }

// LoadConfig returns the defaults overlaid with dataDir/config.yaml (when
// present) and then the NOVA_* variables of environ (os.Environ() form).
// A file that does not read or parse, or a NOVA_* variable that does not,
// is a *ConfigError.
func LoadConfig(dataDir string, environ []string) (Config, error) {
	cfg := DefaultConfig()
	env := envMap(environ)
	if dataDir == "" {
		dataDir = env["NOVA_DATA_DIR"]
	}
	if dataDir != "" {
		cfg.DataDir = dataDir
	}
	path := ConfigPath(cfg.DataDir)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := ParseConfig(b, &cfg); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				ce.Source = path
			}
			return cfg, err
		}
	case !errors.Is(err, os.ErrNotExist):
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is the source
		}
		if errors.Is(err, syscall.EISDIR) {
			err = errors.New("is a directory, not a file")
		}
		return cfg, &ConfigError{Source: path, Err: fmt.Errorf("cannot read it: %w", err)}
	}
	if err := cfg.ApplyEnv(env); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// ConfigError is a configuration the user has to fix: a config.yaml that
// does not read or parse (bad YAML, an unknown key, a value of the wrong
// type), or a NOVA_* variable that does not parse. Its message says where
// (Source, and Line when known) and what, in the file's terms.
type ConfigError struct {
	// Source is the config file's path, or the NOVA_* variable; empty from
	// ParseConfig, which does not know the file.
	Source string
	// Line is the line of the file at fault, 0 when unknown.
	Line int
	Err  error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.Source != "" {
		b.WriteString(e.Source)
		if e.Line > 0 && !strings.HasPrefix(e.Source, "NOVA_") {
			fmt.Fprintf(&b, " line %d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ParseConfig overlays YAML (or JSON, which is YAML) onto cfg. Unknown
// fields are errors, so a typo does not silently keep a default. Errors
// are *ConfigError, worded for the file's author (no Go type names).
func ParseConfig(b []byte, cfg *Config) error {
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return yamlConfigError(err)
	}
	return nil
}

var (
	// yaml's messages (go.yaml.in/yaml/v3 v3.0.5), which has no typed
	// detail: "line N: field K not found in type T", "line N: cannot
	// unmarshal !!KIND `VALUE` into T", and "yaml: line N: SYNTAX".
	yamlUnknownRe  = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)
	yamlWrongRe    = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
	yamlLineRe     = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlTypeWanted = map[string]string{
		"time.Duration": "a duration, like 30s or 500ms",
		"int":           "a whole number",
		"bool":          "true or false",
		"string":        "a string",
	}
)

// yamlConfigError words a yaml error for the config's author: the first
// problem, its line, the key or value at fault, and no Go type names.
func yamlConfigError(err error) *ConfigError {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		first := te.Errors[0]
		more := ""
		if n := len(te.Errors) - 1; n > 0 {
			more = fmt.Sprintf(" (and %d more problem(s))", n)
		}
		if m := yamlUnknownRe.FindStringSubmatch(first); m != nil {
			line, _ := strconv.Atoi(m[1])
			msg := fmt.Sprintf("unknown key %q", m[2])
			if s := closestKey(m[2], m[3]); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			return &ConfigError{Line: line, Err: errors.New(msg + more)}
		}
		if m := yamlWrongRe.FindStringSubmatch(first); m != nil {
			line, _ := strconv.Atoi(m[1])
			want, ok := yamlTypeWanted[m[4]]
			if !ok {
				want = "a value of another kind"
				if m[2] == "str" {
					want = "a list or a mapping"
				}
			}
			return &ConfigError{Line: line, Err: fmt.Errorf("%q is not %s%s", m[3], want, more)}
		}
		if m := yamlLineRe.FindStringSubmatch(first); m != nil {
			line, _ := strconv.Atoi(m[1])
			return &ConfigError{Line: line, Err: errors.New(m[2] + more)}
		}
		return &ConfigError{Err: errors.New(first + more)}
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &ConfigError{Line: line, Err: fmt.Errorf("not valid YAML: %s", m[2])}
	}
	return &ConfigError{Err: fmt.Errorf("not valid YAML: %s", msg)}
}

// configTypes are the config's structs by the name yaml's errors give.
var configTypes = map[string]reflect.Type{
	"node.Config":           reflect.TypeFor[Config](),
	"node.AgentConfig":      reflect.TypeFor[AgentConfig](),
	"node.A2AConfig":        reflect.TypeFor[A2AConfig](),
	"node.MCPConfig":        reflect.TypeFor[MCPConfig](),
	"node.AuditConfig":      reflect.TypeFor[AuditConfig](),
	"node.CapabilityConfig": reflect.TypeFor[CapabilityConfig](),
	"a2ahttp.JWTConfig":     reflect.TypeFor[a2ahttp.JWTConfig](),
	"a2ahttp.ScopeRule":     reflect.TypeFor[a2ahttp.ScopeRule](),
}

// closestKey is the key of the struct yaml names typ that is one or two
// edits from key, or "".
func closestKey(key, typ string) string {
	t, ok := configTypes[typ]
	if !ok {
		return ""
	}
	best, bestD := "", 3
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestD {
			best, bestD = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func envMap(environ []string) map[string]string {
	m := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "NOVA_") {
			m[k] = v
		}
	}
	return m
}

// ApplyEnv applies NOVA_* variables (already filtered into a map).
func (c *Config) ApplyEnv(env map[string]string) error {
	if v, ok := env["NOVA_SWARM"]; ok {
		c.Swarm = v
	}
	if v, ok := env["NOVA_PORT"]; ok {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65534 {
			return &ConfigError{Source: "NOVA_PORT", Err: fmt.Errorf("%q is not a port", v)}
		}
		c.Listen = DefaultListen(p)
	}
	if v, ok := env["NOVA_LISTEN"]; ok {
		c.Listen = splitList(v)
	}
	if v, ok := env["NOVA_PEERS"]; ok {
		c.Peers = splitList(v)
	}
	if v, ok := env["NOVA_BOOTSTRAP"]; ok {
		c.Bootstrap = splitList(v)
	}
	if v, ok := env["NOVA_MDNS"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return &ConfigError{Source: "NOVA_MDNS", Err: fmt.Errorf("%q is not true or false", v)}
		}
		c.MDNS = b
	}
	if v, ok := env["NOVA_SWARM_SECRET"]; ok {
		c.SwarmSecret = v
	}
	if v, ok := env["NOVA_A2A_LISTEN"]; ok {
		c.A2A.Listen = v
	}
	if v, ok := env["NOVA_METRICS_LISTEN"]; ok {
		c.MetricsListen = v
	}
	if v, ok := env["NOVA_LOG_LEVEL"]; ok {
		c.LogLevel = v
	}
	if v, ok := env["NOVA_MAX_FRAME_SIZE"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return &ConfigError{Source: "NOVA_MAX_FRAME_SIZE", Err: fmt.Errorf("%q is not a number of bytes", v)}
		}
		c.MaxFrameSize = n
	}
	if v, ok := env["NOVA_REQUEST_TIMEOUT"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return &ConfigError{Source: "NOVA_REQUEST_TIMEOUT", Err: fmt.Errorf("%q is not a duration like 30s", v)}
		}
		c.RequestTimeout = d
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ParseAgentSpec parses the --agent flag form name[:tier[:cap,cap...]],
// e.g. "alice", "venus:L2", "bob:L3:echo,summarize".
func ParseAgentSpec(s string) (AgentConfig, error) {
	parts := strings.SplitN(s, ":", 3)
	a := AgentConfig{Name: parts[0], Version: "1.0.0"}
	if len(parts) > 1 && parts[1] != "" {
		t, err := tiers.ParseTier(parts[1])
		if err != nil {
			return a, fmt.Errorf("agent %q: %w", s, err)
		}
		a.Tier = &t
	}
	if len(parts) > 2 {
		for _, c := range splitList(parts[2]) {
			a.Capabilities = append(a.Capabilities, CapabilityConfig{ID: c})
		}
	} else {
		a.Capabilities = DefaultAgent(a.Name).Capabilities
		a.Description = DefaultAgent(a.Name).Description
	}
	if !agentcard.ValidID(a.Name) {
		return a, fmt.Errorf("agent %q: name must be letters, digits, '_', '.', '-' (at most 64)", s)
	}
	return a, nil
}

// Secret returns the decoded swarm secret, or nil.
func (c Config) Secret() []byte {
	b, err := hex.DecodeString(c.SwarmSecret)
	if err != nil || len(b) != 32 {
		return nil
	}
	return b
}

// defaultListen reports whether listen is DefaultListen of some port: the
// addresses nobody named one by one.
func defaultListen(listen []string) bool {
	if len(listen) == 0 {
		return false
	}
	a, err := multiaddr.NewMultiaddr(listen[0])
	if err != nil {
		return false
	}
	v, err := a.ValueForProtocol(multiaddr.P_TCP)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(v)
	return err == nil && slices.Equal(listen, DefaultListen(port))
}

// listenAddrs returns the addresses to listen on: with a swarm secret, QUIC
// addresses are left out (libp2p private networks cannot run over QUIC),
// and the second result says which were dropped.
func (c Config) listenAddrs() (keep, dropped []string) {
	for _, a := range c.Listen {
		if c.SwarmSecret != "" && (strings.Contains(a, "/quic") || strings.Contains(a, "/webtransport")) {
			dropped = append(dropped, a)
			continue
		}
		keep = append(keep, a)
	}
	return keep, dropped
}
