package connhealth

import (
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nova-node/nova-node/protocol"
)

// errNotSocket: the connection is not a socket this package can reach.
var errNotSocket = errors.New("not a socket")

// onSocket runs f on c's file descriptor, if c is a socket (libp2p's TCP
// wrapper embeds *net.TCPConn), and returns f's error.
func onSocket(c net.Conn, f func(fd int) error) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errNotSocket
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// setUserTimeout sets TCP_USER_TIMEOUT on c's socket, if c is a TCP
// connection, and makes its keepalive probe an idle connection after
// TCPKeepAliveIdle and then every TCPKeepAliveInterval: with the user
// timeout set, Linux drops the connection at the first probe due once
// nothing was received for the user timeout (about 15 s of silence). A
// connection it cannot reach keeps the kernel's default and yamux's
// keepalive.
func setUserTimeout(c net.Conn, d time.Duration) {
	err := onSocket(c, func(fd int) error {
		return errors.Join(
			unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds())),
			unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, int(TCPKeepAliveIdle/time.Second)),
			unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, int(TCPKeepAliveInterval/time.Second)),
			unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT, tcpKeepAliveCount),
		)
	})
	if err != nil {
		log.Debugw("tcp user timeout or keepalive not set", "conn", c.RemoteAddr(), "error", err)
	}
}

// ackState reads from c's socket what the peer's kernel has acknowledged.
func ackState(c net.Conn) (protocol.AckState, bool) {
	var info *unix.TCPInfo
	err := onSocket(c, func(fd int) (err error) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	})
	if err != nil {
		return protocol.AckState{}, false
	}
	return protocol.AckState{
		Silent:         time.Duration(info.Last_ack_recv) * time.Millisecond,
		InFlight:       info.Unacked > 0,
		Retransmitting: info.Retransmits > 0 || info.Backoff > 0,
		RTO:            time.Duration(info.Rto) * time.Microsecond,
	}, true
}
