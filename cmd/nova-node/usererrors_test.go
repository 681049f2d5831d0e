package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCLIEnv is runCLI with NOVA_* variables (mDNS always off) and a
// deadline, for commands that would start a node if the check under test
// let them through.
func runCLIEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	environ := append([]string{"HOME=" + t.TempDir(), "NOVA_MDNS=false"}, env...)
	code = run(ctx, args, environ, strings.NewReader(""), &o, &e)
	return o.String(), e.String(), code
}

// TestPlainErrorsEndWithCode: without --json, every failure's message ends
// with its code, once, and a hint follows: NO_NODE and USAGE included.
func TestPlainErrorsEndWithCode(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"status", "--data-dir", dir}, codeNoNode},
		{[]string{"events", "--data-dir", dir, "--follow"}, codeNoNode},
		{[]string{"send", "--bogus"}, codeUsage},
		{[]string{"init", "extra-arg"}, codeUsage},
		{[]string{"send", "--data-dir", dir}, codeUsage},
	} {
		_, errOut, _ := runCLI(t, c.args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "error: ") || !strings.HasSuffix(lines[0], " ("+c.code+")") ||
			strings.Count(lines[0], c.code) != 1 || !strings.HasPrefix(lines[1], "hint: ") {
			t.Errorf("%v: stderr %q; want \"error: ... (%s)\" once, then a hint", c.args, errOut, c.code)
		}
	}
}

// TestConfigProblemsAreConfigInvalid: whatever is wrong with config.yaml,
// the failure is CONFIG_INVALID, exit 1, with a hint about the file, and
// says what is wrong in the file's terms (no Go type names).
func TestConfigProblemsAreConfigInvalid(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       string // in the message
	}{
		{"bad YAML", "listen: [\n", "line 1"},
		{"unknown key", "swarm: lab\nlissten: x\n", `unknown key "lissten" (did you mean "listen"?)`},
		{"unknown agent key", "agents:\n  - naem: x\n", `unknown key "naem"`},
		{"wrong type", "requestTimeout: banana\n", `"banana" is not a duration`},
		{"invalid value", "retries: -1\n", "retries: -1 must be between 0 and 20"},
		{"directory", "", "is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			var err error
			if c.name == "directory" {
				err = os.Mkdir(path, 0o700)
			} else {
				err = os.WriteFile(path, []byte(c.yaml), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"run", "init"} {
				out, errOut, exit := runCLIEnv(t, nil, cmd, "--data-dir", dir, "--json")
				if exit != 1 || errOut != "" {
					t.Fatalf("%s: exit %d, stderr %q; want 1", cmd, exit, errOut)
				}
				e := jsonError(t, out)
				if e.Code != codeConfigInvalid || !strings.Contains(e.Message, c.want) ||
					strings.Contains(e.Message, "node.") || strings.Contains(e.Message, "time.Duration") || strings.Contains(e.Hint, "--help") {
					t.Errorf("%s: %+v; want %s naming %q, a hint about the file", cmd, e, codeConfigInvalid, c.want)
				}
			}
			_, errOut, exit := runCLIEnv(t, nil, "run", "--data-dir", dir)
			if exit != 1 || !strings.Contains(errOut, "("+codeConfigInvalid+")\nhint: ") {
				t.Errorf("plain: exit %d, %q", exit, errOut)
			}
		})
	}
	// A bad flag stays a usage error, on a good config.
	_, errOut, exit := runCLIEnv(t, nil, "run", "--data-dir", t.TempDir(), "--log-level", "loud")
	if exit != 2 || !strings.Contains(errOut, "(USAGE)") {
		t.Errorf("--log-level loud: exit %d, %q", exit, errOut)
	}
	// A bad NOVA_* variable is the config's problem too.
	_, errOut, exit = runCLIEnv(t, []string{"NOVA_REQUEST_TIMEOUT=banana"}, "run", "--data-dir", t.TempDir())
	if exit != 1 || !strings.Contains(errOut, "NOVA_REQUEST_TIMEOUT") || !strings.Contains(errOut, "("+codeConfigInvalid+")") {
		t.Errorf("NOVA_REQUEST_TIMEOUT=banana: exit %d, %q", exit, errOut)
	}
}

