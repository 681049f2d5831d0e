package node

import (
	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/gologshim"
)

func init() {
	// Route go-libp2p's slog output into go-log, before libp2p logs anything.
	gologshim.SetDefaultHandler(golog.SlogHandler())
}

// SetupLogging sets nova's subsystems (nova/*) to level and libp2p's own to
// warn unless level is debug; logs go to stderr.
func SetupLogging(level string) {
	golog.SetupLogging(golog.Config{Format: golog.ColorizedOutput, Stderr: true, Level: golog.LevelWarn})
	lvl := level
	if lvl == "" {
		lvl = "info"
	}
	_ = golog.SetLogLevelRegex("^nova/.*", lvl)
	if lvl == "debug" {
		_ = golog.SetLogLevelRegex(".*", "debug")
	}
}
