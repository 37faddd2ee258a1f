//go:build !wasip1

package sdk

import (
	"strings"
	"testing"
	"time"
)

// resetHandlers clears the registry after a test (handlers are package
// state, so these tests do not run in parallel).
func resetHandlers(t *testing.T) {
	t.Cleanup(func() {
		HandleRestate(nil)
		HandleClassify(nil)
		HandleOnRequest(nil)
		HandleRoute(nil)
		required = 0
		ResetFakes()
	})
}

func TestFeaturesFollowHandlers(t *testing.T) {
	resetHandlers(t)
	if f := Features(); f != FeatureBinary {
		t.Fatalf("Features() with nothing registered = %b, want binary only", f)
	}
	HandleClassify(func(ErrorInput) (Decision, bool) { return Decision{}, false })
	Require(FeatureKV | FeatureRestate) // hook bits are ignored here
	if f := Features(); f != FeatureClassify|FeatureKV|FeatureBinary {
		t.Fatalf("Features() = %b, want classify|kv|binary", f)
	}
	HandleRestate(func(ErrorInput) (Restatement, bool) { return Restatement{}, false })
	HandleOnRequest(func(RequestInfo) (RequestAction, bool) { return RequestAction{}, false })
	if f := Features(); f != FeatureRestate|FeatureClassify|FeatureOnRequest|FeatureKV|FeatureBinary {
		t.Fatalf("Features() = %b, want every hook and kv", f)
	}
	HandleClassify(nil)
	if f := Features(); f&FeatureClassify != 0 {
		t.Fatalf("Features() = %b after removing the classify handler", f)
	}
}

func TestCallHelpersGoThroughTheEncoding(t *testing.T) {
	resetHandlers(t)
	var seen ErrorInput
	HandleClassify(func(in ErrorInput) (Decision, bool) {
		seen = in
		return Decision{Reason: ReasonQuotaExhausted, Scope: ScopeConnection, CooldownMS: 1500, RuleID: "r<1>"}, true
	})
	HandleRestate(func(in ErrorInput) (Restatement, bool) {
		return Restatement{Status: 503, RetryAfterMS: int64(in.Status)}, in.Status != 0
	})
	HandleOnRequest(func(in RequestInfo) (RequestAction, bool) {
		return RequestAction{Model: in.Model + "-mini", SetHeaders: map[string]string{"x-path": in.Path}}, true
	})
	in := ErrorInput{Provider: "p", Status: 429, Headers: NewHeaders(map[string]string{"x-q": "\"0\""}), Body: "é\n"}
	d, ok := CallClassify(in)
	if !ok || d != (Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 1500, RuleID: "r<1>"}) {
		t.Fatalf("CallClassify = %+v, %v", d, ok)
	}
	if seen.Headers.Get("x-q") != `"0"` || seen.Body != "é\n" || seen.Status != 429 {
		t.Fatalf("handler saw %+v", seen)
	}
	if r, ok := CallRestate(in); !ok || r != (Restatement{Status: 503, RetryAfterMS: 429}) {
		t.Fatalf("CallRestate = %+v, %v", r, ok)
	}
	if _, ok := CallRestate(ErrorInput{}); ok {
		t.Fatal("CallRestate answered although the handler declined")
	}
	a, ok := CallOnRequest(RequestInfo{Model: "gpt", Path: "/v1/messages"})
	if !ok || a.Model != "gpt-mini" || a.SetHeaders["x-path"] != "/v1/messages" {
		t.Fatalf("CallOnRequest = %+v, %v", a, ok)
	}
}

func TestNoHandlerMeansNoDecision(t *testing.T) {
	resetHandlers(t)
	if _, ok := CallClassify(ErrorInput{Status: 429}); ok {
		t.Error("CallClassify answered without a handler")
	}
	if _, ok := CallRestate(ErrorInput{Status: 429}); ok {
		t.Error("CallRestate answered without a handler")
	}
	if _, ok := CallOnRequest(RequestInfo{}); ok {
		t.Error("CallOnRequest answered without a handler")
	}
}

func TestUndecodableInputIsLoggedAndDeclined(t *testing.T) {
	resetHandlers(t)
	called := false
	HandleClassify(func(ErrorInput) (Decision, bool) { called = true; return Decision{Reason: "x"}, true })
	out, ok := dispatchClassify([]byte{0xff, 0xff, 0xff, 0x7f, 'x'}, nil) // a string longer than the input
	if ok || len(out) != 0 || called {
		t.Fatalf("dispatch = %q, %v (handler called %v); want no decision", out, ok, called)
	}
	logs := FakeLogs()
	if len(logs) != 1 || logs[0].Level != LevelError || !strings.Contains(logs[0].Message, "cannot decode classify input") {
		t.Fatalf("logs = %+v", logs)
	}
}

