package usagewall

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const conn = "claude-oauth-1"

var (
	laneOn  = Config{LowPriorityMode: true}
	resetOn = Config{AutoLimitReset: true, OrgUUID: "org-1"}
	bothOn  = Config{LowPriorityMode: true, AutoLimitReset: true, OrgUUID: "org-1"}
)

// fixedRand returns its values in turn, then 0.5 (no jitter) forever.
type fixedRand struct {
	vals []float64
	n    int
}

func (f *fixedRand) next() float64 {
	if f.n < len(f.vals) {
		f.n++
		return f.vals[f.n-1]
	}
	return 0.5
}

func newWall(vals ...float64) (*Wall, *clocktest.Clock) {
	clk := clocktest.NewClock(t0)
	r := &fixedRand{vals: vals}
	return New(clk, r.next), clk
}

func epoch(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func hdr(kv ...string) map[string]string {
	h := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

// wallResp is the wall 429: rejected, lane offered, window resetting at reset.
func wallResp(reset time.Time, kv ...string) Response {
	h := hdr(HeaderStatus, StatusRejected, HeaderSlowOffer, OfferTreatment, HeaderReset, epoch(reset))
	for k, v := range hdr(kv...) {
		h[k] = v
	}
	return Response{Status: 429, Header: h}
}

// laneResp is an answer to a lane request.
func laneResp(status int, slowStatus string, kv ...string) Response {
	h := hdr(kv...)
	if slowStatus != "" {
		h[HeaderSlowStatus] = slowStatus
	}
	return Response{Status: status, Header: h, Slow: true}
}

func wantDecision(t *testing.T, got Decision, want Decision) {
	t.Helper()
	if got != want {
		t.Fatalf("decision = %+v (%v), want %+v (%v)", got, got.Action, want, want.Action)
	}
}

func wantSlow(t *testing.T, w *Wall, cfg Config, want bool) {
	t.Helper()
	h := w.RequestHeaders(conn, cfg)
	if want && (len(h) != 1 || h[HeaderUsageLimit] != UsageLimitSlow) {
		t.Fatalf("RequestHeaders = %v, want anthropic-usage-limit: slow", h)
	}
	if !want && h != nil {
		t.Fatalf("RequestHeaders = %v, want none", h)
	}
}

// accept opens the lane with a window resetting 2 h from now.
func accept(t *testing.T, w *Wall, clk *clocktest.Clock) time.Time {
	t.Helper()
	reset := clk.Now().Add(2 * time.Hour)
	wantDecision(t, w.OnResponse(conn, laneOn, wallResp(reset)), Decision{Action: ActionRetry})
	wantSlow(t, w, laneOn, true)
	return reset
}

func TestTrigger(t *testing.T) {
	reset := t0.Add(time.Hour)
	tests := []struct {
		name string
		cfg  Config
		resp Response
		want Action
		slow bool
	}{
		{"200 before any wall", laneOn, Response{Status: 200, Header: hdr(HeaderStatus, "allowed")}, ActionNone, false},
		{"burst 429 without unified headers", laneOn, Response{Status: 429, Header: hdr("retry-after", "3")}, ActionNone, false},
		{"429 unified allowed_warning", laneOn, Response{Status: 429, Header: hdr(HeaderStatus, "allowed_warning", HeaderSlowOffer, OfferTreatment)}, ActionNone, false},
		{"rejected on a non-429", laneOn, Response{Status: 200, Header: hdr(HeaderStatus, StatusRejected, HeaderSlowOffer, OfferTreatment)}, ActionNone, false},
		{"wall with lane off", Config{}, wallResp(reset), ActionNone, false},
		{"wall without the offer", laneOn, Response{Status: 429, Header: hdr(HeaderStatus, StatusRejected, HeaderReset, epoch(reset))}, ActionNone, false},
		{"wall with offer control", laneOn, wallResp(reset, HeaderSlowOffer, "control"), ActionNone, false},
		{"wall with offer: lane accepted", laneOn, wallResp(reset), ActionRetry, true},
		{"header values are case-insensitive", laneOn, wallResp(reset, HeaderStatus, " Rejected ", HeaderSlowOffer, "TREATMENT"), ActionRetry, true},
		{"reset on without an org: the reset is tried (the probe names the org)", Config{LowPriorityMode: true, AutoLimitReset: true}, wallResp(reset), ActionTryReset, false},
		{"reset on, lane off", resetOn, wallResp(reset), ActionTryReset, false},
		{"both on: reset first", bothOn, wallResp(reset), ActionTryReset, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := newWall()
			wantSlow(t, w, tc.cfg, false)
			wantDecision(t, w.OnResponse(conn, tc.cfg, tc.resp), Decision{Action: tc.want})
			wantSlow(t, w, tc.cfg, tc.slow)
			if other := w.RequestHeaders("other-conn", tc.cfg); other != nil {
				t.Fatalf("lane leaked to another connection: %v", other)
			}
		})
	}
}

func TestLaneLifetime(t *testing.T) {
	w, clk := newWall()
	reset := accept(t, w, clk)
	s := w.State(conn)
	if !s.LaneActive || !s.WindowReset.Equal(reset) || !s.LaneUntil.Equal(reset.Add(60*time.Second)) {
		t.Fatalf("state = %+v, want lane until reset+60s", s)
	}
	for _, ss := range []string{SlowActive, SlowNotNeeded} {
		wantDecision(t, w.OnResponse(conn, laneOn, laneResp(200, ss, HeaderReset, epoch(reset))), Decision{})
		wantSlow(t, w, laneOn, true)
	}
	clk.Set(reset.Add(59 * time.Second))
	wantSlow(t, w, laneOn, true)
	clk.Set(reset.Add(60 * time.Second))
	wantSlow(t, w, laneOn, false)
	if s := w.State(conn); s.LaneActive || s.LastEndReason != EndExpired || !s.LastEndAt.Equal(reset.Add(60*time.Second)) {
		t.Fatalf("state = %+v, want ended expired", s)
	}
	// After expiry a new wall is accepted again (no cool-off).
	accept(t, w, clk)
}

func TestLaneWindowFallback(t *testing.T) {
	tests := []struct {
		name      string
		reset     string
		wantUntil time.Time
	}{
		{"no reset header", "", t0.Add(DefaultWindow + ResetGrace)},
		{"reset long past", epoch(t0.Add(-2 * time.Minute)), t0.Add(DefaultWindow + ResetGrace)},
		{"reset inside the grace", epoch(t0.Add(-30 * time.Second)), t0.Add(30 * time.Second)},
		{"rfc3339 reset", t0.Add(time.Hour).Format(time.RFC3339), t0.Add(time.Hour + ResetGrace)},
		{"epoch milliseconds", strconv.FormatInt(t0.Add(time.Hour).UnixMilli(), 10), t0.Add(time.Hour + ResetGrace)},
		{"garbage", "soon", t0.Add(DefaultWindow + ResetGrace)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := newWall()
			r := wallResp(t0)
			r.Header[HeaderReset] = tc.reset
			wantDecision(t, w.OnResponse(conn, laneOn, r), Decision{Action: ActionRetry})
			if s := w.State(conn); !s.LaneUntil.Equal(tc.wantUntil) {
				t.Fatalf("LaneUntil = %v, want %v", s.LaneUntil, tc.wantUntil)
			}
		})
	}
}

