package discovery_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/discovery"
)

// bigCard is a valid card of about 50 kB hosted by host: a dozen
// capabilities with the longest descriptions allowed.
func bigCard(id string, host peer.ID) agentcard.Card {
	c := agentCard(id)
	c.Host = host.String()
	for i := range 12 {
		c.Capabilities = append(c.Capabilities, agentcard.Capability{
			ID: fmt.Sprintf("cap-%d", i), Name: "cap", Description: strings.Repeat("x", agentcard.MaxDescriptionLen-1),
		})
	}
	return c
}

// TestStoreBoundsRefuseFlood has an attacker host, a DHT server that
// validates nothing, put valid cards under its own key, valid cards under
// keys it makes up, and provider records for junk keys, into two honest
// nodes with small bounds. Each honest node keeps at most its bounds,
// counts the refusals, and still stores, serves and finds the honest
// nodes' cards, whose republish at the bound goes through.
func TestStoreBoundsRefuseFlood(t *testing.T) {
	checkLeaks(t)
	lim := discovery.Limits{PerAuthor: 8, PerAuthorBytes: 200 << 10, Total: 40, TotalBytes: 1 << 20}
	plim := discovery.Limits{PerAuthor: 8, Total: 40}
	opts := []discovery.Option{discovery.WithRecordLimits(lim), discovery.WithProviderLimits(plim)}
	a := newNode(t, nil, slow, []agentcard.Card{agentCard("alpha", "echo")}, opts...)
	b := newNode(t, []peer.AddrInfo{a.info()}, slow, []agentcard.Card{agentCard("beta", "echo")}, opts...)

	mh, mk := newHost(t)
	t.Cleanup(func() { mh.Close() })
	md, err := dht.New(mh, dht.ProtocolPrefix(discovery.ProtocolPrefix), dht.Mode(dht.ModeServer),
		dht.Validator(record.NamespacedValidator{discovery.Namespace: permissive{}}), dht.BootstrapPeers(a.info()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for _, n := range []*testNode{a, b} {
		if err := mh.Connect(ctx, n.info()); err != nil {
			t.Fatal(err)
		}
	}
	waitRoutingTables(t, []*testNode{a, b}, 1)
	publishAll(t, []*testNode{a, b})
	before := a.svc.Stats()

	// Valid ~50 kB cards under the attacker's own key: its byte share
	// (200 KiB) holds 3 of them.
	for i := range 20 {
		c := bigCard(fmt.Sprintf("flood-%d", i), mh.ID())
		_ = md.PutValue(ctx, agentcard.Key(mh.ID(), c.ID), mustSeal(t, c, mk))
	}
	st := a.svc.Stats()
	if got := st.Records - before.Records; got > 4 || got < 1 {
		t.Errorf("after the own-key flood, node a holds %d more records; want 1 to 4 (the author's 200 KiB)", got)
	}
	if st.RecordsRefused < 16 {
		t.Errorf("node a refused %d puts; want at least 16", st.RecordsRefused)
	}

	// Valid small cards under 60 made-up authors: the total (40) holds.
	for i := range 60 {
		k, id := genKey(t)
		c := agentCard(fmt.Sprintf("sybil-%d", i))
		c.Host = id.String()
		_ = md.PutValue(ctx, agentcard.Key(id, c.ID), mustSeal(t, c, k))
	}
	// Provider records for junk keys: the attacker's share (8) holds.
	for i := range 20 {
		_ = md.Provide(ctx, discovery.KeyCID(fmt.Sprintf("junk-%d", i)), true)
	}
	for name, n := range map[string]*testNode{"a": a, "b": b} {
		st := n.svc.Stats()
		t.Logf("node %s: %d records (%d bytes, %d authors), %d refused; %d providers, %d refused",
			name, st.Records, st.RecordBytes, st.RecordAuthors, st.RecordsRefused, st.Providers, st.ProvidersRefused)
		if st.Records > lim.Total || st.RecordBytes > lim.TotalBytes+64*lim.Total {
			t.Errorf("node %s holds %d records, %d bytes; bounds %d, %d", name, st.Records, st.RecordBytes, lim.Total, lim.TotalBytes)
		}
		if st.Providers > 2*plim.PerAuthor || st.ProvidersRefused == 0 {
			t.Errorf("node %s holds %d providers (refused %d); want at most the attacker's 8 and the honest nodes' few, and refusals", name, st.Providers, st.ProvidersRefused)
		}
	}

	// Honest traffic: republish (replacing records at the bound) works, and
	// each honest node finds the other's card by name and by capability.
	publishAll(t, []*testNode{a, b})
	for _, q := range []struct {
		n    *testNode
		name string
	}{{a, "beta"}, {b, "alpha"}} {
		cards, err := q.n.svc.FindByName(ctx, q.name)
		if err != nil || len(cards) != 1 {
			t.Fatalf("FindByName(%s) = %v, %v", q.name, cards, err)
		}
	}
	cards, err := a.svc.FindByCapability(ctx, "echo")
	if err != nil || !slices.ContainsFunc(cards, func(c agentcard.Card) bool { return c.ID == "beta" }) {
		t.Fatalf("FindByCapability(echo) = %v, %v; want beta among them", cards, err)
	}
}
