package agentcard_test

import (
	"crypto/rand"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// Node A hosts venus: it registers the card, signs it and publishes the
// bytes. Node B opens them, which checks the signature and that A hosts
// venus, merges the card and resolves venus by its bare name.
func Example() {
	keyA, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	keyB, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	nodeA, _ := peer.IDFromPrivateKey(keyA)
	nodeB, _ := peer.IDFromPrivateKey(keyB)
	regA := agentcard.NewRegistry(nodeA)
	regB := agentcard.NewRegistry(nodeB)

	venus, err := regA.Register(agentcard.Card{
		ID:      "venus",
		Name:    "VENUS",
		Version: "1.0.0",
		Tier:    tiers.L2,
		Capabilities: []agentcard.Capability{
			{ID: "codegen.react", Name: "React components"},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	signed, err := agentcard.Seal(venus, keyA)
	if err != nil {
		fmt.Println(err)
		return
	}

	// On node B, with bytes from the network.
	card, signer, err := agentcard.Open(signed)
	if err != nil {
		fmt.Println("rejected:", err)
		return
	}
	fmt.Println("signed by its host:", signer == nodeA && card.Host == nodeA.String())
	changed, err := regB.MergeRemote(card)
	fmt.Println("merged:", changed, err)

	got, err := regB.Resolve("venus")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.ID, got.Origin, got.Tier, "revision", got.Revision, "hosted by A:", got.Host == nodeA.String())
	for _, c := range regB.FindByCapability("codegen.react") {
		fmt.Println("codegen.react is offered by", c.ID)
	}
	_, err = regB.Resolve("mars")
	fmt.Println(err)
	// Output:
	// signed by its host: true
	// merged: true <nil>
	// venus remote L2 revision 0 hosted by A: true
	// codegen.react is offered by venus
	// agentcard: agent not found: "mars" (searched local registry (0 agents) and 1 remote card)
}
