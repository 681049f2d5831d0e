// Package wirecodec holds the decoding rules that every decoder of peer
// input shares, so that each rule has one home:
//
//   - the hardened CBOR decoder configuration ([NewDecMode], [DecOptions]):
//     no duplicate map keys, no indefinite lengths, no tags (so no bignums
//     or times), text strings must be UTF-8, a byte string is never a Go
//     string nor a struct field name, field names match exactly; each use
//     gives its own structure limits ([Limits]);
//   - the encoder of our wire formats: RFC 8949 core deterministic
//     encoding ([EncMode]), so equal values encode to equal bytes;
//   - the shortest CBOR head for hand-written encoders ([AppendHead],
//     [HeadLen]);
//   - the nesting scan of JSON text ([ScanJSON]).
//
// It is a leaf: it imports the standard library and
// github.com/fxamacker/cbor/v2 only, holds no state but immutable modes,
// starts no goroutines and has no network code, so the pure packages
// (envelope, crdt/delta, discovery/invite) may import it.
//
// What the caller must do:
//
//  1. Cap the input's size before decoding: the modes limit structure
//     (nesting, array elements, map pairs), not bytes, and the length of
//     every string is bounded only by the input's size.
//  2. Validate the decoded value: a mode checks the shape of CBOR, never
//     the meaning of a field.
package wirecodec
