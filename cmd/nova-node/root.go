package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
)

// globals are the flags every command shares.
type globals struct {
	dataDir string
	json    bool
	environ []string
	stdout  io.Writer
	stderr  io.Writer
}

// run is main without the process: it parses args, runs one command and
// returns the exit code (0 ok, 1 failure, 2 usage). Failures are reported
// as errors.go describes.
func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{environ: environ, stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	if strings.HasPrefix(err.Error(), "unknown command ") { // cobra's, untyped
		err = &exitError{code: 2, err: err, hint: helpHint(cmd)}
	}
	return report(g, cmd, g.json || jsonRequested(args), err)
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "nova-node",
		Short: "A peer-to-peer mesh node for AI agents",
		Long: `nova-node runs one node of a peer-to-peer mesh on this device. Agents hosted
on any node publish signed Agent Cards and talk to each other over direct,
encrypted libp2p streams, with tier (L0-L3) and sandbox rules enforced by the
node that receives every message.

Start a node (creates ~/.nova with an identity and a config on first run):
  nova-node run

From another terminal, talk to it:
  nova-node id                     # peer ID and addresses
  nova-node agents                 # local and known remote agents
  nova-node send --to echo --payload '{"text":"hi"}'

Errors: "error: MESSAGE (CODE)" and "hint: WHAT TO DO" on stderr. With
--json, one JSON document on stdout instead and nothing on stderr:
{"error":{"code":"...","message":"...","hint":"..."}} on one line, or, for a
command with a result to show (send, broadcast, tasks propose --wait,
swarm create --wait, tools call, a2a call, demo), that result with the
same "error" member. Exit status: 0 success, 1 failure, 2 usage error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.dataDir, "data-dir", "", "data directory (default ~/.nova, env NOVA_DATA_DIR)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		// An explicit --data-dir '' (an unset shell variable, say) must
		// not quietly mean ~/.nova.
		if f := cmd.Flags().Lookup("data-dir"); f != nil && f.Changed && strings.TrimSpace(g.dataDir) == "" {
			return &exitError{code: 2, err: errors.New("--data-dir is empty"),
				hint: "give a directory (--data-dir /path/to/dir), or leave the flag out for the default (~/.nova, or $NOVA_DATA_DIR)"}
		}
		return nil
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: 2, err: err, hint: helpHint(c)}
	})
	root.AddCommand(newInitCmd(g), newRunCmd(g), newSendCmd(g), newAgentsCmd(g), newIDCmd(g), newBroadcastCmd(g), newStatusCmd(g), newChannelsCmd(g), newEventsCmd(g), newPeersCmd(g), newPingCmd(g), newInviteCmd(g), newJoinCmd(g), newCRDTCmd(g), newVersionCmd(g), newOpenCmd(g))
	root.AddCommand(taskCommands(g)...)
	root.AddCommand(authorityCommands(g)...)
	root.AddCommand(mcpCommands(g)...)
	usageArgs(root)
	return root
}

// usageArgs makes every positional-argument check under c a usage error
// (exit 2), as flag errors are: cobra's own checks (ExactArgs, ...) return
// plain errors, which argsError rewords to name what is missing or extra.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var ee *exitError
			if err == nil || errors.As(err, &ee) {
				return err
			}
			return &exitError{code: 2, err: argsError(cmd, args, err), hint: argsHint(cmd)}
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// cobra's messages (v1.10) from ExactArgs, MinimumNArgs, MaximumNArgs and
// RangeArgs: "accepts 1 arg(s), received 0", ... The numbers say what is
// missing or extra.
var cobraArgsRe = regexp.MustCompile(`^(accepts|requires at least|accepts at most|accepts between) (\d+)(?: and (\d+))? arg\(s\), (?:only )?received (\d+)$`)

// argsError rewords err, cobra's complaint about cmd's positional
// arguments args, to name them as cmd's Use line does ("call URL": URL).
func argsError(cmd *cobra.Command, args []string, err error) error {
	m := cobraArgsRe.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	names := strings.Fields(cmd.Use)[1:]
	want := strings.Join(names, " ")
	if want == "" {
		want = "arguments"
	}
	path := cmd.CommandPath()
	if len(args) == 0 {
		return fmt.Errorf("%s needs %s: it is missing (usage: %s %s)", path, want, path, want)
	}
	return fmt.Errorf("%s takes %s, got %d argument(s): %q (usage: %s %s)", path, want, len(args), args, path, want)
}

// argsHint is the usage hint of cmd with its first example, if it has one.
func argsHint(cmd *cobra.Command) string {
	h := helpHint(cmd)
	if ex, _, _ := strings.Cut(strings.TrimSpace(cmd.Example), "\n"); ex != "" {
		h = "for example `" + strings.TrimSpace(ex) + "`; " + h
	}
	return h
}

// checkConfig validates cfg, the loaded configuration, with the command
// line's settings applied by apply, and returns the result. A bad value
// that the command line gave (one that is bad on the defaults too) is a
// usage error (exit 2); any other problem is config.yaml's or the NOVA_*
// variables' (CONFIG_INVALID, exit 1).
func checkConfig(cmd *cobra.Command, cfg node.Config, apply func(*node.Config)) (node.Config, error) {
	flagsOnly := node.DefaultConfig()
	flagsOnly.DataDir = cfg.DataDir
	apply(&flagsOnly)
	if err := flagsOnly.Validate(); err != nil {
		return cfg, usage(cmd, err.Error())
	}
	apply(&cfg)
	if err := cfg.Validate(); err != nil {
		return cfg, configInvalid(fmt.Errorf("%w (from %s or the NOVA_* variables)", err, node.ConfigPath(cfg.DataDir)))
	}
	return cfg, nil
}

// portFlag checks a --port value: 0 (any free port) to 65534, as the
// WebSocket listener takes the next port.
func portFlag(cmd *cobra.Command, port int) error {
	if port < 0 || port > 65534 {
		return usage(cmd, fmt.Sprintf("--port %d: the port must be 0–65534 (WebSocket listens on port+1; 0 picks free ports)", port))
	}
	return nil
}

// config loads the configuration of the selected data dir.
func (g *globals) config() (node.Config, error) {
	return node.LoadConfig(g.dataDir, g.environ)
}

// client returns a client of the running node of the selected data dir.
//
// A config.yaml that does not load (a typo made while the node runs) does
// not cut the user off from the running node, which runs with the config
// it started with: if the data dir's default socket is there, the CLI
// warns and uses it.
func (g *globals) client() (*localapi.Client, error) {
	cfg, err := g.config()
	if err != nil {
		if cfg.DataDir == "" {
			return nil, err
		}
		sock := node.Config{DataDir: cfg.DataDir}.APISocketPath()
		if _, serr := os.Stat(sock); serr != nil {
			return nil, err
		}
		fmt.Fprintf(g.stderr, "warning: %v\nwarning: talking to the node at %s, which runs with the config it started with; fix the file before its next start\n", err, sock)
		return localapi.NewClient(sock), nil
	}
	return localapi.NewClient(cfg.APISocketPath()), nil
}

func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// noArgs refuses positional arguments as a usage error (exit 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usage(cmd, fmt.Sprintf("%s takes no arguments, got %q", cmd.CommandPath(), args))
	}
	return nil
}

// portAndAgentFlags checks --port (when given) and parses the --agent specs
// of run and init; a bad one is a usage error.
func portAndAgentFlags(cmd *cobra.Command, port int, specs []string) ([]node.AgentConfig, error) {
	if cmd.Flags().Changed("port") {
		if err := portFlag(cmd, port); err != nil {
			return nil, err
		}
	}
	var agents []node.AgentConfig
	for _, s := range specs {
		a, err := node.ParseAgentSpec(s)
		if err != nil {
			return nil, usage(cmd, err.Error())
		}
		agents = append(agents, a)
	}
	return agents, nil
}
