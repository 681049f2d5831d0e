package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/tiers"
)

// auditFiles returns the audit log's files in dir: the current one and the
// rotated ones (audit-<time>.jsonl), sorted by name, so oldest rotated first.
func auditFiles(t *testing.T, dir string) []string {
	t.Helper()
	rotated, err := filepath.Glob(filepath.Join(dir, "audit-*.jsonl*"))
	if err != nil {
		t.Fatal(err)
	}
	return append(rotated, filepath.Join(dir, AuditFile))
}

// suppressedIn sums the counts of the audit-suppressed lines of kind code
// about peer p in lines.
func suppressedIn(t *testing.T, lines []map[string]any, code string, p peer.ID) uint64 {
	t.Helper()
	var n uint64
	for _, l := range lines {
		if l["type"] != EvtAuditSuppressed || l["code"] != code || l["peer"] != p.String() {
			continue
		}
		c, err := strconv.ParseUint(strings.Fields(l["detail"].(string))[0], 10, 64)
		if err != nil {
			t.Fatalf("summary %v does not start with a count", l)
		}
		n += c
	}
	return n
}

// countAudit counts the lines of type typ about peer p.
func countAudit(lines []map[string]any, typ string, p peer.ID) int {
	n := 0
	for _, l := range lines {
		if l["type"] == typ && l["peer"] == p.String() {
			n++
		}
	}
	return n
}

// TestAuditRotationBounded: a peer flooding security events and cross-tier
// messages for 15 s fills a 1 MiB audit log several times over; the log
// rotates, keeps MaxBackups rotated files and no more, every file is 0600
// and within the size, and every entry left out is counted in a summary
// line, the last ones written when the Observer closes.
func TestAuditRotationBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, AuditFile)
	ac := AuditConfig{MaxSizeMiB: 1, MaxBackups: 2}
	// Outside the bubble: see auditObserver.
	o, err := newObserver(path, 1000, ac)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.close() })
	flooder := testPeer(t)
	const seconds = 15
	long := strings.Repeat("x", MaxEventFieldLen-1) // a line of about 1.3 KB
	synctest.Test(t, func(t *testing.T) {
		for i := range seconds * 1000 {
			o.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Code: protocol.CodeProtocolError, Peer: flooder,
				Sender: long, Recipient: long, Detail: fmt.Sprintf("%d %s", i, long), SourceTier: -1, TargetTier: -1})
			o.Emit(protocol.Event{Type: protocol.EvtMessageReceived, Peer: flooder, MessageType: envelope.TypeNotification,
				Path: protocol.PathRemote, Sender: long, Recipient: long, Detail: long, SourceTier: 3, TargetTier: 0})
			time.Sleep(time.Millisecond) // fake time: the buckets refill, and each rotation has its own time
		}
	})
	// Of 15,000 of each kind in 15 s, the burst and the refill are written.
	wantSec, wantMsg := uint64(seconds*1000-auditBurst-seconds*auditRate), uint64(seconds*1000-auditMsgBurst-seconds*auditMsgRate)
	near := func(got, want uint64) bool { return got+2 >= want && got <= want+2 } // float refill rounding
	if got := o.Metrics().AuditSuppressed; !near(got, wantSec) {
		t.Errorf("%d security events counted as suppressed, want about %d", got, wantSec)
	}
	if err := o.close(); err != nil {
		t.Fatal(err)
	}
	if o.pending != 0 {
		t.Errorf("%d suppressed entries never written in a summary", o.pending)
	}

	// lumberjack deletes the rotated files beyond MaxBackups in its own
	// goroutine, after each rotation.
	waitfor.Eventually(t, 10*time.Second, func() error {
		if files := auditFiles(t, dir); len(files) != ac.MaxBackups+1 {
			return fmt.Errorf("%d audit files, want %d: %v", len(files), ac.MaxBackups+1, files)
		}
		return nil
	})
	files := auditFiles(t, dir)
	var lines []map[string]any
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(f), fi.Mode().Perm())
		}
		if fi.Size() > int64(ac.MaxSizeMiB)<<20 {
			t.Errorf("%s is %d bytes, over %d MiB", filepath.Base(f), fi.Size(), ac.MaxSizeMiB)
		}
		lines = append(lines, readAudit(t, f)...)
	}
	// The kept files are the newest: they end with the summaries close wrote.
	last := lines[len(lines)-2:]
	for i, code := range []string{AuditKindSecurity, AuditKindCrossTier} {
		if last[i]["type"] != EvtAuditSuppressed || last[i]["code"] != code {
			t.Errorf("the audit log ends with %v, want the pending %s summary", last[i], code)
		}
	}
	// What the kept files hold is a part of the flood: each line with a
	// summary written after it, or one the close wrote.
	sec, msg := suppressedIn(t, lines, AuditKindSecurity, flooder), suppressedIn(t, lines, AuditKindCrossTier, flooder)
	if sec == 0 || sec > wantSec+2 || msg == 0 || msg > wantMsg+2 {
		t.Errorf("the kept files count %d security and %d cross-tier entries suppressed, want some and at most %d and %d",
			sec, msg, wantSec, wantMsg)
	}
	t.Logf("%d files kept, %d lines; suppressed: %d security, %d cross-tier", len(files), len(lines), wantSec, wantMsg)
}

