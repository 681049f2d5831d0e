package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
)

func newChannelsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "channels",
		Short: "List the channels from local agents to remote ones; close one",
		Long: `channels lists the node's outbound channels: one per pair of a local
agent and a remote one, carrying that pair's envelopes in order. Each shows
its id, its state (connecting, open, reconnecting, closed), the envelopes
waiting for acknowledgement (and how many of those are on disk, in the
outbox, where they survive a restart) and the next sequence number.

` + "`channels close ID`" + ` gives up on one channel at once, rather than waiting
for its redials to run out: each envelope still waiting on it fails with
CHANNEL_CLOSED.`,
		Example: `  nova-node channels
  nova-node channels --json
  nova-node channels close 3f9c2a...`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			chs, err := cl.Channels(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(chs)
			}
			if len(chs) == 0 {
				fmt.Fprintln(g.stdout, "no channels (one opens with the first envelope from a local agent to a remote one)")
				return nil
			}
			sortChannels(chs)
			fmt.Fprintf(g.stdout, "  %-32s  %-13s %s\n", "ID", "STATE", "FROM -> TO, ENVELOPES NOT YET ACKNOWLEDGED")
			for _, ch := range chs {
				fmt.Fprintln(g.stdout, channelLine(ch))
			}
			return nil
		},
	}
	c.AddCommand(newChannelsCloseCmd(g))
	return c
}

func newChannelsCloseCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "close ID|PREFIX",
		Short: "Close a channel: what still waits on it fails with CHANNEL_CLOSED",
		Long: `close gives up on one outbound channel (its id as ` + "`nova-node channels`" + ` shows
it, or a prefix of it that no other open channel's id starts with): it stops redialling, each envelope still waiting for acknowledgement
fails with CHANNEL_CLOSED (a sender waiting on one gets that error; the
node's events show one error each), and its outbox entry is deleted. An
envelope the peer took but had not acknowledged yet may still be delivered.
The next envelope between the same two agents opens a new channel.`,
		Example: `  nova-node channels close 3f9c2a7d0e5b41c6a8d2f0e9b7c4a1d3
  nova-node channels close 3f9c      # a unique prefix is enough
  nova-node channels close 3f9c2a7d0e5b41c6a8d2f0e9b7c4a1d3 --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(cmd, "give the id of the channel to close, or a unique prefix of it (`nova-node channels` lists them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			id, err := resolveChannel(cmd, cl, args[0])
			if err != nil {
				return err
			}
			ch, err := cl.CloseChannel(cmd.Context(), id)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(ch)
			}
			waiting := "none was waiting for acknowledgement"
			if ch.Pending > 0 {
				waiting = fmt.Sprintf("%d envelope(s) waiting for acknowledgement failed with CHANNEL_CLOSED", ch.Pending)
			}
			fmt.Fprintf(g.stdout, "closed %s -> %s (%s)\n", shortAddr(ch.From), shortAddr(ch.To), waiting)
			return nil
		},
	}
}

// resolveChannel expands prefix, a prefix of the id of a channel that is
// not closed yet, to that id; as tasks accept does with proposal ids
// (matchChannel).
func resolveChannel(cmd *cobra.Command, cl *localapi.Client, prefix string) (string, error) {
	if strings.TrimSpace(prefix) == "" {
		return "", usage(cmd, "the channel id is empty: give the id of the channel to close, or a unique prefix of it")
	}
	chs, err := cl.Channels(cmd.Context())
	if err != nil {
		return "", err
	}
	return matchChannel(chs, prefix)
}

// matchChannel is the id among chs that is prefix, or else the one id of a
// channel not closed yet that starts with prefix. A prefix that several
// ids start with is a usage error listing them; one that none does is
// returned as it is, for the node to say CHANNEL_NOT_FOUND.
func matchChannel(chs []protocol.ChannelInfo, prefix string) (string, error) {
	var ids []string
	for _, ch := range chs {
		if ch.ID == prefix || ch.State != "closed" {
			ids = append(ids, ch.ID)
		}
	}
	id, several := uniquePrefix(ids, prefix)
	if several != nil {
		return "", usageHint(fmt.Sprintf("%q is the start of %d channel ids (%s)", prefix, len(several), strings.Join(several, ", ")),
			"give more of the id, as `nova-node channels` lists it")
	}
	return id, nil
}

// uniquePrefix is the id among ids that is prefix, or else the one that
// starts with prefix, or else prefix itself (for the node to say it is not
// found); when several start with it, they are returned, sorted, instead.
func uniquePrefix(ids []string, prefix string) (id string, several []string) {
	var match []string
	for _, id := range ids {
		if id == prefix {
			return prefix, nil
		}
		if strings.HasPrefix(id, prefix) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return prefix, nil
	case 1:
		return match[0], nil
	}
	sort.Strings(match)
	return "", match
}

// channelLine is one channel as status and channels print it.
// A channel whose peer's node is away shows how long its oldest envelope
// has waited for it.
func channelLine(ch protocol.ChannelInfo) string {
	line := fmt.Sprintf("  %s  %-13s %s -> %s  pending %d (%d on disk)  next seq %d", ch.ID, ch.State, shortAddr(ch.From), shortAddr(ch.To), ch.Pending, ch.Stored, ch.NextSeq)
	if ch.Pending > 0 && ch.OldestAgeMs > 0 && ch.State != "open" {
		line += fmt.Sprintf("  oldest waiting %s", (time.Duration(ch.OldestAgeMs) * time.Millisecond).Round(time.Second))
	}
	return line
}
