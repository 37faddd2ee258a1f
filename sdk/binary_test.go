package sdk

import (
	"reflect"
	"testing"
)

func TestBinaryRoundTrip(t *testing.T) {
	in := ErrorInput{Provider: "acmé", Connection: "acme/main", Model: "m", Profile: "oauth", Status: 429,
		Headers:   NewHeaders(map[string]string{"retry-after": "7", "x-emoji": "🚀", "x-empty": ""}),
		ErrorCode: "c", ErrorType: "t", Body: `{"error":"quota \"exceeded\""}`}
	var gotIn ErrorInput
	if err := decodeErrorInput(appendErrorInput(nil, &in), &gotIn); err != nil || !reflect.DeepEqual(gotIn, in) {
		t.Errorf("ErrorInput = %+v, %v", gotIn, err)
	}
	d := Decision{Reason: ReasonQuotaExhausted, Scope: ScopeModel, CooldownMS: -5, RuleID: "r"}
	var gotD Decision
	if err := decodeDecision(appendDecision(nil, &d), &gotD); err != nil || gotD != d {
		t.Errorf("Decision = %+v, %v", gotD, err)
	}
	rs := Restatement{Status: 429, RetryAfterMS: 1 << 40, RuleID: "x"}
	var gotR Restatement
	if err := decodeRestatement(appendRestatement(nil, &rs), &gotR); err != nil || gotR != rs {
		t.Errorf("Restatement = %+v, %v", gotR, err)
	}
	ri := RequestInfo{Model: "m", Path: "/p", KeyID: "k", Headers: NewHeaders(map[string]string{"a": "b"})}
	var gotRI RequestInfo
	if err := decodeRequestInfo(appendRequestInfo(nil, &ri), &gotRI); err != nil || !reflect.DeepEqual(gotRI, ri) {
		t.Errorf("RequestInfo = %+v, %v", gotRI, err)
	}
	ra := RequestAction{Model: "m", SetHeaders: map[string]string{"x": ""}, RejectStatus: 403, RejectMessage: "no"}
	var gotRA RequestAction
	if err := decodeRequestAction(appendRequestAction(nil, &ra), &gotRA); err != nil || !reflect.DeepEqual(gotRA, ra) {
		t.Errorf("RequestAction = %+v, %v", gotRA, err)
	}
}

// TestBinaryLayout pins the layout the host documents (plugins/abi), byte
// by byte, for one Decision.
func TestBinaryLayout(t *testing.T) {
	got := appendDecision(nil, &Decision{Reason: "rate_limit", CooldownMS: 258, RuleID: "x"})
	want := []byte{10, 0, 0, 0}
	want = append(want, "rate_limit"...)
	want = append(want, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'x')
	if string(got) != string(want) {
		t.Errorf("encoding\n  %v\nwant\n  %v", got, want)
	}
}

