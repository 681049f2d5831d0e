package node

import (
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/protocol"
)

// docSourceCheck is the write rule of replicated documents, applied to
// local writes and, on every node, to every signed update it receives by
// gossip or in a catch-up answer (author is the update's signer):
//   - the source must be an agent hosted by the author, with a signed card
//     this node knows: documents are open to the swarm's members, and an
//     update whose source's card is unknown here is not applied (nor
//     forwarded) until the card arrives (crdt.ErrUnverifiable);
//   - the sandbox rule sandbox.Policy.CheckWrite on the card's effective
//     sandbox (card.SandboxAgent()): a document "<sandbox>.<name>"
//     belongs to that sandbox and only its agents write it.
func (n *Node) docSourceCheck(doc, source string, author peer.ID) error {
	id, host, qualified := strings.Cut(source, "@")
	if !qualified {
		if author != n.id {
			return fmt.Errorf("node: update source %q is not an agent address", source)
		}
		source, host = id+"@"+n.id.String(), n.id.String()
	}
	if host != author.String() {
		return fmt.Errorf("node: update source %s is not hosted by its author %s", source, author)
	}
	card, ok := n.reg.Get(source)
	if !ok {
		return crdt.ErrUnverifiable
	}
	if d := n.cfg.Sandbox.CheckWrite(card.SandboxAgent(), doc); !d.Allowed {
		return d.Err
	}
	return nil
}

// docRepairAgent names the local agent in whose name a document stored
// without signatures is written again (crdt.WithLegacyRepair): the first
// local agent that may write it.
func (n *Node) docRepairAgent(doc string) (string, bool) {
	for _, c := range n.reg.List() {
		if c.Host != n.id.String() {
			continue
		}
		if n.docSourceCheck(doc, c.Address(), n.id) == nil {
			return c.Address(), true
		}
	}
	return "", false
}

// docSecurityEvent raises a document's security event (a forged or
// invalid update, an equivocating replica) as the node's security event.
func (n *Node) docSecurityEvent(e crdt.SecurityEvent) {
	detail := e.Detail
	if e.Replica != "" {
		detail = "replica " + e.Replica + ": " + detail
	}
	n.obs.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Time: time.Now(), Code: e.Code, Peer: e.Peer,
		Detail: "document " + e.Doc + ": " + detail, SourceTier: -1, TargetTier: -1})
}
