//go:build unix && !linux

package journal

const populate = 0
