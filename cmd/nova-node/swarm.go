package main

import (
	"fmt"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/discovery/invite"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
)

func newInviteCmd(g *globals) *cobra.Command {
	var newSecret, noQR bool
	var relays []string
	c := &cobra.Command{
		Use:   "invite",
		Short: "Print a token another device uses to join this node's swarm",
		Long: `invite prints a token holding the swarm's name, its secret (if it has one)
and this running node's addresses, to bootstrap from. On the other device,
` + "`nova-node join <token>`" + ` is the only step.

--new-secret makes the swarm private: it generates a 32-byte secret, writes
it into this node's config (restart this node for it to apply) and puts it
in the token. With a secret, outsiders cannot complete a handshake with any
member; QUIC is then not used (TCP and WebSocket only).

--relay puts a circuit relay's address in the token, for devices that cannot
reach this node directly: a full multiaddr ending in /p2p/<peerID>. One that
is not is a usage error (exit 2), found before anything is written.

--json prints {"token", "swarm", "private", "bootstrap", "relays",
"warnings"}; the lists are [] when empty.`,
		Example: `  nova-node invite
  nova-node invite --new-secret
  nova-node invite --relay /ip4/203.0.113.7/tcp/4710/p2p/12D3KooW... --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, r := range relays {
				// Before anything is written (--new-secret): the token's own
				// check, on a token that holds only this relay.
				if err := (invite.Token{Swarm: "x", Relays: []string{r}}).Validate(); err != nil {
					_, why, _ := strings.Cut(err.Error(), "relays[0]: ")
					return usageHint("--relay: "+why, "--relay takes a relay's full multiaddr, ending in /p2p/<peerID>: "+
						"/ip4/203.0.113.7/tcp/4710/p2p/12D3KooW... (the relay node's `nova-node id` lists its addresses)")
				}
			}
			cfg, err := g.config()
			if err != nil {
				return err
			}
			tok := invite.Token{Swarm: cfg.Swarm, Secret: cfg.Secret(), Relays: relays}
			if newSecret {
				s, err := invite.GenerateSecret()
				if err != nil {
					return err
				}
				if err := node.SetSwarmSecret(cfg.DataDir, s); err != nil {
					return err
				}
				tok.Secret = s
			}
			cl := localapi.NewClient(cfg.APISocketPath())
			info, err := cl.ID(cmd.Context())
			if err != nil {
				return fmt.Errorf("%w\n(invite needs the running node's addresses)", err)
			}
			for _, a := range info.Addrs {
				if !strings.Contains(a, "/quic") || len(tok.Secret) == 0 {
					tok.Bootstrap = append(tok.Bootstrap, a)
				}
			}
			s, err := tok.Encode()
			if err != nil {
				return err
			}
			warnings := []string{}
			if len(relays) == 0 && onlyLoopback(tok.Bootstrap) {
				warnings = append(warnings, "this node listens only on loopback addresses (127.0.0.1, ::1): the token works on this "+
					"machine only; for other devices, run the node on a LAN address (`nova-node run --listen /ip4/0.0.0.0/tcp/4710`, "+
					"or listen in config.yaml) and invite again, or add a reachable relay with --relay")
			}
			if g.json {
				// [] for none, not null.
				return g.printJSON(map[string]any{"token": s, "swarm": tok.Swarm, "private": len(tok.Secret) > 0,
					"bootstrap": append([]string{}, tok.Bootstrap...), "relays": append([]string{}, tok.Relays...), "warnings": warnings})
			}
			for _, w := range warnings {
				fmt.Fprintln(g.stderr, "warning:", w)
			}
			if !noQR {
				if q, err := qrText(s); err == nil {
					fmt.Fprintln(g.stdout, q)
				}
			}
			fmt.Fprintf(g.stdout, "%s\n\nOn the other device run:\n  nova-node join %s\n", s, s)
			if newSecret {
				fmt.Fprintln(g.stdout, "\nThis node's config now holds the new secret: restart it (Ctrl-C, nova-node run).")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&newSecret, "new-secret", false, "make the swarm private with a new secret (written into this node's config)")
	c.Flags().StringArrayVar(&relays, "relay", nil, "relay multiaddr to put in the token (repeatable)")
	c.Flags().BoolVar(&noQR, "no-qr", false, "do not draw the token as a QR code")
	return c
}

// onlyLoopback reports whether every address is a loopback one (none
// counts as no: there is nothing to warn about but that, said elsewhere).
func onlyLoopback(addrs []string) bool {
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil || !manet.IsIPLoopback(m) {
			return false
		}
	}
	return len(addrs) > 0
}

func newJoinCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "join TOKEN",
		Short: "Join the swarm of an invite token",
		Long: `join writes the token's swarm name, secret and bootstrap addresses into this
device's config.yaml (creating the data dir if needed). Then start the node
(or restart it): ` + "`nova-node run`" + `.`,
		Example: `  nova-node join nova1q...
  nova-node join --data-dir /tmp/nova-b nova1q...`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: 2, err: fmt.Errorf("join takes exactly one token (from `nova-node invite` on a member)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := invite.Decode(args[0])
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("invalid token: %w", err)}
			}
			cfg, err := g.config()
			if err != nil {
				return err
			}
			if err := node.ApplyInvite(cfg.DataDir, tok); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"swarm": tok.Swarm, "private": len(tok.Secret) > 0, "bootstrap": tok.Bootstrap, "config": node.ConfigPath(cfg.DataDir)})
			}
			private := "open"
			if len(tok.Secret) > 0 {
				private = "private (secret set; TCP and WebSocket only)"
			}
			fmt.Fprintf(g.stdout, "joined swarm %q, %s, %d bootstrap address(es)\nconfig: %s\nnow start the node: nova-node run%s (restart it if it is running)\n",
				tok.Swarm, private, len(tok.Bootstrap), node.ConfigPath(cfg.DataDir), dataDirFlag(g))
			return nil
		},
	}
}

func newPeersCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "peers",
		Short: "List connected peers: addresses, direct or relayed, agents hosted",
		Long: `peers lists the nodes this node is connected to now: each peer ID, whether
the connection is direct or relayed (through a circuit relay, when neither
side can dial the other), the agents whose cards that peer presented, and
the addresses of the open connections. A peer that went away drops off
once its connection closes: at once if it stopped (or, over TCP, was
killed); cut off the network (a lid closed), after about 15 s over TCP
(Linux); a QUIC peer killed or cut off, up to 40 s.`,
		Example: `  nova-node peers
  nova-node peers --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			st, err := cl.Status(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(st.PeerList)
			}
			if len(st.PeerList) == 0 {
				fmt.Fprintln(g.stdout, "no peers")
			}
			for _, p := range st.PeerList {
				path := "direct"
				if p.Relayed {
					path = "relayed"
				}
				fmt.Fprintf(g.stdout, "%s  %s\n  agents: %s\n", p.PeerID, path, strings.Join(p.Agents, ", "))
				for _, a := range p.Addrs {
					fmt.Fprintf(g.stdout, "  %s\n", a)
				}
			}
			return nil
		},
	}
}

