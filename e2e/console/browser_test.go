package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium returns the browser binary, failing in CI and skipping
// elsewhere when it is missing (make test-deps installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (make test-deps installs it)")
	}
	t.Skip("chromium is not installed; run make test-deps")
	return ""
}

// browser is one headless Chromium tab with a record of every console
// message and every failed request.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	methods  map[network.RequestID]string
	urls     []string
	problems []string
	// expected are "METHOD path" requests allowed to fail once each (an
	// action that deliberately sends a bad value); allowed the URLs whose
	// failures were expected, for the browser's log line about them.
	expected map[string]int
	allowed  map[string]bool
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("force-prefers-reduced-motion", true),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelT)
	b := &browser{t: t, ctx: ctx, methods: map[network.RequestID]string{}, expected: map[string]int{}, allowed: map[string]bool{}}
	if err := chromedp.Listen(ctx, b.observe); err != nil {
		t.Fatalf("listening to the browser: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 900)); err != nil {
		t.Fatal(err)
	}
	return b
}

// observe records console errors, exceptions and failed requests. It runs
// on the browser's reader goroutine and only appends under the lock.
func (b *browser) observe(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.methods[e.RequestID] = e.Request.Method
		b.urls = append(b.urls, e.Request.URL)
	case *network.EventResponseReceived:
		if e.Response.Status < 400 {
			return
		}
		u, _ := url.Parse(e.Response.URL)
		key := b.methods[e.RequestID] + " " + u.Path
		if b.expected[key] > 0 {
			b.expected[key]--
			b.allowed[e.Response.URL] = true
			return
		}
		b.problems = append(b.problems, fmt.Sprintf("failed request: %s → %d", key, e.Response.Status))
	case *network.EventLoadingFailed:
		if !e.Canceled {
			b.problems = append(b.problems, fmt.Sprintf("request failed to load: %s %s", b.methods[e.RequestID], e.ErrorText))
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.problems = append(b.problems, "console."+string(e.Type)+": "+strings.Join(parts, " "))
		}
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
		b.problems = append(b.problems, "exception: "+msg)
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError && !b.allowed[e.Entry.URL] {
			b.problems = append(b.problems, fmt.Sprintf("browser log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	}
}

// expect allows one failure of "METHOD path" (a deliberately bad value).
func (b *browser) expect(methodPath string) {
	b.mu.Lock()
	b.expected[methodPath]++
	b.mu.Unlock()
}

// clean fails the test on any console error or failed request so far.
func (b *browser) clean(where string) {
	b.t.Helper()
	b.mu.Lock()
	problems := b.problems
	b.problems = nil
	b.mu.Unlock()
	if len(problems) > 0 {
		b.t.Fatalf("%s: the page reported problems:\n  %s", where, strings.Join(problems, "\n  "))
	}
}

// js evaluates expr and returns its value.
func (b *browser) js(expr string) any {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// wait polls the JavaScript expression expr until it is truthy.
func (b *browser) wait(what, expr string, timeout time.Duration) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[any](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.mu.Lock()
		problems := strings.Join(b.problems, "\n  ")
		b.mu.Unlock()
		b.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s\nproblems:\n  %s", what, expr, err, b.text("#main"), problems)
	}
}

func q(sel string) string {
	s, _ := json.Marshal(sel)
	return string(s)
}

// has is a JavaScript test for an element, hasNo for its absence.
func has(sel string) string   { return "document.querySelector(" + q(sel) + ") !== null" }
func hasNo(sel string) string { return "document.querySelector(" + q(sel) + ") === null" }

// text returns the text of the first element matching sel ("" when none).
func (b *browser) text(sel string) string {
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string]("(document.querySelector("+q(sel)+") || {innerText: ''}).innerText"))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return v
}

// data returns the data-key attribute of the first element matching sel
// ("" when none).
func (b *browser) data(sel, key string) string {
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string]("((document.querySelector("+q(sel)+") || {dataset: {}}).dataset["+q(key)+"] || '')"))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return v
}

// click clicks the element matching sel (through the DOM, so that a live
// re-render between finding and clicking cannot miss it).
func (b *browser) click(sel string) {
	b.t.Helper()
	b.wait("element "+sel, has(sel), 5*time.Second)
	b.js("document.querySelector(" + q(sel) + ").click(), true")
}

// set types value into the input matching sel.
func (b *browser) set(sel, value string) {
	b.t.Helper()
	b.wait("input "+sel, has(sel), 5*time.Second)
	v, _ := json.Marshal(value)
	b.js("(() => { const e = document.querySelector(" + q(sel) + "); e.value = " + string(v) +
		"; e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true })()")
}

// page opens a console page by its hash route and waits until ready is
// truthy.
func (b *browser) page(name, ready string) {
	b.t.Helper()
	b.js("location.hash = '#/" + name + "', true")
	b.wait("page "+name, "document.querySelector('#page').dataset.page === '"+name+"' && ("+ready+")", 10*time.Second)
}

// shot saves a full-page PNG screenshot as dir/name.png.
func (b *browser) shot(dir, name string) {
	b.t.Helper()
	b.js("document.getElementById('toasts').replaceChildren(), document.activeElement && document.activeElement.blur(), window.scrollTo(0, 0), true")
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// html is the page's current DOM.
func (b *browser) html() string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// shotDir is where the screenshots go: -screenshots, else a temporary
// directory that outlives the test (its path is logged).
func shotDir(t *testing.T) string {
	t.Helper()
	if *screenshots != "" {
		if err := os.MkdirAll(*screenshots, 0o755); err != nil {
			t.Fatal(err)
		}
		return *screenshots
	}
	dir, err := os.MkdirTemp("", "breakwater-console-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// chromedpNavigate opens url in the tab.
func chromedpNavigate(b *browser, url string) error {
	return chromedp.Do(b.ctx, chromedp.Navigate(url))
}
