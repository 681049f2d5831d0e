package node

import (
	"fmt"
	"io/fs"
)

// Errors about the data dir and the listen addresses that the user can
// fix, each with its code and advice for the CLI and the API (see also
// StoreDamagedError, IdentityLostError and ConfigError).

// DataDirInUseError says another process holds the data dir's store.
type DataDirInUseError struct {
	Path string // the store
}

func (e *DataDirInUseError) Error() string {
	return fmt.Sprintf("node: store %s is locked: is another nova-node running with this data dir? Stop it or use --data-dir", e.Path)
}

// Code is the error's code.
func (e *DataDirInUseError) Code() string { return "DATA_DIR_IN_USE" }

// Hint says what to do about it.
func (e *DataDirInUseError) Hint() string {
	return "another nova-node runs on this data dir: use that one (`nova-node status` talks to it), stop it first, or give this one its own --data-dir"
}

// IdentityInvalidError says the identity key cannot be used as it is.
type IdentityInvalidError struct {
	Path     string
	Readable bool        // other users can read it (Unix)
	Mode     fs.FileMode // its permissions, when Readable
	Err      error       // why it does not decode, when it is corrupt
}

func (e *IdentityInvalidError) Error() string {
	if e.Readable {
		return fmt.Sprintf("node: identity %s has mode %v; other users can read it: run `chmod 600 %s`", e.Path, e.Mode, e.Path)
	}
	return fmt.Sprintf("node: identity %s is corrupt: %v", e.Path, e.Err)
}

func (e *IdentityInvalidError) Unwrap() error { return e.Err }

// Code is the error's code.
func (e *IdentityInvalidError) Code() string { return "IDENTITY_INVALID" }

// Hint says what to do about it.
func (e *IdentityInvalidError) Hint() string {
	if e.Readable {
		return "the key is the node's identity: make it private with `chmod 600` on " + IdentityFile + " in the data dir, then run the command again"
	}
	return "restore " + IdentityFile + " from a backup of the data dir; to start over as a new node instead, move " +
		IdentityFile + " and " + StoreFile + " away (a new peer ID: other nodes see a new node, and agent addresses change)"
}

// ListenError says the node cannot listen where it was told to.
type ListenError struct {
	Addrs  []string
	InUse  bool // a TCP port is taken
	Err    error
	detail string
}

func (e *ListenError) Error() string {
	if e.InUse {
		return fmt.Sprintf("node: listen %s: the port is in use, by another nova-node or another program", e.detail)
	}
	return fmt.Sprintf("node: start libp2p host on %v: %v", e.Addrs, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// Code is the error's code.
func (e *ListenError) Code() string { return "LISTEN_FAILED" }

// Hint says what to do about it.
func (e *ListenError) Hint() string {
	if e.InUse {
		return "another program (or another nova-node) holds the port: stop it, or choose another with --port N (--port 0: any free port), --listen, or `listen` in config.yaml"
	}
	return "check the listen addresses (--listen, --port, `listen` in config.yaml): each must be an address of this machine, with a free port"
}