// TestDataDirProblemsHaveCodes: a data dir that another node holds, a port
// in use, and an identity key that is readable by others or corrupt are
// reported with codes of their own and hints, not as INTERNAL.
func TestDataDirProblemsHaveCodes(t *testing.T) {
	loopback := func(port int) []string {
		return []string{"--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)}
	}
	check := func(name string, args []string, code, hint string) {
		t.Helper()
		out, _, exit := runCLIEnv(t, nil, append(args, "--json")...)
		if exit != 1 {
			t.Fatalf("%s: exit %d: %s", name, exit, out)
		}
		if e := jsonError(t, out); e.Code != code || !strings.Contains(e.Hint, hint) {
			t.Errorf("%s: %+v; want %s, a hint with %q", name, e, code, hint)
		}
		_, errOut, _ := runCLIEnv(t, nil, args...)
		if !strings.Contains(errOut, "("+code+")\nhint: ") {
			t.Errorf("%s: plain %q", name, errOut)
		}
	}

	busy := t.TempDir()
	startNode(t, 0, busy)
	check("store locked", append([]string{"run", "--data-dir", busy}, loopback(0)...), codeDataDirInUse, "--data-dir")

	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	check("port in use", append([]string{"run", "--data-dir", t.TempDir()}, loopback(port)...), codeListenFailed, "--port")
	// A taken UDP port (QUIC) too: libp2p refused it with a raw error and
	// log lines on stderr.
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	quicAddr := fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1", pc.LocalAddr().(*net.UDPAddr).Port)
	check("QUIC port in use", []string{"run", "--data-dir", t.TempDir(), "--listen", quicAddr}, codeListenFailed, "--port")
	if _, errOut, _ := runCLI(t, "run", "--data-dir", t.TempDir(), "--listen", quicAddr); !strings.Contains(errOut, "the port is in use") {
		t.Errorf("QUIC port in use: %s", errOut)
	}

	dir := t.TempDir()
	if _, _, exit := runCLI(t, "init", "--data-dir", dir); exit != 0 {
		t.Fatal("init")
	}
	key := filepath.Join(dir, "identity.key")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	check("key readable by others", []string{"init", "--data-dir", dir}, codeIdentityInvalid, "chmod 600")
	if err := os.WriteFile(key, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	check("key corrupt", []string{"init", "--data-dir", dir}, codeIdentityInvalid, "backup")
}

// TestFlagProblemsAreUsage: an empty --data-dir, a port out of range, and
// --port with --listen are usage errors (exit 2) that say what is wrong.
func TestFlagProblemsAreUsage(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"init", "--data-dir", ""}, "--data-dir is empty"},
		{[]string{"status", "--data-dir", " "}, "--data-dir is empty"},
		{[]string{"run", "--data-dir", t.TempDir(), "--port", "70000"}, "port must be 0–65534"},
		{[]string{"init", "--data-dir", t.TempDir(), "--port", "-1"}, "port must be 0–65534"},
		{[]string{"run", "--data-dir", t.TempDir(), "--port", "0", "--listen", "/ip4/127.0.0.1/tcp/0"}, "--port or --listen, not both"},
	} {
		var o, e bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		exit := run(ctx, c.args, []string{"HOME=" + home, "NOVA_MDNS=false"}, strings.NewReader(""), &o, &e)
		cancel()
		if exit != 2 || !strings.Contains(e.String(), c.want) || !strings.Contains(e.String(), "(USAGE)") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, exit, e.String(), c.want)
		}
		if strings.Count(e.String(), "\n") > 2 {
			t.Errorf("%q: a long error: %q", c.args, e.String())
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".nova")); err == nil {
		t.Error("an empty --data-dir created ~/.nova")
	}
}

// TestRunHelpSaysWhereItListens: run --help says the node listens on all
// interfaces by default, how to listen on loopback only, and how to turn
// mDNS off.
func TestRunHelpSaysWhereItListens(t *testing.T) {
	out, _, _ := runCLI(t, "run", "--help")
	for _, want := range []string{"0.0.0.0 and ::", "--listen /ip4/127.0.0.1/tcp/0", "NOVA_MDNS=false", "mdns: false"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help does not say %q", want)
		}
	}
}

