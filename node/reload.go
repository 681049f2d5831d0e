package node

import (
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
	// restart (listen addresses, MCP servers, ...).
	Restart []string `json:"restartNeeded,omitempty"`
}

// Reload applies a new configuration's agents without a restart (seed 002's
// dynamic discovery): new agents are hosted, changed ones get a new card
// revision, removed ones are withdrawn; every change is announced to the
// swarm. Other settings are reported in Restart when they differ.
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
	for _, a := range cfg.Agents {
		next[a.Name] = true
		p, existed := prev[a.Name]
		if existed && fmt.Sprint(p.MCPServers) != fmt.Sprint(a.MCPServers) {
			res.Restart = append(res.Restart, "agents."+a.Name+".mcpServers")
		}
		if existed && p.Card().Equal(a.Card()) && p.A2AURL == a.A2AURL {
			continue
		}
		var h protocol.Handler
		if hasCap(a, "echo") {
			h = Echo
		}
		if a.A2AURL != "" && started {
			res.Restart = append(res.Restart, "agents."+a.Name+".a2aUrl")
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
		res.Removed = append(res.Removed, a.Name)
	}
	n.mu.Lock()
	n.cfg.Agents = slices.Clone(cfg.Agents)
	n.mu.Unlock()
	n.log.Infow("configuration reloaded", "added", res.Added, "changed", res.Changed, "removed", res.Removed, "restartNeeded", res.Restart)
	return res, nil
}