func TestBinaryRejectsMalformed(t *testing.T) {
	full := appendErrorInput(nil, &ErrorInput{Provider: "p", Status: 500, Headers: NewHeaders(map[string]string{"k": "v"}), Body: "b"})
	var v ErrorInput
	for n := range len(full) {
		if decodeErrorInput(full[:n], &v) == nil {
			t.Fatalf("a value cut to %d of %d bytes decoded", n, len(full))
		}
	}
	if err := decodeErrorInput(append(full, 0), &v); err != errTrailing {
		t.Errorf("trailing byte: %v", err)
	}
	if err := decodeRestatement(appendRestatement(nil, &Restatement{})[:0], new(Restatement)); err != errTruncated {
		t.Errorf("empty input: %v", err)
	}
	big := appendInt(nil, 1<<40)
	big = appendInt(big, 0)
	big = appendString(big, "")
	if err := decodeRestatement(big, new(Restatement)); err != errRange {
		t.Errorf("status 2^40: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(appendErrorInput(nil, &ErrorInput{Provider: "p", Headers: NewHeaders(map[string]string{"a": "b"})}))
	f.Add(appendRequestAction(nil, &RequestAction{SetHeaders: map[string]string{"a": "b"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var in ErrorInput
		if decodeErrorInput(b, &in) == nil {
			var again ErrorInput
			if err := decodeErrorInput(appendErrorInput(nil, &in), &again); err != nil || !reflect.DeepEqual(again, in) {
				t.Fatalf("re-encoding %+v gave %+v, %v", in, again, err)
			}
		}
		_ = decodeRestatement(b, new(Restatement))
		_ = decodeDecision(b, new(Decision))
		_ = decodeRequestInfo(b, new(RequestInfo))
		_ = decodeRequestAction(b, new(RequestAction))
	})
}

func TestHeaders(t *testing.T) {
	var zero Headers
	if zero.Len() != 0 || zero.Get("a") != "" || len(zero.Map()) != 0 {
		t.Fatal("zero Headers not empty")
	}
	h := NewHeaders(map[string]string{"Retry-After": "7", "x-empty": "", "x-q": `"0"`})
	if h.Len() != 3 || h.Get("retry-after") != "7" || h.Get("RETRY-AFTER") != "7" || h.Get("x-q") != `"0"` {
		t.Fatalf("Get on %v", h.Map())
	}
	if v, ok := h.Lookup("x-empty"); !ok || v != "" {
		t.Errorf("Lookup(x-empty) = %q, %v; want present and empty", v, ok)
	}
	if _, ok := h.Lookup("x-missing"); ok {
		t.Error("Lookup(x-missing) found something")
	}
	var names []string
	for k := range h.All() {
		names = append(names, k)
		break // the iterator honours an early stop
	}
	if len(names) != 1 || names[0] != "retry-after" {
		t.Errorf("All yielded %v first", names)
	}
	// A decoded input reads its headers in place, with no allocation per header.
	enc := appendErrorInput(nil, &ErrorInput{Provider: "p", Headers: h, Body: "b"})
	var in ErrorInput
	if allocs := testing.AllocsPerRun(100, func() {
		if err := decodeErrorInput(enc, &in); err != nil {
			t.Fatal(err)
		}
		if in.Headers.Get("x-q") != `"0"` {
			t.Fatal("header lost")
		}
	}); allocs > 1 {
		t.Errorf("decoding an input allocates %.0f times, want 1 (the copy of the input)", allocs)
	}
}

func TestRouteBinaryRoundTrip(t *testing.T) {
	in := RouteInput{
		Request: RouteRequest{Model: "m", Combo: "c", Stream: true, KeyID: "k", Headers: NewHeaders(map[string]string{"a": "b"}),
			ToolCount: 4, PromptTokens: 1 << 20},
		Candidates: []RouteCandidate{{Provider: "p", Model: "m", Connection: "c", Eligible: true, Health: "open",
			CooldownMS: 5, LockoutMS: 6, Headroom: -1, LatencyMS: 7, InFlight: 8, PriceIn: 0.25, PriceOut: 1e9}},
	}
	var got RouteInput
	if err := decodeRouteInput(appendRouteInput(nil, &in), &got); err != nil || !reflect.DeepEqual(got, in) {
		t.Errorf("RouteInput = %+v, %v", got, err)
	}
	a := RouteAnswer{Order: []int{2, 0}, Exclude: []RouteExclusion{{1, "x"}}, RuleID: "r"}
	var gotA RouteAnswer
	if err := decodeRouteAnswer(appendRouteAnswer(nil, &a), &gotA); err != nil || !reflect.DeepEqual(gotA, a) {
		t.Errorf("RouteAnswer = %+v, %v", gotA, err)
	}
	full := appendRouteInput(nil, &in)
	for n := range len(full) {
		if decodeRouteInput(full[:n], &got) == nil {
			t.Fatalf("a route input cut to %d of %d bytes decoded", n, len(full))
		}
	}
}
