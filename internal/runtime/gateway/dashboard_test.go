package gateway_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the browser binary, failing in CI and skipping
// elsewhere when it is missing (make test installs it).
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

func TestDashboardInHeadlessChromium(t *testing.T) {
	bin := chromium(t)
	h := startWith(t, resCfg("{backend: memory}"), newFakeClock())
	h.setScript(`rules: [{key: sk-d1, responses: [{status: 503}]}, {key: sk-a1, responses: [{status: 429, headers: {Retry-After: "60"}}]}]`)
	for i := 0; i < 12; i++ {
		readBody(t, h.post("/v1/chat/completions", chat("down/d1", "")))
	}
	readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", "")))

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1200, 900),
		chromedp.Navigate(h.url+"/dashboard"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "test-admin-token-0123456789"),
		chromedp.Click(chromedp.ID("connect")),
		chromedp.WaitVisible(chromedp.CSS("#breakers .OPEN")),
	)
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	text := func(sel string) string {
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(sel)))
		if err != nil {
			t.Fatalf("reading #%s: %v", sel, err)
		}
		return v
	}
	breakers, conns := text("breakers"), text("connections")
	pageHTML, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(breakers, "down") || !strings.Contains(breakers, "OPEN") || !strings.Contains(breakers, "alpha") || !strings.Contains(breakers, "CLOSED") {
		t.Fatalf("breaker table:\n%s", breakers)
	}
	if !strings.Contains(conns, "a1") || !strings.Contains(conns, "60.0 s") {
		t.Fatalf("connection table must show a1 cooling for 60 s:\n%s", conns)
	}
	for _, secret := range []string{"sk-a1", "sk-a2", "sk-d1", "test-admin-token-0123456789"} {
		if strings.Contains(pageHTML, secret) {
			t.Fatalf("the dashboard shows secret %q", secret)
		}
	}
	if dir := os.Getenv("BREAKWATER_SCREENSHOT_DIR"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "dashboard.png"), shot, 0o644)
	}

	// A wrong token is refused and said so.
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("token"), "wrong"),
		chromedp.Click(chromedp.ID("connect")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("error").textContent.includes("refused")`)); err != nil {
		t.Fatalf("wrong token: %v (error text %q)", err, text("error"))
	}
}