func TestLaneFallbackWindowAdoptsAnnouncedReset(t *testing.T) {
	w, clk := newWall()
	r := wallResp(t0)
	delete(r.Header, HeaderReset)
	wantDecision(t, w.OnResponse(conn, laneOn, r), Decision{Action: ActionRetry})
	real := t0.Add(6 * time.Hour) // later than the 5 h fallback: not a new window
	wantDecision(t, w.OnResponse(conn, laneOn, laneResp(200, SlowActive, HeaderReset, epoch(real))), Decision{})
	if s := w.State(conn); !s.LaneUntil.Equal(real.Add(ResetGrace)) {
		t.Fatalf("LaneUntil = %v, want the announced reset + 60s", s.LaneUntil)
	}
	clk.Set(real.Add(ResetGrace - time.Second))
	wantSlow(t, w, laneOn, true)
}

func TestLaneEnds(t *testing.T) {
	tests := []struct {
		name string
		resp func(reset time.Time) Response
		want string
	}{
		{"weekly_limit", func(time.Time) Response { return laneResp(429, SlowWeeklyLimit) }, EndWeeklyLimit},
		{"budget_exhausted", func(time.Time) Response { return laneResp(429, SlowBudgetExhausted) }, EndBudgetExhausted},
		{"off", func(time.Time) Response { return laneResp(429, SlowOff) }, EndOff},
		{"ineligible", func(time.Time) Response { return laneResp(429, SlowIneligible) }, EndIneligible},
		{"ineligible with overage false", func(time.Time) Response {
			return laneResp(429, SlowIneligible, HeaderOverageInUse, "false")
		}, EndIneligible},
		{"ineligible with overage in use", func(time.Time) Response {
			return laneResp(200, SlowIneligible, HeaderOverageInUse, "true")
		}, EndExtraUsage},
		{"new 5-hour window", func(reset time.Time) Response {
			return laneResp(200, SlowActive, HeaderReset, epoch(reset.Add(5*time.Hour)))
		}, EndNewWindow},
		{"new window on a request sent without the header", func(reset time.Time) Response {
			return Response{Status: 200, Header: hdr(HeaderReset, epoch(reset.Add(5*time.Hour)))}
		}, EndNewWindow},
		{"ending status on a non-lane response", func(time.Time) Response {
			return Response{Status: 429, Header: hdr(HeaderSlowStatus, SlowOff)}
		}, EndOff},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, clk := newWall()
			reset := accept(t, w, clk)
			clk.Advance(time.Minute)
			wantDecision(t, w.OnResponse(conn, laneOn, tc.resp(reset)), Decision{Action: ActionEnded, EndReason: tc.want})
			wantSlow(t, w, laneOn, false)
			s := w.State(conn)
			if s.LaneActive || s.LastEndReason != tc.want || !s.LastEndAt.Equal(t0.Add(time.Minute)) {
				t.Fatalf("state = %+v", s)
			}
			if !s.CoolOffUntil.IsZero() {
				t.Fatalf("%s must not start the max_wait cool-off: %+v", tc.want, s)
			}
		})
	}
}

