package usagewall_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine/usagewall"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// The end-to-end tests drive the Wall against the mock upstream the way the
// request path does: they execute every Decision, waiting on a fake clock.

var e2eStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// windowReset is 17:00 of e2eStart's day, the announced window reset.
const windowReset = "1772384400"

const wallStep = `
      - status: 429
        headers:
          anthropic-ratelimit-unified-status: rejected
          anthropic-ratelimit-unified-slow-offer: treatment
          anthropic-ratelimit-unified-reset: "` + windowReset + `"`

type driver struct {
	t      *testing.T
	srv    *mock.Server
	base   string
	client *http.Client
	clk    *clocktest.Clock
	wall   *usagewall.Wall
	cfg    usagewall.Config
}

func newDriver(t *testing.T, cfg usagewall.Config, script string) *driver {
	t.Helper()
	sc, err := mock.ParseScript([]byte(script))
	if err != nil {
		t.Fatalf("script: %v", err)
	}
	srv := mock.New(sc, nil)
	addr, err := srv.Start("")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(func() {
		_ = srv.Close()
		tr.CloseIdleConnections()
	})
	clk := clocktest.NewClock(e2eStart)
	return &driver{t: t, srv: srv, base: "http://" + addr, client: &http.Client{Transport: tr},
		clk: clk, wall: usagewall.New(clk, func() float64 { return 0.5 }), cfg: cfg}
}

