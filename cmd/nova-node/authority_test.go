package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// startNodeAuth runs a node on dir whose swarm's authority is auth ("" for
// none), as config.yaml's authority key would make it.
func startNodeAuth(t *testing.T, i int, dir, auth string) *node.Node {
	t.Helper()
	cfg := testnet.Config(t, i, testnet.TCP)
	cfg.DataDir, cfg.APISocket, cfg.Authority = dir, "", auth
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

func readJSON(t *testing.T, what, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
}

func TestAuthorityInviteJoin(t *testing.T) {
	dirA := t.TempDir()
	a := startNode(t, 0, dirA)
	self := a.ID().String()
	// The founder: --new-secret on a node without an authority.
	out, errOut, code := runCLI(t, "invite", "--data-dir", dirA, "--new-secret", "--json")
	var inv map[string]any
	if code != 0 {
		t.Fatalf("invite --new-secret: %d %s %s", code, out, errOut)
	}
	readJSON(t, "invite", out, &inv)
	if inv["authority"] != self || !strings.Contains(strings.Join(toStrings(inv["warnings"]), " "), "restart") {
		t.Fatalf("invite --new-secret: %s", out)
	}
	if cfg, err := node.LoadConfig(dirA, nil); err != nil || cfg.Authority != self {
		t.Fatalf("founder config: %v %q", err, cfg.Authority)
	}
	// Restarted, the founder is an admin and admits a joiner.
	a.Close()
	a = startNodeAuth(t, 0, dirA, self)
	out, errOut, code = runCLI(t, "invite", "--data-dir", dirA, "--max-tier", "L1", "--sandbox", "lab", "--expires", "720h", "--json")
	if code != 0 {
		t.Fatalf("invite --max-tier: %d %s %s", code, out, errOut)
	}
	readJSON(t, "invite --max-tier", out, &inv)
	joiner, _ := inv["identity"].(string)
	if joiner == "" || inv["authority"] != self || inv["grantSerial"] == nil {
		t.Fatalf("invite --max-tier: %s", out)
	}
	token := inv["token"].(string)

	dirC := filepath.Join(t.TempDir(), "c")
	out, errOut, code = runCLI(t, "join", "--data-dir", dirC, token, "--json")
	var joined map[string]any
	if code != 0 {
		t.Fatalf("join: %d %s %s", code, out, errOut)
	}
	readJSON(t, "join", out, &joined)
	if joined["peerId"] != joiner || joined["identityInstalled"] != true || joined["granted"] != true || joined["authority"] != self {
		t.Fatalf("join: %s", out)
	}
	key, err := node.LoadIdentity(dirC)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := peer.IDFromPrivateKey(key); id.String() != joiner {
		t.Fatalf("identity %s, want the granted %s", id, joiner)
	}
	cfgC, err := node.LoadConfig(dirC, nil)
	if err != nil || cfgC.Authority != self || len(cfgC.Grants) != 1 {
		t.Fatalf("joined config: %v authority %q grants %d", err, cfgC.Authority, len(cfgC.Grants))
	}
	// A data dir with another identity: refused, or kept without the grant.
	dirD := t.TempDir()
	if _, _, err := node.EnsureIdentity(dirD); err != nil {
		t.Fatal(err)
	}
	out, _, code = runCLI(t, "join", "--data-dir", dirD, token, "--json")
	if code != 1 || !strings.Contains(out, "IDENTITY_EXISTS") || !strings.Contains(out, "--keep-identity") {
		t.Fatalf("join over an identity: %d %s", code, out)
	}
	out, _, code = runCLI(t, "join", "--data-dir", dirD, token, "--keep-identity")
	if code != 0 || !strings.Contains(out, "dropped") || !strings.Contains(out, "nova-node grant 12D3") {
		t.Fatalf("join --keep-identity: %d %s", code, out)
	}
	if cfgD, _ := node.LoadConfig(dirD, nil); cfgD.Authority != self || len(cfgD.Grants) != 0 {
		t.Fatalf("kept identity config: %q %d", cfgD.Authority, len(cfgD.Grants))
	}

	// grant, list, revoke.
	other := newPeerID(t)
	out, errOut, code = runCLI(t, "grant", "--data-dir", dirA, other, "--agent", "builder", "--max-tier", "L2", "--expires", "2d", "--json")
	var issued localapi.GrantIssued
	if code != 0 {
		t.Fatalf("grant: %d %s %s", code, out, errOut)
	}
	readJSON(t, "grant", out, &issued)
	if issued.Serial == 0 || issued.Peer != other || issued.MaxTier != "L2" || issued.State != "valid" || issued.Signed == "" {
		t.Fatalf("grant: %s", out)
	}
	out, _, code = runCLI(t, "grant", "list", "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, strconv.FormatUint(issued.Serial, 10)) || !strings.Contains(out, "soon!") {
		t.Fatalf("grant list: %s", out)
	}
	out, _, code = runCLI(t, "grant", "revoke", "--data-dir", dirA, strconv.FormatUint(issued.Serial, 10), "--reason", "test", "--json")
	var rev localapi.Revoked
	readJSON(t, "revoke", out, &rev)
	if code != 0 || rev.Peer != other {
		t.Fatalf("grant revoke: %d %s", code, out)
	}
	out, _, code = runCLI(t, "grant", "list", "--data-dir", dirA, "--json")
	var grants []localapi.GrantInfo
	readJSON(t, "grant list", out, &grants)
	// A revoked grant is dropped: the joiner's is left.
	if code != 0 || len(grants) != 1 || grants[0].Serial == issued.Serial {
		t.Fatalf("grant list after revoke: %s", out)
	}

	// Admins.
	out, _, code = runCLI(t, "authority", "add-admin", "--data-dir", dirA, other, "--json")
	var st localapi.AuthorityStatus
	readJSON(t, "add-admin", out, &st)
	if code != 0 || len(st.Admins) != 2 || st.LogLength != 1 || !st.IsAdmin {
		t.Fatalf("add-admin: %s", out)
	}
	out, _, code = runCLI(t, "authority", "remove-admin", "--data-dir", dirA, other, "--json")
	readJSON(t, "remove-admin", out, &st)
	if code != 0 || len(st.Admins) != 1 || st.LogLength != 2 {
		t.Fatalf("remove-admin: %s", out)
	}
	out, _, code = runCLI(t, "authority", "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "this node is an admin") || !strings.Contains(out, "GRANTS (1)") {
		t.Fatalf("authority: %s", out)
	}
}

func TestTrustCommands(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir)
	p := newPeerID(t)
	out, errOut, code := runCLI(t, "trust", "--data-dir", dir, p, "--max-tier", "L1", "--sandbox", "lab", "--note", "Ana's laptop", "--json")
	var tr localapi.TrustInfo
	if code != 0 {
		t.Fatalf("trust: %d %s %s", code, out, errOut)
	}
	readJSON(t, "trust", out, &tr)
	if tr.Peer != p || tr.MaxTier != "L1" || tr.Note != "Ana's laptop" {
		t.Fatalf("trust: %s", out)
	}
	if _, _, code := runCLI(t, "trust", "--data-dir", dir, p, "--agent", "builder", "--max-tier", "L2", "--expires", "30d"); code != 0 {
		t.Fatal("trust --agent")
	}
	out, _, code = runCLI(t, "trust", "list", "--data-dir", dir, "--json")
	var ts []localapi.TrustInfo
	readJSON(t, "trust list", out, &ts)
	if code != 0 || len(ts) != 2 {
		t.Fatalf("trust list: %s", out)
	}
	out, _, code = runCLI(t, "trust", "remove", "--data-dir", dir, p, "--json")
	var rm localapi.TrustRemoved
	readJSON(t, "trust remove", out, &rm)
	if code != 0 || rm.Removed != 1 {
		t.Fatalf("trust remove: %s", out)
	}
	out, _, code = runCLI(t, "trust", "remove", "--data-dir", dir, p, "--all")
	if code != 0 || !strings.Contains(out, "removed 1 trust") {
		t.Fatalf("trust remove --all: %s", out)
	}
	out, _, _ = runCLI(t, "authority", "--data-dir", dir)
	if !strings.Contains(out, "authority  none") || !strings.Contains(out, "TRUSTS (0)") {
		t.Fatalf("authority without one: %s", out)
	}
	if _, errOut, code := runCLI(t, "trust", "--data-dir", dir, p); code != 2 || !strings.Contains(errOut, "--max-tier is required") {
		t.Fatalf("trust without --max-tier: %d %s", code, errOut)
	}
}