func TestEndedLaneCanBeReacceptedExceptBudget(t *testing.T) {
	for _, ss := range []string{SlowWeeklyLimit, SlowOff, SlowIneligible} {
		t.Run(ss, func(t *testing.T) {
			w, clk := newWall()
			accept(t, w, clk)
			w.OnResponse(conn, laneOn, laneResp(429, ss))
			clk.Advance(time.Second)
			accept(t, w, clk)
		})
	}
}

func TestBudgetExhaustedRemembered(t *testing.T) {
	tests := []struct {
		name      string
		announced string
		wantUntil time.Duration // from the end
	}{
		{"announced in 3 days", epoch(t0.Add(time.Minute + 72*time.Hour)), 72 * time.Hour},
		{"announced in 30 days: capped at 8", epoch(t0.Add(30 * 24 * time.Hour)), 8 * 24 * time.Hour},
		{"not announced: 8 days", "", 8 * 24 * time.Hour},
		{"announced in the past: 8 days", epoch(t0.Add(-time.Hour)), 8 * 24 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, clk := newWall()
			accept(t, w, clk)
			clk.Advance(time.Minute)
			ended := clk.Now()
			wantDecision(t, w.OnResponse(conn, laneOn, laneResp(429, SlowBudgetExhausted, HeaderSlowBudgetReset, tc.announced)),
				Decision{Action: ActionEnded, EndReason: EndBudgetExhausted})
			if s := w.State(conn); !s.BudgetExhaustedUntil.Equal(ended.Add(tc.wantUntil)) {
				t.Fatalf("BudgetExhaustedUntil = %v, want %v", s.BudgetExhaustedUntil, ended.Add(tc.wantUntil))
			}
			clk.Set(ended.Add(tc.wantUntil - time.Second))
			wantDecision(t, w.OnResponse(conn, laneOn, wallResp(clk.Now().Add(time.Hour))), Decision{})
			wantSlow(t, w, laneOn, false)
			clk.Set(ended.Add(tc.wantUntil))
			accept(t, w, clk)
		})
	}
}

