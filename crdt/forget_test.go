package crdt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/internal/leakcheck"
	"github.com/nova-node/nova-node/internal/waitfor"
)

// TestLookupOfUnknownDocLeavesNothing: Lookup of a document that neither
// the node nor its connected peers hold is a NotFoundError; nothing is
// listed or stored, and no goroutine of it is left. A document a peer
// holds is fetched and held; one opened here (unwritten) is returned as
// it is.
func TestLookupOfUnknownDocLeavesNothing(t *testing.T) {
	a, b := newReplica(t, nil, nil), newReplica(t, nil, nil)
	connect(t, a, b)
	ctx := context.Background()
	_, err := b.m.Lookup(ctx, "nosuchdoc")
	if nf, ok := errors.AsType[*crdt.NotFoundError](err); !ok || nf.Code() != crdt.CodeDocNotFound {
		t.Fatalf("Lookup of an unknown document: %v, want a NotFoundError", err)
	}
	if docs := b.m.Docs(); len(docs) != 0 {
		t.Fatalf("listed after Lookup: %v", docs[0].Name())
	}
	if names, _ := b.store.DocNames(); len(names) != 0 {
		t.Fatalf("stored after Lookup: %v", names)
	}
	if leak := leakcheck.Wait("nova-node/crdt.(*Doc)", 5*time.Second); leak != "" {
		t.Fatalf("a goroutine of the looked-up document is left:\n%s", leak)
	}
	// Lookup again: the document's topics were left, so it opens again.
	if _, err := b.m.Lookup(ctx, "nosuchdoc"); err == nil {
		t.Fatal("second Lookup found the document")
	}

	da := open(t, a, "notes")
	if err := da.Set(ctx, "w@"+a.h.ID().String(), "/k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	db, err := b.m.Lookup(ctx, "notes")
	if err != nil {
		t.Fatalf("Lookup of a document a peer holds: %v", err)
	}
	if v, _ := db.Get("/k"); string(v) != "1" {
		t.Fatalf("Lookup returned %s, want the peer's content", db.JSON())
	}
	if len(b.m.Docs()) != 1 {
		t.Fatal("a document found on a peer is not held")
	}
	open(t, b, "empty")
	if d, err := b.m.Lookup(ctx, "empty"); err != nil || string(d.JSON()) != "{}" {
		t.Fatalf("Lookup of an open unwritten document: %v", err)
	}
}

// TestForgetClosesAndDeletes: Forget ends the document's watches and
// goroutines, removes it from the listing and the store; opening it
// again catches up from the peer that kept it. Forgetting a document the
// node does not hold is a NotFoundError.
func TestForgetClosesAndDeletes(t *testing.T) {
	a, b := newReplica(t, nil, nil), newReplica(t, nil, nil)
	connect(t, a, b)
	ctx := context.Background()
	da, db := open(t, a, "notes"), open(t, b, "notes")
	for k := range 5 {
		if err := db.Set(ctx, "w@"+b.h.ID().String(), fmt.Sprintf("/k%d", k), json.RawMessage(`true`)); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Eventually(t, 5*time.Second, func() error { return converged(da, db) })
	w := db.Watch(4)
	if err := b.m.Forget("notes"); err != nil {
		t.Fatal(err)
	}
	if _, open := <-w.C; open {
		t.Fatal("a watch of the forgotten document goes on")
	}
	if len(b.m.Docs()) != 0 {
		t.Fatal("the forgotten document is listed")
	}
	if names, _ := b.store.DocNames(); len(names) != 0 {
		t.Fatalf("the forgotten document is stored: %v", names)
	}
	// The document's goroutines have it as their receiver (a keeps its
	// own copy open).
	if leak := leakcheck.Wait(fmt.Sprintf("(%p", db), 5*time.Second); leak != "" {
		t.Fatalf("a goroutine of the forgotten document is left:\n%s", leak)
	}
	if err := db.Set(ctx, "w@"+b.h.ID().String(), "/late", json.RawMessage(`1`)); err == nil {
		t.Fatal("a write through the forgotten document's handle was taken")
	}
	if err := b.m.Forget("notes"); !errors.As(err, new(*crdt.NotFoundError)) {
		t.Fatalf("Forget of a document not held: %v, want a NotFoundError", err)
	}
	again := open(t, b, "notes")
	if err := converged(da, again); err != nil {
		t.Fatalf("reopened after Forget, not caught up from the peer: %v", err)
	}
}

// TestLookupOpenForgetConcurrently: Lookups, Opens and Forgets of one
// name at once never fail otherwise than with a NotFoundError (no topic
// left joined twice, no validator registered twice), and a Lookup never
// returns a document that was closed under it.
func TestLookupOpenForgetConcurrently(t *testing.T) {
	a, b := newReplica(t, nil, nil), newReplica(t, nil, nil)
	connect(t, a, b)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 8 {
				switch (g + i) % 3 {
				case 0:
					d, err := b.m.Lookup(ctx, "x")
					if err != nil && !errors.As(err, new(*crdt.NotFoundError)) {
						t.Errorf("Lookup: %v", err)
					}
					if err == nil && d.Info().Name != "x" {
						t.Error("Lookup returned another document")
					}
				case 1:
					if _, err := b.m.Open(ctx, "x"); err != nil {
						t.Errorf("Open: %v", err)
					}
				case 2:
					if err := b.m.Forget("x"); err != nil && !errors.As(err, new(*crdt.NotFoundError)) {
						t.Errorf("Forget: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	// Whatever happened, the name opens, takes a write and reaches a.
	d := open(t, b, "x")
	if err := d.Set(ctx, "w@"+b.h.ID().String(), "/k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	da := open(t, a, "x")
	waitfor.Eventually(t, 5*time.Second, func() error { return converged(da, d) })
}