func (d *driver) do(method, path string, hdr map[string]string, body []byte) (int, map[string]string, []byte) {
	d.t.Helper()
	req, err := http.NewRequest(method, d.base+path, bytes.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer oauth-token")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	h := make(map[string]string, len(resp.Header))
	for k, v := range resp.Header {
		h[strings.ToLower(k)] = v[0]
	}
	return resp.StatusCode, h, data
}

// request sends one client request through the wall and returns the final
// upstream status and the trace of decisions (action names, with the end
// reason or wait).
func (d *driver) request() (int, []string) {
	d.t.Helper()
	const conn = "claude-1"
	var trace []string
	body := []byte(`{"model":"claude-sonnet-4","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	for attempt := 0; attempt < 20; attempt++ {
		hdr := d.wall.RequestHeaders(conn, d.cfg)
		status, h, _ := d.do(http.MethodPost, "/v1/messages", hdr, body)
		resp := usagewall.Response{Status: status, Header: h, Slow: hdr != nil}
		dec := d.wall.OnResponse(conn, d.cfg, resp)
		if dec.Action == usagewall.ActionTryReset {
			trace = append(trace, dec.Action.String())
			dec = d.wall.OnResetResult(conn, d.cfg, resp, d.resetFlow())
		}
		switch dec.Action {
		case usagewall.ActionNone:
			return status, trace
		case usagewall.ActionEnded:
			return status, append(trace, "ended:"+dec.EndReason)
		case usagewall.ActionRetry:
			trace = append(trace, "retry")
		case usagewall.ActionWaitAndRetry:
			trace = append(trace, "wait:"+dec.Wait.String())
			d.clk.Advance(dec.Wait)
		}
	}
	d.t.Fatalf("no end after 20 attempts: %v", trace)
	return 0, nil
}

func (d *driver) resetFlow() usagewall.ResetOutcome {
	status, h, body := d.do(http.MethodGet, usagewall.UsageProbePath(), nil, nil)
	u, err := usagewall.ParseUsage(status, h, body)
	if err != nil {
		return usagewall.ResetOutcome{Err: err}
	}
	if !u.Claimable() {
		return u.Outcome()
	}
	org, ok := u.ResetOrg(d.cfg)
	if !ok {
		return usagewall.ResetOutcome{Err: errors.New("no organization")}
	}
	status, _, body = d.do(http.MethodPost, usagewall.ResetPath(org), nil, usagewall.ResetBody())
	return usagewall.ParseResetResponse(status, body)
}

func check(t *testing.T, status int, trace []string, wantStatus int, want string) {
	t.Helper()
	if got := strings.Join(trace, " "); status != wantStatus || got != want {
		t.Fatalf("status %d trace %q, want %d %q", status, got, wantStatus, want)
	}
}

func TestE2ELaneWithBusySlot(t *testing.T) {
	d := newDriver(t, usagewall.Config{LowPriorityMode: true}, `
rules:
  - header: anthropic-usage-limit=slow
    responses:
      - status: 429
        headers: {anthropic-ratelimit-unified-slow-status: slot_busy, anthropic-ratelimit-unified-slow-retry-after: "2"}
      - status: 200
        headers: {anthropic-ratelimit-unified-slow-status: active, anthropic-ratelimit-unified-reset: "`+windowReset+`"}
  - responses:`+wallStep)
	status, trace := d.request()
	check(t, status, trace, 200, "retry wait:5s")
	// Every later request of the window carries the header: straight to the lane.
	status, trace = d.request()
	check(t, status, trace, 200, "")
	// After reset + 60 s the header stops; the wall is met (and accepted) again.
	d.clk.Set(time.Unix(1772384400, 0).Add(usagewall.ResetGrace))
	if h := d.wall.RequestHeaders("claude-1", d.cfg); h != nil {
		t.Fatalf("header after the window: %v", h)
	}
}

func TestE2ELaneEnds(t *testing.T) {
	tests := []struct {
		name       string
		laneStep   string
		wantStatus int
		wantTrace  string
	}{
		{"weekly_limit", `{status: 429, headers: {anthropic-ratelimit-unified-slow-status: weekly_limit}}`, 429, "retry ended:weekly_limit"},
		{"extra usage", `{status: 429, headers: {anthropic-ratelimit-unified-slow-status: ineligible, anthropic-ratelimit-unified-overage-in-use: "true"}}`, 429, "retry ended:extra_usage"},
		{"max_wait on 529s", `{status: 529, headers: {anthropic-ratelimit-unified-slow-retry-after: "30", anthropic-ratelimit-unified-slow-max-wait: "60"}}`,
			529, "retry wait:30s wait:30s ended:max_wait"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, usagewall.Config{LowPriorityMode: true}, `
rules:
  - header: anthropic-usage-limit=slow
    responses: [`+tc.laneStep+`]
  - responses:`+wallStep)
			status, trace := d.request()
			check(t, status, trace, tc.wantStatus, tc.wantTrace)
			if h := d.wall.RequestHeaders("claude-1", d.cfg); h != nil {
				t.Fatalf("lane still active: %v", h)
			}
		})
	}
}

func TestE2EResetBeforeLane(t *testing.T) {
	both := usagewall.Config{LowPriorityMode: true, AutoLimitReset: true, OrgUUID: "org-1"}
	t.Run("reset works: full speed", func(t *testing.T) {
		d := newDriver(t, both, `
rules:
  - path: /v1/messages
    responses:`+wallStep+`
      - {status: 200}
  - path: /api/organizations/org-1/reset_rate_limits
    responses: [{result: reset}]
`)
		status, trace := d.request()
		check(t, status, trace, 200, "try_reset retry")
		if st := d.srv.Stats(); st.UsageProbes != 1 || st.ResetClaims != 1 {
			t.Fatalf("stats = %+v", st)
		}
		if h := d.wall.RequestHeaders("claude-1", d.cfg); h != nil {
			t.Fatalf("slow header after a reset: %v", h)
		}
	})
	t.Run("no organization configured: the probe's header names it", func(t *testing.T) {
		d := newDriver(t, usagewall.Config{LowPriorityMode: true, AutoLimitReset: true}, `
rules:
  - path: /v1/messages
    responses:`+wallStep+`
      - {status: 200}
  - path: /api/oauth/usage
    responses: [{organization_id: org-from-probe}]
  - path: /api/organizations/org-from-probe/reset_rate_limits
    responses: [{result: reset}]
  - path: /api/organizations/*/reset_rate_limits
    responses: [{status: 404}]
`)
		status, trace := d.request()
		check(t, status, trace, 200, "try_reset retry")
		if st := d.srv.Stats(); st.UsageProbes != 1 || st.ResetClaims != 1 {
			t.Fatalf("stats = %+v", st)
		}
		if s := d.wall.State("claude-1"); s.LastResetResult != usagewall.ResultReset {
			t.Fatalf("state = %+v, want a reset claimed for the probe's organization", s)
		}
	})
	t.Run("no organization anywhere: the flow fails, then the lane", func(t *testing.T) {
		d := newDriver(t, usagewall.Config{LowPriorityMode: true, AutoLimitReset: true}, `
rules:
  - header: anthropic-usage-limit=slow
    responses: [{status: 200, headers: {anthropic-ratelimit-unified-slow-status: active}}]
  - path: /v1/messages
    responses:`+wallStep+`
  - path: /api/oauth/usage
    responses: [{organization_id: ""}]
`)
		status, trace := d.request()
		check(t, status, trace, 200, "try_reset retry")
		if st := d.srv.Stats(); st.ResetClaims != 0 {
			t.Fatalf("a claim without an organization: %+v", st)
		}
		if s := d.wall.State("claude-1"); s.LastResetResult != usagewall.ResetFailed || !s.LaneActive {
			t.Fatalf("state = %+v, want a failed reset and the lane", s)
		}
	})
	t.Run("already used: remembered, then the lane", func(t *testing.T) {
		d := newDriver(t, both, `
rules:
  - header: anthropic-usage-limit=slow
    responses: [{status: 200, headers: {anthropic-ratelimit-unified-slow-status: active}}]
  - path: /v1/messages
    responses:`+wallStep+`
  - path: /api/oauth/usage
    responses: [{juniper_tide: {arm: reset, available: false, next_available_at: "2026-03-01T14:00:00Z"}}]
`)
		status, trace := d.request()
		check(t, status, trace, 200, "try_reset retry")
		if st := d.srv.Stats(); st.UsageProbes != 1 || st.ResetClaims != 0 {
			t.Fatalf("stats = %+v", st)
		}
		s := d.wall.State("claude-1")
		if !s.LaneActive || !s.ResetNextAvailableAt.Equal(e2eStart.Add(2*time.Hour)) || s.LastResetResult != usagewall.ResultAlreadyUsed {
			t.Fatalf("state = %+v", s)
		}
	})
	t.Run("claim fails: 15 min back-off, then the lane", func(t *testing.T) {
		d := newDriver(t, both, `
rules:
  - header: anthropic-usage-limit=slow
    responses: [{status: 200, headers: {anthropic-ratelimit-unified-slow-status: active}}]
  - path: /v1/messages
    responses:`+wallStep+`
  - path: /api/organizations/*/reset_rate_limits
    responses: [{status: 500}]
`)
		status, trace := d.request()
		check(t, status, trace, 200, "try_reset retry")
		if s := d.wall.State("claude-1"); !s.ResetBackoffUntil.Equal(e2eStart.Add(15*time.Minute)) || s.LastResetResult != usagewall.ResetFailed {
			t.Fatalf("state = %+v", s)
		}
	})
}