func TestSlotBusyWait(t *testing.T) {
	tests := []struct {
		name      string
		resp      Response
		r         float64
		want      time.Duration
		remaining time.Duration
		wantEnded bool
	}{
		{name: "default 20 s, no jitter", resp: laneResp(429, SlowSlotBusy), r: 0.5, want: 20 * time.Second},
		{name: "default 20 s, lowest jitter", resp: laneResp(429, SlowSlotBusy), r: 0, want: 14 * time.Second},
		{name: "2 s clamps to 5 s, lowest", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "2"), r: 0, want: 3500 * time.Millisecond},
		{name: "2 s clamps to 5 s, middle", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "2"), r: 0.5, want: 5 * time.Second},
		{name: "2 s clamps to 5 s, top", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "2"), r: 0.75, want: 5*time.Second + 750*time.Millisecond},
		{name: "900 s clamps to 600 s", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "900", HeaderSlowMaxWait, "3600"), r: 0.5, want: 600 * time.Second},
		{name: "900 s clamps to 600 s, highest", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "900", HeaderSlowMaxWait, "3600"), r: 1, want: 780 * time.Second},
		{name: "decimal seconds", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "7.5"), r: 0.5, want: 7500 * time.Millisecond},
		{name: "garbage retry-after: default", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "soon"), r: 0.5, want: 20 * time.Second},
		{name: "529 waits too", resp: laneResp(529, ""), r: 0.5, want: 20 * time.Second},
		{name: "529 with slot_busy", resp: laneResp(529, SlowSlotBusy, HeaderSlowRetryAfter, "30"), r: 0.5, want: 30 * time.Second},
		{name: "start timeout leaves room", resp: laneResp(429, SlowSlotBusy), r: 0.5, want: 20 * time.Second, remaining: 25 * time.Second},
		{name: "start timeout minus 5 s too short", resp: laneResp(429, SlowSlotBusy), r: 0.5, remaining: 25*time.Second - time.Millisecond, wantEnded: true},
		{name: "start timeout ran out", resp: laneResp(429, SlowSlotBusy), r: 0.5, remaining: -time.Second, wantEnded: true},
		{name: "max-wait 10 s clamps to 1 min: 60 s fits", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "60", HeaderSlowMaxWait, "10"), r: 0.5, want: 60 * time.Second},
		{name: "max-wait 10 s clamps to 1 min: 61 s does not", resp: laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "61", HeaderSlowMaxWait, "10"), r: 0.5, wantEnded: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, clk := newWall(tc.r)
			accept(t, w, clk)
			resp := tc.resp
			resp.RemainingStart = tc.remaining
			d := w.OnResponse(conn, laneOn, resp)
			if tc.wantEnded {
				wantDecision(t, d, Decision{Action: ActionEnded, EndReason: EndMaxWait})
				wantSlow(t, w, laneOn, false)
				return
			}
			wantDecision(t, d, Decision{Action: ActionWaitAndRetry, Wait: tc.want})
			wantSlow(t, w, laneOn, true)
		})
	}
}

