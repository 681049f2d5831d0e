package node

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nova-node/nova-node/protocol"
)

// ReloadResult says what a reload changed.
type ReloadResult struct {
	Added   []string `json:"added"`
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
	// Restart lists settings that changed but take effect only after a
	// restart (listen addresses, the swarm, an agent's a2aUrl); those
	// settings keep their running values until then.
	Restart []string `json:"restartNeeded,omitempty"`
}

// Reload applies a new configuration's agents without a restart (seed 002's
// dynamic discovery): new agents are hosted, changed ones get a new card
// revision, removed ones are withdrawn; every change is announced to the
// swarm. An agent's MCP servers (mcpServers) are applied too: servers of
// new and changed declarations start, those of removed agents and
// declarations stop, and the agent's card follows its tools. An agent
// whose a2aUrl is new or changed on a running node is not applied (it is
// neither hosted nor changed) and is listed in Restart, as are the other
// settings that differ.
func (n *Node) Reload(cfg Config) (ReloadResult, error) {
	var res ReloadResult
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	n.mu.Lock()
	old := n.cfg
	started := n.started
	n.mu.Unlock()
	if !slices.Equal(old.Listen, cfg.Listen) {
		res.Restart = append(res.Restart, "listen")
	}
	if old.Swarm != cfg.Swarm || old.SwarmSecret != cfg.SwarmSecret {
		res.Restart = append(res.Restart, "swarm")
	}
	prev := map[string]AgentConfig{}
	for _, a := range old.Agents {
		prev[a.Name] = a
	}
	next := map[string]bool{}
	applied := make([]AgentConfig, 0, len(cfg.Agents))
	var mcpChanged []AgentConfig
	for _, a := range cfg.Agents {
		next[a.Name] = true
		p, existed := prev[a.Name]
		if started && a.A2AURL != "" && (!existed || p.A2AURL != a.A2AURL) {
			// The A2A agent's card comes from its URL, fetched by the
			// hosting loop Start runs: a card published now would be a
			// half agent, with no handler behind it.
			res.Restart = append(res.Restart, "agents."+a.Name+".a2aUrl")
			if existed {
				applied = append(applied, p)
			}
			continue
		}
		applied = append(applied, a)
		if fmt.Sprint(p.MCPServers) != fmt.Sprint(a.MCPServers) {
			mcpChanged = append(mcpChanged, a)
		}
		if existed && p.Card().Equal(a.Card()) && p.A2AURL == a.A2AURL {
			continue
		}
		var h protocol.Handler
		if hasCap(a, "echo") {
			h = Echo
		}
		if _, err := n.RegisterAgent(a.Card(), h); err != nil {
			return res, fmt.Errorf("node: reload agent %q: %w", a.Name, err)
		}
		if existed {
			res.Changed = append(res.Changed, a.Name)
		} else {
			res.Added = append(res.Added, a.Name)
		}
	}
	for _, a := range old.Agents {
		if next[a.Name] {
			continue
		}
		n.mu.Lock()
		n.reg.Unregister(a.Name)
		delete(n.handlers, a.Name)
		started := n.started
		n.mu.Unlock()
		n.router.Handle(a.Name, nil)
		if started {
			n.router.Announce()
			n.disc.Announce()
		}
		if len(a.MCPServers) > 0 {
			mcpChanged = append(mcpChanged, AgentConfig{Name: a.Name})
		}
		res.Removed = append(res.Removed, a.Name)
	}
	n.mu.Lock()
	n.cfg.Agents = applied
	n.mu.Unlock()
	// The tool publisher reads n.cfg.Agents: the servers start once it
	// holds the new declarations.
	var errs []error
	if started {
		for _, a := range mcpChanged {
			if err := n.restartBackends(a); err != nil {
				errs = append(errs, fmt.Errorf("node: reload agent %q: MCP servers: %w", a.Name, err))
			}
		}
	}
	n.log.Infow("configuration reloaded", "added", res.Added, "changed", res.Changed, "removed", res.Removed, "mcpServers", len(mcpChanged), "restartNeeded", res.Restart)
	return res, errors.Join(errs...)
}