func TestNotAdmin(t *testing.T) {
	// No authority at all.
	dir := t.TempDir()
	startNode(t, 0, dir)
	p := newPeerID(t)
	out, _, code := runCLI(t, "grant", "--data-dir", dir, p, "--max-tier", "L1", "--json")
	var e struct{ Error errorBody }
	readJSON(t, "grant", out, &e)
	if code != 1 || e.Error.Code != localapi.CodeNotAdmin || !strings.Contains(e.Error.Hint, "invite --new-secret") {
		t.Fatalf("grant without an authority: %d %s", code, out)
	}
	// An authority whose admin is another node.
	dir2 := t.TempDir()
	if err := node.SetAuthority(dir2, mustDecode(t, p)); err != nil {
		t.Fatal(err)
	}
	startNodeAuth(t, 1, dir2, p)
	for _, args := range [][]string{
		{"grant", p, "--max-tier", "L1"},
		{"grant", "revoke", "7"},
		{"authority", "add-admin", p},
		{"invite", "--max-tier", "L1"},
	} {
		_, errOut, code := runCLI(t, append(args, "--data-dir", dir2)...)
		if code != 1 || !strings.Contains(errOut, "(NOT_ADMIN)") || !strings.Contains(errOut, "add-admin") || !strings.Contains(errOut, p) {
			t.Errorf("%v on a non-admin: %d %s", args, code, errOut)
		}
	}
}

