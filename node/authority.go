package node

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/discovery"
	"github.com/nova-node/nova-node/internal/clock"
	"github.com/nova-node/nova-node/internal/secretfile"
	"github.com/nova-node/nova-node/protocol"
)

// AuthorityFile is the file in the data dir that keeps what the node knows
// of its swarm's authority (admin log, grants, revocations) and its
// operator's trusts, so that a restart forgets none of them.
const AuthorityFile = "authority.json"

// authz is the node's side of the swarm authority: the book, its file, the
// registry's assessor, and the timer that reassesses cards when a grant or
// trust starts or stops counting.
type authz struct {
	n    *Node
	book *authority.Book
	path string

	fileMu sync.Mutex // the file: one save at a time

	mu    sync.Mutex // the timer and the downgrades reported
	timer *time.Timer
	// ticking counts the timer's callbacks running, which close waits for.
	ticking sync.WaitGroup
	// told: the note last reported per agent address whose claims this node
	// holds lower than claimed, so a downgrade is one security event, not
	// one per reassessment. Bounded: cleared when full.
	told   map[string]string
	closed bool
}

const maxTold = 4096

// newAuthz builds the book of the swarm's authority (cfg.Authority) from
// the data dir's file and the grants config.yaml holds, and makes it the
// judge of every remote card in the registry.
func (n *Node) newAuthz() (*authz, error) {
	var auth peer.ID
	if n.cfg.Authority != "" {
		p, err := peer.Decode(n.cfg.Authority)
		if err != nil {
			return nil, &ConfigError{Source: "authority", Err: fmt.Errorf("%q is not a peer ID: %v", n.cfg.Authority, err)}
		}
		auth = p
	}
	a := &authz{n: n, book: authority.NewBook(n.id, auth, clock.Now), path: filepath.Join(n.cfg.DataDir, AuthorityFile), told: map[string]string{}}
	if b, err := os.ReadFile(a.path); err == nil {
		var st authority.State
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("node: %s: %w (move it aside to start without the grants and trusts it holds)", a.path, err)
		}
		if skipped := a.book.Restore(st); skipped > 0 {
			n.log.Infow("authority records no longer valid were dropped", "count", skipped, "file", a.path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("node: read %s: %w", a.path, err)
	}
	for i, g := range n.cfg.Grants {
		b, err := base64.RawURLEncoding.DecodeString(g)
		if err != nil {
			return nil, &ConfigError{Source: fmt.Sprintf("grants[%d]", i), Err: fmt.Errorf("not base64url: %v", err)}
		}
		if _, err := a.book.Add(b); err != nil {
			n.log.Warnw("a grant in config.yaml is refused", "index", i, "err", err)
		}
	}
	n.reg.SetAssessor(a.assess)
	a.schedule()
	return a, nil
}

// assess is the registry's assessor: the book's effective identity, with
// a security event the first time a card's claims are held lower than
// claimed. It runs under the registry's lock, so the lock order is
// registry, then book, then a.mu, then the observer's: none of these calls
// back into the registry.
func (a *authz) assess(c agentcard.Card) agentcard.Card {
	v := a.book.Effective(c)
	st := v.Standing()
	if st.Note == "" {
		return v
	}
	addr := v.Address()
	a.mu.Lock()
	fresh := a.told[addr] != st.Note
	if fresh {
		if len(a.told) >= maxTold {
			clear(a.told)
		}
		a.told[addr] = st.Note
	}
	a.mu.Unlock()
	if fresh {
		p, _ := peer.Decode(v.Host)
		a.n.obs.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Time: clock.Now(), Code: authority.CodeClaimNotGranted, Sender: addr, Peer: p,
			Detail: fmt.Sprintf("%s %s", addr, st.Note), SourceTier: -1, TargetTier: -1})
	}
	return v
}

// Records implements protocol.Authority.
func (a *authz) Records() [][]byte { return a.book.Records() }

// Accept implements protocol.Authority: each record is checked by the book;
// what is new is saved, cards are reassessed, and the node announces again
// so its peers learn it too (a flood that ends where nothing is new).
func (a *authz) Accept(p peer.ID, recs [][]byte) (refused []error) {
	changed := false
	for _, b := range recs {
		ch, err := a.book.Add(b)
		if err != nil {
			refused = append(refused, err)
			continue
		}
		if !ch.Changed {
			continue
		}
		changed = true
		a.report(p, ch)
	}
	if changed {
		a.changed(true)
	}
	return refused
}

