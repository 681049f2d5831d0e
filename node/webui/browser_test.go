package webui_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/testnet"
)

// These tests drive the page in headless Chromium (Debian's chromium
// package; .ci/run installs it) against real nodes on loopback. Without
// a browser they skip.

// chromium returns the browser's path, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NOVA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary (apt-get install chromium, or set NOVA_CHROMIUM)")
	return ""
}

// page is one browser tab on a node's web view.
type page struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string // console errors, exceptions and failed loads
}

// openPage starts a browser and opens nd's web view with its token, as
// the URL `nova-node open` prints.
func openPage(t *testing.T, nd *node.Node) *page {
	t.Helper()
	return openURL(t, nd.WebURL()+"#token="+token(t, nd))
}

// openURL starts a browser on the web view at url. The browser closes
// when the test ends; if the test failed, a screenshot of the page is
// saved first.
func openURL(t *testing.T, url string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(1400, 1000),
	)
	if os.Geteuid() == 0 { // Chromium refuses to run as root with its sandbox
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	p := &page{t: t, ctx: ctx}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		if t.Failed() {
			p.screenshot(t.Name())
		}
		cancel()
		cancelAlloc()
		wg.Wait()
	})
	// Console starts the browser and subscribes to the page's console
	// before the page exists, so no message is lost.
	msgs := chromedp.Console(ctx)
	wg.Go(func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				p.mu.Lock()
				p.errors = append(p.errors, m.String()+" "+m.URL)
				p.mu.Unlock()
			}
		}
	})
	p.run("open the page", chromedp.Navigate(url))
	p.waitText("#live", "live", 10*time.Second)
	return p
}

// run runs actions on the page, failing the test on error.
func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates the JavaScript expression js on the page into out.
func eval[T any](p *page, what, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// wait polls the page (once per animation frame) until the JavaScript
// expression js is true, for at most timeout.
func (p *page) wait(what, js string, timeout time.Duration) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timeout+5*time.Second)
	defer cancel()
	start := time.Now()
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(timeout)))
	if err != nil || !ok {
		p.t.Fatalf("%s: not within %v (%v)", what, timeout, err)
	}
	p.t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
}

// waitText waits until the element of selector contains text.
func (p *page) waitText(selector, text string, timeout time.Duration) {
	p.t.Helper()
	p.wait(fmt.Sprintf("%s shows %q", selector, text),
		fmt.Sprintf(`(document.querySelector(%q)||{}).textContent?.includes(%q) || false`, selector, text), timeout)
}

// consoleErrors are the page's console errors so far.
func (p *page) consoleErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errors...)
}

