package node

import (
	"context"
	"encoding/json"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/envelope"

	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/node/tasknode"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// Task negotiation and swarms on a node run in package tasknode; the node
// builds its tasknode.Service in build, wraps every local agent's handler
// with it (RegisterAgent), starts it in Start after the router and the
// documents and closes it before them. The names below keep the node's API.

// Defaults of TaskOptions (see package tasknode).
const (
	DefaultSubTaskTimeout  = tasknode.DefaultSubTaskTimeout
	DefaultPeerGoneAfter   = tasknode.DefaultPeerGoneAfter
	DefaultProposalTimeout = tasknode.DefaultProposalTimeout
	DefaultEstimate        = tasknode.DefaultEstimate
)

// EvtSwarmNotice is the event type of a swarm notification received by a
// local agent (released, completed, failed, escalation).
const EvtSwarmNotice = tasknode.EvtSwarmNotice

// TaskOptions configure task negotiation and swarms on a node; see
// [tasknode.TaskOptions].
type TaskOptions = tasknode.TaskOptions

// DefaultWork is the sub-task worker of agents when TaskOptions.Work is not
// set; see [tasknode.DefaultWork].
func DefaultWork(ctx context.Context, agent string, t taskswarm.Task) (json.RawMessage, error) {
	return tasknode.DefaultWork(ctx, agent, t)
}

// SwarmDocName returns the name of the replicated document holding the
// shared state of swarm id created by an agent of sandbox sandboxID ("" for
// none).
func SwarmDocName(sandboxID, id string) string { return tasknode.SwarmDocName(sandboxID, id) }

// ConfigureTasks sets the node's task options (see [TaskOptions] for which
// take effect when). Safe before and after Start.
func (n *Node) ConfigureTasks(o TaskOptions) { n.tasks.Configure(o) }

// CapabilityPolicy returns a proposal policy for TaskOptions.Decide: a
// local target whose card declares at least one of the required
// capabilities (or any proposal, when none is required) accepts, with an
// estimate by complexity (1m simple, 5m medium, 30m complex); any other
// target rejects with CAPABILITY_MISSING.
func (n *Node) CapabilityPolicy() negotiation.ProposalHandler { return n.tasks.CapabilityPolicy() }

// newTasks builds the node's task service on its host, discovery, router
// and documents; nothing runs until its Start.
func (n *Node) newTasks(h host.Host, disc *discovery.Service, r *protocol.Router, docs *crdt.Manager) *tasknode.Service {
	return tasknode.New(tasknode.Config{
		Post: func(ctx context.Context, env *envelope.Envelope) error {
			_, err := r.Post(ctx, env)
			return err
		},
		Registry: n.reg, Docs: docs, FindByCapability: disc.FindByCapability, Host: h,
		Factory: n.factory, Sandbox: n.cfg.Sandbox, Emit: n.obs.Record,
		Subscribe: func(buf int, types ...string) (<-chan localapi.Event, func()) {
			sub := n.obs.Subscribe(buf, types...)
			return sub.C, sub.Close
		},
		Store: kvStore{n.db}, Log: n.log,
	})
}
