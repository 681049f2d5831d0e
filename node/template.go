package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// configTemplate is the commented config.yaml that `nova-node init` writes.
// It is YAML, so JSON snippets (such as an mcpServers block) paste in as is.
const configTemplate = `# nova-node configuration. Every setting can also be given as a NOVA_*
# environment variable or a command-line flag; flags win over the
# environment, which wins over this file. See docs/configuration.md.

# Swarm name: nodes only talk to nodes of the same swarm. (NOVA_SWARM)
swarm: %s

# Addresses to listen on: TCP, QUIC and WebSocket. Port 0 picks a free port.
# (NOVA_LISTEN=a,b,c or NOVA_PORT=N / --port N to move the default ports)
listen:
%s
# Peers to connect to at start and keep connected, as multiaddrs ending in
# /p2p/<peerID> (print them with ` + "`nova-node id`" + ` on the other node).
# (NOVA_PEERS=a,b or --peer, repeatable)
peers:%s

# Swarm members to join the DHT through, and relays for when this node is
# behind a NAT that hole punching cannot cross. nova-node join fills these.
bootstrap: []
relays: []

# Find swarm members on the local network with zero configuration. (NOVA_MDNS)
mdns: true

# Agents hosted on this node. An agent with the capability "echo" answers
# every request with its own payload. tier: L0..L3 (default: the seed's tier
# for the 21 planetary agent names, L3 otherwise). sandbox: optional.
agents:
%s
# Sandbox rules: agents in different sandboxes cannot reach or see each
# other unless one is listed in crossSandboxAllowList (names or name@peerID).
sandbox:
  enforced: true
  crossSandboxAllowList: []

# Largest frame accepted on nova's stream protocols, in bytes. (NOVA_MAX_FRAME_SIZE)
maxFrameSize: 1048576

# How long a request may wait for its answer. (NOVA_REQUEST_TIMEOUT)
requestTimeout: 30s

# A channel that loses its peer redials after retryDelay, doubling the delay
# each time, retries times. Then the peer's node counts as away: requests
# fail with DELIVERY_FAILED, everything else waits in the outbox and goes,
# in order, when the node returns; an envelope still waiting after
# deliveryTTL fails with DELIVERY_FAILED (0s: fail at once, as requests do).
# Unacknowledged envelopes survive a restart (outbox).
retryDelay: 500ms
retries: 3
deliveryTTL: 24h

# Prometheus /metrics and /healthz, loopback only by default; port 0 picks a
# free port (printed by run and status); "off" disables. (NOVA_METRICS_LISTEN)
metricsListen: 127.0.0.1:0

# debug, info, warn or error. (NOVA_LOG_LEVEL)
logLevel: %s

# The audit log (audit.jsonl): rotated when it reaches maxSizeMiB, keeping the
# maxBackups newest rotated files (gzipped if compress), so it takes at most
# (maxBackups+1) x maxSizeMiB.
audit:
  maxSizeMiB: 32
  maxBackups: 5
  compress: false
`

func renderConfig(cfg Config) string {
	var listen, peers, agents strings.Builder
	for _, a := range cfg.Peers {
		fmt.Fprintf(&peers, "\n  - %s", a)
	}
	if len(cfg.Peers) == 0 {
		peers.WriteString(" []")
	}
	for _, a := range cfg.Listen {
		fmt.Fprintf(&listen, "  - %s\n", a)
	}
	for _, a := range cfg.Agents {
		fmt.Fprintf(&agents, "  - name: %s\n", a.Name)
		if a.Description != "" {
			fmt.Fprintf(&agents, "    description: %q\n", a.Description)
		}
		if a.Tier != nil {
			fmt.Fprintf(&agents, "    tier: %s\n", a.Tier.String())
		}
		if a.Sandbox != "" {
			fmt.Fprintf(&agents, "    sandbox: %s\n", a.Sandbox)
		}
		agents.WriteString("    capabilities:\n")
		for _, c := range a.Capabilities {
			fmt.Fprintf(&agents, "      - %s\n", c.ID)
		}
	}
	swarm, logLevel := cfg.Swarm, cfg.LogLevel
	if swarm == "" {
		swarm = DefaultConfig().Swarm
	}
	if logLevel == "" {
		logLevel = "info"
	}
	return fmt.Sprintf(configTemplate, swarm, listen.String(), peers.String(), agents.String(), logLevel)
}

// writeConfigTemplate writes config.yaml unless it exists, and reports
// whether it wrote it.
func writeConfigTemplate(cfg Config) (bool, error) {
	f, err := os.OpenFile(ConfigPath(cfg.DataDir), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node: write config: %w", err)
	}
	if _, err := f.WriteString(renderConfig(cfg)); err != nil {
		f.Close()
		return false, fmt.Errorf("node: write config: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}