// TestInitSaysWhichFlagsItDidNotApply: init on a data dir with a config
// names the flags it did not write into it, and how to change the config.
func TestInitSaysWhichFlagsItDidNotApply(t *testing.T) {
	dir := t.TempDir()
	if _, _, exit := runCLI(t, "init", "--data-dir", dir, "--agent", "alice"); exit != 0 {
		t.Fatal("init")
	}
	out, errOut, exit := runCLI(t, "init", "--data-dir", dir, "--agent", "zed", "--port", "4720")
	if exit != 0 || !strings.Contains(out, "already initialised") || !strings.Contains(errOut, "not applied: --agent, --port") ||
		!strings.Contains(errOut, "SIGHUP") {
		t.Errorf("second init: exit %d\n%s\n%s", exit, out, errOut)
	}
	out, _, _ = runCLI(t, "init", "--data-dir", dir, "--agent", "zed", "--json")
	var v struct {
		NotApplied []string `json:"notApplied"`
	}
	if json.Unmarshal([]byte(out), &v) != nil || len(v.NotApplied) != 1 || v.NotApplied[0] != "--agent" {
		t.Errorf("--json: %s", out)
	}
	// Without flags, nothing to say.
	if _, errOut, _ := runCLI(t, "init", "--data-dir", dir); errOut != "" {
		t.Errorf("plain second init: %q", errOut)
	}
}

// TestHelpTeaches: the commands have a Long description and an example;
// and a missing or extra argument is a usage error that names it, not
// cobra's bare "accepts 1 arg(s), received 0".
func TestHelpTeaches(t *testing.T) {
	root := newRoot(&globals{})
	for _, path := range [][]string{{"init"}, {"run"}, {"send"}, {"agents"}, {"agents", "find"}, {"agents", "show"}, {"id"},
		{"broadcast"}, {"status"}, {"events"}, {"channels"}, {"channels", "close"}, {"version"}} {
		c, _, err := root.Find(path)
		if err != nil || c.Long == "" || c.Example == "" {
			t.Errorf("%v: no Long description or example (%v)", path, err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"a2a", "call"}, "needs URL"},
		{[]string{"a2a", "call", "x", "y"}, `got 2 argument(s): ["x" "y"]`},
		{[]string{"tools", "call"}, "needs TOOL"},
		{[]string{"agents", "show"}, "agents show needs the agent"},
		{[]string{"agents", "show", "a", "b"}, "takes one agent"},
		{[]string{"version", "extra"}, "takes no arguments"},
	} {
		_, errOut, exit := runCLI(t, c.args...)
		if exit != 2 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "arg(s)") || !strings.Contains(errOut, "(USAGE)\nhint: ") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, exit, errOut, c.want)
		}
	}
}

// hintedError is an error that says what to do about it.
type hintedError struct{}

func (hintedError) Error() string { return "node: something the user can fix" }
func (hintedError) Code() string  { return "FIXABLE" }
func (hintedError) Hint() string  { return "do this" }

// TestErrorsOwnHint: an error with a Hint method (node's
// IdentityLostError, StoreDamagedError) is reported with that hint.
func TestErrorsOwnHint(t *testing.T) {
	var o, e bytes.Buffer
	g := &globals{stdout: &o, stderr: &e}
	if exit := report(g, newRoot(g), false, fmt.Errorf("wrapped: %w", hintedError{})); exit != 1 ||
		e.String() != "error: wrapped: node: something the user can fix (FIXABLE)\nhint: do this\n" {
		t.Errorf("exit %d, %q", exit, e.String())
	}
}

// A message with line breaks (cobra's suggestions) is put on one line, so
// that its code ends it, in text and in --json.
func TestErrorMessagesOnOneLine(t *testing.T) {
	_, errOut, code := runCLI(t, "sned")
	if code != 2 || !strings.Contains(errOut, `unknown command "sned" for "nova-node": did you mean send? (USAGE)`) {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	if got := oneLine("first line\n\n\tsecond\n"); got != "first line; second" {
		t.Fatalf("oneLine: %q", got)
	}
}
