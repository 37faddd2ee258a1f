package console

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const adminToken = "e2e-admin-token-5f0c2a9d8b7e41aa"

// secrets are every credential of the test configuration: none may appear
// in a page or an API answer the console uses.
var secrets = []string{adminToken, "sk-e2e-alpha-1", "sk-e2e-alpha-2", "sk-e2e-beta-1", "sk-e2e-beta-2",
	"sk-e2e-down-1", "sk-e2e-broke-1", "sk-e2e-claude-1", "sk-e2e-gamma-1"}

const mockScript = `
rules:
  - {name: down is down, key: sk-e2e-down-1, responses: [{status: 503}]}
  - {name: beta key 1 rate limited, key: sk-e2e-beta-1, responses: [{status: 429, headers: {Retry-After: "60"}}]}
  - {name: beta key 2 rate limited, key: sk-e2e-beta-2, responses: [{status: 429, headers: {Retry-After: "60"}}]}
  - name: gamma rate limited without a hint
    key: sk-e2e-gamma-1
    responses: [{status: 429, body: '{"error": {"message": "Rate limit reached.", "type": "requests", "code": "rate_limit_exceeded"}}'}]
  - name: broke has no credit
    key: sk-e2e-broke-1
    responses: [{status: 402, body: '{"error": {"message": "Your credit balance is too low to access the API.", "type": "invalid_request_error"}}'}]
`

const configTemplate = `
server:
  listen: LISTEN
  admin_token: ADMIN
state: {backend: badger, path: DIR/data}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  model_lockout: {enabled: true}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK/v1
    models: [m1, m2]
    connections:
      - {id: a1, api_key: sk-e2e-alpha-1, max_concurrent: 4}
      - {id: a2, api_key: sk-e2e-alpha-2}
  - id: beta
    kind: openai
    base_url: MOCK/v1
    models: [q1]
    connections:
      - {id: bq1, api_key: sk-e2e-beta-1}
      - {id: bq2, api_key: sk-e2e-beta-2}
  - id: down
    kind: openai
    profile: local
    base_url: MOCK/v1
    models: [d1, d2]
    connections:
      - {id: d1key, api_key: sk-e2e-down-1}
  - id: broke
    kind: openai
    base_url: MOCK/v1
    models: [b1]
    connections:
      - {id: b1key, api_key: sk-e2e-broke-1}
  - id: gamma
    kind: openai
    base_url: MOCK/v1
    models: [g1]
    connections:
      - {id: g1key, api_key: sk-e2e-gamma-1}
  - id: claude
    kind: anthropic
    profile: oauth
    base_url: MOCK/v1
    models: [c1]
    connections:
      - {id: c1key, api_key: sk-e2e-claude-1, provider_specific: {low_priority_mode: true}}
combos:
  - name: smart
    strategy: priority
    targets: [{model: down/d1}, {model: alpha/m1}]
  - name: spread
    strategy: weighted
    sticky_limit: 2
    targets: [{model: alpha/m1, weight: 3}, {model: beta/q1, weight: 1}]
policies: {dir: DIR/policies}
plugins:
  - {name: acme-quota, path: WASM, hooks: [classify]}
`

