package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/tiers"
)

// The swarm authority's commands: grant (an admin signs what a node's
// agents may claim), trust (this node's operator vouches for a peer), and
// authority (what this node knows and makes of every remote agent).

func authorityCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{newGrantCmd(g), newTrustCmd(g), newAuthorityCmd(g)}
}

// grantFlags are the flags that say what a grant or a trust allows.
type grantFlags struct {
	agent, maxTier, expires, notBefore string
	sandboxes, capabilities            []string
}

func (f *grantFlags) add(c *cobra.Command, what string) {
	c.Flags().StringVar(&f.agent, "agent", "", "only this agent of the peer (default: every agent it hosts)")
	c.Flags().StringVar(&f.maxTier, "max-tier", "", "the most privileged tier its agents may claim: L0, L1, L2 or L3 (required)")
	c.Flags().StringArrayVar(&f.sandboxes, "sandbox", nil, "a sandbox its agents may claim to be in (repeatable; '*' for any; none: no sandbox claim is honoured)")
	c.Flags().StringVar(&f.expires, "expires", "", "when the "+what+" ends: a duration from now (720h, 30d) or a date (2027-01-01, or RFC 3339); default: never")
}

// tierFlag checks --max-tier: it is required and must be L0..L3.
func tierFlag(cmd *cobra.Command, s string) error {
	if s == "" {
		return usage(cmd, "--max-tier is required: the most privileged tier the peer's agents may claim (L0, L1, L2 or L3)")
	}
	if _, err := tiers.ParseTier(s); err != nil {
		return usage(cmd, fmt.Sprintf("--max-tier %q: want L0, L1, L2 or L3", s))
	}
	return nil
}

// parseWhen reads a time flag: a duration from now as the other duration
// flags take it (720h, 30d, 1d12h: parseDuration), a date ("2027-01-01",
// midnight local time) or RFC 3339; "" is zero.
func parseWhen(cmd *cobra.Command, flag, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := parseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, usage(cmd, fmt.Sprintf("--%s %s: a duration must be positive", flag, s))
		}
		return now.Add(d), nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, usage(cmd, fmt.Sprintf("--%s %q: want a duration (720h, 30d, 1d12h), a date (2027-01-01) or an RFC 3339 time", flag, s))
}

// notAdmin adds to a NOT_ADMIN refusal what to do, naming the admins this
// node knows; a node that runs without the authority its config.yaml
// names is told to restart.
func notAdmin(cmd *cobra.Command, g *globals, cl *localapi.Client, err error) error {
	var ae *localapi.APIError
	if !errors.As(err, &ae) || ae.Code != localapi.CodeNotAdmin {
		return err
	}
	st, serr := cl.Authority(cmd.Context())
	if serr == nil && st.Authority == "" {
		if cfg, cerr := g.config(); cerr == nil && cfg.Authority != "" {
			return &exitError{code: 1, err: err, hint: "config.yaml names the authority " + cfg.Authority + ", but the running node started before it did: " +
				"restart the node (Ctrl-C, nova-node run), then run the command again"}
		}
		return &exitError{code: 1, err: err, hint: "this swarm has no authority: make an admin node its founder with `nova-node invite --new-secret` there " +
			"(then restart it; it also gives the swarm a new secret, so members need its new token), " +
			"or, to vouch for a peer on this node alone, use `nova-node trust PEER --max-tier L1`"}
	}
	admins := "`nova-node authority` on a member lists them"
	if serr == nil && len(st.Admins) > 0 {
		admins = strings.Join(st.Admins, ", ")
	}
	self := "this node's peer ID"
	if serr == nil {
		self = st.Self
	}
	return &exitError{code: 1, err: err, hint: fmt.Sprintf("run `%s` on an admin node of the authority (admins: %s), "+
		"or ask an admin to run `nova-node authority add-admin %s`", cmd.CommandPath(), admins, self)}
}