func TestSlotBusyJitterBounds(t *testing.T) {
	// A seeded source: every wait stays inside the ±30 % band of the
	// clamped retry-after and the draws actually spread over it.
	tests := []struct {
		retryAfter string
		base       time.Duration
	}{
		{"", 20 * time.Second},
		{"2", 5 * time.Second},
		{"900", 600 * time.Second},
		{"45", 45 * time.Second},
	}
	for _, tc := range tests {
		t.Run("retry-after="+tc.retryAfter, func(t *testing.T) {
			clk := clocktest.NewClock(t0)
			w := New(clk, rand.New(rand.NewPCG(7, 11)).Float64)
			lo, hi := tc.base*7/10, tc.base*13/10
			var minW, maxW time.Duration = hi, lo
			for i := 0; i < 200; i++ {
				w.Forget(conn)
				accept(t, w, clk)
				d := w.OnResponse(conn, laneOn, laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, tc.retryAfter, HeaderSlowMaxWait, "21600"))
				if d.Action != ActionWaitAndRetry || d.Wait < lo || d.Wait > hi {
					t.Fatalf("draw %d: %+v, want a wait in [%v, %v]", i, d, lo, hi)
				}
				minW, maxW = min(minW, d.Wait), max(maxW, d.Wait)
			}
			if spread := tc.base / 2; maxW-minW < spread {
				t.Fatalf("waits in [%v, %v]: jitter does not spread over ±30 %% of %v", minW, maxW, tc.base)
			}
		})
	}
}

func TestMaxWaitStreakAndCoolOff(t *testing.T) {
	w, clk := newWall()
	accept(t, w, clk)
	busy := laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "300")
	// 20 min default max wait: waits of 300 s at 0, 5, 10 min fit (they end
	// at 5, 10, 15 min) and the one asked at 15 min ends exactly at 20 min.
	for i := 0; i < 4; i++ {
		wantDecision(t, w.OnResponse(conn, laneOn, busy), Decision{Action: ActionWaitAndRetry, Wait: 300 * time.Second})
		if s := w.State(conn); !s.BusySince.Equal(t0) {
			t.Fatalf("BusySince = %v, want the streak start %v", s.BusySince, t0)
		}
		clk.Advance(300 * time.Second)
	}
	// At 20 min nothing fits any more.
	ended := clk.Now()
	wantDecision(t, w.OnResponse(conn, laneOn, busy), Decision{Action: ActionEnded, EndReason: EndMaxWait})
	wantSlow(t, w, laneOn, false)
	s := w.State(conn)
	if !s.CoolOffUntil.Equal(ended.Add(10*time.Minute)) || s.LastEndReason != EndMaxWait || !s.BusySince.IsZero() {
		t.Fatalf("state = %+v, want a 10-minute cool-off", s)
	}
	// The cool-off blocks re-accepting at 9:59 and allows it at 10:00.
	clk.Set(ended.Add(10*time.Minute - time.Second))
	wantDecision(t, w.OnResponse(conn, laneOn, wallResp(clk.Now().Add(time.Hour))), Decision{})
	wantSlow(t, w, laneOn, false)
	clk.Set(ended.Add(10 * time.Minute))
	accept(t, w, clk)
}

func TestBusyStreakClearedByProgress(t *testing.T) {
	for _, ok := range []Response{laneResp(200, SlowActive), laneResp(200, SlowNotNeeded), laneResp(200, "")} {
		w, clk := newWall()
		accept(t, w, clk)
		busy := laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "600")
		wantDecision(t, w.OnResponse(conn, laneOn, busy), Decision{Action: ActionWaitAndRetry, Wait: 600 * time.Second})
		clk.Advance(15 * time.Minute)
		wantDecision(t, w.OnResponse(conn, laneOn, ok), Decision{})
		if s := w.State(conn); !s.BusySince.IsZero() {
			t.Fatalf("%+v did not clear the busy streak: %+v", ok, s)
		}
		// A fresh streak may wait 600 s again (15 min + 10 min would not fit).
		wantDecision(t, w.OnResponse(conn, laneOn, busy), Decision{Action: ActionWaitAndRetry, Wait: 600 * time.Second})
	}
}

func TestLaneOtherAnswersKeepLane(t *testing.T) {
	tests := []struct {
		name string
		resp Response
	}{
		{"wall without lane status on a lane request", Response{Status: 429, Slow: true, Header: hdr(HeaderStatus, StatusRejected, HeaderSlowOffer, OfferTreatment)}},
		{"burst 429 on a lane request", Response{Status: 429, Slow: true}},
		{"slot_busy on a 200", laneResp(200, SlowSlotBusy)},
		{"500 on a lane request", laneResp(500, "")},
		{"unknown lane status", laneResp(429, "mystery")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, clk := newWall()
			accept(t, w, clk)
			wantDecision(t, w.OnResponse(conn, laneOn, tc.resp), Decision{})
			wantSlow(t, w, laneOn, true)
		})
	}
}

