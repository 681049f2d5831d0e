package discovery

import "slices"

// ForgetCards drops every card and agent index this node holds from its
// lookups, so that a benchmark's next lookup reads them all over the wire.
func (s *Service) ForgetCards() {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	s.cache.clearCards()
	clear(s.cache.indexes)
}

// OwnGossip returns the roster message this node last published.
func OwnGossip(s *Service) []byte {
	if own := s.own.Load(); own != nil {
		return own.gossip
	}
	return nil
}

// SyncRoster runs one roster catch-up (see syncRoster) and reports whether
// a peer served the roster messages it holds.
func SyncRoster(s *Service) bool { return s.syncRoster(s.ctx) }

// ProvidedKeys returns the provider keys s has provided to the closest
// peers since Start (each first provided with a bounded lookup).
func ProvidedKeys(s *Service) []string {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	keys := make([]string, 0, len(s.provided))
	for k := range s.provided {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Regossip runs regossip: this node's roster message again, under a new
// heartbeat.
func Regossip(s *Service) { s.regossip(s.ctx) }