// TestConsoleInHeadlessChromium drives every page of the console against
// the real binary and the real mock upstream, checking each action against
// what the admin API reports afterwards.
func TestConsoleInHeadlessChromium(t *testing.T) {
	chromium(t)
	dir := t.TempDir()
	shots := shotDir(t)
	t.Logf("screenshots: %s", shots)
	bin, wasm := buildAll(t, dir)

	// The mock upstream, with its faults, and the gateway.
	if err := os.WriteFile(filepath.Join(dir, "mock.yaml"), []byte(mockScript), 0o644); err != nil {
		t.Fatal(err)
	}
	mockAddr, gwAddr := freeAddr(t), freeAddr(t)
	mock := start(t, "mock", bin, "mock", "--listen", mockAddr, "--script", filepath.Join(dir, "mock.yaml"))
	waitHTTP(t, mock, "http://"+mockAddr+"/_mock/health", nil)
	if err := os.MkdirAll(filepath.Join(dir, "policies"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("LISTEN", gwAddr, "ADMIN", adminToken, "DIR", dir, "MOCK", "http://"+mockAddr, "WASM", wasm).Replace(configTemplate)
	if err := os.WriteFile(filepath.Join(dir, "breakwater.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := start(t, "gateway", bin, "serve", "--config", filepath.Join(dir, "breakwater.yaml"))
	waitHTTP(t, serve, "http://"+gwAddr+"/api/version", http.Header{"Authorization": {"Bearer " + adminToken}})
	g := &gateway{t: t, url: "http://" + gwAddr, token: adminToken}

	// Traffic: a failed-over combo request (down 503, then alpha), beta's
	// two keys rate limited (cooldowns and model lockouts), broke out of
	// credit (a terminal state).
	if code := g.chat("smart"); code != 200 {
		t.Fatalf("combo smart: %d, want 200 after failing over from down to alpha", code)
	}
	if code := g.chat("beta/q1"); code != 429 {
		t.Fatalf("beta/q1: %d, want 429 (both keys rate limited)", code)
	}
	if code := g.chat("broke/b1"); code < 400 {
		t.Fatalf("broke/b1: %d, want an error", code)
	}
	for range 3 {
		g.chat("alpha/m1")
	}
	// beta/q1 again: both keys cool now, so this one skips them (skipped
	// candidates in the request log) and makes no attempt.
	if code := g.chat("beta/q1"); code < 400 {
		t.Fatalf("beta/q1 again: %d, want an error (both keys cooling)", code)
	}
	// Lockouts: beta's two keys on q1 (429) and down's d1 (503).
	if n := len(g.get("/api/resilience/model-cooldowns")["lockouts"].([]any)); n != 3 {
		t.Fatalf("%d lockouts, want 3", n)
	}

	b := newBrowser(t)

	// Sign in: a wrong token is refused and said so, the right one opens
	// the overview.
	if err := chromedpNavigate(b, g.url+"/dashboard"); err != nil {
		t.Fatal(err)
	}
	b.wait("login form", has("#token"), 10*time.Second)
	b.shot(shots, "login")
	b.expect("GET /api/console/state")
	b.set("#token", "not-the-token")
	b.click("#connect")
	b.wait("refusal", `document.getElementById('error').textContent.includes('refused')`, 5*time.Second)
	b.set("#token", adminToken)
	b.click("#connect")
	b.page("overview", has("[data-count=terminal]"))
	b.wait("live stream", `document.getElementById('live').classList.contains('on')`, 5*time.Second)
	if got := b.text("[data-count=terminal] .n"); got != "1" {
		t.Errorf("overview: %s terminal connection(s), want 1 (broke)", got)
	}
	if got := b.text("[data-count=lockouts] .n"); got != "3" {
		t.Errorf("overview: %s lockout(s), want 3", got)
	}
	if got := b.text("[data-count=cooling] .n"); got != "2" {
		t.Errorf("overview: %s cooling connection(s), want 2 (beta's keys)", got)
	}
	if !strings.Contains(b.text("#banner"), "down") {
		t.Errorf("the DEGRADED banner must name down (one failure of two): %q", b.text("#banner"))
	}
	b.clean("overview")

	step(t, b, g, "a failing provider shows as OPEN within 2 s", func(t *testing.T) {
		b.page("providers", has(`[data-provider="down"]`))
		// d2: d1 is locked out by the combo request's 503.
		if code := g.chat("down/d2"); code != 503 {
			t.Fatalf("down/d2: %d, want 503", code)
		}
		failed := time.Now()
		b.wait("down OPEN with its transition", has(`[data-provider="down"].state-open ol.timeline li.to-open`), 2*time.Second)
		if d := time.Since(failed); d > 2*time.Second {
			t.Fatalf("OPEN shown %v after the failure, want ≤ 2 s", d)
		}
		if st := path(g.get("/api/monitoring/health"), "providers", "down", "state"); st != "OPEN" {
			t.Fatalf("admin API: down is %v", st)
		}
		b.shot(shots, "providers")
		b.clean("providers")
	})

	step(t, b, g, "cooling and terminal connections: time left, backoff, last error, when and why", func(t *testing.T) {
		// gamma's key: a 429 without a Retry-After cools it by the
		// exponential backoff, which raises its level to 1.
		if code := g.chat("gamma/g1"); code != 429 {
			t.Fatalf("gamma/g1: %d, want 429", code)
		}
		b.page("providers", has(`[data-conn="beta/bq2"] [data-field=state] .countdown`)+" && "+has(`[data-conn="gamma/g1key"] [data-field=state] .countdown`))
		if c := g.apiConn("gamma", "g1key"); path(c, "backoff_level") != float64(1) {
			t.Errorf("admin API: gamma/g1key backoff level %v, want 1 after one 429 without a hint: %v", path(c, "backoff_level"), c)
		} else if got := b.text(`[data-conn="gamma/g1key"] [data-field=backoff]`); got != "1" {
			t.Errorf("gamma/g1key: backoff level %q on the page, 1 in the API", got)
		}
		// beta's keys cool for their Retry-After (60 s; an honoured hint
		// keeps the backoff level at 0).
		for _, conn := range []string{"bq1", "bq2"} {
			c, row := g.apiConn("beta", conn), `[data-conn="beta/`+conn+`"]`
			if got := b.text(row + " [data-field=backoff]"); got != "0" || path(c, "backoff_level") != float64(0) {
				t.Errorf("beta/%s: backoff level %q on the page, %v in the API, want 0", conn, got, path(c, "backoff_level"))
			}
			until := b.data(row+" [data-field=state] .countdown", "until")
			if !sameInstant(until, path(c, "rate_limited_until")) {
				t.Errorf("beta/%s: the page counts down to %v, the API says cooling until %v", conn, until, path(c, "rate_limited_until"))
			}
			shown := b.text(row + " [data-field=state] .countdown")
			left, ok := leftOnPage(shown)
			if apiLeft := path(c, "remaining_ms").(float64) / 1000; !ok || left <= 0 || left > 60 || math.Abs(left-apiLeft) > 3 {
				t.Errorf("beta/%s: %q left on the page, the API says %.1f s (of 60 s)", conn, shown, apiLeft)
			}
			lastErr := b.text(row + " [data-field=last-error]")
			if path(c, "error_code") != float64(429) || path(c, "last_error_type") != "rate_limit" || path(c, "last_error") == nil {
				t.Errorf("admin API: beta/%s last error %v/%v %q, want a 429 rate_limit with a message", conn, path(c, "error_code"), path(c, "last_error_type"), path(c, "last_error"))
			}
			for _, want := range []string{"rate_limit", "429", fmt.Sprint(path(c, "last_error"))} {
				if !strings.Contains(lastErr, want) {
					t.Errorf("beta/%s: last error %q on the page lacks %q", conn, lastErr, want)
				}
			}
		}
		// broke/b1key: out of credit, terminal since the 402, with the rule
		// that judged it.
		c, row := g.apiConn("broke", "b1key"), `[data-conn="broke/b1key"]`
		if path(c, "test_status") != "credits_exhausted" || path(c, "terminal_reason") == nil || path(c, "terminal_rule") == nil {
			t.Fatalf("admin API: broke/b1key %v, want credits_exhausted with a reason and a rule", c)
		}
		if !strings.Contains(b.js(`document.querySelector(`+q(row)+`).className`).(string), "row-terminal") {
			t.Errorf("broke/b1key is not shown as terminal")
		}
		if got := b.text(row + " [data-field=state]"); !strings.Contains(got, "credits_exhausted") {
			t.Errorf("broke/b1key state %q, want credits_exhausted", got)
		}
		if got := b.text(row + " [data-field=terminal-reason]"); got != path(c, "terminal_reason") {
			t.Errorf("broke/b1key: why %q on the page, %v in the API", got, path(c, "terminal_reason"))
		}
		if got := b.text(row + " [data-field=terminal-rule]"); got != path(c, "terminal_rule") {
			t.Errorf("broke/b1key: rule %q on the page, %v in the API", got, path(c, "terminal_rule"))
		}
		at := b.data(row+" [data-field=terminal-at]", "at")
		if !sameInstant(at, path(c, "terminal_at")) || b.text(row+" [data-field=terminal-at]") == "–" {
			t.Errorf("broke/b1key: terminal since %v (%q) on the page, %v in the API", at, b.text(row+" [data-field=terminal-at]"), path(c, "terminal_at"))
		}
		// The window gate is off in this configuration: the page says so.
		if got := b.data(`[data-provider="down"] [data-field=window-gate]`, "state"); got != "off" {
			t.Errorf("down's window gate shows %v, want off (provider_cooldown disabled)", got)
		}
		b.clean("cooling and terminal details")
	})

	step(t, b, g, "reset breaker", func(t *testing.T) {
		b.click(`[data-action="reset-breaker:down"]`)
		b.wait("down CLOSED", has(`[data-provider="down"].state-closed`), 3*time.Second)
		if st := path(g.get("/api/monitoring/health"), "providers", "down", "state"); st != "CLOSED" {
			t.Fatalf("admin API after reset: down is %v", st)
		}
	})

	step(t, b, g, "toggle rate-limit protection", func(t *testing.T) {
		b.click(`[data-action="protect:alpha/a1"]`)
		deadline := time.Now().Add(3 * time.Second)
		for {
			on := false
			for _, a := range g.get("/api/monitoring/health")["admission"].([]any) {
				if path(a, "provider") == "alpha" && path(a, "connection") == "a1" {
					on = path(a, "rate_limit_protection") == true
				}
			}
			if on {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("admin API: alpha/a1 rate_limit_protection still off")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	step(t, b, g, "per-model concurrency cap", func(t *testing.T) {
		form := `[data-caps="alpha/a1"]`
		b.wait("caps form", has(form), 5*time.Second)
		b.set(form+` select`, "m1")
		b.set(form+` input[data-path=cap]`, "3")
		b.click(form + ` button[type=submit]`)
		b.wait("cap shown", `document.querySelector('[data-caps-row="alpha/a1"]').innerText.includes('m1: 3')`, 5*time.Second)
		for _, c := range g.get("/api/resilience/model-concurrency")["connections"].([]any) {
			if path(c, "provider") == "alpha" && path(c, "connection") == "a1" && path(c, "caps", "m1") != float64(3) {
				t.Fatalf("admin API: alpha/a1 caps %v, want m1: 3", path(c, "caps"))
			}
		}
		b.wait("model gate listed", `document.body.innerText.includes('alpha / a1 / m1')`, 3*time.Second)
	})

	step(t, b, g, "model lockouts: re-enable one, then all", func(t *testing.T) {
		b.page("lockouts", has("[data-lockout]"))
		b.shot(shots, "lockouts")
		lockouts := g.get("/api/resilience/model-cooldowns")["lockouts"].([]any)
		before := len(lockouts)
		// Each lockout shows its reason (and status) and the time it has
		// left, as the admin API reports them.
		for _, l := range lockouts {
			ref := fmt.Sprintf("%v/%v/%v", path(l, "provider"), path(l, "connection"), path(l, "model"))
			row := `[data-lockout="` + ref + `"]`
			reason := b.text(row + " [data-field=reason]")
			if !strings.Contains(reason, fmt.Sprint(path(l, "reason"))) || (path(l, "status") != nil && !strings.Contains(reason, fmt.Sprint(path(l, "status")))) {
				t.Errorf("lockout %s: reason %q on the page, the API says %v %v", ref, reason, path(l, "reason"), path(l, "status"))
			}
			until := b.data(row+" [data-field=time-left] .countdown", "until")
			apiUntil, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(path(l, "expires_at")))
			left, ok := leftOnPage(b.text(row + " [data-field=time-left]"))
			if !sameInstant(until, path(l, "expires_at")) || !ok || left <= 0 || math.Abs(left-time.Until(apiUntil).Seconds()) > 3 {
				t.Errorf("lockout %s: %q left (until %v) on the page, the API says until %v", ref, b.text(row+" [data-field=time-left]"), until, path(l, "expires_at"))
			}
		}
		// beta's rate-limited keys: rate_limit 429 on q1; down's 503 on d1.
		for ref, want := range map[string]string{"beta/bq1/q1": "429", "beta/bq2/q1": "429", "down/d1key/d1": "503"} {
			if got := b.text(`[data-lockout="` + ref + `"] [data-field=reason]`); !strings.Contains(got, want) {
				t.Errorf("lockout %s: reason %q, want status %s", ref, got, want)
			}
		}
		b.click(`[data-action="reenable:beta/bq1/q1"]`)
		b.wait("one lockout fewer", fmt.Sprintf("document.querySelectorAll('[data-lockout]').length === %d", before-1), 3*time.Second)
		if has := b.text(`[data-lockout="beta/bq1/q1"]`); has != "" {
			t.Fatalf("beta/bq1/q1 still listed: %q", has)
		}
		if n := len(g.get("/api/resilience/model-cooldowns")["lockouts"].([]any)); n != before-1 {
			t.Fatalf("admin API: %d lockouts after re-enabling one of %d", n, before)
		}
		b.click(`[data-action="reenable-all"]`)
		b.wait("no lockout left", "document.querySelectorAll('[data-lockout]').length === 0", 3*time.Second)
		if n := len(g.get("/api/resilience/model-cooldowns")["lockouts"].([]any)); n != 0 {
			t.Fatalf("admin API: %d lockouts after re-enabling all, want 0", n)
		}
		b.clean("lockouts")
	})

	step(t, b, g, "clear a connection's cooldown", func(t *testing.T) {
		b.page("providers", has(`[data-conn="beta/bq1"]`))
		b.click(`[data-action="clear:beta/bq1"]`)
		b.wait("bq1 active", `document.querySelector('[data-conn="beta/bq1"]').innerText.includes('active')`, 3*time.Second)
		for _, c := range g.get("/api/resilience/cooldowns?provider=beta")["connections"].([]any) {
			if path(c, "connection") == "bq1" && path(c, "remaining_ms") != float64(0) {
				t.Fatalf("admin API: bq1 still cooling: %v", c)
			}
		}
		b.clean("providers actions")
	})

	step(t, b, g, "reset a terminal connection", func(t *testing.T) {
		b.click(`[data-action="reset-conn:broke/b1key"]`)
		b.wait("b1key active", `!document.querySelector('[data-conn="broke/b1key"]').classList.contains('row-terminal')`, 3*time.Second)
		if n := path(g.get("/api/monitoring/health"), "unavailable_connections"); n != float64(0) {
			t.Fatalf("admin API: %v terminal connections after the reset, want 0", n)
		}
	})

	step(t, b, g, "test a connection", func(t *testing.T) {
		b.page("providers", has(`[data-conn="alpha/a1"]`))
		b.click(`[data-action="test-conn:alpha/a1"]`)
		b.wait("a passed test's toast", `[...document.querySelectorAll('#toasts .toast.ok')].some((e) => e.innerText.startsWith('alpha/a1: test passed on m1 in '))`, 5*time.Second)
		// A failed test says why and records nothing.
		before := path(g.get("/api/monitoring/health"), "providers", "down", "failure_count")
		b.click(`[data-action="test-conn:down/d1key"]`)
		b.wait("a failed test's toast", `[...document.querySelectorAll('#toasts .toast.error')].some((e) => e.innerText.startsWith('down/d1key: test failed on d1: 503, '))`, 5*time.Second)
		if after := path(g.get("/api/monitoring/health"), "providers", "down", "failure_count"); after != before {
			t.Fatalf("admin API: down's breaker counted the failed test (%v failures, was %v)", after, before)
		}
		b.clean("connection test")
	})

	step(t, b, g, "window gate: counting, then cooling the provider", func(t *testing.T) {
		// provider_cooldown on at run time; down (profile local) cools for
		// 1 min after 2 failures within 5 min.
		if code, m := g.admin("PATCH", "/api/resilience", map[string]any{"provider_cooldown": map[string]any{"enabled": true}}); code != 200 {
			t.Fatalf("PATCH provider_cooldown.enabled: %d %v", code, m)
		}
		gate := `[data-provider="down"] [data-field=window-gate]`
		b.page("providers", has(gate))
		b.wait("window gate on", has(gate+`[data-state=open]`), 3*time.Second)
		if got := b.text(gate); !strings.Contains(got, "0/2 failures within 5 min 00 s") {
			t.Errorf("down's window gate: %q, want 0/2 failures within 5 min", got)
		}
		if code := g.chat("down/d1"); code != 503 {
			t.Fatalf("down/d1: %d, want 503", code)
		}
		b.wait("one failure counted", `document.querySelector(`+q(gate)+`).innerText.includes('1/2 failures')`, 3*time.Second)
		if code := g.chat("down/d2"); code != 503 {
			t.Fatalf("down/d2: %d, want 503", code)
		}
		b.wait("down cooling", has(gate+`[data-state=cooling] .countdown`), 3*time.Second)
		apiUntil := path(g.get("/api/monitoring/health"), "providers", "down", "cooling_until")
		until := b.data(gate+" .countdown", "until")
		left, ok := leftOnPage(b.text(gate + " .countdown"))
		if !sameInstant(until, apiUntil) || !ok || left <= 0 || left > 60 {
			t.Errorf("down's window gate: %q left until %v on the page, the API says until %v (1 min)", b.text(gate+" .countdown"), until, apiUntil)
		}
		if got := b.text(gate); !strings.Contains(got, "cools 1 min 00 s") {
			t.Errorf("down's window gate: %q, want a 1 min cooldown", got)
		}
		if code, m := g.admin("PATCH", "/api/resilience", map[string]any{"provider_cooldown": map[string]any{"enabled": false}}); code != 200 {
			t.Fatalf("PATCH provider_cooldown.enabled back off: %d %v", code, m)
		}
		b.wait("window gate off again", has(gate+`[data-state=off]`), 3*time.Second)
		b.clean("window gate")
	})

	step(t, b, g, "settings: a bad value is refused at the field, a good one saved", func(t *testing.T) {
		b.page("settings", has(`[data-card="combo"]`))
		field := `[data-card="combo"] [data-path="combo_cooldown_wait.max_wait_ms"]`
		b.expect("PATCH /api/resilience")
		b.set(field, "-5")
		b.click(`[data-action="save:combo"]`)
		b.wait("field error", has(`[data-card="combo"] [data-error-for="combo_cooldown_wait.max_wait_ms"]`), 3*time.Second)
		if v := path(g.get("/api/resilience"), "combo_cooldown_wait", "max_wait_ms"); v != float64(5000) {
			t.Fatalf("admin API after a bad value: max_wait_ms %v, want 5000 kept", v)
		}
		b.set(field, "4000")
		b.click(`[data-action="save:combo"]`)
		b.wait("error gone", hasNo(`[data-card="combo"] .field-error`), 3*time.Second)
		deadline := time.Now().Add(3 * time.Second)
		for path(g.get("/api/resilience"), "combo_cooldown_wait", "max_wait_ms") != float64(4000) {
			if time.Now().After(deadline) {
				t.Fatal("admin API: max_wait_ms not 4000 after saving")
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.wait("usage-wall opt-in shown", `document.querySelector('[data-wall="claude/c1key"]').innerText.includes('on')`, 3*time.Second)
		b.shot(shots, "settings")
		b.clean("settings")
	})

	step(t, b, g, "settings: the emergency-fallback flag flipped on the page", func(t *testing.T) {
		box := `[data-card="flags"] [data-path="emergency_fallback.enabled"]`
		b.wait("the flag's box", has(box), 3*time.Second)
		if b.js(`document.querySelector(`+q(box)+`).checked`) != false || path(g.get("/api/resilience"), "emergency_fallback", "enabled") != false {
			t.Fatal("emergency_fallback must start disabled (the configuration's default)")
		}
		for _, on := range []bool{true, false} {
			b.click(box)
			b.click(`[data-action="save:flags"]`)
			deadline := time.Now().Add(3 * time.Second)
			for path(g.get("/api/resilience"), "emergency_fallback", "enabled") != on {
				if time.Now().After(deadline) {
					t.Fatalf("admin API: emergency_fallback.enabled not %v after saving the page", on)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if got := path(g.get("/api/console/state"), "flags", "emergency_fallback"); got != on {
				t.Fatalf("admin API: console state flags.emergency_fallback %v, want %v", got, on)
			}
			b.wait(fmt.Sprintf("the box shows %v after the save", on), fmt.Sprintf(`document.querySelector(%s).checked === %v`, q(box), on), 3*time.Second)
		}
		b.clean("emergency flag")
	})

	step(t, b, g, "combos: edit with a bad then a good target, delete, create", func(t *testing.T) {
		b.page("combos", has(`[data-combo="spread"]`))
		if !strings.Contains(b.text(`[data-combo="spread"]`), "weighted") {
			t.Fatalf("combo spread card: %q", b.text(`[data-combo="spread"]`))
		}
		// beta/q1's keys: bq1 was cleared, bq2 still cools: the card says why.
		b.wait("exclusion reason", `document.querySelector('[data-combo="spread"] [data-target="beta/q1"]').innerText.includes('connection_cooldown')`, 3*time.Second)
		b.shot(shots, "combos")
		b.click(`[data-action="edit-combo:spread"]`)
		b.wait("editor", has("#combo-editor"), 3*time.Second)
		b.set("#combo-strategy", "round-robin")
		b.set(`[data-path="targets[1].model"]`, "beta/nope")
		b.expect("PUT /api/combos/spread")
		b.click("#combo-save")
		b.wait("target error", has(`[data-error-for="targets[1].model"]`), 3*time.Second)
		if path(g.get("/api/combos"), "combos", 1, "strategy") != "weighted" {
			t.Fatal("admin API: a refused edit changed the combo")
		}
		b.set(`[data-path="targets[1].model"]`, "beta/q1")
		b.click("#combo-save")
		b.wait("editor closed", hasNo("#combo-editor"), 3*time.Second)
		var spread any
		for _, c := range g.get("/api/combos")["combos"].([]any) {
			if path(c, "name") == "spread" {
				spread = c
			}
		}
		if path(spread, "strategy") != "round-robin" || path(spread, "source") != "api" {
			t.Fatalf("admin API after the edit: %v", spread)
		}
		b.wait("card updated", `document.querySelector('[data-combo="spread"]').innerText.includes('round-robin')`, 3*time.Second)
		b.click(`[data-action="delete-combo:spread"]`)
		b.wait("back to the file's combo", `document.querySelector('[data-combo="spread"]').innerText.includes('weighted')`, 3*time.Second)
		for _, c := range g.get("/api/combos")["combos"].([]any) {
			if path(c, "name") == "spread" && path(c, "source") != "config" {
				t.Fatalf("admin API after delete: %v", c)
			}
		}
		// Create one.
		b.click(`[data-action="new-combo"]`)
		b.wait("empty editor", has("#combo-editor #combo-name"), 3*time.Second)
		b.set("#combo-name", "e2e-new")
		b.set(`[data-path="targets[0].model"]`, "alpha/m2")
		b.click("#combo-save")
		b.wait("new combo listed", has(`[data-combo="e2e-new"]`), 3*time.Second)
		found := false
		for _, c := range g.get("/api/combos")["combos"].([]any) {
			found = found || (path(c, "name") == "e2e-new" && path(c, "targets", 0, "model") == "alpha/m2")
		}
		if !found {
			t.Fatal("admin API: the new combo e2e-new is missing")
		}
		b.clean("combos")
	})

	step(t, b, g, "policies: operator rule, explain, reload plugins", func(t *testing.T) {
		b.page("policies", has("#rules")+" && "+has(`[data-plugin="acme-quota"]`)+" && "+has(`#decision-log [data-field=recorded]`))
		// The decision log's status and its latest decisions, each with the
		// request it judged (the failed-over request's 503 among them).
		if got := b.text(`#decision-log [data-field=recorded]`); !strings.Contains(got, "recorded") {
			t.Fatalf("decision log status shows %q", got)
		}
		if got := b.text("#policy-decisions"); !strings.Contains(got, "down/d1key") {
			t.Fatalf("decision log card shows %q, want the down/d1key decision", got)
		}
		if got := b.text("#plugins"); !strings.Contains(strings.ToLower(got), "routing plugins") {
			t.Fatalf("the plugins card lacks the routing plugins: %q", got)
		}
		b.expect("PUT /api/policies/operator-rules")
		b.set("#rules", `[{"provider": "alpha", "status": 418, "reason": "bogus", "scope": "connection"}]`)
		b.click("#rules-save")
		b.wait("rule error", has(`#rules-form .field-error`), 3*time.Second)
		if n := len(g.get("/api/policies")["operator_rules"].([]any)); n != 0 {
			t.Fatalf("admin API: a refused rule list saved %d rules", n)
		}
		b.set("#rules", `[{"id": "e2e-teapot", "provider": "alpha", "status": 418, "match": "teapot", "reason": "rate_limit", "scope": "connection", "cooldown_ms": 7000}]`)
		b.click("#rules-save")
		b.wait("rule saved", hasNo(`#rules-form .field-error`)+" && document.getElementById('policy-status').innerText.includes('Operator rules')", 3*time.Second)
		if rules := g.get("/api/policies")["operator_rules"].([]any); len(rules) != 1 || path(rules, 0, "id") != "e2e-teapot" {
			t.Fatalf("admin API: operator rules %v; the page shows:\n%s", rules, b.text("#policy-rules"))
		}
		b.set("#ex-provider", "alpha")
		b.set("#ex-status", "418")
		b.set("#ex-body", "I am a teapot")
		b.click("#explain")
		b.wait("explanation", has(`#explain-result [data-field=rule]`), 3*time.Second)
		if got := b.text(`#explain-result`); !strings.Contains(got, "e2e-teapot") || !strings.Contains(got, "rate_limit") {
			t.Fatalf("explain shows %q, want rule e2e-teapot and reason rate_limit", got)
		}
		_, ex := g.admin("POST", "/api/policies/explain", map[string]any{"provider": "alpha", "status": 418, "body": "I am a teapot"})
		if ex["rule_id"] != "e2e-teapot" || ex["reason"] != "rate_limit" {
			t.Fatalf("admin API explain: %v", ex)
		}
		// A reload keeps an unchanged file's build: change the file (a
		// custom section, which runs the same) so the reload loads it anew.
		before := path(g.get("/api/plugins"), "plugins", 0, "sha256")
		f, err := os.OpenFile(wasm, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte{0x00, 0x09, 0x04, 'e', '2', 'e', '!', 'n', 'e', 'w', '!'}); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		b.click(`[data-action="reload-plugins"]`)
		deadline := time.Now().Add(10 * time.Second)
		for path(g.get("/api/plugins"), "plugins", 0, "sha256") == before {
			if time.Now().After(deadline) {
				t.Fatal("admin API: the plugin was not reloaded")
			}
			time.Sleep(100 * time.Millisecond)
		}
		after := fmt.Sprint(path(g.get("/api/plugins"), "plugins", 0, "sha256"))
		b.wait("reloaded plugin shown", fmt.Sprintf(`document.querySelector('[data-plugin="acme-quota"] [data-field=sha]').title === %q`, after), 5*time.Second)
		b.shot(shots, "policies")
		b.clean("policies")
	})

	step(t, b, g, "requests: the failed-over request and its attempts", func(t *testing.T) {
		b.page("requests", has("tr[data-seq]"))
		seq := ""
		for _, r := range g.get("/api/console/requests?limit=500")["requests"].([]any) {
			if path(r, "attempts") == float64(2) {
				seq = fmt.Sprint(path(r, "seq"))
			}
		}
		if seq == "" {
			t.Fatal("admin API: no request with 2 attempts in the request log")
		}
		b.click(`tr[data-seq="` + seq + `"]`)
		b.wait("detail", `document.getElementById('request-detail').innerText.includes('Request #`+seq+`')`, 3*time.Second)
		if got := b.text(`tr[data-seq="` + seq + `"] [data-field=attempts]`); got != "2" {
			t.Errorf("the failed-over request shows %q attempts, want 2", got)
		}
		b.shot(shots, "requests")
		b.clean("requests")
		b.wait("two attempts", "document.querySelectorAll('#attempts li').length === 2", 3*time.Second)
		first, second := b.text(`#attempts li[data-attempt="1"]`), b.text(`#attempts li[data-attempt="2"]`)
		if !strings.Contains(first, "down/d1key") || !strings.Contains(second, "alpha/") || !strings.Contains(second, "success") {
			t.Fatalf("attempts: %q, %q: want down failing then alpha succeeding", first, second)
		}
		// The request's policy decisions: the decision log's entry for the
		// failed attempt, found by the request's id.
		b.wait("the request's decisions", "document.querySelectorAll('#decisions li').length === 1", 3*time.Second)
		if got := b.text("#decisions"); !strings.Contains(got, "down/d1key") || !strings.Contains(got, "503") {
			t.Fatalf("decisions of the request: %q, want down/d1key's 503", got)
		}

		// The second beta/q1 request skipped both keys (cooling): its
		// detail lists each skip with its reason and the time it had left.
		seq = ""
		var skipped []any
		for _, r := range g.get("/api/console/requests?limit=500")["requests"].([]any) {
			if path(r, "model") == "beta/q1" && path(r, "attempts") == float64(0) {
				seq = fmt.Sprint(path(r, "seq"))
				skipped, _ = path(r, "skipped").([]any)
			}
		}
		if seq == "" || len(skipped) != 2 {
			t.Fatalf("admin API: the second beta/q1 request (seq %q) skipped %v, want bq1 and bq2", seq, skipped)
		}
		b.click(`tr[data-seq="` + seq + `"]`)
		b.wait("the skipped candidates", "document.querySelectorAll('#skipped li').length === 2", 3*time.Second)
		for _, sk := range skipped {
			sel := fmt.Sprintf(`#skipped li[data-skip="%v/%v/%v"]`, path(sk, "provider"), path(sk, "connection"), path(sk, "model"))
			reason := path(sk, "reason")
			if reason != "connection_cooldown" && reason != "model_lockout" {
				t.Errorf("admin API: skip %v, want a cooldown or lockout reason", sk)
			}
			if got := b.text(sel + " .badge"); got != reason {
				t.Errorf("%s: reason %q on the page, %v in the API", sel, got, reason)
			}
			left, ok := leftOnPage(strings.TrimSuffix(b.text(sel+" [data-field=time-left]"), " left"))
			apiLeft, _ := path(sk, "seconds_left").(float64)
			if !ok || left <= 0 || left > 120 || math.Abs(left-apiLeft) > 1.5 {
				t.Errorf("%s: time left %q, want the API's %.1f s", sel, b.text(sel+" [data-field=time-left]"), apiLeft)
			}
		}
		b.clean("requests: skipped candidates")
	})

	step(t, b, g, "overview charts", func(t *testing.T) {
		b.page("overview", has("[data-chart=rps] svg"))
		b.wait("a sample", "document.querySelector('[data-chart=rps] svg path.line') !== null", 12*time.Second)
		b.shot(shots, "overview")
		b.clean("overview charts")
	})

	step(t, b, g, "no secret in the page, the URLs or the console's API answers", func(t *testing.T) {
		var pages []string
		for _, name := range []string{"overview", "providers", "lockouts", "combos", "settings", "policies", "requests"} {
			b.page(name, "true")
			time.Sleep(200 * time.Millisecond)
			pages = append(pages, b.html())
		}
		if loc := fmt.Sprint(b.js("location.href")); strings.Contains(loc, adminToken) {
			t.Fatalf("the token is in the URL %s", loc)
		}
		b.mu.Lock()
		urls := strings.Join(b.urls, "\n")
		b.mu.Unlock()
		sources := map[string]string{"request URLs": urls, "event stream": g.events(1500 * time.Millisecond)}
		for i, p := range pages {
			sources[fmt.Sprint("page ", i)] = p
		}
		for _, p := range []string{"/dashboard", "/dashboard/assets/app.js", "/dashboard/assets/util.js"} {
			_, body := g.call("GET", p, "", nil)
			sources[p] = string(body)
		}
		for _, p := range []string{"/api/console/state", "/api/console/series", "/api/console/requests", "/api/console/combos",
			"/api/resilience", "/api/resilience/defaults", "/api/resilience/model-concurrency", "/api/monitoring/health",
			"/api/resilience/cooldowns", "/api/resilience/model-cooldowns", "/api/combos", "/api/policies", "/api/plugins"} {
			code, body := g.call("GET", p, adminToken, nil)
			if code != 200 {
				t.Fatalf("GET %s: %d", p, code)
			}
			sources[p] = string(body)
		}
		for where, text := range sources {
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("secret %q appears in %s", s, where)
				}
			}
		}
		b.clean("secret check")
	})

	step(t, b, g, "sign out", func(t *testing.T) {
		b.click("#logout")
		b.wait("login form", "!document.getElementById('login').hidden", 3*time.Second)
		if v := b.js("sessionStorage.length"); v != float64(0) {
			t.Fatalf("session storage keeps %v item(s) after signing out", v)
		}
		b.clean("sign out")
	})
}

// apiConn is one connection of GET /api/resilience/cooldowns.
func (g *gateway) apiConn(provider, conn string) any {
	g.t.Helper()
	for _, c := range g.get("/api/resilience/cooldowns?provider=" + provider)["connections"].([]any) {
		if path(c, "connection") == conn {
			return c
		}
	}
	g.t.Fatalf("admin API: no connection %s/%s in the cooldowns", provider, conn)
	return nil
}

// sameInstant reports that page and api are the same time, both in RFC 3339.
func sameInstant(page string, api any) bool {
	p, err1 := time.Parse(time.RFC3339Nano, page)
	a, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(api))
	return err1 == nil && err2 == nil && p.Equal(a)
}

// leftOnPage parses the time left a countdown shows ("58.3 s", "1 min 59 s")
// in seconds; ok is false for anything else.
func leftOnPage(s string) (float64, bool) {
	var m, sec float64
	if _, err := fmt.Sscanf(s, "%g min %g s", &m, &sec); err == nil {
		return m*60 + sec, true
	}
	if _, err := fmt.Sscanf(s, "%g s", &sec); err == nil {
		return sec, true
	}
	return 0, false
}

// step runs fn as a subtest whose failures the browser and gateway helpers
// report on the subtest.
func step(t *testing.T, b *browser, g *gateway, name string, fn func(t *testing.T)) {
	t.Run(name, func(st *testing.T) {
		b.t, g.t = st, st
		defer func() { b.t, g.t = t, t }()
		fn(st)
	})
}
