//go:build lockorder

package protocol

// The lockorder build tag turns the lock-order checker on for the tests of
// packages that use the Router (go test -tags lockorder ./testnet/); the
// package's own tests turn it on in TestMain. Never in a release build: it
// walks the stack on every Lock.
func init() { lockOrderChecks.Store(true) }