func TestRequestOutsideLaneJoinsIt(t *testing.T) {
	w, clk := newWall()
	reset := accept(t, w, clk)
	clk.Advance(time.Second)
	// A request sent before the lane opened hits the same wall: retry it in
	// the lane; the lane's window is unchanged.
	wantDecision(t, w.OnResponse(conn, laneOn, wallResp(reset, HeaderSlowOffer, "")), Decision{Action: ActionRetry})
	if s := w.State(conn); !s.LaneUntil.Equal(reset.Add(ResetGrace)) {
		t.Fatalf("LaneUntil = %v", s.LaneUntil)
	}
	// A non-wall answer outside the lane leaves it alone.
	wantDecision(t, w.OnResponse(conn, laneOn, Response{Status: 200}), Decision{})
	wantSlow(t, w, laneOn, true)
}

func TestLaneDisabled(t *testing.T) {
	w, clk := newWall()
	accept(t, w, clk)
	wantSlow(t, w, Config{}, false)
	if s := w.State(conn); s.LaneActive || s.LastEndReason != EndDisabled {
		t.Fatalf("state = %+v", s)
	}
	// Turned on again: nothing is sent until the next wall.
	wantSlow(t, w, laneOn, false)
}

func TestResetFlowResults(t *testing.T) {
	wall := wallResp(t0.Add(time.Hour))
	tests := []struct {
		name     string
		cfg      Config
		out      ResetOutcome
		want     Decision
		slow     bool
		result   string
		nextAt   time.Time
		backoff  time.Time
		canAgain time.Time // first instant CanTryReset is true again (zero: after the next non-wall)
	}{
		{name: "reset: full speed", cfg: bothOn, out: ResetOutcome{Result: ResultReset},
			want: Decision{Action: ActionRetry}, result: ResultReset},
		{name: "not_limited: full speed", cfg: bothOn, out: ResetOutcome{Result: ResultNotLimited},
			want: Decision{Action: ActionRetry}, result: ResultNotLimited},
		{name: "already_used with next_available_at: lane", cfg: bothOn,
			out:  ResetOutcome{Result: ResultAlreadyUsed, NextAvailableAt: t0.Add(3 * time.Hour)},
			want: Decision{Action: ActionRetry}, slow: true, result: ResultAlreadyUsed,
			nextAt: t0.Add(3 * time.Hour), canAgain: t0.Add(3 * time.Hour)},
		{name: "not_offered without next_available_at: one week", cfg: bothOn,
			out:  ResetOutcome{Result: ResultNotOffered},
			want: Decision{Action: ActionRetry}, slow: true, result: ResultNotOffered,
			nextAt: t0.Add(7 * 24 * time.Hour), canAgain: t0.Add(7 * 24 * time.Hour)},
		{name: "already_used with a past next_available_at: one week", cfg: bothOn,
			out:  ResetOutcome{Result: ResultAlreadyUsed, NextAvailableAt: t0.Add(-time.Hour)},
			want: Decision{Action: ActionRetry}, slow: true, result: ResultAlreadyUsed,
			nextAt: t0.Add(7 * 24 * time.Hour), canAgain: t0.Add(7 * 24 * time.Hour)},
		{name: "already_used, lane off: normal path", cfg: resetOn,
			out:  ResetOutcome{Result: ResultAlreadyUsed, NextAvailableAt: t0.Add(time.Hour)},
			want: Decision{}, result: ResultAlreadyUsed, nextAt: t0.Add(time.Hour), canAgain: t0.Add(time.Hour)},
		{name: "failure: 15 min back-off, then the lane", cfg: bothOn, out: ResetOutcome{Err: errors.New("dial: refused")},
			want: Decision{Action: ActionRetry}, slow: true, result: ResetFailed,
			backoff: t0.Add(15 * time.Minute), canAgain: t0.Add(15 * time.Minute)},
		{name: "unknown result is a failure", cfg: resetOn, out: ResetOutcome{Result: "maybe"},
			want: Decision{}, result: ResetFailed, backoff: t0.Add(15 * time.Minute), canAgain: t0.Add(15 * time.Minute)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, clk := newWall()
			if !w.CanTryReset(conn, tc.cfg) {
				t.Fatal("CanTryReset = false on a fresh connection")
			}
			wantDecision(t, w.OnResponse(conn, tc.cfg, wall), Decision{Action: ActionTryReset})
			wantSlow(t, w, tc.cfg, false)
			if s := w.State(conn); !s.ResetInFlightSince.Equal(t0) {
				t.Fatalf("ResetInFlightSince = %v", s.ResetInFlightSince)
			}
			wantDecision(t, w.OnResetResult(conn, tc.cfg, wall, tc.out), tc.want)
			wantSlow(t, w, tc.cfg, tc.slow)
			s := w.State(conn)
			if s.LastResetResult != tc.result || !s.LastResetAt.Equal(t0) || !s.ResetInFlightSince.IsZero() ||
				!s.ResetNextAvailableAt.Equal(tc.nextAt) || !s.ResetBackoffUntil.Equal(tc.backoff) {
				t.Fatalf("state = %+v", s)
			}
			if tc.canAgain.IsZero() {
				// Loop guard: the retry hitting the wall again goes to the
				// lane, until a non-wall answer re-arms the flow.
				if w.CanTryReset(conn, tc.cfg) {
					t.Fatal("CanTryReset right after a reset")
				}
				wantDecision(t, w.OnResponse(conn, tc.cfg, wall), Decision{Action: ActionRetry})
				wantSlow(t, w, tc.cfg, true)
				w.OnResponse(conn, tc.cfg, Response{Status: 200, Slow: true, Header: hdr(HeaderSlowStatus, SlowActive)})
				if !w.CanTryReset(conn, tc.cfg) {
					t.Fatal("CanTryReset not re-armed by a non-wall answer")
				}
				return
			}
			// Walls of the next window, 1 s before and at the instant.
			next := wallResp(tc.canAgain.Add(time.Hour))
			clk.Set(tc.canAgain.Add(-time.Second))
			if w.CanTryReset(conn, tc.cfg) {
				t.Fatalf("CanTryReset 1 s before %v", tc.canAgain)
			}
			if d := w.OnResponse(conn, tc.cfg, next); d.Action == ActionTryReset {
				t.Fatalf("wall 1 s before %v tried the reset", tc.canAgain)
			}
			clk.Set(tc.canAgain)
			if !w.CanTryReset(conn, tc.cfg) {
				t.Fatalf("CanTryReset false at %v", tc.canAgain)
			}
			wantDecision(t, w.OnResponse(conn, tc.cfg, next), Decision{Action: ActionTryReset})
		})
	}
}