func TestFakeKV(t *testing.T) {
	resetHandlers(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	SetNow(t0)
	if _, ok, err := KVGet("k"); ok || err != nil {
		t.Fatalf("KVGet of a missing key = %v, %v", ok, err)
	}
	if err := KVSet("k", []byte("v1"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := KVSet("forever", []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	SetNow(t0.Add(9999 * time.Millisecond))
	if v, ok, _ := KVGet("k"); !ok || string(v) != "v1" {
		t.Fatalf("KVGet before expiry = %q, %v", v, ok)
	}
	SetNow(t0.Add(10 * time.Second))
	if _, ok, _ := KVGet("k"); ok {
		t.Fatal("KVGet at the expiry instant found the key")
	}
	if v, ok, _ := KVGet("forever"); !ok || string(v) != "v2" {
		t.Fatalf("KVGet of a key without ttl = %q, %v", v, ok)
	}
	if err := KVSet("forever", nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := KVGet("forever"); ok {
		t.Fatal("an empty value did not delete the key")
	}
	for _, bad := range []struct {
		key string
		val []byte
		ttl time.Duration
	}{
		{"", []byte("v"), 0},
		{strings.Repeat("k", MaxKeyBytes+1), []byte("v"), 0},
		{"k", make([]byte, MaxValueBytes+1), 0},
		{"k", []byte("v"), -time.Second},
	} {
		if err := KVSet(bad.key, bad.val, bad.ttl); err == nil {
			t.Errorf("KVSet(%d-byte key, %d-byte value, %v) succeeded", len(bad.key), len(bad.val), bad.ttl)
		}
	}
	if _, _, err := KVGet(""); err == nil {
		t.Error("KVGet of an empty key succeeded")
	}
}

func TestFakeLogAndClock(t *testing.T) {
	resetHandlers(t)
	Log(LevelWarn, strings.Repeat("x", MaxLogBytes+10))
	logs := FakeLogs()
	if len(logs) != 1 || logs[0].Level != LevelWarn || len(logs[0].Message) != MaxLogBytes {
		t.Fatalf("logs = %d entries, first %d bytes; want 1 truncated to %d", len(logs), len(logs[0].Message), MaxLogBytes)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	SetNow(at)
	if got := Now(); !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("Now() = %v, want %v (millisecond resolution, like the host)", got, at.Truncate(time.Millisecond))
	}
	ResetFakes()
	if len(FakeLogs()) != 0 {
		t.Fatal("ResetFakes kept logs")
	}
	if d := time.Since(Now()); d < -time.Second || d > time.Second {
		t.Fatalf("Now() after ResetFakes is %v from the wall clock", d)
	}
}

func TestRouteHandler(t *testing.T) {
	resetHandlers(t)
	if f := Features(); f&FeatureRoute != 0 {
		t.Fatalf("Features() = %b with no route handler", f)
	}
	var seen RouteInput
	HandleRoute(func(in RouteInput) (RouteAnswer, bool) {
		seen = in
		if in.Request.Headers.Get("x-route-provider") == "" {
			return RouteAnswer{}, false
		}
		return RouteAnswer{Order: []int{1}, Exclude: []RouteExclusion{{Index: 0, Reason: "asked for b"}}, RuleID: "hdr"}, true
	})
	Require(FeatureRoute) // a hook bit: ignored here
	if f := Features(); f != FeatureRoute|FeatureBinary {
		t.Fatalf("Features() = %b, want route|binary", f)
	}
	in := RouteInput{
		Request: RouteRequest{Model: "smart", Combo: "smart", Stream: true, KeyID: "k",
			Headers: NewHeaders(map[string]string{"X-Route-Provider": "b"}), ToolCount: 2, PromptTokens: 99},
		Candidates: []RouteCandidate{
			{Provider: "a", Model: "m1", Eligible: true, Health: HealthDegraded, Headroom: -1, LatencyMS: 80},
			{Provider: "b", Model: "m2", Connection: "c", Eligible: true, Health: HealthClosed, CooldownMS: 0, Headroom: 0.5, PriceIn: 1.5},
		},
	}
	a, ok := CallRoute(in)
	if !ok || len(a.Order) != 1 || a.Order[0] != 1 || len(a.Exclude) != 1 || a.Exclude[0] != (RouteExclusion{0, "asked for b"}) || a.RuleID != "hdr" {
		t.Fatalf("CallRoute = %+v, %v", a, ok)
	}
	if !seen.Request.Stream || seen.Request.ToolCount != 2 || seen.Request.PromptTokens != 99 || len(seen.Candidates) != 2 ||
		seen.Candidates[0].Health != HealthDegraded || seen.Candidates[1].Headroom != 0.5 || seen.Candidates[1].PriceIn != 1.5 {
		t.Fatalf("handler saw %+v", seen)
	}
	in.Request.Headers = Headers{}
	if _, ok := CallRoute(in); ok {
		t.Fatal("CallRoute answered although the handler declined")
	}
}
