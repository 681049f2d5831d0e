package tiers_test

import (
	"errors"
	"fmt"

	"github.com/nova-node/nova-node/tiers"
)

func ExampleRules_Check() {
	rules := tiers.DefaultRules()
	if err := rules.Validate(); err != nil {
		panic(err)
	}
	atlas, _ := tiers.DefaultTier("atlas") // L3
	sun, _ := tiers.DefaultTier("SUN")     // L0
	mercury, _ := tiers.DefaultTier("mercury")
	venus, _ := tiers.DefaultTier("venus")

	// An L3 agent asks the orchestrator to take on work without saying why.
	err := rules.Check(tiers.Message{Source: atlas, Target: sun, Type: "task-proposal"})
	fmt.Println(errors.Is(err, tiers.ErrEscalationRequired), err)

	// With a justification the proposal goes through.
	err = rules.Check(tiers.Message{Source: atlas, Target: sun, Type: "task-proposal",
		Justification: "needs a decision only the orchestrator can make"})
	fmt.Println(err)

	// L1 may not start a conversation with L2 ...
	err = rules.Check(tiers.Message{Source: mercury, Target: venus, Type: "request"})
	var v *tiers.ViolationError
	fmt.Println(errors.As(err, &v), v.Code(), err)

	// ... but may answer a request venus sent it.
	err = rules.Check(tiers.Message{Source: mercury, Target: venus, Type: "response", Reply: true})
	fmt.Println(err)

	// Output:
	// true tiers: escalation justification required: L3 -> L0 "task-proposal" needs metadata.escalationJustification
	// <nil>
	// true TIER_VIOLATION tiers: tier violation: L1 may not send "request" to L2
	// <nil>
}

func ExampleParseTier() {
	for _, s := range []string{"L2", "l3", "1", "L7"} {
		t, err := tiers.ParseTier(s)
		fmt.Println(t, err)
	}
	// Output:
	// L2 <nil>
	// L3 <nil>
	// L1 <nil>
	// L0 tiers: invalid tier "L7": want L0, L1, L2 or L3
}
