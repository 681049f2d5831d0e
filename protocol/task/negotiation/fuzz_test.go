package negotiation_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/nova-node/nova-node/protocol/task/negotiation"
)

// Seed corpora live in testdata/fuzz/<Target>/; the inputs below are added
// as well so a fresh checkout fuzzes from good inputs.

// checkDecoded checks a decoder's result: an *InvalidError with a code, or a
// valid value that round-trips through encoding/json within the size limit.
func checkDecoded[T interface{ Validate() error }](t *testing.T, v T, err error, decode func([]byte) (T, error)) {
	t.Helper()
	if err != nil {
		var ie *negotiation.InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, negotiation.ErrInvalidProposal) || ie.Code() != negotiation.CodeInvalidProposal {
			t.Fatalf("error is not an *InvalidError: %v", err)
		}
		if len(err.Error()) > 1024 {
			t.Fatalf("error message of %d bytes", len(err.Error()))
		}
		return
	}
	if err := v.Validate(); err != nil {
		t.Fatalf("decoded value is invalid: %v", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if len(b) > 2*negotiation.MaxPayloadSize {
		t.Fatalf("re-encoded to %d bytes", len(b))
	}
	v2, err := decode(b)
	if err != nil {
		t.Fatalf("decode re-encoding %s: %v", b, err)
	}
	if !reflect.DeepEqual(v, v2) {
		t.Fatalf("round trip: %+v != %+v", v, v2)
	}
}

func FuzzDecodeProposal(f *testing.F) {
	for _, s := range []string{
		`{"taskDescription":"review the parser","requiredCapabilities":["code.review"],"estimatedComplexity":"medium","deadlineMs":1767225660000,"proposerAgentId":"mars@12D3KooW"}`,
		`{"taskDescription":"x","requiredCapabilities":[],"estimatedComplexity":"simple","deadlineMs":1.76722566e12,"proposerAgentId":"sun"}`,
		`{"taskDescription":"x","requiredCapabilities":null,"estimatedComplexity":"complex","deadlineMs":1,"proposerAgentId":"a"}`,
		`{"taskDescription":1}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := negotiation.DecodeProposal(b)
		checkDecoded(t, p, err, negotiation.DecodeProposal)
	})
}

func FuzzDecodeAccept(f *testing.F) {
	for _, s := range []string{
		`{"acceptedBy":"venus@12D3KooW","estimatedCompletionMs":90000}`,
		`{"acceptedBy":"venus","estimatedCompletionMs":9e4}`,
		`{"acceptedBy":"","estimatedCompletionMs":-1}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := negotiation.DecodeAccept(b)
		checkDecoded(t, a, err, negotiation.DecodeAccept)
	})
}

func FuzzDecodeReject(f *testing.F) {
	for _, s := range []string{
		`{"reason":"BUSY"}`,
		`{"reason":"CAPABILITY_MISSING","alternativeSuggestion":"mercury@12D3KooW"}`,
		`{"rejectionReason":"DECLINED"}`, `{"reason":"busy"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := negotiation.DecodeReject(b)
		checkDecoded(t, r, err, negotiation.DecodeReject)
	})
}

// TestDecodeLimits checks the bounds on hostile input.
func TestDecodeLimits(t *testing.T) {
	big := make([]byte, negotiation.MaxPayloadSize+1)
	for i := range big {
		big[i] = ' '
	}
	big[0] = '{'
	if _, err := negotiation.DecodeProposal(big); !errors.Is(err, negotiation.ErrInvalidProposal) {
		t.Fatalf("oversized: %v", err)
	}
	caps := make([]string, negotiation.MaxCapabilities+1)
	for i := range caps {
		caps[i] = "c" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	b, _ := json.Marshal(map[string]any{
		"taskDescription": "x", "requiredCapabilities": caps, "estimatedComplexity": "simple",
		"deadlineMs": 1, "proposerAgentId": "a",
	})
	var ie *negotiation.InvalidError
	if _, err := negotiation.DecodeProposal(b); !errors.As(err, &ie) || ie.Field != "requiredCapabilities" {
		t.Fatalf("too many capabilities: %v", err)
	}
	for _, s := range []string{`{"acceptedBy":"a","estimatedCompletionMs":1.5}`, `{"acceptedBy":"a","estimatedCompletionMs":1e300}`, `{"acceptedBy":"a","estimatedCompletionMs":"5"}`} {
		if _, err := negotiation.DecodeAccept([]byte(s)); !errors.As(err, &ie) || ie.Field != "estimatedCompletionMs" {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{`{"taskDescription":"x","requiredCapabilities":["a","a"],"estimatedComplexity":"simple","deadlineMs":1,"proposerAgentId":"a"}`} {
		if _, err := negotiation.DecodeProposal([]byte(s)); !errors.As(err, &ie) || ie.Field != "requiredCapabilities[1]" {
			t.Errorf("%s: %v", s, err)
		}
	}
}
