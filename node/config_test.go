package node_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	golog "github.com/ipfs/go-log/v2"
	"go.yaml.in/yaml/v3"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/tiers"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := node.DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxFrameSize != 1<<20 || cfg.Swarm != "default" || len(cfg.Agents) != 1 || !cfg.Sandbox.Enforced {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	bad := tiers.Tier(9)
	cases := map[string]func(c *node.Config){
		"dataDir":                   func(c *node.Config) { c.DataDir = "" },
		"swarm":                     func(c *node.Config) { c.Swarm = "Bad Swarm" },
		"listen[0]":                 func(c *node.Config) { c.Listen = []string{"not-a-multiaddr"} },
		"listen":                    func(c *node.Config) { c.Listen = nil },
		"peers[0]":                  func(c *node.Config) { c.Peers = []string{"/ip4/127.0.0.1/tcp/1"} },
		"agents[0].name":            func(c *node.Config) { c.Agents[0].Name = "bad@name" },
		"agents[1].name":            func(c *node.Config) { c.Agents = append(c.Agents, c.Agents[0]) },
		"agents[0].tier":            func(c *node.Config) { c.Agents[0].Tier = &bad },
		"agents[0].capabilities[0]": func(c *node.Config) { c.Agents[0].Capabilities[0].ID = " " },
		"tierRules":                 func(c *node.Config) { c.TierRules = tiers.Rules{{Source: 0}} },
		"maxFrameSize":              func(c *node.Config) { c.MaxFrameSize = 10 },
		"requestTimeout":            func(c *node.Config) { c.RequestTimeout = 0 },
		"logLevel":                  func(c *node.Config) { c.LogLevel = "loud" },
		"deliveryTTL":               func(c *node.Config) { c.DeliveryTTL = -time.Second },
		"a2a.pushSecret":            func(c *node.Config) { c.A2A.PushSecret = "abcd" },
	}
	for field, mutate := range cases {
		t.Run(field, func(t *testing.T) {
			cfg := node.DefaultConfig()
			mutate(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), "config: "+field) {
				t.Fatalf("got %v, want an error naming %s", err, field)
			}
		})
	}
}

func TestTemplateParsesBackToTheSameConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := node.DefaultConfig()
	cfg.DataDir = dir
	l2 := tiers.L2
	cfg.Agents = []node.AgentConfig{
		{Name: "venus", Tier: &l2, Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "design.review"}, {ID: "echo"}}},
		node.DefaultAgent("bob"),
	}
	cfg.Listen = node.DefaultListen(4720)
	if _, err := node.EnsureDataDir(cfg); err != nil {
		t.Fatal(err)
	}
	got, err := node.LoadConfig(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Listen, cfg.Listen) || len(got.Agents) != 2 || *got.Agents[0].Tier != l2 ||
		got.Agents[0].Sandbox != "lab" || got.Agents[0].Capabilities[0].ID != "design.review" || got.Agents[1].Name != "bob" {
		t.Fatalf("round trip through config.yaml lost data:\n%+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigSources(t *testing.T) {
	dir := t.TempDir()
	yaml := `swarm: lab
requestTimeout: 5s
agents:
  - name: alice
    tier: L1
    capabilities: [echo, {id: plan, name: Planning}]
`
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := node.LoadConfig(dir, []string{"NOVA_SWARM=prod", "NOVA_PORT=5000", "NOVA_PEERS=/ip4/1.2.3.4/tcp/1/p2p/12D3KooWJpzJncECJAKJALbQd9joKfVLn2d2bJGrWj5Wgu9n6uN4", "HOME=/x"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Swarm != "prod" || cfg.RequestTimeout != 5*time.Second || !strings.HasSuffix(cfg.Listen[0], "/tcp/5000") || len(cfg.Peers) != 1 {
		t.Fatalf("env should override file: %+v", cfg)
	}
	if a := cfg.Agents[0]; a.Name != "alice" || *a.Tier != tiers.L1 || a.Capabilities[1].Name != "Planning" {
		t.Fatalf("agents from file: %+v", cfg.Agents)
	}
	// NOVA_DATA_DIR selects the data dir when no flag does.
	cfg, err = node.LoadConfig("", []string{"NOVA_DATA_DIR=" + dir})
	if err != nil || cfg.DataDir != dir || cfg.Swarm != "lab" {
		t.Fatalf("NOVA_DATA_DIR: %v %+v", err, cfg)
	}
	// Errors name the source.
	for _, env := range []string{"NOVA_PORT=x", "NOVA_MAX_FRAME_SIZE=big", "NOVA_REQUEST_TIMEOUT=soon"} {
		if _, err := node.LoadConfig(dir, []string{env}); err == nil || !strings.Contains(err.Error(), strings.Split(env, "=")[0]) {
			t.Errorf("%s: %v", env, err)
		}
	}
	// A typo in the file is an error, not a silent default.
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("swram: x\n"), 0o600)
	if _, err := node.LoadConfig(dir, nil); err == nil || !strings.Contains(err.Error(), "swram") {
		t.Fatalf("unknown field: %v", err)
	}
}

// TestConfigErrorsAreTyped: what is wrong with config.yaml or a NOVA_*
// variable is a *node.ConfigError naming the file (or variable) and line,
// in the file's terms: no Go type names.
func TestConfigErrorsAreTyped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	for _, c := range []struct {
		yaml string
		line int
		want string
	}{
		{"swarm: lab\nlissten: [x]\n", 2, `unknown key "lissten" (did you mean "listen"?)`},
		{"agents:\n  - name: a\n    tierr: L1\n", 3, `unknown key "tierr" (did you mean "tier"?)`},
		{"requestTimeout: banana\n", 1, `"banana" is not a duration`},
		{"retries: many\n", 1, `"many" is not a whole number`},
		{"swarm: [\n", 1, "not valid YAML"},
	} {
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := node.LoadConfig(dir, nil)
		var ce *node.ConfigError
		if !errors.As(err, &ce) || ce.Source != path || ce.Line != c.line || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "node.") || strings.Contains(err.Error(), "time.Duration") {
			t.Errorf("%q: %v (%#v); want a ConfigError at %s line %d saying %q", c.yaml, err, ce, path, c.line, c.want)
		}
	}
	os.Remove(path)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	var ce *node.ConfigError
	if _, err := node.LoadConfig(dir, nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("config.yaml a directory: %v", err)
	}
	if _, err := node.LoadConfig(t.TempDir(), []string{"NOVA_MDNS=maybe"}); !errors.As(err, &ce) || ce.Source != "NOVA_MDNS" {
		t.Errorf("NOVA_MDNS=maybe: %v", err)
	}
}

