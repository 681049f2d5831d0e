package node

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
)

// The connection manager's watermarks sit below the inbound-connection
// limit in force, so trimming acts before newcomers are refused.
func TestWatermarksBelowInboundLimit(t *testing.T) {
	for _, in := range []int{0, 24} {
		limits := limitConfig(in)
		inbound := rcmgr.NewFixedLimiter(limits).GetSystemLimits().GetConnLimit(network.DirInbound)
		if in > 0 && inbound != in {
			t.Fatalf("inbound limit %d, want %d", inbound, in)
		}
		low, high := watermarks(limits)
		if low <= 0 || low >= high || high >= inbound {
			t.Fatalf("inbound limit %d: watermarks %d / %d, want 0 < low < high < limit", inbound, low, high)
		}
	}
}