// indexRecords are the records this node publishes in its DHT agent
// index: its own grants that count now or later, after the admin log (so a
// grant by a later admin can be checked) when the whole log fits beside
// them (a log is taken whole or not at all: a receiver refuses a gap).
func (a *authz) indexRecords() [][]byte {
	grants := a.book.Presentable(a.n.id)
	log := a.book.Log()
	if len(log)+len(grants) > discovery.MaxIndexAuth {
		return grants
	}
	return append(log, grants...)
}

// acceptIndexRecords takes the records in host's DHT agent index, as Accept
// takes a hello's, with one security event naming host for the refused.
func (a *authz) acceptIndexRecords(host peer.ID, recs [][]byte) {
	refused := a.Accept(host, recs)
	if len(refused) == 0 {
		return
	}
	detail := fmt.Sprintf("%d authority record(s) in the DHT index of %s refused; the first: %v", len(refused), host, refused[0])
	a.n.obs.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Time: clock.Now(), Code: protocol.CodeOf(refused[0]), Peer: host,
		Detail: detail, SourceTier: -1, TargetTier: -1})
}

// report puts a new record in the audit trail.
func (a *authz) report(from peer.ID, ch authority.Change) {
	if ch.Kind != authority.KindRevocation {
		a.n.log.Infow("authority record received", "kind", ch.Kind, "from", from, "grantPeer", ch.Grant.Peer, "serial", ch.Grant.Serial)
		return
	}
	r := ch.Revocation
	detail := fmt.Sprintf("grant serial %d revoked by %s", r.Serial, r.Issuer)
	if r.Reason != "" {
		detail += ": " + r.Reason
	}
	a.n.obs.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Time: clock.Now(), Code: authority.CodeGrantRevoked, Peer: r.Peer,
		Detail: detail, SourceTier: -1, TargetTier: -1})
}

// changed saves the book, reassesses every remote card and, if announce,
// has the router present the new records to the peers (in its own
// goroutine: changed runs on a stream's reader too).
func (a *authz) changed(announce bool) {
	if err := a.save(); err != nil {
		a.n.log.Warnw("cannot save the authority records", "file", a.path, "err", err)
	}
	a.n.reg.Reassess()
	a.schedule()
	if announce && a.n.router != nil {
		a.n.router.AnnounceSoon()
	}
}

// save writes the book to the data dir (temp file, rename). The snapshot
// is taken under fileMu, so of two saves racing the later state is written
// last; not under a.mu, which the assessor takes under the registry's lock.
func (a *authz) save() error {
	a.fileMu.Lock()
	defer a.fileMu.Unlock()
	b, err := json.MarshalIndent(a.book.Snapshot(), "", "  ")
	if err != nil {
		return err
	}
	return secretfile.Replace(a.path, b)
}

// schedule arms the timer for the next instant a grant or trust starts or
// stops counting.
func (a *authz) schedule() {
	next := a.book.NextChange()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	if next.IsZero() || a.closed {
		return
	}
	a.timer = time.AfterFunc(time.Until(next)+time.Millisecond, a.tick)
}

// tick reassesses the cards when a grant or trust starts or stops
// counting, and arms the timer for the next such instant. close waits for
// a tick under way.
func (a *authz) tick() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.ticking.Add(1)
	a.mu.Unlock()
	defer a.ticking.Done()
	a.n.reg.Reassess()
	a.schedule()
}

// close stops the timer and waits for a tick under way.
func (a *authz) close() error {
	a.mu.Lock()
	a.closed = true
	if a.timer != nil {
		a.timer.Stop()
	}
	a.mu.Unlock()
	a.ticking.Wait()
	return nil
}

// AddAuthorityRecord adds a signed authority record (grant, revocation or
// admin update) as if a peer had presented it: checked, saved, cards
// reassessed, and announced to the peers.
func (n *Node) AddAuthorityRecord(signed []byte) (authority.Change, error) {
	ch, err := n.auth.book.Add(signed)
	if err != nil || !ch.Changed {
		return ch, err
	}
	n.auth.report(n.id, ch)
	n.auth.changed(true)
	return ch, nil
}

// Authority returns the book of the swarm's authority: what this node knows
// of admins, grants, revocations and its operator's trusts.
func (n *Node) Authority() *authority.Book { return n.auth.book }
