package tasknode_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/tasknode"
)

// A Service that never started closes, twice, and then neither starts nor
// serves: envelopes waiting for the start fail, API calls get ErrNotRunning.
func TestCloseBeforeStart(t *testing.T) {
	s := tasknode.New(tasknode.Config{})
	s.Close()
	s.Close()
	if err := s.Start(t.Context()); err == nil {
		t.Fatal("Start after Close succeeded")
	}
	if _, _, err := s.Running(); !errors.Is(err, tasknode.ErrNotRunning) {
		t.Fatalf("Running after Close: %v, want ErrNotRunning", err)
	}
	h := s.Wrap("a", nil)
	env := &envelope.Envelope{Type: envelope.TypeTaskAccept}
	if _, err := h(context.Background(), env); err == nil {
		t.Fatal("a task envelope was handled by a closed Service")
	}
}