func TestResetBeforeLaneOrder(t *testing.T) {
	w, _ := newWall()
	wall := wallResp(t0.Add(time.Hour))
	// Both on: the reset flow first, the lane only when the reset did not help.
	wantDecision(t, w.OnResponse(conn, bothOn, wall), Decision{Action: ActionTryReset})
	wantSlow(t, w, bothOn, false)
	// A concurrent wall while the flow runs does not start a second flow:
	// it takes the lane.
	wantDecision(t, w.OnResponse(conn, bothOn, wall), Decision{Action: ActionRetry})
	wantSlow(t, w, bothOn, true)
	// The reset works: the lane is no longer needed.
	wantDecision(t, w.OnResetResult(conn, bothOn, wall, ResetOutcome{Result: ResultReset}), Decision{Action: ActionRetry})
	wantSlow(t, w, bothOn, false)
	if s := w.State(conn); s.LastEndReason != EndLimitReset {
		t.Fatalf("state = %+v", s)
	}
}

func TestResetFlightTimeout(t *testing.T) {
	w, clk := newWall()
	wall := wallResp(t0.Add(time.Hour))
	wantDecision(t, w.OnResponse(conn, resetOn, wall), Decision{Action: ActionTryReset})
	clk.Advance(ResetFlightTimeout - time.Second)
	wantDecision(t, w.OnResponse(conn, resetOn, wall), Decision{})
	clk.Advance(time.Second)
	wantDecision(t, w.OnResponse(conn, resetOn, wall), Decision{Action: ActionTryReset})
}