func newPingCmd(g *globals) *cobra.Command {
	var count int
	return func() *cobra.Command {
		c := &cobra.Command{
			Use:   "ping PEER|AGENT",
			Short: "Measure round trips to a peer or to the node hosting an agent",
			Long: `ping measures --count round trips (libp2p ping) to a node: give its peer ID,
or an agent (name or name@peerID) to ping the node hosting it, found in
the swarm if this node does not know it yet. It connects first if needed,
and prints the path (direct or relayed), the address used, each round trip
and their average. It tells whether a node is reachable; whether an agent
answers, ` + "`nova-node send`" + ` tells.`,
			Example: `  nova-node ping bob
  nova-node ping 12D3KooWAbc... --count 5 --json`,
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) != 1 {
					return &exitError{code: 2, err: fmt.Errorf("ping takes one peer ID or agent name")}
				}
				if count < 1 || count > 100 {
					return usage(cmd, fmt.Sprintf("--count must be 1 to 100, not %d", count))
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, err := g.client()
				if err != nil {
					return err
				}
				res, err := cl.Ping(cmd.Context(), args[0], count)
				if err != nil {
					return err
				}
				if g.json {
					return g.printJSON(res)
				}
				who := res.Peer
				if res.Agent != "" {
					who = res.Agent
				}
				fmt.Fprintf(g.stdout, "%s via %s (%s)\n", who, res.Path, res.Addr)
				for i, r := range res.RTTs {
					fmt.Fprintf(g.stdout, "  %d: %.3f ms\n", i+1, r)
				}
				fmt.Fprintf(g.stdout, "  avg %.3f ms\n", res.Average)
				return nil
			},
		}
		c.Flags().IntVar(&count, "count", 3, "round trips to measure")
		return c
	}()
}
