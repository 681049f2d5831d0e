package envelope_test

import (
	"fmt"
	"time"

	"github.com/nova-node/nova-node/envelope"
)

// A request and its reply, sent over the wire as CBOR. The factory's clock
// and IDs are fixed here so the output is stable; use NewFactory in
// production.
func ExampleFactory() {
	ids := []string{"req-1", "resp-1"}
	f := &envelope.Factory{
		Now: func() time.Time { return time.UnixMilli(1767225600000) },
		NewID: func() string {
			id := ids[0]
			ids = ids[1:]
			return id
		},
	}

	req, err := f.New("mars", "venus", envelope.TypeRequest, map[string]string{"task": "map the craters"})
	if err != nil {
		fmt.Println(err)
		return
	}
	req.Metadata = &envelope.Metadata{Tier: 2}

	wire, err := envelope.EncodeCBOR(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	got, err := envelope.DecodeCBOR(wire)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %s -> %s %s tier %d\n", got.Type, got.Sender, got.Recipient, got.Payload, got.Metadata.Tier)

	resp, err := f.Reply(got, envelope.TypeResponse, map[string]int{"craters": 42})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %s -> %s %s thread %s\n", resp.Type, resp.Sender, resp.Recipient, resp.Payload, resp.ThreadID())

	// Output:
	// request mars -> venus {"task":"map the craters"} tier 2
	// response venus -> mars {"craters":42} thread req-1
}