func TestResetNotTriedWithoutWall(t *testing.T) {
	w, _ := newWall()
	for _, r := range []Response{{Status: 429}, {Status: 529}, {Status: 200, Header: hdr(HeaderStatus, StatusRejected)}} {
		wantDecision(t, w.OnResponse(conn, bothOn, r), Decision{})
	}
	if s := w.State(conn); !s.ResetInFlightSince.IsZero() {
		t.Fatalf("state = %+v", s)
	}
}

func TestConnectionsAreIndependent(t *testing.T) {
	w, clk := newWall()
	accept(t, w, clk)
	if h := w.RequestHeaders("b", laneOn); h != nil {
		t.Fatalf("b got %v", h)
	}
	wantDecision(t, w.OnResponse("b", bothOn, wallResp(t0.Add(time.Hour))), Decision{Action: ActionTryReset})
	w.Forget(conn)
	if s := w.State(conn); s != (Snapshot{}) {
		t.Fatalf("Forget kept %+v", s)
	}
	wantSlow(t, w, laneOn, false)
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{ActionNone: "none", ActionRetry: "retry", ActionWaitAndRetry: "wait_and_retry",
		ActionTryReset: "try_reset", ActionEnded: "ended", Action(99): "unknown"} {
		if a.String() != want {
			t.Errorf("%d.String() = %q, want %q", a, a.String(), want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	clk := clocktest.NewClock(t0)
	w := New(clk, nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := fmt.Sprintf("c%d", g%3)
			for i := 0; i < 300; i++ {
				hdrs := w.RequestHeaders(c, bothOn)
				switch i % 5 {
				case 0:
					if d := w.OnResponse(c, bothOn, wallResp(clk.Now().Add(time.Hour))); d.Action == ActionTryReset {
						w.OnResetResult(c, bothOn, wallResp(clk.Now().Add(time.Hour)), ResetOutcome{Result: ResultAlreadyUsed})
					}
				case 1:
					w.OnResponse(c, bothOn, laneResp(429, SlowSlotBusy))
				case 2:
					w.OnResponse(c, bothOn, Response{Status: 200, Slow: hdrs != nil})
				case 3:
					_ = w.State(c)
					_ = w.CanTryReset(c, bothOn)
				default:
					clk.Advance(time.Second)
				}
			}
		}()
	}
	wg.Wait()
}

func TestMaxWaitClamps(t *testing.T) {
	tests := []struct {
		name    string
		maxWait string
		limit   time.Duration // the clamped max wait
	}{
		{"10 s clamps to 1 min", "10", time.Minute},
		{"1 day clamps to 6 h", "86400", 6 * time.Hour},
		{"absent: 20 min", "", 20 * time.Minute},
		{"45 min as sent", "2700", 45 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, clk := newWall()
			// A window long enough for a 6 h streak.
			wantDecision(t, w.OnResponse(conn, laneOn, wallResp(t0.Add(8*time.Hour))), Decision{Action: ActionRetry})
			busy := laneResp(429, SlowSlotBusy, HeaderSlowRetryAfter, "5", HeaderSlowMaxWait, tc.maxWait)
			wantDecision(t, w.OnResponse(conn, laneOn, busy), Decision{Action: ActionWaitAndRetry, Wait: 5 * time.Second})
			// A 5 s wait asked at limit-5s ends exactly at the limit: granted.
			clk.Set(t0.Add(tc.limit - 5*time.Second))
			wantDecision(t, w.OnResponse(conn, laneOn, busy), Decision{Action: ActionWaitAndRetry, Wait: 5 * time.Second})
			// 1 ms later it would end past the limit: max_wait.
			clk.Advance(time.Millisecond)
			wantDecision(t, w.OnResponse(conn, laneOn, busy), Decision{Action: ActionEnded, EndReason: EndMaxWait})
		})
	}
}
