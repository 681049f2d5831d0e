package testnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/testnet"
)

// TestDocumentSurvivesRestart: a node restarted from its data dir has its
// documents as they were, and catches up on what it missed while down.
func TestDocumentSurvivesRestart(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	ctx := context.Background()
	for _, nd := range net.Nodes {
		nd.ReadDoc(ctx, "notes", "")
	}
	if _, err := net.Nodes[1].ApplyDocOp(ctx, "notes", localapi.DocOp{Op: "set", Path: "/a", Value: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		v, _ := net.Nodes[0].ReadDoc(ctx, "notes", "/a")
		if string(v.Value) != "1" {
			return fmt.Errorf("node 0 sees %s", v.Value)
		}
		return nil
	})
	cfg := net.ConfigOf(1)
	net.Kill(1)
	// Written while node 1 is down.
	net.Nodes[0].ApplyDocOp(ctx, "notes", localapi.DocOp{Op: "set", Path: "/b", Value: json.RawMessage(`2`)})
	nd := net.Start(1, cfg, nil)
	v, err := nd.ReadDoc(ctx, "notes", "/a")
	if err != nil || string(v.Value) != "1" {
		t.Fatalf("after restart /a = %s (%v)", v.Value, err)
	}
	net.Connect(1, 0)
	waitfor.Eventually(t, 10*time.Second, func() error {
		v, _ := nd.ReadDoc(ctx, "notes", "/b")
		if string(v.Value) != "2" {
			return fmt.Errorf("restarted node has not caught up: /b = %s", v.Value)
		}
		return nil
	})
}

