package main

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
	"github.com/breakwater-dev/breakwater/bench/internal/proc"
	"github.com/breakwater-dev/breakwater/bench/internal/watch"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

func TestRetryHint(t *testing.T) {
	tests := []struct {
		name, value string
		want        time.Duration
		ok          bool
	}{
		{"Retry-After", "1", time.Second, true},
		{"retry-after", " 2.5 ", 2500 * time.Millisecond, true},
		{"retry-after-ms", "100", 100 * time.Millisecond, true},
		{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT", 0, false},
		{"Retry-After", "-1", 0, false},
		{"X-RateLimit-Reset", "1", 0, false},
	}
	for _, tt := range tests {
		got, ok := retryHint(tt.name, tt.value)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryHint(%q, %q) = %v, %v; want %v, %v", tt.name, tt.value, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCapacityBound(t *testing.T) {
	// Two connections, 30 % 429 and 67.5 % success (half the calls
	// streams, 5 % of those stalling): 2.25 successes between two 429s
	// per connection, then 1 s of rest → 4.5 successes/s.
	if got := capacityBound(2, 0.30, 0.675, time.Second); math.Abs(got-4.5) > 1e-9 {
		t.Errorf("capacityBound(2, 0.30, 0.675, 1s) = %v, want 4.5", got)
	}
	if got := capacityBound(2, 0.30, 0.70, 100*time.Millisecond); math.Abs(got-2*0.7/0.3/0.1) > 1e-9 {
		t.Errorf("capacityBound with a 100 ms wait = %v, want %v", got, 2*0.7/0.3/0.1)
	}
	if capacityBound(2, 0.30, 0.7, 0) != 0 || capacityBound(2, 0, 1, time.Second) != 0 {
		t.Error("capacityBound without a wait or without 429s should be 0 (no bound)")
	}
}

func TestShortestLeft(t *testing.T) {
	ids := []string{"down1", "down2"}
	tests := []struct {
		left map[string]int64
		want time.Duration
	}{
		{map[string]int64{"down1": 3000, "down2": 1200}, 1200 * time.Millisecond},
		{map[string]int64{"down1": 3000}, 0}, // down2 not cooling
		{map[string]int64{"down1": -5, "down2": 900}, 0},
		{nil, 0},
	}
	for _, tt := range tests {
		if got := shortestLeft(ids, tt.left); got != tt.want {
			t.Errorf("shortestLeft(%v) = %v, want %v", tt.left, got, tt.want)
		}
	}
}

func TestTallyOfAndMean(t *testing.T) {
	rs := []*load.Result{
		{Tally: map[load.TallyKey]int{
			{Header: headerAttempts, Value: "1", OK: true}:  8,
			{Header: headerAttempts, Value: "3", OK: true}:  2,
			{Header: headerAttempts, Value: "", OK: false}:  5,
			{Header: headerProvider, Value: "up", OK: true}: 10,
		}},
		nil,
		{Tally: map[load.TallyKey]int{{Header: headerAttempts, Value: "1", OK: true}: 2}},
	}
	ok := tallyOf(rs, headerAttempts, true)
	if len(ok) != 2 || ok["1"] != 10 || ok["3"] != 2 {
		t.Fatalf("successes = %v, want 1:10, 3:2", ok)
	}
	if got := meanOf(ok); math.Abs(got-16.0/12) > 1e-9 {
		t.Errorf("meanOf = %v, want %v", got, 16.0/12)
	}
	if got := tallyOf(rs, headerAttempts, false); len(got) != 1 || got[""] != 5 {
		t.Errorf("failures = %v, want none:5", got)
	}
	if got := tallyOf(rs, "X-Other", true); got != nil {
		t.Errorf("absent header tallied as %v", got)
	}
	if meanOf(map[string]int{"": 3}) != 0 {
		t.Error("meanOf of no integer values should be 0")
	}
	if got := tallyCell(map[string]int{"10": 1, "2": 3, "": 4}); got != "none ×4, 2 ×3, 10 ×1" {
		t.Errorf("tallyCell = %q", got)
	}
}

func TestFireSide(t *testing.T) {
	s := fireSide("gateway", [2]*load.Result{
		{Scheduled: 100, Sent: 100, OK: 99},
		{Scheduled: 100, Sent: 100, OK: 100, FirstData: []time.Duration{time.Millisecond}, Latency: []time.Duration{time.Millisecond}},
	})
	if s.OK != 199 || s.Scheduled != 200 || s.SuccessPct != 99.5 {
		t.Fatalf("fireSide = %d/%d (%v %%), want 199/200 (99.5 %%)", s.OK, s.Scheduled, s.SuccessPct)
	}
	if s.Stream.FirstData == nil || s.NonStream.FirstData != nil {
		t.Errorf("first data: stream %v, non-stream %v", s.Stream.FirstData, s.NonStream.FirstData)
	}
}

// scriptServer serves the mock with the under-fire script.
func scriptServer(t *testing.T, downHealthy bool) *httptest.Server {
	t.Helper()
	data, err := json.Marshal(fireScript("Retry-After", "1", 2, 0, downHealthy))
	if err != nil {
		t.Fatal(err)
	}
	script, err := mock.ParseScript(data)
	if err != nil {
		t.Fatalf("the mock rejects the under-fire script: %v\n%s", err, data)
	}
	srv := httptest.NewServer(mock.New(script, hclog.NewNullLogger()).Handler())
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, key string, stream bool) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(string(chatBody(proc.FireModel, stream))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestFireScriptOnTheMock runs the under-fire script on the real mock:
// the down keys answer 503 until switched to healthy, the up keys 429
// about 30 % of non-streaming calls with the retry header and the 429
// body, and the streaming rule is tried before the generic one.
func TestFireScriptOnTheMock(t *testing.T) {
	srv := scriptServer(t, false)
	for _, key := range proc.FireKeys(proc.FireDownKeyPrefix) {
		resp := post(t, srv.URL, key, false)
		resp.Body.Close()
		if resp.StatusCode != fireDownStatus {
			t.Errorf("down key %s: status %d, want %d", key, resp.StatusCode, fireDownStatus)
		}
	}
	const calls = 400
	limited := 0
	for i := range calls {
		resp := post(t, srv.URL, proc.FireKeys(proc.FireUpKeyPrefix)[i%2], false)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			limited++
			if got := resp.Header.Get("Retry-After"); got != "1" {
				t.Fatalf("429 Retry-After = %q, want 1", got)
			}
		case http.StatusOK:
		default:
			t.Fatalf("up key: status %d", resp.StatusCode)
		}
	}
	if share := float64(limited) / calls; share < 0.24 || share > 0.36 {
		t.Errorf("%d of %d calls were 429 (%.0f %%), want about %d %%", limited, calls, 100*share, fire429Pct)
	}

	data, _ := json.Marshal(fireScript("Retry-After", "1", 2, 0, false))
	script, err := mock.ParseScript(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(script.Rules) != 3 || script.Rules[1].Header != "accept=text/event-stream" || script.Rules[2].Header != "" {
		t.Fatalf("rules = %+v; want down, up streams (accept header), up", script.Rules)
	}
	sum, stall := 0, 0
	for _, st := range script.Rules[1].Responses {
		sum += *st.Weight
		if st.StallAfterChunks != nil && *st.StallAfterChunks == 0 {
			stall += *st.Weight
		}
	}
	if sum != 100 || stall != fireStallPct {
		t.Errorf("stream weights sum to %d with %d stalling, want 100 and %d", sum, stall, fireStallPct)
	}

	healthy := scriptServer(t, true)
	for _, stream := range []bool{false, true} {
		resp := post(t, healthy.URL, proc.FireDownKeyPrefix+"1", stream)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("healthy down key (stream %v): status %d, want 200", stream, resp.StatusCode)
		}
	}
}

func TestRecoveryDetector(t *testing.T) {
	d := newRecoveryDetector()
	recovered := func() bool {
		select {
		case <-d.recovered:
			return true
		default:
			return false
		}
	}
	d.observe(watch.Sample{Calls: 20, State: watch.StateClosed})
	if recovered() {
		t.Fatal("recovered before being armed")
	}
	d.arm(20)
	d.observe(watch.Sample{Calls: 20, State: watch.StateClosed})
	if recovered() {
		t.Fatal("recovered without a call after the switch")
	}
	d.observe(watch.Sample{Calls: 21, State: watch.StateHalfOpen})
	if recovered() {
		t.Fatal("recovered while HALF_OPEN")
	}
	d.observe(watch.Sample{Calls: 25, State: watch.StateClosed})
	if !recovered() {
		t.Fatal("not recovered after a call and CLOSED")
	}
	d.observe(watch.Sample{Calls: 30, State: watch.StateClosed}) // no double close
}
