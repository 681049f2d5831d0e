package main

import (
	"fmt"

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

Running init again never overwrites an identity or a config. ` + "`nova-node run`" + `
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
			if cmd.Flags().Changed("port") {
				cfg.Listen = node.DefaultListen(port)
			}
			if len(agents) > 0 {
				cfg.Agents = nil
				for _, s := range agents {
					a, err := node.ParseAgentSpec(s)
					if err != nil {
						return &exitError{code: 2, err: err}
					}
					cfg.Agents = append(cfg.Agents, a)
				}
			}
			if err := cfg.Validate(); err != nil {
				return &exitError{code: 2, err: err}
			}
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
			if g.json {
				return g.printJSON(map[string]any{"dataDir": cfg.DataDir, "peerId": id, "created": created, "config": node.ConfigPath(cfg.DataDir)})
			}
			if created {
				fmt.Fprintf(g.stdout, "created %s\n  peer ID  %s\n  config   %s\nstart it with: nova-node run%s\n", cfg.DataDir, id, node.ConfigPath(cfg.DataDir), dataDirFlag(g))
			} else {
				fmt.Fprintf(g.stdout, "%s already initialised (identity kept)\n  peer ID  %s\n  config   %s\n", cfg.DataDir, id, node.ConfigPath(cfg.DataDir))
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