// TestPartitionWriteBothSidesHeal: the swarm splits in two, both halves
// write (including to the same key), the partition heals, and every node
// ends with the same document with no update lost: the counter has every
// increment, the set every element, and the conflicting key keeps both
// values (the last writer's on read).
func TestPartitionWriteBothSidesHeal(t *testing.T) {
	net := testnet.New(t, 6)
	net.FullMesh()
	net.WaitForCards()
	ctx := context.Background()
	for _, nd := range net.Nodes {
		nd.ReadDoc(ctx, "plan", "")
	}
	left, right := []int{0, 1, 2}, []int{3, 4, 5}
	net.Partition(left, right)
	write := func(i int, side string) {
		nd := net.Nodes[i]
		for _, o := range []localapi.DocOp{
			{Op: "set", Path: "/owner", Value: json.RawMessage(fmt.Sprintf(`"%s-%d"`, side, i))},
			{Op: "incr", Path: "/votes", By: 1},
			{Op: "add", Path: "/tags", Value: json.RawMessage(fmt.Sprintf(`"%s%d"`, side, i))},
			{Op: "set", Path: fmt.Sprintf("/%s/n%d", side, i), Value: json.RawMessage(`true`)},
		} {
			if _, err := nd.ApplyDocOp(ctx, "plan", o); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, i := range left {
		write(i, "left")
	}
	for _, i := range right {
		write(i, "right")
	}
	// Each side converges on its own writes and does not see the other's.
	waitfor.Eventually(t, 10*time.Second, func() error {
		for _, i := range left {
			v, _ := net.Nodes[i].ReadDoc(ctx, "plan", "/votes")
			if string(v.Value) != "3" {
				return fmt.Errorf("left node %d has %s votes", i, v.Value)
			}
		}
		return nil
	})
	if v, _ := net.Nodes[0].ReadDoc(ctx, "plan", "/right"); string(v.Value) != "null" {
		t.Fatalf("the left side sees the right side's writes through the partition: %s", v.Value)
	}
	net.Heal(left, right)
	waitfor.Eventually(t, 20*time.Second, func() error {
		first, _ := net.Nodes[0].ReadDoc(ctx, "plan", "")
		for i, nd := range net.Nodes[1:] {
			v, _ := nd.ReadDoc(ctx, "plan", "")
			if !bytes.Equal(v.Value, first.Value) {
				return fmt.Errorf("node %d differs after healing", i+1)
			}
		}
		return nil
	})
	v, _ := net.Nodes[4].ReadDoc(ctx, "plan", "/votes")
	if string(v.Value) != "6" {
		t.Fatalf("%s votes after healing, want 6", v.Value)
	}
	var tags []string
	tv, _ := net.Nodes[1].ReadDoc(ctx, "plan", "/tags")
	json.Unmarshal(tv.Value, &tags)
	if len(tags) != 6 {
		t.Fatalf("tags %v, want 6", tags)
	}
	owner, _ := net.Nodes[2].ReadDoc(ctx, "plan", "/owner")
	if len(owner.Values) < 2 {
		t.Fatalf("concurrent writes to /owner: %d values kept, want both sides' (%s)", len(owner.Values), owner.Value)
	}
}

// TestDocumentSandboxRules: a document "lab.<name>" belongs to sandbox lab:
// its agents write it, others may not, a sandboxed agent cannot write a
// shared document, and a node that does not enforce sandboxes cannot slip
// an update into a sandbox's document: the other nodes refuse it.
func TestDocumentSandboxRules(t *testing.T) {
	net := testnet.New(t, 3, testnet.WithConfig(func(i int, c *node.Config) {
		if i == 0 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "boxed", Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		}
		if i == 2 {
			c.Sandbox.Enforced = false // a careless (or hostile) member
		}
	}))
	net.FullMesh()
	net.WaitForCards()
	ctx := context.Background()
	for _, nd := range net.Nodes {
		nd.ReadDoc(ctx, "lab.plan", "")
	}
	n0 := net.Nodes[0]
	if _, err := n0.ApplyDocOp(ctx, "lab.plan", localapi.DocOp{Op: "set", Path: "/by", Value: json.RawMessage(`"boxed"`), Agent: "boxed"}); err != nil {
		t.Fatalf("a lab agent writing the lab's document: %v", err)
	}
	if _, err := n0.ApplyDocOp(ctx, "plan", localapi.DocOp{Op: "set", Path: "/leak", Value: json.RawMessage(`1`), Agent: "boxed"}); !errors.Is(err, sandbox.ErrSandboxViolation) {
		t.Fatalf("a lab agent writing a shared document: %v, want SANDBOX_VIOLATION", err)
	}
	if _, err := n0.ApplyDocOp(ctx, "lab.plan", localapi.DocOp{Op: "set", Path: "/x", Value: json.RawMessage(`1`), Agent: "a0"}); !errors.Is(err, sandbox.ErrSandboxViolation) {
		t.Fatalf("an outside agent writing the lab's document: %v, want SANDBOX_VIOLATION", err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		v, _ := net.Nodes[1].ReadDoc(ctx, "lab.plan", "/by")
		if string(v.Value) != `"boxed"` {
			return fmt.Errorf("node 1 sees %s", v.Value)
		}
		return nil
	})
	// Node 2 does not enforce sandboxes: its agent writes the lab's document.
	if _, err := net.Nodes[2].ApplyDocOp(ctx, "lab.plan", localapi.DocOp{Op: "set", Path: "/intruder", Value: json.RawMessage(`true`), Agent: "a2"}); err != nil {
		t.Fatalf("node 2 (not enforcing) refused its own write: %v", err)
	}
	// A later legitimate update shows the enforcing nodes are current...
	if _, err := n0.ApplyDocOp(ctx, "lab.plan", localapi.DocOp{Op: "set", Path: "/after", Value: json.RawMessage(`1`), Agent: "boxed"}); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		v, _ := net.Nodes[1].ReadDoc(ctx, "lab.plan", "/after")
		if string(v.Value) != "1" {
			return fmt.Errorf("node 1 not current")
		}
		return nil
	})
	// ...and never applied the intruder's update.
	for _, i := range []int{0, 1} {
		if v, _ := net.Nodes[i].ReadDoc(ctx, "lab.plan", "/intruder"); string(v.Value) != "null" {
			t.Fatalf("node %d applied an update from outside the sandbox: %s", i, v.Value)
		}
	}
}

// TestOpeningADocumentShowsItCurrent: a node that opens a document another
// node wrote sees its content on the first read (Open waits for the initial
// catch-up), without polling.
func TestOpeningADocumentShowsItCurrent(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	ctx := context.Background()
	if _, err := net.Nodes[0].ApplyDocOp(ctx, "fresh", localapi.DocOp{Op: "set", Path: "/goal", Value: json.RawMessage(`"ship"`)}); err != nil {
		t.Fatal(err)
	}
	v, err := net.Nodes[1].ReadDoc(ctx, "fresh", "/goal")
	if err != nil || string(v.Value) != `"ship"` {
		t.Fatalf("first read on the other node: %s (%v)", v.Value, err)
	}
}