func newGrantCmd(g *globals) *cobra.Command {
	var f grantFlags
	c := &cobra.Command{
		Use:   "grant PEER",
		Short: "Sign a grant: what a node's agents may claim (admin nodes only)",
		Long: `grant signs, with this node's key, a grant that lets the agents of node PEER
keep the tier and sandbox their cards claim, up to --max-tier and within the
--sandbox list; every member of the swarm honours it once it reaches them
(this node spreads it at once, and the granted node presents it). Without a
grant (or a trust) a remote agent is held at L3 with no sandbox, whatever
it claims.

Only an admin of the swarm's authority can sign a grant: elsewhere this is
a NOT_ADMIN error. The founder (the node that ran ` + "`nova-node invite --new-secret`" + `)
is an admin; ` + "`nova-node authority add-admin`" + ` makes others.

Flags:
  --max-tier L0..L3   the most privileged tier PEER's agents may claim (required)
  --agent NAME        only that agent of PEER (default: all of them)
  --sandbox NAME      a sandbox they may be in (repeatable; '*' for any)
  --capability ID     a capability they may advertise as covered (repeatable;
                      default: all)
  --expires WHEN      720h, 30d, 2027-01-01 or RFC 3339 (default: never)
  --not-before WHEN   valid from then (default: now)

The serial printed identifies the grant: ` + "`nova-node grant revoke SERIAL`" + `
cancels it. --json prints the grant with "signed", the record as
config.yaml's grants key takes it.`,
		Example: `  nova-node grant 12D3KooWAbc... --max-tier L1 --sandbox lab --expires 720h
  nova-node grant 12D3KooWAbc... --agent builder --max-tier L2 --expires 2027-01-01 --json
  nova-node grant list
  nova-node grant revoke 8123456789 --reason "laptop lost"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(cmd, "grant takes one peer ID (the node to grant: its `nova-node id`), or a subcommand: list, revoke")
			}
			return tierFlag(cmd, f.maxTier)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			exp, err := parseWhen(cmd, "expires", f.expires, now)
			if err != nil {
				return err
			}
			nb, err := parseWhen(cmd, "not-before", f.notBefore, now)
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			res, err := cl.IssueGrant(cmd.Context(), localapi.GrantRequest{Peer: args[0], Agent: f.agent, MaxTier: f.maxTier,
				Sandboxes: f.sandboxes, Capabilities: f.capabilities, NotBefore: nb, Expires: exp})
			if err != nil {
				return notAdmin(cmd, g, cl, err)
			}
			if g.json {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.stdout, "granted: %s\nserial %d (revoke with: nova-node grant revoke %d)\nthe grant is spreading to the swarm's members; the granted node presents it with its cards\n",
				grantLine(res.GrantInfo, now), res.Serial, res.Serial)
			return nil
		},
	}
	f.add(c, "grant")
	c.Flags().StringArrayVar(&f.capabilities, "capability", nil, "a capability id its agents may advertise as covered (repeatable; default: all)")
	c.Flags().StringVar(&f.notBefore, "not-before", "", "when the grant starts to count (same forms as --expires; default: now)")
	c.AddCommand(newGrantListCmd(g), newGrantRevokeCmd(g))
	return c
}

// grantLine is one grant in a line: who, what, until when, and its state.
func grantLine(gr localapi.GrantInfo, now time.Time) string {
	line := scopeLine(gr.Agent, gr.Peer, gr.MaxTier, gr.Sandboxes, gr.Expires, "never expires", now)
	if len(gr.Capabilities) > 0 {
		line += ", capabilities " + strings.Join(gr.Capabilities, ",")
	}
	if !gr.NotBefore.IsZero() && gr.NotBefore.After(now) {
		line += ", from " + gr.NotBefore.Local().Format("2006-01-02 15:04")
	}
	return line
}

// scopeLine is what a grant or a trust covers, in words: which agents of
// which peer, up to which tier, in which sandboxes, until when (never:
// the words for no expiry).
func scopeLine(agent, peer, maxTier string, sandboxes []string, expires time.Time, never string, now time.Time) string {
	who := "every agent"
	if agent != "" {
		who = "agent " + agent
	}
	sbs := "no sandbox"
	if len(sandboxes) > 0 {
		sbs = "sandbox " + strings.Join(sandboxes, ",")
	}
	exp := never
	if !expires.IsZero() {
		exp = "expires " + expiryText(expires, now)
	}
	return fmt.Sprintf("%s of %s up to %s, %s, %s", who, peer, maxTier, sbs, exp)
}

func newGrantListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the grants this node holds, with their state and expiry",
		Long: `grant list shows every grant this node holds (its own, those peers presented
and those admins spread): serial, node, agent, tier, sandboxes, expiry and
state (valid, not-yet-valid, expired, revoked, issuer-not-admin). An expiry
within 7 days is flagged "soon!". --json prints the list.`,
		Example: `  nova-node grant list
  nova-node grant list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return showAuthority(cmd, g, func(st localapi.AuthorityStatus) any { return st.Grants },
				func(st localapi.AuthorityStatus, now time.Time) { printGrants(g, st.Grants, now) })
		},
	}
}

