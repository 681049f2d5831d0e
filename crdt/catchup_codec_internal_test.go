package crdt

import (
	"bytes"
	"errors"
	"testing"
)

// TestCatchupDecoderRefuses: the catch-up frames (and the digests, which
// share decMode) go through the hardened decoder of every peer input
// (internal/wirecodec): each input below breaks one of its rules, in a
// request's document name and in an answer's error text, and is refused
// by the decoder itself, before any check of the value.
func TestCatchupDecoderRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		in   func(key byte) []byte // a one-pair map whose key is key
	}{
		{"invalid utf-8 text", func(k byte) []byte { return []byte{0xa1, 0x61, k, 0x65, 'n', 'o', 0xff, 'e', 's'} }},
		{"indefinite-length text", func(k byte) []byte { return []byte{0xa1, 0x61, k, 0x7f, 0x62, 'n', 'o', 0x63, 't', 'e', 's', 0xff} }},
		{"indefinite-length map", func(k byte) []byte { return []byte{0xbf, 0x61, k, 0x65, 'n', 'o', 't', 'e', 's', 0xff} }},
		{"byte string as text", func(k byte) []byte { return []byte{0xa1, 0x61, k, 0x45, 'n', 'o', 't', 'e', 's'} }},
		{"byte string key", func(k byte) []byte { return []byte{0xa1, 0x41, k, 0x65, 'n', 'o', 't', 'e', 's'} }},
		{"tagged text", func(k byte) []byte { return []byte{0xa1, 0x61, k, 0xd8, 0x20, 0x65, 'n', 'o', 't', 'e', 's'} }},
		{"duplicate key", func(k byte) []byte {
			return []byte{0xa2, 0x61, k, 0x65, 'n', 'o', 't', 'e', 's', 0x61, k, 0x65, 'n', 'o', 't', 'e', 's'}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readCatchupRequest(bytes.NewReader(framed(c.in('d'))))
			if err == nil || errors.Is(err, errBadDocName) {
				t.Errorf("request: %v, want a decoding error", err)
			}
			resp, err := readCatchupResponse(bytes.NewReader(framed(c.in('e'))))
			if !errors.As(err, new(undecodable)) {
				t.Errorf("answer decoded to %+v (%v), want undecodable", resp, err)
			}
		})
	}
	// Field names match exactly: "D" and "E" name no field.
	if _, err := readCatchupRequest(bytes.NewReader(framed([]byte{0xa1, 0x61, 'D', 0x65, 'n', 'o', 't', 'e', 's'}))); !errors.Is(err, errBadDocName) {
		t.Errorf(`request {"D": "notes"}: %v, want no document name`, err)
	}
	if resp, err := readCatchupResponse(bytes.NewReader(framed([]byte{0xa1, 0x61, 'E', 0x61, 'x'}))); err != nil || resp.Err != "" {
		t.Errorf(`answer {"E": "x"} = %+v, %v; want an empty answer`, resp, err)
	}
	// The well-formed counterpart passes.
	if req, err := readCatchupRequest(bytes.NewReader(framed([]byte{0xa1, 0x61, 'd', 0x65, 'n', 'o', 't', 'e', 's'}))); err != nil || req.Doc != "notes" {
		t.Errorf(`request {"d": "notes"} = %+v, %v`, req, err)
	}
}
