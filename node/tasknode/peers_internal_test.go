package tasknode

import (
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// A peer-gone event says sub-tasks are reassigned only when the peer ran
// some, and how many.
func TestPeerGoneDetail(t *testing.T) {
	p, err := peer.Decode("12D3KooWJpzJ3Nn1Z6zNcbcbBv6K3q2bX1ZbtESv5qv7KUT7kqXx")
	if err != nil {
		t.Fatal(err)
	}
	if d := peerGoneDetail(p, runningOn(nil, p)); strings.Contains(d, "sub-task") {
		t.Errorf("no swarms: %q", d)
	}
	swarms := []taskswarm.Swarm{
		{Status: taskswarm.StatusActive, SubTasks: []taskswarm.SubTask{
			{Status: taskswarm.SubTaskRunning, AssignedAgent: "mars@" + p.String()},
			{Status: taskswarm.SubTaskRunning, AssignedAgent: "venus@12D3KooWOther"},
		}},
		{Status: taskswarm.StatusCompleted, SubTasks: []taskswarm.SubTask{
			{Status: taskswarm.SubTaskRunning, AssignedAgent: "mars@" + p.String()},
		}},
	}
	if n := runningOn(swarms, p); n != 1 {
		t.Fatalf("running on the peer: %d, want 1", n)
	}
	if d := peerGoneDetail(p, 1); !strings.Contains(d, "its running sub-task is reassigned") {
		t.Errorf("one running: %q", d)
	}
}
