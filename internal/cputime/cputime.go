// Package cputime reads the CPU time this process has used, for benchmarks
// that report CPU per operation next to wall time (both nodes of a
// loopback benchmark live in one process).
package cputime
