package node

import (
	stdlog "log"
	"os"
	"strings"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/gologshim"
)

func init() {
	// Route go-libp2p's slog output into go-log, before libp2p logs anything.
	gologshim.SetDefaultHandler(golog.SlogHandler())
}

// quietSubsystems are libp2p subsystems whose warnings are expected on a
// healthy node, shown from ERROR up unless the level is debug: a node
// alone in its swarm has no DHT peers, and the routing table refresh
// warns of that ("failed to find any peer in table") at every start.
var quietSubsystems = []string{"dht/RtRefreshManager"}

// SetupLogging sets nova's subsystems (nova/*) to level and libp2p's own to
// warn unless level is debug (some, quietSubsystems, to error); logs go to
// stderr, in colour only when stderr is a terminal. GOLOG_LOG_FMT (color,
// nocolor, json) chooses the format, and the SUBSYSTEM=LEVEL entries of
// GOLOG_LOG_LEVEL set those subsystems' levels last.
func SetupLogging(level string) {
	cfg := LogConfig(level, stderrIsTerminal(), os.Environ())
	golog.SetupLogging(cfg)
	lvl := level
	if lvl == "" {
		lvl = "info"
	}
	_ = golog.SetLogLevelRegex("^nova/.*", lvl)
	if lvl == "debug" {
		_ = golog.SetLogLevelRegex(".*", "debug")
	}
	for name, l := range userSubsystemLevels(os.Environ()) {
		_ = golog.SetLogLevel(name, l)
	}
	// Libraries that print with the standard log package (mDNS's zeroconf)
	// go through go-log too, in its format and levels.
	l := libLog
	stdlog.SetFlags(0)
	stdlog.SetOutput(&stdLogWriter{log: func(debug bool, msg string) {
		if debug {
			l.Debug(msg)
		} else {
			l.Info(msg)
		}
	}})
}

// libLog logs what libraries print with the standard log package. It
// exists before SetupLogging, which sets the level of the nova/* loggers
// there are.
var libLog = golog.Logger("nova/lib")

// stdLogWriter turns the lines of the standard log package into log
// calls. zeroconf's "[zeroconf] no suitable IPv4 interface: ..." (a host
// or network namespace with loopback only) goes to debug: discovery says
// it once and clearly ("mDNS unavailable, LAN peers will not be found
// without bootstrap peers"). Other lines are logged at info.
type stdLogWriter struct {
	log func(debug bool, msg string)
}

func (w *stdLogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[zeroconf] no suitable") {
			w.log(true, line)
			continue
		}
		w.log(false, line)
	}
	return len(p), nil
}

// LogConfig is the go-log configuration SetupLogging applies for level
// (debug, info, warn, error; "" is info), a stderr that is a terminal or
// not, and environ (os.Environ() form): plain text without ANSI colour
// codes unless stderr is a terminal (or GOLOG_LOG_FMT says otherwise, or
// NO_COLOR is set), libp2p at warn and quietSubsystems at error, unless
// level is debug.
func LogConfig(level string, stderrTerminal bool, environ []string) golog.Config {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	cfg := golog.Config{Format: golog.PlaintextOutput, Stderr: true, Level: golog.LevelWarn, SubsystemLevels: map[string]golog.LogLevel{}}
	switch env["GOLOG_LOG_FMT"] {
	case "color":
		cfg.Format = golog.ColorizedOutput
	case "nocolor":
	case "json":
		cfg.Format = golog.JSONOutput
	default:
		if stderrTerminal && env["NO_COLOR"] == "" {
			cfg.Format = golog.ColorizedOutput
		}
	}
	if level != "debug" {
		for _, s := range quietSubsystems {
			cfg.SubsystemLevels[s] = golog.LevelError
		}
	}
	return cfg
}

// userSubsystemLevels are the SUBSYSTEM=LEVEL entries of GOLOG_LOG_LEVEL.
func userSubsystemLevels(environ []string) map[string]string {
	m := map[string]string{}
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, "GOLOG_LOG_LEVEL=")
		if !ok {
			continue
		}
		for _, e := range strings.Split(v, ",") {
			if name, l, ok := strings.Cut(strings.TrimSpace(e), "="); ok && name != "" {
				m[name] = l
			}
		}
	}
	return m
}

// stderrIsTerminal reports whether stderr is a terminal (a character
// device), where colour codes render; in a file, a pipe or journald they
// are noise.
func stderrIsTerminal() bool {
	fi, err := os.Stderr.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
