// Command nova-node runs a node of the nova mesh and talks to a running one.
//
// Run `nova-node --help` for the commands, and `nova-node <command> --help`
// for each one's flags and examples.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
