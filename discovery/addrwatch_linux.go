package discovery

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// watchAddrs reports, on changed, each time the kernel adds or removes an
// IP address of this network namespace (a netlink subscription to
// RTMGRP_IPV4_IFADDR and RTMGRP_IPV6_IFADDR); several changes may come as
// one. stop ends the subscription and waits for its reader.
func watchAddrs() (changed <-chan struct{}, stop func(), err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, nil, os.NewSyscallError("socket", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, nil, os.NewSyscallError("bind", err)
	}
	// Non-blocking, so the runtime's poller reads it and Close ends a Read.
	f := os.NewFile(uintptr(fd), "netlink-addr")
	c := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 16<<10) // the messages are not parsed: any of them is a change
		for {
			if _, err := f.Read(buf); err != nil && !isRetryable(err) {
				return
			}
			select {
			case c <- struct{}{}:
			default:
			}
		}
	})
	return c, func() { f.Close(); wg.Wait() }, nil
}

// isRetryable reports whether a netlink read may go on after err: ENOBUFS
// means notifications were lost, which a fresh read of the addresses makes
// up for.
func isRetryable(err error) bool {
	var errno unix.Errno
	if pe, ok := err.(*os.PathError); ok {
		errno, _ = pe.Err.(unix.Errno)
	}
	return errno == unix.ENOBUFS
}
