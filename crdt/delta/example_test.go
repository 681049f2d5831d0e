package delta_test

import (
	"encoding/json"
	"fmt"

	"github.com/nova-node/nova-node/crdt/delta"
)

// Two replicas update the same document concurrently, exchange their
// updates as sync messages, lose one on the way, and catch up: they end
// with the same state.
func Example() {
	mars, _ := delta.New("mars-node")
	venus, _ := delta.New("venus-node")

	// publish returns the bytes to gossip for x, which d has joined (its
	// clock then covers x).
	publish := func(d *delta.Doc, agent string, x *delta.Delta) []byte {
		m, err := delta.NewSyncMessage(agent, d.Clock(), x, 1767225600000)
		if err != nil {
			panic(err)
		}
		b, err := delta.EncodeSyncMessage(m)
		if err != nil {
			panic(err)
		}
		return b
	}
	// receive is what a topic subscriber does with the bytes.
	receive := func(d *delta.Doc, b []byte) {
		m, err := delta.DecodeSyncMessage(b)
		if err != nil {
			fmt.Println("skip:", err) // CRDT_DESERIALIZATION_FAILED: log with the source, skip
			return
		}
		x, err := m.Delta()
		if err != nil {
			fmt.Println("skip:", err)
			return
		}
		if !d.Ready(m.VectorClock, x) {
			fmt.Println(d.Replica(), "missed an update: ask", m.SourceAgentID, "for DeltaSince")
		}
		d.Join(x)
	}

	m1 := publish(mars, "mars", must(mars.Apply(mars.Set("/task", json.RawMessage(`{"title":"survey","owner":"mars"}`)))))
	receive(venus, m1)

	// Concurrent updates.
	m2 := publish(mars, "mars", must(mars.Apply(mars.Set("/task/owner", json.RawMessage(`"mars"`)))))
	m3 := publish(venus, "venus", must(venus.Apply(venus.Set("/task/owner", json.RawMessage(`"venus"`)))))
	m4 := publish(venus, "venus", must(venus.Apply(venus.SetAdd("/task/tags", json.RawMessage(`"geology"`)))))
	m5 := publish(mars, "mars", must(mars.Apply(mars.Incr("/task/progress", 10))))
	receive(venus, m2)
	receive(mars, m4) // m3 is lost on the way to mars
	receive(venus, m5)
	_ = m3
	receive(mars, []byte("garbage"))

	// Catch-up: mars sends its context, venus answers with what mars lacks.
	mars.Join(venus.DeltaSince(mars.Context()))

	fmt.Println(string(mars.JSON()))
	fmt.Println(string(venus.JSON()))
	fmt.Println(mars.Equal(venus), mars.Clock().Compare(venus.Clock()))
	owners, _ := json.Marshal(mars.Values("/task/owner"))
	fmt.Println("owner candidates:", string(owners))
	// Output:
	// mars-node missed an update: ask venus for DeltaSince
	// skip: delta: cannot decode sync message: malformed cbor: unexpected EOF
	// {"task":{"owner":"venus","progress":10,"tags":["geology"],"title":"survey"}}
	// {"task":{"owner":"venus","progress":10,"tags":["geology"],"title":"survey"}}
	// true equal
	// owner candidates: ["venus","mars"]
}

func must(x *delta.Delta, err error) *delta.Delta {
	if err != nil {
		panic(err)
	}
	return x
}
