package node

import (
	"fmt"
	"testing"

	"github.com/nova-node/nova-node/protocol/task/negotiation"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// TestKVStore: the bbolt KV keeps keys in order across a reopen, lets
// ForEach's callback write, deletes, and refuses buckets that are not the
// task buckets.
func TestKVStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	kv := kvStore{s}
	for i := range 5 {
		if err := kv.Put(negotiation.Bucket, fmt.Sprintf("sent/%d", 4-i), []byte(fmt.Sprint(4-i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Put("cards", "x", nil); err == nil {
		t.Fatal("a node bucket was writable through the task KV")
	}
	var keys []string
	err = kv.ForEach(negotiation.Bucket, func(k string, v []byte) error {
		keys = append(keys, k)
		return kv.Put(taskswarm.Bucket, k, v) // writing from the callback must not deadlock
	})
	if err != nil || fmt.Sprint(keys) != "[sent/0 sent/1 sent/2 sent/3 sent/4]" {
		t.Fatalf("ForEach: %v %v", keys, err)
	}
	if err := kv.Delete(negotiation.Bucket, "sent/2"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(negotiation.Bucket, "missing"); err != nil {
		t.Fatal(err)
	}
	s.close()
	s, err = openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	kv = kvStore{s}
	n := map[string]int{}
	for _, b := range []string{negotiation.Bucket, taskswarm.Bucket} {
		if err := kv.ForEach(b, func(k string, v []byte) error {
			if string(v) != k[len("sent/"):] {
				return fmt.Errorf("%s = %q", k, v)
			}
			n[b]++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n[negotiation.Bucket] != 4 || n[taskswarm.Bucket] != 5 {
		t.Fatalf("after reopen: %v", n)
	}
}
