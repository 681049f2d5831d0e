package main

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

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
	var f grantFlags
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

A swarm's authority decides which tier and sandbox claims of remote agents
count (see ` + "`nova-node authority`" + `). --new-secret on a node whose config names
no authority makes this node its founder: its own peer ID is written as
` + "`authority:`" + ` in its config.yaml (restart it, as for the secret), and this
node is the first admin. The token always carries the authority when the
config names one, so the joiner knows whose grants count.

--max-tier L0..L3 (on an admin node only; NOT_ADMIN otherwise) makes the
token an admission: it generates a new identity (an Ed25519 key) for the
joiner, signs a grant for it (--sandbox, repeatable, '*' for any;
--expires 720h, 30d or 2027-01-01, default never) and puts key and grant in
the token, so the joiner's agents count at that tier from the start. Such
a token is the joiner's private key: hand it over as you would the swarm
secret it already carries (privately, once). ` + "`nova-node grant list`" + ` shows the
grant; ` + "`nova-node grant revoke SERIAL`" + ` cancels it.

--json prints {"token", "swarm", "private", "bootstrap", "relays",
"warnings", "authority", "identity", "grantSerial"}; the lists are [] when
empty; authority, identity (the joiner's peer ID) and grantSerial only
when the token carries them.`,
		Example: `  nova-node invite
  nova-node invite --new-secret
  nova-node invite --max-tier L1 --sandbox lab --expires 720h
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
			admission := cmd.Flags().Changed("max-tier")
			if admission {
				if err := tierFlag(cmd, f.maxTier); err != nil {
					return err
				}
			} else if len(f.sandboxes) > 0 || f.expires != "" {
				return usage(cmd, "--sandbox and --expires go with --max-tier: they say what the joiner's grant allows")
			}
			exp, err := parseWhen(cmd, "expires", f.expires, time.Now())
			if err != nil {
				return err
			}
			cfg, err := g.config()
			if err != nil {
				return err
			}
			if admission && newSecret && cfg.Authority == "" {
				return usageHint("--max-tier with --new-secret on a node without an authority: this node becomes the authority's admin only once restarted",
					"run `nova-node invite --new-secret` first, restart the node, then `nova-node invite --max-tier "+f.maxTier+"`")
			}
			tok := invite.Token{Swarm: cfg.Swarm, Secret: cfg.Secret(), Relays: relays}
			founded := false
			if newSecret && cfg.Authority == "" {
				self, err := node.FoundAuthority(cfg.DataDir)
				if err != nil {
					return err
				}
				cfg.Authority, founded = self.String(), true
			}
			if cfg.Authority != "" {
				a, err := peer.Decode(cfg.Authority)
				if err != nil {
					return configInvalid(fmt.Errorf("authority %q is not a peer ID: %v", cfg.Authority, err))
				}
				tok.Authority = []byte(a)
			}
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
			var joiner peer.ID
			var serial uint64
			if admission {
				if tok.Authority == nil {
					return &exitError{code: 1, err: &codedError{code: localapi.CodeNotAdmin, msg: "--max-tier signs a grant, and this node's swarm has no authority"},
						hint: "found one with `nova-node invite --new-secret` on this node (then restart it), or invite without --max-tier and let the joiner's operator be trusted (`nova-node trust`)"}
				}
				res, err := cl.Admit(cmd.Context(), localapi.GrantRequest{MaxTier: f.maxTier, Sandboxes: f.sandboxes, Expires: exp})
				if err != nil {
					return notAdmin(cmd, g, cl, err)
				}
				if tok.Grant, err = base64.RawURLEncoding.DecodeString(res.Signed); err != nil {
					return err
				}
				if tok.Identity, err = base64.RawURLEncoding.DecodeString(res.Identity); err != nil {
					return err
				}
				if joiner, err = peer.Decode(res.Peer); err != nil {
					return err
				}
				serial = res.Serial
			}
			for _, a := range info.Addrs {
				if !strings.Contains(a, "/quic") || len(tok.Secret) == 0 {
					tok.Bootstrap = append(tok.Bootstrap, a)
				}
			}
			// Loopback addresses reach only this machine: a joiner on
			// another would dial itself. They stay when there is nothing
			// else (a token for this machine).
			tok.Bootstrap = invite.ForOtherDevices(tok.Bootstrap)
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
			if founded {
				warnings = append(warnings, "this node founded the swarm's authority (authority: "+cfg.Authority+" in its config.yaml): restart it to become its admin")
			}
			if g.json {
				// [] for none, not null.
				out := map[string]any{"token": s, "swarm": tok.Swarm, "private": len(tok.Secret) > 0,
					"bootstrap": append([]string{}, tok.Bootstrap...), "relays": append([]string{}, tok.Relays...), "warnings": warnings}
				if cfg.Authority != "" {
					out["authority"] = cfg.Authority
				}
				if joiner != "" {
					out["identity"], out["grantSerial"] = joiner.String(), serial
				}
				return g.printJSON(out)
			}
			for _, w := range warnings {
				fmt.Fprintln(g.stderr, "warning:", w)
			}
			if !noQR && isTerminal(g.stdout) {
				if q, err := qrText(s); err == nil {
					fmt.Fprintln(g.stdout, q)
				}
			}
			fmt.Fprintf(g.stdout, "%s\n\nOn the other device run:\n  nova-node join %s\n", s, s)
			if joiner != "" {
				fmt.Fprintf(g.stdout, "\nThe token holds a new identity (%s) with a grant up to %s (serial %d): it is that node's private key, so hand it over privately.\n", joiner, f.maxTier, serial)
			}
			if newSecret {
				fmt.Fprintln(g.stdout, "\nThis node's config now holds the new secret: restart it (Ctrl-C, nova-node run).")
			}
			if founded {
				fmt.Fprintln(g.stdout, "This node founded the swarm's authority (its peer ID is `authority:` in its config): after the restart it is the admin that signs grants.")
			}
			return nil
		},
	}
	c.Flags().StringVar(&f.maxTier, "max-tier", "", "make an admission: a new identity for the joiner with a grant up to this tier (L0..L3; admin nodes only)")
	c.Flags().StringArrayVar(&f.sandboxes, "sandbox", nil, "with --max-tier: a sandbox the joiner's agents may be in (repeatable; '*' for any)")
	c.Flags().StringVar(&f.expires, "expires", "", "with --max-tier: when the grant ends (720h, 30d, 2027-01-01; default never)")
	c.Flags().BoolVar(&newSecret, "new-secret", false, "make the swarm private with a new secret (written into this node's config)")
	c.Flags().StringArrayVar(&relays, "relay", nil, "relay multiaddr to put in the token (repeatable)")
	c.Flags().BoolVar(&noQR, "no-qr", false, "do not draw the token as a QR code (it is drawn only when stdout is a terminal)")
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
	var replaceID, keepID bool
	c := &cobra.Command{
		Use:   "join TOKEN",
		Short: "Join the swarm of an invite token",
		Long: `join writes the token's swarm name, secret, bootstrap addresses and
authority into this device's config.yaml (creating the data dir if
needed). Then start the node (or restart it): ` + "`nova-node run`" + `.

A token from ` + "`nova-node invite --max-tier ...`" + ` also carries an identity made
for this device, with a grant for it: join installs it as the data dir's
identity (and the grant in config.yaml's grants) when the data dir has
none yet. If the data dir has another identity, join refuses
(IDENTITY_EXISTS) unless you say which to keep:

  --replace-identity  become the granted node; the old key is kept as
                      identity.key.replaced (peers see a new node)
  --keep-identity     stay this node; the grant is for the token's
                      identity only, so it is dropped: ask an admin for
                      ` + "`nova-node grant <this peer ID>`" + `

--json prints {"swarm", "private", "bootstrap", "config", "authority",
"peerId", "identityInstalled", "granted", "grantDropped"}.`,
		Example: `  nova-node join nova1q...
  nova-node join --data-dir /tmp/nova-b nova1q...
  nova-node join --keep-identity nova1q...`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: 2, err: fmt.Errorf("join takes exactly one token (from `nova-node invite` on a member)")}
			}
			if replaceID && keepID {
				return usage(cmd, "--replace-identity and --keep-identity: give one")
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
			res, err := node.ApplyInviteWith(cfg.DataDir, tok, node.JoinOptions{ReplaceIdentity: replaceID, KeepIdentity: keepID})
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"swarm": tok.Swarm, "private": len(tok.Secret) > 0, "bootstrap": tok.Bootstrap, "config": node.ConfigPath(cfg.DataDir),
					"authority": res.Authority, "peerId": res.PeerID, "identityInstalled": res.IdentityInstalled, "granted": res.Granted, "grantDropped": res.GrantDropped})
			}
			private := "open"
			if len(tok.Secret) > 0 {
				private = "private (secret set; TCP and WebSocket only)"
			}
			fmt.Fprintf(g.stdout, "joined swarm %q, %s, %d bootstrap address(es)\nconfig: %s\n",
				tok.Swarm, private, len(tok.Bootstrap), node.ConfigPath(cfg.DataDir))
			if res.Authority != "" {
				fmt.Fprintf(g.stdout, "authority: %s\n", res.Authority)
			}
			switch {
			case res.IdentityInstalled && res.ReplacedIdentity != "":
				fmt.Fprintf(g.stdout, "identity: %s, from the token (the old key is in %s)\n", res.PeerID, res.ReplacedIdentity)
			case res.IdentityInstalled:
				fmt.Fprintf(g.stdout, "identity: %s, from the token\n", res.PeerID)
			}
			if res.Granted {
				fmt.Fprintln(g.stdout, "grant: written to config.yaml; this node presents it with its cards")
			}
			if res.GrantDropped {
				fmt.Fprintf(g.stdout, "grant: dropped (it was for the token's identity); ask an admin to run: nova-node grant %s --max-tier L1\n", res.PeerID)
			}
			fmt.Fprintf(g.stdout, "now start the node: nova-node run%s (restart it if it is running)\n", dataDirFlag(g))
			return nil
		},
	}
	c.Flags().BoolVar(&replaceID, "replace-identity", false, "install the token's identity in place of this data dir's (kept as identity.key.replaced)")
	c.Flags().BoolVar(&keepID, "keep-identity", false, "keep this data dir's identity and drop the token's identity and grant")
	return c
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
and their average. A peer this node could not dial a moment ago (it was
restarting) is dialled again at once. An agent this node hosts is reachable
with no round trip (path "local"). A node that cannot be reached fails with
PEER_UNREACHABLE. It tells whether a node is reachable; whether an agent
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
				if res.Path == "local" {
					fmt.Fprintf(g.stdout, "%s is on this node: reachable, no network between (0 ms)\n", who)
					return nil
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
