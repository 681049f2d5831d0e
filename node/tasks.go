package node

import (
	"context"
	"net/http"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/protocol"
)

// taskState is the node's task negotiation and swarm coordination.
type taskState struct{}

// startTasks starts negotiation, swarm coordination and participation.
// Called from Start with n.mu held: it must not call methods that lock it.
func (n *Node) startTasks(ctx context.Context, r *protocol.Router, docs *crdt.Manager) error {
	return nil
}

// closeTasks stops what startTasks started; safe when it did not run.
func (n *Node) closeTasks() {}

// wrapTaskHandler routes task envelopes of local agent id to negotiation
// and swarms before h (which may be nil) sees the rest.
func (n *Node) wrapTaskHandler(id string, h protocol.Handler) protocol.Handler { return h }

// registerTaskRoutes adds the local API's task and swarm routes.
func (n *Node) registerTaskRoutes(mux *http.ServeMux) {}
