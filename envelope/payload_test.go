package envelope_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

// CheckPayload applies the Factory's payload rules and measures a broken
// limit in the error's cause.
func TestCheckPayload(t *testing.T) {
	for _, ok := range []string{"", "null", `{"a":[1,2]}`, " [ 1 ] ",
		strings.Repeat("[", envelope.MaxPayloadDepth) + strings.Repeat("]", envelope.MaxPayloadDepth),
		// over the limit as given, under it once compacted
		`"` + strings.Repeat("x", envelope.MaxPayloadSize-2) + `"` + strings.Repeat(" ", 100),
	} {
		if err := envelope.CheckPayload([]byte(ok)); err != nil {
			t.Errorf("CheckPayload(%.40q): %v", ok, err)
		}
	}
	for _, bad := range []string{`{"a":`, "\"\xff\"", "[1,]"} {
		err := envelope.CheckPayload([]byte(bad))
		var ie *envelope.InvalidError
		if !errors.As(err, &ie) || ie.Field != "payload" {
			t.Errorf("CheckPayload(%q) = %v, want an invalid payload", bad, err)
		}
	}

	big := `"` + strings.Repeat("x", envelope.MaxPayloadSize) + `"`
	err := envelope.CheckPayload([]byte(big))
	var se *envelope.PayloadSizeError
	if !errors.Is(err, envelope.ErrInvalid) || !errors.As(err, &se) || se.Size != len(big) || se.Max != envelope.MaxPayloadSize {
		t.Errorf("CheckPayload(%d bytes) = %v (%+v)", len(big), err, se)
	}

	deep := strings.Repeat("[", 500) + strings.Repeat("]", 500)
	err = envelope.CheckPayload([]byte(deep))
	var de *envelope.PayloadDepthError
	if !errors.Is(err, envelope.ErrInvalid) || !errors.As(err, &de) || de.Depth != 500 || de.Max != envelope.MaxPayloadDepth {
		t.Errorf("CheckPayload(500 deep) = %v (%+v)", err, de)
	}
	if want := "envelope: invalid payload: nested deeper than 64 levels"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
