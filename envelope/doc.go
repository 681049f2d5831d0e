// Package envelope owns the A2A envelope: the wrapper of every message
// between agents, its ten message types, the rules a valid envelope follows,
// a factory with an injected clock and ID source, the two codecs (CBOR on
// the wire, JSON for storage and APIs) and an index of correlation threads.
//
// The package is pure. It imports only the standard library and
// github.com/fxamacker/cbor/v2: never libp2p, the network, or another
// nova-node package, and it starts no goroutine. Tiers, sandboxes and
// routing belong to other packages; here a tier is only a number from 0 to 3.
//
// # Fields
//
// The JSON names are the wire names in both codecs:
//
//	id             string   required, 1..128 bytes of printable ASCII (0x21..0x7E)
//	schemaVersion  int      required, 1 (SchemaVersion)
//	sender         string   required, 1..256 bytes of UTF-8, no control characters
//	recipient      string   required, as sender; "*" (Broadcast) addresses everyone
//	correlationId  string   optional, like id; the thread (see Envelope.ThreadID)
//	type           string   required, one of the ten Type constants
//	timestamp      int      required, Unix milliseconds, > 0
//	payload        JSON     any JSON value, compact, at most MaxPayloadSize bytes
//	metadata       map      optional:
//	  tier                     int     required in metadata, 0..3
//	  sandboxId                string  optional, at most 128 bytes
//	  routingHint              string  optional, "capability"
//	  escalationJustification  string  optional, at most 4096 bytes
//
// Optional fields are left out when empty. Decoders ignore unknown fields,
// so a later revision of schema version 1 may add some.
//
// # Wire layout (CBOR)
//
// An envelope is one CBOR map with text-string keys, encoded with RFC 8949
// core deterministic encoding (EncMode): shortest lengths, definite lengths,
// keys sorted by their encoded bytes (shorter keys first), so equal
// envelopes give equal bytes. The payload is a byte string holding the
// compact JSON text of the payload value (null is the four bytes "null"); it
// is not converted to CBOR, so any JSON value crosses unchanged and the CBOR
// and JSON forms carry the same payload bytes. For example, in diagnostic
// notation:
//
//	{"id": "6f1c…", "type": "request", "sender": "mars",
//	 "payload": h'7b226b223a317d',                      / {"k":1} /
//	 "metadata": {"tier": 2}, "recipient": "venus", "timestamp": 1767225600000,
//	 "correlationId": "0a9e…", "schemaVersion": 1}
//
// Protocol frames carry this map after a length prefix; framing is the
// protocol package's job.
//
// # JSON
//
// EncodeJSON writes one compact object, fields in the order of the table
// above, the payload inline, strings escaped as encoding/json does with
// HTML escaping off. Its output is never smaller than the CBOR encoding of
// the same envelope, so Validate's size rule (the JSON encoding fits
// MaxEncodedSize) bounds both codecs, and anything a decoder accepts
// re-encodes within the limit.
//
// # Decoding untrusted input
//
// DecodeCBOR and DecodeJSON check the input size (MaxEncodedSize) before
// any other work and decode with explicit limits (DecMode: 16 levels, 4096
// array elements and map pairs, no tags, no indefinite lengths; JSON: UTF-8,
// nesting of at most MaxPayloadDepth+1 checked before parsing, 4096 members
// per object). Both reject duplicate keys; a key that differs from a JSON
// name only by case is an unknown field, not that field. A missing
// schemaVersion is an error, and a schemaVersion other than 1 is reported
// before any other problem of a well-formed input, since a later version may
// change the layout. Then the payload is compacted and Validate runs. The
// decoders never panic; fuzz targets check that, and that whatever they
// accept re-encodes within the limit and decodes back to the same envelope.
//
// # Checking once
//
// Validate, EncodeCBOR and EncodeJSON check the whole envelope, payload
// included, every time. A router that has already checked an envelope
// (decoded it, or built it with a Factory) and only changes header fields
// can use Envelope.ValidateHeader and EncodeCBORValidated, which check
// every rule but the payload's; Envelope.Normalize checks a payload of
// other origin once and puts it in the compact form they expect. Bytes
// from the network are never trusted this way: the decoders always check
// everything.
//
// # What callers must do
//
//  1. Treat envelopes as values. Clone one before changing it if anything
//     else may hold it; Threads keeps the pointers it is given.
//  2. Set Metadata after Factory.New or Factory.Reply; the encoders validate
//     again, so an invalid change is caught before it leaves.
//  3. Treat metadata.tier and metadata.sandboxId as the sender's claims: the
//     receiving side re-checks tiers and sandboxes against its own records.
//  4. Cap the input size before decoding with DecMode directly (DecodeCBOR
//     and DecodeJSON do it themselves).
//
// # Errors
//
// Every error the package returns has a Code() string method:
//
//	SCHEMA_VERSION_MISMATCH  *SchemaVersionError{Expected, Actual}; errors.Is(err, ErrSchemaVersionMismatch)
//	INVALID_ENVELOPE         *InvalidError{Field, Reason};          errors.Is(err, ErrInvalid)
//
// Field is the JSON name of the offending field ("metadata.tier"), or empty
// for the envelope as a whole (size, malformed encoding). Messages are
// lower-case and start with "envelope: ".
package envelope
