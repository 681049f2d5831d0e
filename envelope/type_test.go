package envelope_test

import (
	"errors"
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

// Of the ten types, exactly request and task-proposal ask for an answer,
// and exactly those are refused as broadcasts.
func TestCheckBroadcastType(t *testing.T) {
	for _, typ := range envelope.Types() {
		asks := typ == envelope.TypeRequest || typ == envelope.TypeTaskProposal
		if typ.AsksForAnswer() != asks {
			t.Errorf("%s.AsksForAnswer() = %v", typ, !asks)
		}
		err := envelope.CheckBroadcastType(typ)
		var ie *envelope.InvalidError
		if asks != (err != nil) || err != nil && (!errors.As(err, &ie) || ie.Field != "type" || ie.Code() != envelope.CodeInvalidEnvelope) {
			t.Errorf("CheckBroadcastType(%s) = %v", typ, err)
		}
	}
	want := "envelope: invalid type: a request asks for an answer, and a broadcast cannot be answered"
	if err := envelope.CheckBroadcastType(envelope.TypeRequest); err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
