package discovery

import "errors"

// ErrNotStarted is returned by the DHT operations of a [Service] whose
// Start has not run.
var ErrNotStarted = errors.New("discovery: not started")

// ErrClosed is returned by every operation of a [Service] after Close.
var ErrClosed = errors.New("discovery: closed")