// showAuthority asks the node for its authority status and prints part
// of it: what part picks, as JSON with --json, else print's words.
func showAuthority(cmd *cobra.Command, g *globals, part func(localapi.AuthorityStatus) any, print func(localapi.AuthorityStatus, time.Time)) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	st, err := cl.Authority(cmd.Context())
	if err != nil {
		return err
	}
	if g.json {
		return g.printJSON(part(st))
	}
	print(st, time.Now())
	return nil
}

func printGrants(g *globals, grants []localapi.GrantInfo, now time.Time) {
	if len(grants) == 0 {
		fmt.Fprintln(g.stdout, "  no grants")
	}
	for _, gr := range grants {
		fmt.Fprintf(g.stdout, "  serial %-20d %-16s %s\n", gr.Serial, gr.State, grantLine(gr, now))
	}
}

func newGrantRevokeCmd(g *globals) *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "revoke SERIAL",
		Short: "Revoke a grant by its serial (admin nodes only)",
		Long: `grant revoke signs, with this node's key, a revocation of the grant with
SERIAL (` + "`nova-node grant list`" + ` shows serials) and spreads it: every member that
receives it stops honouring the grant at once, and its agents fall back to
what any other grant or trust allows, else L3 with no sandbox. Only an
admin of the swarm's authority can revoke (NOT_ADMIN otherwise).
--reason is kept with the revocation, for the audit trail.`,
		Example: `  nova-node grant revoke 8123456789 --reason "laptop lost"
  nova-node grant revoke 8123456789 --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(cmd, "grant revoke takes one serial (`nova-node grant list` shows them)")
			}
			if s, err := strconv.ParseUint(args[0], 10, 64); err != nil || s == 0 {
				return usage(cmd, fmt.Sprintf("serial %q is not a grant serial: a positive number, as `nova-node grant list` shows", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			serial, _ := strconv.ParseUint(args[0], 10, 64)
			cl, err := g.client()
			if err != nil {
				return err
			}
			res, err := cl.Revoke(cmd.Context(), localapi.RevokeRequest{Serial: serial, Reason: reason})
			if err != nil {
				return notAdmin(cmd, g, cl, err)
			}
			if g.json {
				return g.printJSON(res)
			}
			who := "a grant this node does not hold (the revocation still spreads)"
			if res.Peer != "" {
				who = "the grant of " + res.Peer
			}
			fmt.Fprintf(g.stdout, "revoked serial %d: %s\n", res.Serial, who)
			return nil
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why, kept with the revocation (at most 256 bytes)")
	return c
}

func newTrustCmd(g *globals) *cobra.Command {
	var f grantFlags
	var note string
	c := &cobra.Command{
		Use:   "trust PEER",
		Short: "Trust a peer on this node: its agents keep their claims up to a tier",
		Long: `trust records that you, this node's operator, vouch for node PEER: its
agents keep the tier and sandbox their cards claim, up to --max-tier and
within the --sandbox list, on this node only (a trust never travels to
other nodes; for the whole swarm, an admin signs a grant). It is the way
to vouch for a peer in a swarm without an authority. Setting a trust for
the same PEER and --agent again replaces it.

