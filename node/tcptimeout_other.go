//go:build !linux

package node

import (
	"net"
	"time"
)

// setUserTimeout is Linux-only (TCP_USER_TIMEOUT); elsewhere a TCP peer cut
// off the network is noticed by yamux's keepalive alone.
func setUserTimeout(net.Conn, time.Duration) {}

func userTimeoutOf(net.Conn) (time.Duration, bool) { return 0, false }

func ackState(net.Conn) (time.Duration, bool, bool) { return 0, false, false }
