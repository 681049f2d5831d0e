package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/node"
)

func newRunCmd(g *globals) *cobra.Command {
	var listen, peers, agents []string
	var port int
	var swarm, logLevel string
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the node until Ctrl-C",
		Long: `run starts the node: it listens on TCP, QUIC and WebSocket, prints its peer
ID and addresses, hosts the agents declared in config.yaml, connects to the
given peers, and serves the local control API that the other commands use
(a Unix socket in the data dir, reachable only by you). Ctrl-C stops it
cleanly. On first run it creates the data dir, as ` + "`nova-node init`" + ` does,
and once the node has started it writes the flags (--agent, --peer, --listen
or --port, --swarm, --log-level) into config.yaml, so a plain run keeps them.
An existing config.yaml is never rewritten: flags then apply to this run only,
and run names them on stderr.

By default it listens on all interfaces (0.0.0.0 and ::): TCP and QUIC on
port 4710, WebSocket on 4711, so other machines can connect; and it finds
swarm members on the local network by mDNS. --port moves those ports;
--listen replaces the whole list (give one or the other, not both): for
loopback only, --listen /ip4/127.0.0.1/tcp/0 (any free port). mDNS has no
flag: turn it off with NOVA_MDNS=false, or "mdns: false" in config.yaml.

Settings come from config.yaml, then NOVA_* variables, then these flags.
A problem in config.yaml or a NOVA_* variable fails with CONFIG_INVALID
(exit 1); a bad flag is a usage error (exit 2).`,
		Example: `  nova-node run
  nova-node run --data-dir /tmp/nova-b --port 4720 --agent bob
  nova-node run --peer /ip4/192.168.1.20/tcp/4710/p2p/12D3KooW...
  NOVA_MDNS=false nova-node run --listen /ip4/127.0.0.1/tcp/0 --listen /ip4/127.0.0.1/udp/0/quic-v1   # loopback only, no mDNS
  NOVA_LOG_LEVEL=debug nova-node run`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.config()
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("port") && f.Changed("listen") {
				return &exitError{code: 2, err: errors.New("give --port or --listen, not both: --listen replaces the addresses --port would set"),
					hint: "for one port on loopback only: --listen /ip4/127.0.0.1/tcp/4710 --listen /ip4/127.0.0.1/udp/4710/quic-v1"}
			}
			flagAgents, err := portAndAgentFlags(cmd, port, agents)
			if err != nil {
				return err
			}
			cfg, err = checkConfig(cmd, cfg, func(c *node.Config) {
				if f.Changed("port") {
					c.Listen = node.DefaultListen(port)
				}
				if f.Changed("listen") {
					c.Listen = listen
				}
				if f.Changed("peer") {
					c.Peers = append(c.Peers, peers...)
				}
				if f.Changed("swarm") {
					c.Swarm = swarm
				}
				if f.Changed("log-level") {
					c.LogLevel = logLevel
				}
				if len(flagAgents) > 0 {
					c.Agents = flagAgents
				}
			})
			if err != nil {
				return err
			}
			node.SetupLogging(cfg.LogLevel)
			_, statErr := os.Stat(node.ConfigPath(cfg.DataDir))
			configExisted := statErr == nil
			if _, err := node.PrepareDataDir(cfg); err != nil {
				return err
			}
			n, err := node.New(cfg)
			if err != nil {
				return err
			}
			defer n.Close()
			ctx := cmd.Context()
			if err := n.Start(ctx); err != nil {
				return err
			}
			// config.yaml is written once the node runs, so a setting it
			// could not start with is not kept; an existing one is never
			// rewritten, and the flags this run alone uses are named.
			if !configExisted {
				if _, err := node.WriteConfig(cfg); err != nil {
					fmt.Fprintf(g.stderr, "warning: %v: the flags of this run are not kept for the next\n", err)
				}
			} else if notKept := runFlagsNotKept(f); len(notKept) > 0 {
				verb, them := "apply", "them"
				if len(notKept) == 1 {
					verb, them = "applies", "it"
				}
				fmt.Fprintf(g.stderr, "note: %s %s to this run only: %s exists and run does not rewrite it;\n"+
					"  to keep %s for a plain `nova-node run`, add %s there (peers:, agents:, listen:, swarm:, logLevel:)\n",
					strings.Join(notKept, ", "), verb, node.ConfigPath(cfg.DataDir), them, them)
			}
			info := n.Info()
			if g.json {
				_ = g.printJSON(info)
			} else {
				fmt.Fprintf(g.stdout, "nova-node %s running\n  peer ID  %s\n  swarm    %s\n  data dir %s\n", node.Version, info.PeerID, info.Swarm, info.DataDir)
				fmt.Fprintln(g.stdout, "  listening on:")
				for _, a := range info.Addrs {
					fmt.Fprintf(g.stdout, "    %s\n", a)
				}
				fmt.Fprintln(g.stdout, "  agents:")
				for _, a := range n.Registry().Local() {
					fmt.Fprintf(g.stdout, "    %-16s %s  %s\n", a.ID, a.Tier, capIDs(a.Capabilities))
				}
				if info.MCPURL != "" {
					fmt.Fprintf(g.stdout, "  mcp      %s  (or: nova-node mcp)\n", info.MCPURL)
				}
				if info.A2AURL != "" {
					fmt.Fprintf(g.stdout, "  a2a      %s/a2a/<agent>/\n", info.A2AURL)
				}
				if info.MetricsURL != "" {
					fmt.Fprintf(g.stdout, "  metrics  %s\n", info.MetricsURL)
				}
				fmt.Fprintln(g.stdout, "Press Ctrl-C to stop.")
			}
			// SIGHUP reloads the agents from config.yaml (and NOVA_*): new
			// ones are hosted, changed ones republished, removed ones withdrawn.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
		wait:
			for {
				select {
				case <-ctx.Done():
					break wait
				case <-hup:
					next, err := g.config()
					if err == nil {
						// Flags keep overriding what they overrode at start.
						next.Listen, next.Peers, next.Swarm, next.LogLevel = cfg.Listen, cfg.Peers, cfg.Swarm, cfg.LogLevel
						if len(agents) > 0 {
							next.Agents = cfg.Agents
						}
						var res node.ReloadResult
						if res, err = n.Reload(next); err == nil {
							fmt.Fprintf(g.stderr, "reloaded: added %s; changed %s; removed %s\n", nameList(res.Added), nameList(res.Changed), nameList(res.Removed))
							if len(agents) > 0 {
								fmt.Fprintln(g.stderr, "note: this node's agents come from --agent, which overrides config.yaml's: restart it without --agent to manage them in config.yaml")
							}
							if len(res.Restart) > 0 {
								fmt.Fprintf(g.stderr, "restart to apply: %s\n", nameList(res.Restart))
							}
						}
					}
					if err != nil {
						fmt.Fprintf(g.stderr, "reload refused, keeping the running configuration: %v\n", err)
					}
				}
			}
			fmt.Fprintln(g.stderr, "stopping...")
			start := time.Now()
			if err := n.Close(); err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "stopped cleanly in %s\n", time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := c.Flags()
	f.StringArrayVar(&listen, "listen", nil, "multiaddr to listen on (repeatable; replaces the configured list; default all interfaces, 0.0.0.0 and ::)")
	f.StringArrayVar(&peers, "peer", nil, "peer multiaddr ending in /p2p/<peerID> to connect to (repeatable)")
	f.StringArrayVar(&agents, "agent", nil, "agent to host, name[:tier[:cap,cap]] (repeatable; replaces the configured agents)")
	f.IntVar(&port, "port", node.DefaultPort, "base port on all interfaces: TCP and QUIC on it, WebSocket on port+1 (0 = random; not with --listen)")
	f.StringVar(&swarm, "swarm", "", "swarm name")
	f.StringVar(&logLevel, "log-level", "", "debug, info, warn or error")
	return c
}

// runFlagsNotKept names the run flags given that a config.yaml does not
// take (it exists, and run never rewrites it).
func runFlagsNotKept(f interface{ Changed(string) bool }) []string {
	var names []string
	for _, name := range []string{"peer", "agent", "port", "listen", "swarm", "log-level"} {
		if f.Changed(name) {
			names = append(names, "--"+name)
		}
	}
	return names
}

func peerID(k crypto.PrivKey) (string, error) {
	id, err := peer.IDFromPrivateKey(k)
	return id.String(), err
}

// nameList is names for people: "none", or "a, b".
func nameList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