Flags:
  --max-tier L0..L3   the most privileged tier PEER's agents may claim (required)
  --agent NAME        only that agent of PEER (default: all of them)
  --sandbox NAME      a sandbox they may be in (repeatable; '*' for any)
  --expires WHEN      720h, 30d, 2027-01-01 or RFC 3339 (default: until removed)
  --note TEXT         why, for you later

` + "`nova-node trust list`" + ` shows the trusts; ` + "`nova-node trust remove PEER`" + ` forgets one.`,
		Example: `  nova-node trust 12D3KooWAbc... --max-tier L1 --sandbox lab --note "Ana's laptop"
  nova-node trust 12D3KooWAbc... --agent builder --max-tier L2 --expires 30d --json
  nova-node trust list
  nova-node trust remove 12D3KooWAbc... --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(cmd, "trust takes one peer ID (the node to trust: its `nova-node id`), or a subcommand: list, remove")
			}
			return tierFlag(cmd, f.maxTier)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			exp, err := parseWhen(cmd, "expires", f.expires, time.Now())
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			res, err := cl.SetTrust(cmd.Context(), localapi.TrustRequest{Peer: args[0], Agent: f.agent, MaxTier: f.maxTier,
				Sandboxes: f.sandboxes, Expires: exp, Note: note})
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.stdout, "trusted on this node: %s\n", trustLine(res, time.Now()))
			return nil
		},
	}
	f.add(c, "trust")
	c.Flags().StringVar(&note, "note", "", "why you trust the peer, for later")
	c.AddCommand(newTrustListCmd(g), newTrustRemoveCmd(g))
	return c
}

func trustLine(t localapi.TrustInfo, now time.Time) string {
	line := scopeLine(t.Agent, t.Peer, t.MaxTier, t.Sandboxes, t.Expires, "until removed", now)
	if t.Note != "" {
		line += " — " + t.Note
	}
	return line
}

func newTrustListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the peers this node trusts",
		Long: `trust list shows every trust of this node's operator: peer, agent, tier,
sandboxes, expiry (flagged "soon!" within 7 days) and note. --json prints
the list.`,
		Example: `  nova-node trust list
  nova-node trust list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return showAuthority(cmd, g, func(st localapi.AuthorityStatus) any { return st.Trusts },
				func(st localapi.AuthorityStatus, now time.Time) { printTrusts(g, st.Trusts, now) })
		},
	}
}

func printTrusts(g *globals, ts []localapi.TrustInfo, now time.Time) {
	if len(ts) == 0 {
		fmt.Fprintln(g.stdout, "  no trusts")
	}
	for _, t := range ts {
		fmt.Fprintf(g.stdout, "  %s\n", trustLine(t, now))
	}
}

func newTrustRemoveCmd(g *globals) *cobra.Command {
	var agent string
	var all bool
	c := &cobra.Command{
		Use:   "remove PEER",
		Short: "Forget a trust of this node",
		Long: `trust remove forgets the trust of PEER for every agent (the one set without
--agent), or with --agent NAME the one for that agent, or with --all every
trust of PEER. Its agents fall back to what a grant allows, else L3 with
no sandbox. Removing nothing is not an error: the output (and "removed"
with --json) says how many went.`,
		Example: `  nova-node trust remove 12D3KooWAbc...
  nova-node trust remove 12D3KooWAbc... --agent builder
  nova-node trust remove 12D3KooWAbc... --all --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(cmd, "trust remove takes one peer ID (`nova-node trust list` shows them)")
			}
			if all && agent != "" {
				return usage(cmd, "--agent and --all: give one (--all removes every trust of the peer)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			res, err := cl.RemoveTrust(cmd.Context(), args[0], agent, all)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.stdout, "removed %d trust(s) of %s\n", res.Removed, res.Peer)
			return nil
		},
	}
	c.Flags().StringVar(&agent, "agent", "", "the trust of this agent of the peer")
	c.Flags().BoolVar(&all, "all", false, "every trust of the peer")
	return c
}

func newAuthorityCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "authority",
		Short: "Show the swarm's authority, grants, trusts and each remote agent's standing",
		Long: `authority shows what this node knows of its swarm's authority and what it
makes of every remote agent:

  - the authority (the founding admin's peer ID), the admins, and whether
    this node is one;
  - the grants it holds, with state and expiry ("soon!" within 7 days);
  - its operator's trusts;
  - for each remote agent, the tier and sandbox its card claims, those this
    node holds it at, and the basis: grant, trust, or none. An agent held
    lower than it claims is marked "!" with the reason.

A remote agent keeps its claimed tier and sandbox only where a grant signed
by an admin (` + "`nova-node grant`" + `) or this node's trust (` + "`nova-node trust`" + `) covers
them; otherwise it is held at L3 with no sandbox. --json prints it all.

Admins: ` + "`nova-node authority add-admin PEER`" + ` and ` + "`remove-admin PEER`" + ` (on an admin node).`,
		Example: `  nova-node authority
  nova-node authority --json
  nova-node authority add-admin 12D3KooWAbc...`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return showAuthority(cmd, g, func(st localapi.AuthorityStatus) any { return st },
				func(st localapi.AuthorityStatus, now time.Time) { printAuthority(g, st, now) })
		},
	}
	c.AddCommand(newAuthorityInitCmd(g), newAdminCmd(g, true), newAdminCmd(g, false))
	return c
}

// authorityInit is what `authority init --json` prints.
type authorityInit struct {
	Authority string `json:"authority"`
	Founder   bool   `json:"founder"`            // this node's key is the authority
	Changed   bool   `json:"changed"`            // config.yaml was written
	Restart   bool   `json:"restartNeeded"`      // a running node must restart to use it
	Previous  string `json:"previous,omitempty"` // the authority config.yaml named before
}

