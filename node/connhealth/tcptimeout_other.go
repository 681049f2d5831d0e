//go:build !linux

package connhealth

import (
	"net"
	"time"

	"github.com/nova-node/nova-node/protocol"
)

// setUserTimeout is Linux-only (TCP_USER_TIMEOUT); elsewhere a TCP peer cut
// off the network is noticed by yamux's keepalive alone.
func setUserTimeout(net.Conn, time.Duration) {}

func ackState(net.Conn) (protocol.AckState, bool) { return protocol.AckState{}, false }