// newPeerID is the peer ID of a fresh key: a node that need not run.
func newPeerID(t *testing.T) string {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return id.String()
}

func mustDecode(t *testing.T, s string) peer.ID {
	t.Helper()
	p, err := peer.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestAuthorityHelpTeaches: each authority command says what it does,
// shows an example, and documents its flags.
func TestAuthorityHelpTeaches(t *testing.T) {
	root := newRoot(&globals{})
	for _, path := range [][]string{{"grant"}, {"grant", "list"}, {"grant", "revoke"}, {"trust"}, {"trust", "list"}, {"trust", "remove"},
		{"authority"}, {"authority", "add-admin"}, {"authority", "remove-admin"}, {"invite"}, {"join"}} {
		c, _, err := root.Find(path)
		if err != nil || c.Long == "" || c.Example == "" {
			t.Errorf("%v: no Long description or example (%v)", path, err)
		}
	}
	out, _, code := runCLI(t, "grant", "--help")
	for _, want := range []string{"--max-tier", "--sandbox", "--expires", "--not-before", "--capability", "NOT_ADMIN", "--json", "grant revoke"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("grant --help lacks %q", want)
		}
	}
	out, _, _ = runCLI(t, "invite", "--help")
	if !strings.Contains(out, "private key") || !strings.Contains(out, "--max-tier") {
		t.Errorf("invite --help does not say the admission token is a secret:\n%s", out)
	}
	if _, errOut, code := runCLI(t, "grant", "revoke", "x"); code != 2 || !strings.Contains(errOut, "not a grant serial") {
		t.Errorf("revoke x: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "grant", newPeerID(t), "--max-tier", "L1", "--expires", "soon"); code != 2 || !strings.Contains(errOut, "--expires") {
		t.Errorf("--expires soon: %d %s", code, errOut)
	}
}

// TestStandingShown: an agent claiming L1 with nothing to cover it is
// shown at L3 with its claim, by agents and authority; once trusted,
// status names the basis and the expiry.
func TestStandingShown(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startNode(t, 0, dirA, node.DefaultAgent("alice"))
	l1 := tiers.L1
	bobCfg := node.DefaultAgent("bob")
	bobCfg.Tier = &l1
	b := startNode(t, 1, dirB, bobCfg)
	if _, err := a.Connect(t.Context(), b.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		_, err := a.Registry().Resolve("bob")
		return err
	})
	out, _, code := runCLI(t, "agents", "--data-dir", dirA, "--origin", "remote")
	if code != 0 || !strings.Contains(out, "L3 (claims L1: no grant)") {
		t.Fatalf("agents:\n%s", out)
	}
	out, _, _ = runCLI(t, "authority", "--data-dir", dirA)
	if !strings.Contains(out, "! bob@") || !strings.Contains(out, "(claims L1)") {
		t.Fatalf("authority:\n%s", out)
	}
	if _, _, code := runCLI(t, "trust", "--data-dir", dirA, b.ID().String(), "--max-tier", "L1", "--expires", "72h"); code != 0 {
		t.Fatal("trust")
	}
	out, _, code = runCLI(t, "status", "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "basis: trust, expires") || !strings.Contains(out, "soon!") {
		t.Fatalf("status:\n%s", out)
	}
	out, _, _ = runCLI(t, "agents", "--data-dir", dirA, "--origin", "remote", "--json")
	if !strings.Contains(out, `"basis": "trust"`) || !strings.Contains(out, `"claimedTier": "L1"`) {
		t.Fatalf("agents --json:\n%s", out)
	}
}