// screenshot saves a full-page screenshot as the test's artifact (go test
// -artifacts keeps them; otherwise in a temp dir that stays), and logs
// where.
func (p *page) screenshot(name string) {
	dir := p.t.ArtifactDir()
	if f := flag.Lookup("test.artifacts"); f == nil || f.Value.String() != "true" {
		var err error
		if dir, err = os.MkdirTemp("", "nova-webview-"); err != nil {
			p.t.Logf("screenshot: %v", err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	p.t.Logf("screenshot of the page: %s", path)
}

// has is a JavaScript expression: an element matches selector.
func has(selector string) string {
	return fmt.Sprintf(`document.querySelector(%q) !== null`, selector)
}

// swarm4 is a 4-node testnet, fully connected, every node knowing every
// agent.
func swarm4(t *testing.T) *testnet.Net {
	net := testnet.New(t, 4)
	net.FullMesh()
	waitForCards(t, net)
	return net
}

// waitForCards waits until every node knows every other node's agents.
// (The page needs no broadcast topic, which testnet's WaitForCards also
// waits for.)
func waitForCards(t *testing.T, net *testnet.Net) {
	t.Helper()
	waitfor.Eventually(t, 30*time.Second, func() error {
		for i, a := range net.Nodes {
			for _, b := range net.Nodes {
				for _, c := range b.Registry().Local() {
					if _, ok := a.Registry().Get(c.Address()); !ok {
						return fmt.Errorf("node %d does not know %s yet", i, c.Address())
					}
				}
			}
		}
		return nil
	})
}

// The page of node 0 of a 4-node swarm shows the three peers and the four
// agents, updates within a second when a node leaves and when it comes
// back, and logs no console error.
func TestPageShowsTheSwarmLive(t *testing.T) {
	chromium(t)
	net := swarm4(t)
	p := openPage(t, net.Nodes[0])
	for i := 1; i < 4; i++ {
		p.wait(fmt.Sprintf("peer %d listed", i), has(fmt.Sprintf(`#peers .vrow[data-key=%q]`, net.Nodes[i].ID())), 5*time.Second)
	}
	for i := 0; i < 4; i++ {
		p.wait(fmt.Sprintf("agent a%d listed", i), has(fmt.Sprintf(`#agents .vrow[data-key="a%d@%s"]`, i, net.Nodes[i].ID())), 5*time.Second)
	}
	p.waitText("#peer-count", "3 peers", time.Second)
	p.wait("the graph draws three peers", `document.querySelectorAll('#graph circle:not(.self)').length === 3`, time.Second)

	// Node 2 leaves: within a second its row goes.
	gone := fmt.Sprintf(`#peers .vrow[data-key=%q]:not([hidden])`, net.Nodes[2].ID())
	cfg := net.ConfigOf(2)
	net.Kill(2)
	p.wait("node 2 gone from the peers", "!("+has(gone)+")", time.Second)
	p.waitText("#peer-count", "2 peers", time.Second)
	// It comes back: within a second of the connection, its row is back.
	net.Start(2, cfg, nil)
	net.Connect(0, 2)
	p.wait("node 2 back among the peers", has(gone), time.Second)

	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// A message sent from the page arrives at its agent on another node, and
// the answer shows; a refused one shows its error code.
func TestPageSendsMessages(t *testing.T) {
	chromium(t)
	net := swarm4(t)
	p := openPage(t, net.Nodes[0])
	to := "a3@" + net.Nodes[3].ID().String()
	received := net.Nodes[3].Observer().Subscribe(64, protocol.EvtMessageReceived)
	defer received.Close()

	// By keyboard: focus the field, type, and submit with Enter.
	p.run("fill the send form",
		chromedp.Focus(chromedp.CSS("#send-to")),
		chromedp.SendKeys(chromedp.CSS("#send-to"), to),
		chromedp.SetValue(chromedp.CSS("#send-payload"), `{"text":"hello from the page"}`),
		chromedp.Click(chromedp.CSS(`#send-form button[type=submit]`)),
	)
	p.waitText("#send-result", "delivered to a3", 10*time.Second)
	p.waitText("#send-result", "hello from the page", time.Second) // the echo's answer
	select {
	case e := <-received.C:
		if !strings.HasPrefix(e.Sender, "a0") || !strings.HasPrefix(e.Recipient, "a3") {
			t.Errorf("node 3 received %+v, want from a0 to a3", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node 3 received no message")
	}

	p.run("send to an agent nobody hosts",
		chromedp.SetValue(chromedp.CSS("#send-to"), "nosuch"),
		chromedp.Click(chromedp.CSS(`#send-form button[type=submit]`)),
	)
	p.wait("the refusal's code shows", `document.querySelector('#send-result').dataset.code === 'AGENT_NOT_FOUND'`, 10*time.Second)
	p.waitText("#send-result", "AGENT_NOT_FOUND", time.Second)

	p.run("send a payload that is not JSON",
		chromedp.SetValue(chromedp.CSS("#send-to"), to),
		chromedp.SetValue(chromedp.CSS("#send-payload"), `{not json`),
		chromedp.Click(chromedp.CSS(`#send-form button[type=submit]`)),
	)
	p.waitText("#send-result", "INVALID_PAYLOAD", time.Second)

	// The refusal is an event of the node: the security/error filter
	// shows it.
	p.run("show errors only", chromedp.SetValue(chromedp.CSS("#event-kind"), "error"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#event-kind').dispatchEvent(new Event('change'))`))
	p.wait("the error event listed", `[...document.querySelectorAll('#events .vrow:not([hidden])')].some(r => r.textContent.includes('AGENT_NOT_FOUND'))`, 5*time.Second)

	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// A document value set from the page replicates to another node, and a
// value set on another node shows on the page without a reload.
func TestPageReadsAndSetsDocuments(t *testing.T) {
	chromium(t)
	net := swarm4(t)
	p := openPage(t, net.Nodes[0])
	p.run("set a value",
		chromedp.SetValue(chromedp.CSS("#doc-name"), "plan"),
		chromedp.SetValue(chromedp.CSS("#doc-path"), "/step"),
		chromedp.SetValue(chromedp.CSS("#doc-value"), `"design"`),
		chromedp.Click(chromedp.CSS(`#doc-form button[type=submit]`)),
	)
	p.waitText("#doc-view", "design", 5*time.Second)
	p.wait("the document listed", has(`#docs .vrow[data-key="plan"]`), 5*time.Second)

	// By keyboard: the document list is a listbox; the arrow keys choose.
	p.run("choose the document with the keyboard",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#doc-name').value = ''; document.querySelector('#doc-view').textContent = ''`),
		chromedp.Focus(chromedp.CSS("#docs")),
		chromedp.KeyEvent(kb.ArrowDown),
	)
	p.wait("the chosen document's name in the form", `document.querySelector('#doc-name').value === 'plan'`, time.Second)
	p.waitText("#doc-view", "design", 5*time.Second)

	// Node 1 changes it: the page shows the new value.
	ctx := t.Context()
	waitForDoc(t, net.Nodes[1], "plan", "/step", `"design"`)
	if _, err := net.Nodes[1].ApplyDocOp(ctx, "plan", docSet("/step", `"build"`)); err != nil {
		t.Fatal(err)
	}
	p.waitText("#doc-view", "build", 10*time.Second)

	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// Every form field has a label, and the lists are reachable by keyboard.
func TestPageAccessibilityBasics(t *testing.T) {
	chromium(t)
	net := testnet.New(t, 1)
	p := openPage(t, net.Nodes[0])
	unlabelled := eval[[]string](p, "find unlabelled fields", `[...document.querySelectorAll('input, select, textarea')]
		.filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.id || e.outerHTML)`)
	if len(unlabelled) > 0 {
		t.Errorf("fields without a label: %v", unlabelled)
	}
	notFocusable := eval[[]string](p, "find lists out of keyboard reach", `[...document.querySelectorAll('.vlist')]
		.filter(e => e.tabIndex < 0).map(e => e.id)`)
	if len(notFocusable) > 0 {
		t.Errorf("lists not reachable by Tab: %v", notFocusable)
	}
	lowContrast := eval[[]string](p, "check text contrast", contrastJS)
	if len(lowContrast) > 0 {
		t.Errorf("text under 4.5:1 contrast: %v", lowContrast)
	}
	// The check itself: light grey on white is caught.
	p.run("add grey text", chromedp.Evaluate[chromedp.Void](`(() => { const e = document.createElement('p'); e.id = 'grey'; e.textContent = 'grey'; e.style.color = '#aaa'; document.querySelector('main').append(e); })()`))
	if caught := eval[[]string](p, "check text contrast", contrastJS); len(caught) != 1 || !strings.HasPrefix(caught[0], "grey ") {
		t.Errorf("the contrast check reports %v for grey text on white", caught)
	}
}

// contrastJS lists the visible text elements whose colour has less than
// WCAG's 4.5:1 contrast with the background behind them.
const contrastJS = `(() => {
  const rgb = (s) => { const m = s.match(/[\d.]+/g) || []; return m.map(Number); };
  const lum = ([r, g, b]) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bg = (e) => { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.length === 3 || c[3] > 0) return c; } return [255, 255, 255]; };
  const bad = [];
  for (const e of document.querySelectorAll('body *')) {
    if (!e.offsetParent || ![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const a = lum(rgb(getComputedStyle(e).color)), b = lum(bg(e));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) bad.push((e.id || e.className || e.tagName) + ' ' + ratio.toFixed(2));
  }
  return bad;
})()`

func docSet(path, value string) localapi.DocOp {
	return localapi.DocOp{Op: "set", Path: path, Value: json.RawMessage(value)}
}

// waitForDoc waits until nd's document doc holds want at path.
func waitForDoc(t *testing.T, nd *node.Node, doc, path, want string) {
	t.Helper()
	waitfor.Eventually(t, 10*time.Second, func() error {
		v, err := nd.ReadDoc(t.Context(), doc, path)
		if err != nil {
			return err
		}
		if string(v.Value) != want {
			return fmt.Errorf("%s%s is %s, want %s", doc, path, v.Value, want)
		}
		return nil
	})
}

// TestScreenshotForTheDocs rewrites docs/webview.png, the screenshot in
// the README, when NOVA_WEBVIEW_SCREENSHOT=1:
//
//	NOVA_WEBVIEW_SCREENSHOT=1 go test -run TestScreenshotForTheDocs ./node/webui/
//
// It runs a 4-node swarm with a few agents each, sends messages for a few
// seconds (one refused), proposes a task, starts a task swarm and sets a
// document from the page, then captures it.
func TestScreenshotForTheDocs(t *testing.T) {
	if os.Getenv("NOVA_WEBVIEW_SCREENSHOT") != "1" {
		t.Skip("set NOVA_WEBVIEW_SCREENSHOT=1 to rewrite docs/webview.png")
	}
	chromium(t)
	agents := [][]string{{"sun", "mercury"}, {"earth", "mars"}, {"jupiter", "venus", "titan"}, {"pluto", "io", "europa"}}
	caps := []string{"plan.review", "codegen.go", "summarise", "translate"}
	net := testnet.New(t, 4, testnet.WithConfig(func(i int, c *node.Config) {
		c.Agents = nil
		for k, name := range agents[i] {
			a := node.DefaultAgent(name)
			a.Capabilities = append(a.Capabilities, node.CapabilityConfig{ID: caps[(i+k)%len(caps)]})
			c.Agents = append(c.Agents, a)
		}
	}))
	net.FullMesh()
	waitForCards(t, net)
	nd := net.Nodes[0]
	p := openPage(t, nd)

	// Traffic for the charts, until the page has twenty samples.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() {
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			to := agents[1+i%3][i%2] + "@" + net.Nodes[1+i%3].ID().String()
			nd.SendFromAPI(ctx, localapi.SendRequest{From: "sun", To: to, Payload: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`)})
		}
	})
	if _, err := nd.CreateSwarm(ctx, localapi.CreateSwarmRequest{As: "sun", Task: "Review the release plan", Capabilities: []string{"echo", "plan.review"}}); err != nil {
		t.Logf("create a swarm: %v", err)
	}
	p.run("set a document",
		chromedp.SetValue(chromedp.CSS("#doc-name"), "release"),
		chromedp.SetValue(chromedp.CSS("#doc-path"), "/status"),
		chromedp.SetValue(chromedp.CSS("#doc-value"), `{"stage":"review","owner":"earth"}`),
		chromedp.Click(chromedp.CSS(`#doc-form button[type=submit]`)),
	)
	p.waitText("#doc-view", "review", 5*time.Second)
	p.run("propose a task",
		chromedp.SetValue(chromedp.CSS("#propose-to"), "earth"),
		chromedp.SetValue(chromedp.CSS("#propose-task"), "Check the changelog"),
		chromedp.Click(chromedp.CSS(`#propose-form button[type=submit]`)),
	)
	p.waitText("#propose-result", "proposal", 10*time.Second)
	p.run("send a refused message",
		chromedp.SetValue(chromedp.CSS("#send-to"), "neptune"),
		chromedp.Click(chromedp.CSS(`#send-form button[type=submit]`)),
	)
	p.waitText("#send-result", "AGENT_NOT_FOUND", 10*time.Second)
	p.run("send a message",
		chromedp.SetValue(chromedp.CSS("#send-to"), "earth"),
		chromedp.Click(chromedp.CSS(`#send-form button[type=submit]`)),
	)
	p.waitText("#send-result", "delivered", 10*time.Second)
	p.wait("twenty metrics samples", `state.samples.length >= 20`, 40*time.Second)
	stop()

	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "webview.png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote docs/webview.png (%d bytes)", len(buf))
}
