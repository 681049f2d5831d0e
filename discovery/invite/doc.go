// Package invite encodes and decodes nova invite tokens: the one string a
// newcomer pastes into `nova-node join` to enter a swarm. A [Token]
// carries the swarm's name, its optional 32-byte secret (the private
// network key, see discovery.PSK), multiaddrs of members to bootstrap
// from and of relays, and, in a swarm with an authority, its peer ID and
// optionally an identity made for the joiner with a grant for it.
//
// # Format
//
//	token   = "nova1" base32( cbor-map checksum )
//	cbor-map = {1: swarm, ?2: secret, ?3: [bootstrap…], ?4: [relays…],
//	            ?5: authority, ?6: identity, ?7: grant}
//	checksum = first 4 bytes of SHA-256("nova1" || cbor-map)
//
// "nova" names the format and "1" its version. The base32 is RFC 4648's
// alphabet in lower case without padding (it has no '1', so the prefix is
// unambiguous); Decode ignores case and whitespace. The CBOR map uses
// core deterministic encoding and must be canonical, so every token has
// exactly one spelling and Encode(Decode(s)) is s, lower-cased and without
// whitespace. The checksum turns a typo or a token cut short into a clear
// error ([ErrBadChecksum]) instead of a wrong swarm.
//
// Multiaddrs are checked without go-multiaddr, against a small grammar:
// /ip4, /ip6 (no zone), /dns, /dns4, /dns6, /dnsaddr, /sni with a host
// name, /tcp and /udp with a port, /quic-v1, /ws, /wss, /tls,
// /p2p-circuit, and /p2p with a base58 peer ID (sha2-256 or identity
// multihash); each must end in /p2p/<peerID>. Whatever this package
// accepts also parses with go-multiaddr and peer.AddrInfoFromP2pAddr (the
// fuzz test checks it).
//
// # Limits
//
// At most [MaxTokenLen] characters (checked before anything else), 32
// bootstrap and 32 relay addresses of at most 512 bytes each, an authority
// of at most [MaxAuthorityLen] bytes, an identity of at most
// [MaxIdentityLen] and a grant of at most [MaxGrantLen]; the CBOR
// decoder (internal/wirecodec's, shared by every decoder of peer input)
// refuses tags, indefinite lengths, duplicate keys, unknown keys, invalid
// UTF-8 and byte strings where text belongs.
//
// # What it may import
//
// The standard library and internal/wirecodec (the shared CBOR
// configuration, a leaf over fxamacker/cbor) only: no libp2p, no network,
// no goroutines. The caller (the node) turns the addresses into
// peer.AddrInfo (discovery.ParseAddrs) and the secret into a PSK.
package invite