func TestParseAgentSpec(t *testing.T) {
	a, err := node.ParseAgentSpec("venus:L2:design.review,echo")
	if err != nil || a.Name != "venus" || *a.Tier != tiers.L2 || len(a.Capabilities) != 2 {
		t.Fatalf("%+v %v", a, err)
	}
	a, err = node.ParseAgentSpec("bob")
	if err != nil || a.Tier != nil || a.Capabilities[0].ID != "echo" {
		t.Fatalf("%+v %v", a, err)
	}
	for _, bad := range []string{"", "x:L9", "a@b"} {
		if _, err := node.ParseAgentSpec(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestAgentTierDefaults(t *testing.T) {
	if c := node.DefaultAgent("sun").Card(); c.Tier != tiers.L0 {
		t.Fatalf("sun is %s", c.Tier)
	}
	if c := node.DefaultAgent("mercury").Card(); c.Tier != tiers.L1 {
		t.Fatalf("mercury is %s", c.Tier)
	}
	if c := node.DefaultAgent("somebody").Card(); c.Tier != tiers.L3 {
		t.Fatalf("a non-planetary agent is %s, want L3", c.Tier)
	}
}

// TestLogConfig: logs to a stderr that is not a terminal carry no colour
// codes, and the DHT's warnings of a node alone in its swarm are quiet
// unless the level is debug.
func TestLogConfig(t *testing.T) {
	quiet := "dht/RtRefreshManager"
	cfg := node.LogConfig("info", false, nil)
	if cfg.Format != golog.PlaintextOutput || !cfg.Stderr {
		t.Errorf("not a terminal: format %v; want plain text on stderr", cfg.Format)
	}
	if l, ok := cfg.SubsystemLevels[quiet]; !ok || l != golog.LevelError {
		t.Errorf("%s at %v; want error", quiet, l)
	}
	if cfg := node.LogConfig("info", true, nil); cfg.Format != golog.ColorizedOutput {
		t.Errorf("a terminal: format %v; want colour", cfg.Format)
	}
	if cfg := node.LogConfig("info", true, []string{"NO_COLOR=1"}); cfg.Format != golog.PlaintextOutput {
		t.Errorf("NO_COLOR: format %v", cfg.Format)
	}
	if cfg := node.LogConfig("info", false, []string{"GOLOG_LOG_FMT=color"}); cfg.Format != golog.ColorizedOutput {
		t.Errorf("GOLOG_LOG_FMT=color: format %v", cfg.Format)
	}
	if cfg := node.LogConfig("debug", false, nil); len(cfg.SubsystemLevels) != 0 {
		t.Errorf("debug quiets %v", cfg.SubsystemLevels)
	}
}

// An agent declared with --agent and the same agent as init writes it to
// config.yaml ("- echo") have the same card: a node restarted with the
// other declaration kept the card but bumped its revision, and peers saw
// the capability renamed.
func TestAgentCardSameWhateverTheDeclaration(t *testing.T) {
	flag, err := node.ParseAgentSpec("bob")
	if err != nil {
		t.Fatal(err)
	}
	var fromFile node.Config
	if err := yaml.Unmarshal([]byte("agents:\n  - name: bob\n    description: \"answers every request with its own payload\"\n    capabilities:\n      - echo\n"), &fromFile); err != nil {
		t.Fatal(err)
	}
	if a, b := flag.Card(), fromFile.Agents[0].Card(); !a.Equal(b) {
		t.Fatalf("--agent bob: %+v\nconfig.yaml: %+v", a.Capabilities, b.Capabilities)
	}
}
