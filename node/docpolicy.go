package node

import (
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/sandbox"
)

// docSourceCheck applies, to local writes and on every receiving node to
// remote updates, who may change a replicated document:
//   - the source must be an agent hosted by the publisher, with a signed
//     card this node knows (else the update cannot be verified: it is not
//     applied or forwarded when the document belongs to a sandbox, and is
//     accepted for a shared document, its host being proven by the
//     publisher's signature);
//   - the sandbox rule sandbox.Policy.CheckWrite (a document
//     "<sandbox>.<name>" belongs to that sandbox).
func (n *Node) docSourceCheck(doc, source string, publisher peer.ID) error {
	id, host, qualified := strings.Cut(source, "@")
	if !qualified {
		if publisher != n.id {
			return fmt.Errorf("node: update source %q is not an agent address", source)
		}
		source, host = id+"@"+n.id.String(), n.id.String()
	}
	if host != publisher.String() {
		return fmt.Errorf("node: update source %s is not hosted by its publisher %s", source, publisher)
	}
	card, ok := n.reg.Get(source)
	if !ok {
		if sandbox.DocumentSandbox(doc) != "" {
			return crdt.ErrUnverifiable
		}
		return nil
	}
	if d := n.cfg.Sandbox.CheckWrite(card.SandboxAgent(), doc); !d.Allowed {
		return d.Err
	}
	return nil
}

// docReplicaCheck: a replica may appear in a catch-up answer for a
// sandbox's document only if this node knows a card of an agent it hosts
// that may write the document. (A node hosting both such an agent and
// others is trusted for all of them: a catch-up delta names replicas, not
// agents.)
func (n *Node) docReplicaCheck(doc, replica string) error {
	if sandbox.DocumentSandbox(doc) == "" || !n.cfg.Sandbox.Enforced {
		return nil
	}
	for _, c := range n.reg.List() {
		if c.Host == replica && n.cfg.Sandbox.CheckWrite(c.SandboxAgent(), doc).Allowed {
			return nil
		}
	}
	return fmt.Errorf("node: replica %s hosts no agent that may write %s", replica, doc)
}
