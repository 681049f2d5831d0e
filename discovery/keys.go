package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multihash"

	"github.com/nova-node/nova-node/discovery/invite"
)

// ProtocolPrefix is the DHT protocol prefix: nova's DHT speaks
// "/nova/kad/1.0.0", never the public IPFS DHT's "/ipfs/kad/1.0.0".
const ProtocolPrefix protocol.ID = "/nova"

// dhtProtocol is the DHT protocol kad-dht derives from the prefix.
const dhtProtocol = ProtocolPrefix + "/kad/1.0.0"

// Namespace is the DHT record namespace whose validator is [Validator]:
// every nova value record has a key "/nova/...".
const Namespace = "nova"

// ValidateSwarm checks a swarm name: lower-case letters, digits and '-',
// starting with a letter or digit, at most 63 characters
// ([invite.SwarmPattern], the rule's home).
func ValidateSwarm(swarm string) error {
	if !invite.ValidSwarm(swarm) {
		return fmt.Errorf("discovery: swarm name %q must be lower-case letters, digits and '-', at most 63", swarm)
	}
	return nil
}

// NameKey is the provider key of an agent name (the card's id) in a swarm:
// "nova/<swarm>/agent/<name>". Every node hosting an agent of that name
// provides it.
func NameKey(swarm, name string) string { return "nova/" + swarm + "/agent/" + name }

// CapabilityKey is the provider key of a capability in a swarm:
// "nova/<swarm>/cap/<capability>". Every node hosting an agent with that
// capability provides it.
func CapabilityKey(swarm, capID string) string { return "nova/" + swarm + "/cap/" + capID }

// MembersKey is the provider key of a swarm's roster:
// "nova/<swarm>/members". Every node hosting at least one agent provides
// it, so any node can list the swarm's members ([Service.Roster]).
func MembersKey(swarm string) string { return "nova/" + swarm + "/members" }

// KeyCID turns a provider key into the CID the DHT stores providers under:
// CIDv1, codec raw, multihash sha2-256 of the key's bytes. Any libp2p
// implementation computes the same CID from the same key.
func KeyCID(key string) cid.Cid {
	mh, err := multihash.Sum([]byte(key), multihash.SHA2_256, -1)
	if err != nil {
		panic("discovery: sha2-256 multihash: " + err.Error()) // cannot happen: sha2-256 is built in
	}
	return cid.NewCidV1(cid.Raw, mh)
}

// ServiceName is the mDNS service name of a swarm, "_nova-<swarm>._udp".
// A DNS label holds at most 63 bytes, so a swarm name longer than 57 is
// shortened to its first 40 characters, '-' and 16 hex digits of its
// SHA-256, which keeps distinct swarms apart.
func ServiceName(swarm string) string {
	label := "_nova-" + swarm
	if len(label) > 63 {
		sum := sha256.Sum256([]byte(swarm))
		label = "_nova-" + swarm[:40] + "-" + hex.EncodeToString(sum[:8])
	}
	return label + "._udp"
}