// TestAuthorityInit: `authority init` founds the authority on this node
// without a swarm secret, says a running node must restart, refuses to
// change a set authority without --replace, and the restarted node is its
// admin.
func TestAuthorityInit(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir)
	self := n.ID().String()
	out, errOut, code := runCLI(t, "authority", "init", "--data-dir", dir, "--json")
	if code != 0 {
		t.Fatalf("authority init: %d %s %s", code, out, errOut)
	}
	var res map[string]any
	readJSON(t, "authority init", out, &res)
	if res["authority"] != self || res["founder"] != true || res["changed"] != true || res["restartNeeded"] != true {
		t.Fatalf("authority init: %s", out)
	}
	cfg, err := os.ReadFile(node.ConfigPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "authority: "+self) || strings.Contains(string(cfg), "swarmSecret:") {
		t.Fatalf("config.yaml after authority init:\n%s", cfg)
	}
	if out, _, code := runCLI(t, "authority", "init", "--data-dir", dir); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("authority init again: %d %s", code, out)
	}
	other := newPeerID(t)
	if _, errOut, code := runCLI(t, "authority", "init", "--data-dir", dir, "--founder", other); code != 2 || !strings.Contains(errOut, "--replace") {
		t.Fatalf("authority init --founder over a set authority: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "authority", "init", "--data-dir", dir, "--founder", "nope"); code != 2 || !strings.Contains(errOut, "not a peer ID") {
		t.Fatalf("authority init --founder nope: %d %s", code, errOut)
	}
	// Restarted with the authority it wrote, the node is its admin.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	startNodeAuth(t, 0, dir, self)
	if out, _, code := runCLI(t, "authority", "--data-dir", dir); code != 0 || !strings.Contains(out, "this node is an admin") {
		t.Fatalf("authority after restart: %d %s", code, out)
	}
	out, _, code = runCLI(t, "authority", "init", "--data-dir", dir, "--founder", other, "--replace", "--json")
	readJSON(t, "authority init --replace", out, &res)
	if code != 0 || res["authority"] != other || res["founder"] != false || res["previous"] != self {
		t.Fatalf("authority init --replace: %s", out)
	}
}