// TestAuditCrossTierLimitedPerPeer: a peer's flood of cross-tier messages
// reaches the audit log at the burst and then the rate, with a summary for
// the rest; another peer's entries, and the answers this node sends to that
// other peer, still get through; the answers to the flooder count against
// the flooder.
func TestAuditCrossTierLimitedPerPeer(t *testing.T) {
	o, path := auditObserver(t)
	flooder, quiet := testPeer(t), testPeer(t)
	recv := func(p peer.ID, i int) {
		o.Emit(protocol.Event{Type: protocol.EvtMessageReceived, Peer: p, MessageType: envelope.TypeRequest,
			Path: protocol.PathRemote, Detail: fmt.Sprintf("msg %d", i), SourceTier: 3, TargetTier: 0})
	}
	answer := func(p peer.ID, i int) {
		o.Emit(protocol.Event{Type: protocol.EvtMessageSent, Recipient: "a@" + p.String(), MessageType: envelope.TypeResponse,
			Path: protocol.PathRemote, Detail: fmt.Sprintf("answer %d", i), SourceTier: 0, TargetTier: 3})
	}
	synctest.Test(t, func(t *testing.T) {
		for i := range 3 * auditMsgBurst {
			recv(flooder, i)
		}
		answer(flooder, 0)
		for i := range 10 {
			recv(quiet, i)
			answer(quiet, i)
		}
		// An escalation refusal is a cross-tier entry too.
		o.Emit(protocol.Event{Type: protocol.EvtErrorRaised, Peer: flooder, Code: tiers.CodeEscalationRequired,
			EnvelopeID: "e1", SourceTier: 3, TargetTier: 0})
		lines := readAudit(t, path)
		if n := countAudit(lines, protocol.EvtMessageReceived, flooder); n != auditMsgBurst {
			t.Fatalf("%d of the flooder's %d messages audited at once, want the burst %d", n, 3*auditMsgBurst, auditMsgBurst)
		}
		answers := 0
		for _, l := range lines {
			if l["type"] == protocol.EvtMessageSent && l["recipient"] == "a@"+flooder.String() {
				answers++
			}
		}
		if answers != 0 || countAudit(lines, protocol.EvtErrorRaised, flooder) != 0 {
			t.Fatal("an answer to the flooder, or its escalation refusal, was audited past its limit")
		}
		if n := countAudit(lines, protocol.EvtMessageReceived, quiet); n != 10 {
			t.Fatalf("%d of the quiet peer's 10 messages audited, want 10", n)
		}
		if n := len(lines) - auditMsgBurst - 10; n != 10 {
			t.Fatalf("%d answers to the quiet peer audited, want 10", n)
		}
		if m := o.Metrics(); m.AuditSuppressed != 0 || m.TotalMessagesReceived != 3*auditMsgBurst+10 {
			t.Fatalf("metrics: %d received, %d security events suppressed; want every message counted, no security event",
				m.TotalMessagesReceived, m.AuditSuppressed)
		}

		time.Sleep(time.Second) // the bucket refills by auditMsgRate
		recv(flooder, 3*auditMsgBurst)
		lines = readAudit(t, path)
		last := lines[len(lines)-2:]
		want := fmt.Sprintf("%d cross-tier entries from peer %s suppressed", 2*auditMsgBurst+2, flooder)
		if last[0]["type"] != EvtAuditSuppressed || last[0]["code"] != AuditKindCrossTier ||
			!strings.HasPrefix(last[0]["detail"].(string), want) || last[1]["detail"] != fmt.Sprintf("msg %d", 3*auditMsgBurst) {
			t.Fatalf("after a refill the audit log ends with %v; want the summary %q, then the message", last, want)
		}
	})
}

