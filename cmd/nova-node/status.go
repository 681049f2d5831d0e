package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
)

func newStatusCmd(g *globals) *cobra.Command {
	var reset bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show peers, channels, message counters and recent errors",
		Long: `status shows what the running node is doing: connected peers (direct or
relayed, the agents they host, and on what basis this node holds their
tiers and sandboxes: a grant of the swarm's authority, this node's trust,
or none (least privilege, L3), with the earliest expiry; see
` + "`nova-node authority`" + ` for the details), each channel from a local agent to a
remote one (state: connecting, open, reconnecting, closed; envelopes waiting
for acknowledgement), message counters (sent and received, and the sent
ones by type), average routing latency, and
the last errors and security events. --reset zeroes these counters (the
recent errors stay listed); the /metrics counters never go down, as
Prometheus expects, so after a reset the two differ.`,
		Example: `  nova-node status
  nova-node status --json
  nova-node status --reset`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			if reset {
				if _, err := cl.ResetMetrics(cmd.Context()); err != nil {
					return err
				}
			}
			st, err := cl.Status(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(st)
			}
			w := g.stdout
			fmt.Fprintf(w, "node     %s (%s, swarm %s)\n", st.PeerID, st.Version, st.Swarm)
			if st.MetricsURL != "" {
				fmt.Fprintf(w, "metrics  %s\n", st.MetricsURL)
			}
			if st.MCPURL != "" {
				fmt.Fprintf(w, "mcp      %s  (or: nova-node mcp)\n", st.MCPURL)
			}
			if st.A2AURL != "" {
				fmt.Fprintf(w, "a2a      %s/a2a/<agent>/\n", st.A2AURL)
			}
			fmt.Fprintln(w, reachLine(st.Reach))
			fmt.Fprintf(w, "\nPEERS (%d)\n", len(st.PeerList))
			for _, p := range st.PeerList {
				path := "direct"
				if p.Relayed {
					path = "relayed"
				}
				addr := ""
				if len(p.Addrs) > 0 {
					addr = p.Addrs[0]
				}
				fmt.Fprintf(w, "  %s  %-7s %s  agents: %s%s\n", p.PeerID, path, addr, strings.Join(p.Agents, ","), standingText(p.Basis, p.Expires, time.Now()))
			}
			fmt.Fprintf(w, "\nCHANNELS (%d)\n", len(st.Channels))
			sortChannels(st.Channels)
			for _, ch := range st.Channels {
				fmt.Fprintln(w, channelLine(ch))
			}
			m := st.Metrics
			fmt.Fprintf(w, "\nMESSAGES  sent %d  received %d  errors %d  security events %d  avg routing %.3f ms\n",
				m.TotalMessagesSent, m.TotalMessagesReceived, m.ErrorCount, m.SecurityEvents, m.AverageRoutingLatencyMs)
			if len(m.MessagesByType) > 0 {
				types := make([]string, 0, len(m.MessagesByType))
				for t, n := range m.MessagesByType {
					types = append(types, fmt.Sprintf("%s=%d", t, n))
				}
				sort.Strings(types)
				fmt.Fprintf(w, "  sent by type: %s\n", strings.Join(types, " "))
			}
			if len(st.RecentErrors) > 0 {
				fmt.Fprintln(w, "\nRECENT ERRORS")
				for _, e := range st.RecentErrors {
					fmt.Fprintf(w, "  %s\n", formatEvent(e))
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&reset, "reset", false, "zero the message counters first")
	return c
}

// sortChannels orders channels by sender and recipient, and the channels
// of one pair (a closed one and its successor) by state, then id: the same
// order every time, so that two status calls line up.
func sortChannels(chs []protocol.ChannelInfo) {
	sort.Slice(chs, func(i, j int) bool {
		a, b := chs[i], chs[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		if a.State != b.State {
			return a.State < b.State
		}
		return a.ID < b.ID
	})
}

// shortAddr abbreviates name@12D3KooW...xyz for tables.
func shortAddr(a string) string {
	name, host, ok := strings.Cut(a, "@")
	if !ok || len(host) < 12 {
		return a
	}
	return name + "@" + host[:6] + "…" + host[len(host)-4:]
}

// formatEvent is one line of `events` and of status's recent errors: time,
// type, then what the event carries. The peer is shown where no agent
// address names it (cards received, a malformed frame), and always for a
// security event, whose sender is only what the peer claimed. The detail is
// shown for errors, security events and every event that is not a message
// (channel changes, cards received, task and swarm steps).
func formatEvent(e localapi.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-16s", e.Time.Local().Format("15:04:05.000"), e.Type)
	head := b.Len()
	task := strings.HasPrefix(e.Type, "proposal-") || strings.HasPrefix(e.Type, "swarm-") || e.Type == "peer-gone"
	if task && e.EnvelopeID != "" {
		fmt.Fprintf(&b, " %s", e.EnvelopeID) // the proposal or swarm id
	}
	task = task || e.Type == localapi.EvtMCPInvoked
	if e.MessageType != "" {
		fmt.Fprintf(&b, " %s", e.MessageType)
	}
	if e.Sender != "" || e.Recipient != "" {
		fmt.Fprintf(&b, " %s -> %s", shortAddr(e.Sender), shortAddr(e.Recipient))
	}
	if e.Path != "" {
		fmt.Fprintf(&b, " (%s", e.Path)
		if e.Latency > 0 {
			fmt.Fprintf(&b, ", %s", e.Latency.Round(time.Microsecond))
		}
		b.WriteString(")")
	}
	if e.Peer != "" && e.Type != localapi.EvtPeerGone && (e.Type == protocol.EvtSecurityRaised || e.Sender == "" && e.Recipient == "") {
		fmt.Fprintf(&b, " peer %s", e.Peer)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Detail != "" && (e.Code != "" || e.MessageType == "" || task) {
		if b.Len() > head {
			b.WriteString(":")
		}
		fmt.Fprintf(&b, " %s", e.Detail)
	}
	return strings.TrimRight(b.String(), " ")
}

func newEventsCmd(g *globals) *cobra.Command {
	var follow bool
	var limit int
	c := &cobra.Command{
		Use:   "events",
		Short: "Print the node's recent events, and follow new ones live",
		Long: `events prints what the router did: message-sent, message-received,
routing-decision (path and latency), channel state changes, errors with
their codes, and security events. --json prints one JSON object per line.

--follow keeps printing new events until Ctrl-C (exit 0). When the node
stops (Ctrl-C or SIGTERM on ` + "`nova-node run`" + `), the stream ends at once:
the last line is "node stopped" (with --json, an object with "type":
"node-stopped"), and events exits 0. If the node is killed instead, the
stream breaks off and events exits 1.`,
		Example: `  nova-node events
  nova-node events --follow
  nova-node events --follow --limit 0        # only what happens from now on
  nova-node events --follow --json | jq 'select(.type=="security")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usage(cmd, fmt.Sprintf("--limit must be 0 or more, not %d", limit))
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			recent := limit
			if recent == 0 {
				recent = -1 // none: to the API, 0 is all it keeps
			}
			enc := json.NewEncoder(g.stdout)
			return cl.Events(cmd.Context(), recent, follow, func(e localapi.Event) error {
				if g.json {
					return enc.Encode(e)
				}
				if e.Type == localapi.EvtNodeStopped {
					_, err := fmt.Fprintf(g.stdout, "%s node stopped\n", e.Time.Local().Format("15:04:05.000"))
					return err
				}
				_, err := fmt.Fprintln(g.stdout, formatEvent(e))
				return err
			})
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	c.Flags().IntVar(&limit, "limit", 50, "how many recent events to print first (0: none, only new ones with --follow)")
	return c
}

// standingText is a peer's basis and earliest expiry for status: "" when
// the peer presented no agents; an expiry within a week is flagged.
func standingText(basis string, expires, now time.Time) string {
	if basis == "" {
		return ""
	}
	out := "  basis: " + basis
	if !expires.IsZero() {
		out += ", expires " + expiryText(expires, now)
	}
	return out
}

// expiryText is an expiry as a date and how far off it is, flagged "!"
// within soonDays days, and "expired" once past.
func expiryText(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d <= 0:
		return t.Local().Format("2006-01-02 15:04") + " (expired)"
	case d < soonDays*24*time.Hour:
		return t.Local().Format("2006-01-02 15:04") + " (in " + roughDuration(d) + ", soon!)"
	}
	return t.Local().Format("2006-01-02") + " (in " + roughDuration(d) + ")"
}

// soonDays is how close an expiry is flagged.
const soonDays = 7

// roughDuration is d to the nearest day, hour or minute: a grant made
// for 30d reads "30 days", not the 29 and a fraction left.
func roughDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", int(d.Round(24*time.Hour)/(24*time.Hour)))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", int(d.Round(time.Hour)/time.Hour))
	}
	return fmt.Sprintf("%d min", max(1, int(d/time.Minute)))
}
