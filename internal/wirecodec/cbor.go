package wirecodec

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// Limits are the structure limits of one decoder of peer input, chosen by
// its format: how deep it nests and how long its arrays and maps grow.
// Every count must be set (the library's defaults are far larger than any
// of our formats needs); the library accepts MaxNestedLevels of 4 to 65535
// and MaxArrayElements and MaxMapPairs of at least 16.
type Limits struct {
	MaxNestedLevels  int // nesting of arrays, maps and tags
	MaxArrayElements int // elements of one array
	MaxMapPairs      int // pairs of one map

	// RejectUnknownFields makes a map key that names no field of the
	// struct decoded into an error. Leave it false for formats that stay
	// readable across minor revisions (unknown fields are ignored); set it
	// for closed formats such as an invite token.
	RejectUnknownFields bool
}

// DecOptions returns the hardened decoding options with l's limits:
//
//   - one meaning per input: duplicate map keys and indefinite lengths are
//     errors, and struct field names match exactly ("ID" is an unknown
//     field, not "id");
//   - no tags anywhere in the input, so no bignums, times or unknown tag
//     numbers reach any decoding path;
//   - a text string decoded into a Go string must be valid UTF-8, a byte
//     string never becomes a Go string, and a map key must be a text
//     string to name a struct field;
//   - unknown fields are ignored unless l.RejectUnknownFields.
func DecOptions(l Limits) cbor.DecOptions {
	o := cbor.DecOptions{
		MaxNestedLevels:  l.MaxNestedLevels,
		MaxArrayElements: l.MaxArrayElements,
		MaxMapPairs:      l.MaxMapPairs,

		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,

		TagsMd:    cbor.TagsForbidden,
		BignumTag: cbor.BignumTagForbidden,

		UTF8:                cbor.UTF8RejectInvalid,
		ByteStringToString:  cbor.ByteStringToStringForbidden,
		FieldNameByteString: cbor.FieldNameByteStringForbidden,

		ExtraReturnErrors: cbor.ExtraDecErrorNone,
	}
	if l.RejectUnknownFields {
		o.ExtraReturnErrors = cbor.ExtraDecErrorUnknownField
	}
	return o
}

// NewDecMode returns the hardened decoding mode ([DecOptions]) with l's
// limits. It panics if a limit is unset or out of the library's range:
// limits are constants of a format, so that is a bug that any test of
// the caller catches at package initialisation.
func NewDecMode(l Limits) cbor.DecMode {
	if l.MaxNestedLevels == 0 || l.MaxArrayElements == 0 || l.MaxMapPairs == 0 {
		panic(fmt.Sprintf("wirecodec: unset decoder limit in %+v", l))
	}
	m, err := DecOptions(l).DecMode()
	if err != nil {
		panic("wirecodec: cbor decoding options: " + err.Error())
	}
	return m
}

var encMode = func() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic("wirecodec: cbor encoding options: " + err.Error()) // a bug, caught by any test
	}
	return m
}()

// EncMode returns the encoding mode of our wire formats: RFC 8949 core
// deterministic encoding (cbor.CoreDetEncOptions), so equal values encode
// to equal bytes. A format that needs another option starts from
// cbor.CoreDetEncOptions itself.
func EncMode() cbor.EncMode { return encMode }

// AppendHead appends to dst the shortest head of CBOR major type major
// (0 to 7) with argument v (RFC 8949 section 3, as core deterministic
// encoding requires): for hand-written encoders that must give the bytes
// [EncMode] gives.
func AppendHead(dst []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(dst, m|byte(v))
	case v <= 0xff:
		return append(dst, m|24, byte(v))
	case v <= 0xffff:
		return append(dst, m|25, byte(v>>8), byte(v))
	case v <= 0xffffffff:
		return append(dst, m|26, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return append(dst, m|27, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// HeadLen is the length of the head AppendHead appends for argument v.
func HeadLen(v uint64) int {
	switch {
	case v < 24:
		return 1
	case v <= 0xff:
		return 2
	case v <= 0xffff:
		return 3
	case v <= 0xffffffff:
		return 5
	}
	return 9
}