// TestAuditKindsLimitedApart: a peer's flood of cross-tier messages does
// not use up its security events' budget, nor the other way round.
func TestAuditKindsLimitedApart(t *testing.T) {
	o, path := auditObserver(t)
	p := testPeer(t)
	synctest.Test(t, func(t *testing.T) {
		for range 2 * auditMsgBurst {
			o.Emit(protocol.Event{Type: protocol.EvtMessageReceived, Peer: p, SourceTier: 2, TargetTier: 1})
		}
		for range 2 * auditBurst {
			o.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Peer: p, SourceTier: -1, TargetTier: -1})
		}
		lines := readAudit(t, path)
		if m, s := countAudit(lines, protocol.EvtMessageReceived, p), countAudit(lines, protocol.EvtSecurityRaised, p); m != auditMsgBurst || s != auditBurst {
			t.Fatalf("%d messages and %d security events audited, want %d and %d", m, s, auditMsgBurst, auditBurst)
		}
	})
}

// TestAuditSummaryOfQuietPeer: the count of a peer that flooded and went
// quiet is written by the next event the Observer records a second later,
// whatever its kind, not left until the peer is evicted or the node stops.
func TestAuditSummaryOfQuietPeer(t *testing.T) {
	o, path := auditObserver(t)
	flooder := testPeer(t)
	synctest.Test(t, func(t *testing.T) {
		for range auditBurst + 7 {
			o.Emit(protocol.Event{Type: protocol.EvtSecurityRaised, Peer: flooder, SourceTier: -1, TargetTier: -1})
		}
		o.Emit(protocol.Event{Type: protocol.EvtRouteDecided, Success: true, SourceTier: -1, TargetTier: -1})
		if n := suppressedIn(t, readAudit(t, path), AuditKindSecurity, flooder); n != 0 {
			t.Fatalf("a summary of %d written while the peer still floods", n)
		}
		time.Sleep(auditSummaryEvery)
		o.Emit(protocol.Event{Type: protocol.EvtRouteDecided, Success: true, SourceTier: -1, TargetTier: -1})
		if n := suppressedIn(t, readAudit(t, path), AuditKindSecurity, flooder); n != 7 {
			t.Fatalf("a second later, the summaries count %d, want 7", n)
		}
		if o.pending != 0 {
			t.Fatalf("%d still pending", o.pending)
		}
	})
}

// TestAuditFileMode: the audit log is created 0600, and an existing one
// with looser permissions is made 0600 before it is written to.
func TestAuditFileMode(t *testing.T) {
	for _, existing := range []os.FileMode{0, 0o644, 0o600} {
		t.Run(fmt.Sprint(existing), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), AuditFile)
			if existing != 0 {
				if err := os.WriteFile(path, nil, existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, existing); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			o, err := newObserver(path, 10, DefaultConfig().Audit)
			if err != nil {
				t.Fatal(err)
			}
			defer o.close()
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("audit log mode %v, want 0600", fi.Mode().Perm())
			}
		})
	}
}

// TestAuditConfig: the defaults, a partial audit: block keeping the others,
// and the bounds Validate enforces.
func TestAuditConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.Audit != (AuditConfig{MaxSizeMiB: 32, MaxBackups: 5}) {
		t.Fatalf("default audit config %+v", cfg.Audit)
	}
	if err := ParseConfig([]byte("audit:\n  maxSizeMiB: 8\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Audit != (AuditConfig{MaxSizeMiB: 8, MaxBackups: 5}) {
		t.Fatalf("after audit.maxSizeMiB: 8, %+v", cfg.Audit)
	}
	for _, tc := range []struct {
		ac    AuditConfig
		field string
	}{
		{AuditConfig{MaxSizeMiB: 0, MaxBackups: 5}, "audit.maxSizeMiB"},
		{AuditConfig{MaxSizeMiB: 2048, MaxBackups: 5}, "audit.maxSizeMiB"},
		{AuditConfig{MaxSizeMiB: 32, MaxBackups: 0}, "audit.maxBackups"}, // lumberjack's 0 keeps every file
		{AuditConfig{MaxSizeMiB: 32, MaxBackups: 101}, "audit.maxBackups"},
	} {
		c := DefaultConfig()
		c.Audit = tc.ac
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want an error naming %s", tc.ac, err, tc.field)
		}
	}
	err := ParseConfig([]byte("audit:\n  maxBackup: 3\n"), &cfg)
	if ce := (*ConfigError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), `"maxBackups"`) {
		t.Errorf("a misspelt key: %v, want a suggestion of maxBackups", err)
	}
}
