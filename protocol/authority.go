package protocol

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/clock"
)

// Authority is the swarm's authority as the router carries it: records
// signed by its admins (the log of admin keys, revocations and grants),
// which every hello presents and every receiver checks for itself. The
// router never interprets them; the node's authority book does (see
// package authority), and the registry's assessor turns them into what a
// remote card is held at.
type Authority interface {
	// Records returns the signed records this node presents in its
	// hellos: the admin log in order, then revocations, then grants.
	Records() [][]byte
	// Accept takes the records peer p presented. It returns the records
	// refused (each error says why, with its code), which the router
	// reports as security events naming p; the rest are kept. New
	// records should make the node announce again (Router.AnnounceSoon:
	// Accept runs on the stream's reading goroutine), so they spread to
	// its peers.
	Accept(p peer.ID, records [][]byte) (refused []error)
}

// acceptAuthority hands the authority records peer p presented to the
// authority, and reports the refusals as one security event naming p (a
// hello frame may carry a thousand records). A refused record does not end
// the hello: a peer may relay a grant whose admin this node does not know
// yet.
func (r *Router) acceptAuthority(p peer.ID, recs [][]byte) {
	refused := r.o.auth.Accept(p, recs)
	if len(refused) == 0 {
		return
	}
	detail := fmt.Sprintf("authority record from %s refused: %v", shortID(p), refused[0])
	if len(refused) > 1 {
		detail = fmt.Sprintf("%d authority records from %s refused; the first: %v", len(refused), shortID(p), refused[0])
	}
	r.security(Event{Time: clock.Now(), Code: CodeOf(refused[0]), Detail: detail, Peer: p, SourceTier: -1, TargetTier: -1})
}
