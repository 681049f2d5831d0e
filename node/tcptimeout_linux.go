package node

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nova-node/nova-node/protocol"
)

// setUserTimeout sets TCP_USER_TIMEOUT on c's socket, if c is a TCP
// connection (libp2p's wrapper embeds *net.TCPConn). A connection it cannot
// reach keeps the kernel's default and yamux's keepalive.
func setUserTimeout(c net.Conn, d time.Duration) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		log.Debugw("tcp user timeout: not a socket", "conn", c.RemoteAddr())
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	}); err == nil && serr != nil {
		log.Debugw("tcp user timeout not set", "conn", c.RemoteAddr(), "error", serr)
	}
}

// ackState reads from c's socket what the peer's kernel has acknowledged.
func ackState(c net.Conn) (protocol.AckState, bool) {
	sc, isSock := c.(syscall.Conn)
	if !isSock {
		return protocol.AckState{}, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return protocol.AckState{}, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return protocol.AckState{}, false
	}
	return protocol.AckState{
		Silent:         time.Duration(info.Last_ack_recv) * time.Millisecond,
		InFlight:       info.Unacked > 0,
		Retransmitting: info.Retransmits > 0 || info.Backoff > 0,
		RTO:            time.Duration(info.Rto) * time.Microsecond,
	}, true
}
