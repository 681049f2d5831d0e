package node

import (
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/sandbox"
)

// DocSandbox returns the sandbox a document belongs to: "lab" for a
// document named "lab.plan", "" (shared) for a name without a dot.
func DocSandbox(doc string) string {
	s, _, ok := strings.Cut(doc, ".")
	if !ok {
		return ""
	}
	return s
}

// docSourceCheck is the node's rule for who may change a document, applied
// to local writes and, on every receiving node, to remote updates:
//   - the source must be an agent hosted by the publisher, with a signed
//     card this node knows (else the update cannot be verified: it is not
//     applied or forwarded when the document belongs to a sandbox, and is
//     accepted for a shared document, its host being proven by the
//     publisher's signature);
//   - with sandboxes enforced, a document "<sandbox>.<name>" may be written
//     only by agents of that sandbox or on the cross-sandbox allow list, and
//     a sandboxed agent may write only its own sandbox's documents.
func (n *Node) docSourceCheck(doc, source string, publisher peer.ID) error {
	id, host, qualified := strings.Cut(source, "@")
	if !qualified {
		if publisher == n.id {
			source = id + "@" + n.id.String()
			host = n.id.String()
		} else {
			return fmt.Errorf("node: update source %q is not an agent address", source)
		}
	}
	if host != publisher.String() {
		return fmt.Errorf("node: update source %s is not hosted by its publisher %s", source, publisher)
	}
	card, ok := n.reg.Get(source)
	docSandbox := DocSandbox(doc)
	if !ok {
		if docSandbox != "" {
			return crdt.ErrUnverifiable
		}
		return nil
	}
	if !n.cfg.Sandbox.Enforced {
		return nil
	}
	a := sandbox.Agent{ID: card.Address(), Sandbox: card.SandboxID}
	if card.SandboxID == docSandbox || n.cfg.Sandbox.Allowlisted(a) {
		return nil
	}
	return &sandbox.ViolationError{Action: "write document " + doc, From: a, To: sandbox.Agent{ID: doc, Sandbox: docSandbox}}
}

// docReplicaCheck: a replica may appear in a catch-up answer for a
// sandbox's document only if this node knows a card of an agent it hosts
// that may write the document. (A node hosting both such an agent and
// others is trusted for all of them: a catch-up delta names replicas, not
// agents.)
func (n *Node) docReplicaCheck(doc, replica string) error {
	docSandbox := DocSandbox(doc)
	if docSandbox == "" || !n.cfg.Sandbox.Enforced {
		return nil
	}
	for _, c := range n.reg.List() {
		if c.Host != replica {
			continue
		}
		if c.SandboxID == docSandbox || n.cfg.Sandbox.Allowlisted(sandbox.Agent{ID: c.Address(), Sandbox: c.SandboxID}) {
			return nil
		}
	}
	return fmt.Errorf("node: replica %s hosts no agent that may write %s", replica, doc)
}