func newAuthorityInitCmd(g *globals) *cobra.Command {
	var founder string
	var replace bool
	c := &cobra.Command{
		Use:   "init",
		Short: "Found the swarm's authority on this node (or name its founder) without touching the swarm secret",
		Long: `authority init sets up the swarm's authority in config.yaml.

With no flag this node founds it: its own peer ID becomes the authority and
its key the first admin, which signs grants (` + "`nova-node grant`" + `), revocations
and admin changes. ` + "`invite --new-secret`" + ` does the same while it makes a new
swarm secret; init leaves the secret (or its absence) as it is, for a swarm
that already runs or one without a secret.

With --founder PEER the authority is another node's key, as ` + "`join`" + ` would
write it from a token: for a node set up by hand.

A running node uses the authority after a restart (Ctrl-C, nova-node run).
Changing an authority that is already set needs --replace: every grant of
the old authority stops counting.`,
		Example: `  nova-node authority init
  nova-node authority init --founder 12D3KooWAbc...
  nova-node authority init --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.config()
			if err != nil {
				return err
			}
			self, err := node.LoadIdentity(cfg.DataDir)
			if err != nil {
				return err
			}
			selfID, err := peer.IDFromPrivateKey(self)
			if err != nil {
				return err
			}
			want := selfID
			if founder != "" {
				if want, err = peer.Decode(founder); err != nil {
					return usage(cmd, fmt.Sprintf("--founder %q is not a peer ID (a node's `nova-node id`): %v", founder, err))
				}
			}
			res := authorityInit{Authority: want.String(), Founder: want == selfID, Previous: cfg.Authority}
			switch {
			case cfg.Authority == want.String():
				res.Previous = ""
			case cfg.Authority != "" && !replace:
				return usageHint(fmt.Sprintf("this swarm's authority is already %s", cfg.Authority),
					"add --replace to change it: every grant of the old authority stops counting on this node")
			default:
				if err := node.SetAuthority(cfg.DataDir, want); err != nil {
					return err
				}
				res.Changed = true
				res.Restart = nodeRunning(cmd, cfg)
			}
			if g.json {
				return g.printJSON(res)
			}
			w := g.stdout
			switch {
			case !res.Changed:
				fmt.Fprintf(w, "authority  %s (unchanged)\n", res.Authority)
			case res.Founder:
				fmt.Fprintf(w, "authority  %s: this node founds it; its key signs grants\n", res.Authority)
			default:
				fmt.Fprintf(w, "authority  %s (written to config.yaml)\n", res.Authority)
			}
			if res.Restart {
				fmt.Fprintln(w, "restart the running node to use it (Ctrl-C, nova-node run)")
			}
			if res.Founder && res.Changed {
				fmt.Fprintln(w, "next: nova-node invite --max-tier L1 (a token whose joiner is granted), or nova-node grant PEER --max-tier L2")
			}
			return nil
		},
	}
	c.Flags().StringVar(&founder, "founder", "", "the authority's peer ID when another node founded it (default: this node)")
	c.Flags().BoolVar(&replace, "replace", false, "change an authority that is already set")
	return c
}

// nodeRunning reports whether the data dir's node answers on its socket.
func nodeRunning(cmd *cobra.Command, cfg node.Config) bool {
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	_, err := localapi.NewClient(cfg.APISocketPath()).ID(ctx)
	return err == nil
}

func printAuthority(g *globals, st localapi.AuthorityStatus, now time.Time) {
	w := g.stdout
	if st.Authority == "" {
		fmt.Fprintln(w, "authority  none: only this node's trusts vouch for remote agents (`nova-node invite --new-secret` founds one; `nova-node authority init` founds one and keeps the secret)")
	} else {
		role := "this node is not an admin"
		if st.IsAdmin {
			role = "this node is an admin"
		}
		fmt.Fprintf(w, "authority  %s (%s)\n", st.Authority, role)
		fmt.Fprintf(w, "admins     %s (%d update(s) in the log)\n", strings.Join(st.Admins, ", "), st.LogLength)
	}
	fmt.Fprintf(w, "\nGRANTS (%d)\n", len(st.Grants))
	printGrants(g, st.Grants, now)
	fmt.Fprintf(w, "\nTRUSTS (%d)\n", len(st.Trusts))
	printTrusts(g, st.Trusts, now)
	fmt.Fprintf(w, "\nREMOTE AGENTS (%d)\n", len(st.Agents))
	if len(st.Agents) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, a := range st.Agents {
		mark, held := " ", a.Tier+sandboxSuffix(a.Sandbox)
		if a.Note != "" {
			mark = "!"
			held += " (claims " + a.ClaimedTier + sandboxSuffix(a.ClaimedSandbox) + ")"
		}
		line := fmt.Sprintf("%s %s  %s  basis %s", mark, a.Address, held, a.Basis)
		if a.Grant != "" {
			line += " (" + a.Grant + ")"
		}
		if !a.Expires.IsZero() {
			line += ", expires " + expiryText(a.Expires, now)
		}
		if a.Note != "" {
			line += ": " + a.Note
		}
		fmt.Fprintln(w, line)
	}
}

func sandboxSuffix(sb string) string {
	if sb == "" {
		return ""
	}
	return " in " + sb
}

func newAdminCmd(g *globals, add bool) *cobra.Command {
	use, verb := "remove-admin PEER", "removes"
	if add {
		use, verb = "add-admin PEER", "adds"
	}
	return &cobra.Command{
		Use:   use,
		Short: "Change the admins of the swarm's authority (admin nodes only)",
		Long: `authority ` + strings.Fields(use)[0] + ` signs, with this node's key, the next entry of the
authority's log, which ` + verb + ` PEER's key as an admin, and spreads it to the
swarm. An admin signs grants and revocations and changes the admins; the
founding key stays an admin for good. Only an admin can do this
(NOT_ADMIN otherwise). A grant by a removed admin stops counting
(issuer-not-admin): have a remaining admin sign it again.
--json prints the authority's status after the change.`,
		Example: `  nova-node authority ` + strings.Fields(use)[0] + ` 12D3KooWAbc...`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(cmd, cmd.CommandPath()+" takes one peer ID (that node's `nova-node id`)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			req := localapi.AdminsRequest{Remove: args}
			if add {
				req = localapi.AdminsRequest{Add: args}
			}
			st, err := cl.ChangeAdmins(cmd.Context(), req)
			if err != nil {
				return notAdmin(cmd, g, cl, err)
			}
			if g.json {
				return g.printJSON(st)
			}
			fmt.Fprintf(g.stdout, "admins now: %s\n", strings.Join(st.Admins, ", "))
			return nil
		},
	}
}
