//go:build !linux

package discovery

import "errors"

// watchAddrs is Linux-only (netlink); elsewhere addrLoop polls.
func watchAddrs() (<-chan struct{}, func(), error) {
	return nil, nil, errors.New("no address notifications on this system")
}
