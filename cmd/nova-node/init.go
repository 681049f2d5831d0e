package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/node"
)

func newInitCmd(g *globals) *cobra.Command {
	var agents []string
	var port int
	c := &cobra.Command{
		Use:   "init",
		Short: "Create a data dir: identity key, commented config, empty store",
		Long: `init creates the data directory (default ~/.nova) with:
  identity.key   the node's Ed25519 key (mode 0600): its peer ID and identity
  config.yaml    a commented configuration (YAML; JSON snippets paste in)
  nova.db        the store (bbolt)

Running init again never overwrites an identity or a config: on a data dir
that has a config.yaml, --agent and --port are not applied, and init says
so (with --json: "notApplied"); edit config.yaml instead. ` + "`nova-node run`" + `
does the same on first start, so init is only needed to edit the config first.`,
		Example: `  nova-node init
  nova-node init --data-dir /tmp/nova-b --agent bob --port 4720
  nova-node init --agent venus:L2:design.review,echo`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.config()
			if err != nil {
				return err
			}
			f := cmd.Flags()
			flagAgents, err := portAndAgentFlags(cmd, port, agents)
			if err != nil {
				return err
			}
			cfg, err = checkConfig(cmd, cfg, func(c *node.Config) {
				if f.Changed("port") {
					c.Listen = node.DefaultListen(port)
				}
				if len(flagAgents) > 0 {
					c.Agents = flagAgents
				}
			})
			if err != nil {
				return err
			}
			_, statErr := os.Stat(node.ConfigPath(cfg.DataDir))
			configExisted := statErr == nil
			created, err := node.EnsureDataDir(cfg)
			if err != nil {
				return err
			}
			k, err := node.LoadIdentity(cfg.DataDir)
			if err != nil {
				return err
			}
			id, err := peerID(k)
			if err != nil {
				return err
			}
			// An existing config.yaml is never rewritten: the flags that
			// would have gone into it are named, not dropped silently.
			var notApplied []string
			if configExisted {
				for _, name := range []string{"agent", "port"} {
					if f.Changed(name) {
						notApplied = append(notApplied, "--"+name)
					}
				}
			}
			if g.json {
				out := map[string]any{"dataDir": cfg.DataDir, "peerId": id, "created": created, "config": node.ConfigPath(cfg.DataDir)}
				if len(notApplied) > 0 {
					out["notApplied"] = notApplied
				}
				return g.printJSON(out)
			}
			if created {
				fmt.Fprintf(g.stdout, "created %s\n  peer ID  %s\n  config   %s\nstart it with: nova-node run%s\n", cfg.DataDir, id, node.ConfigPath(cfg.DataDir), dataDirFlag(g))
			} else {
				fmt.Fprintf(g.stdout, "%s already initialised (identity kept)\n  peer ID  %s\n  config   %s\n", cfg.DataDir, id, node.ConfigPath(cfg.DataDir))
			}
			if len(notApplied) > 0 {
				fmt.Fprintf(g.stderr, "warning: not applied: %s: %s exists and init never rewrites it.\n"+
					"  Edit it (agents:, listen:), then restart the node, or send a running one SIGHUP to take agent changes;\n"+
					"  or pass the same flags to `nova-node run` (they override the file for that run).\n",
					strings.Join(notApplied, ", "), node.ConfigPath(cfg.DataDir))
			}
			return nil
		},
	}
	c.Flags().StringArrayVar(&agents, "agent", nil, "agent to declare, name[:tier[:cap,cap]] (repeatable; default one echo agent named \"echo\")")
	c.Flags().IntVar(&port, "port", node.DefaultPort, "base port: TCP and QUIC on it, WebSocket on port+1 (0 = random)")
	return c
}

func dataDirFlag(g *globals) string {
	if g.dataDir == "" {
		return ""
	}
	return " --data-dir " + g.dataDir
}
