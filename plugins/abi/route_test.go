package abi

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

var sampleRoute = RouteInput{
	Request: RouteRequest{Model: "smart", Combo: "smart", Stream: true, KeyID: "app1",
		Headers: map[string]string{"x-route-provider": "anthropic", "user-agent": "curl/8"}, ToolCount: 3, PromptTokens: 1200},
	Candidates: []RouteCandidate{
		{Provider: "openai", Model: "gpt-4o", Connection: "key-a", Eligible: true, Health: "closed",
			Headroom: 0.25, LatencyMS: 420, InFlight: 2, PriceIn: 2.5, PriceOut: 10},
		{Provider: "anthropic", Model: "claude-haiku-4", Eligible: false, Health: "open", CooldownMS: 3000,
			LockoutMS: 120000, Headroom: -1, PriceIn: 0.8, PriceOut: 4},
	},
}

func TestRouteBinaryRoundTrip(t *testing.T) {
	got, err := DecodeRouteInputBinary(AppendRouteInputBinary(nil, &sampleRoute))
	if err != nil || !reflect.DeepEqual(got, sampleRoute) {
		t.Errorf("RouteInput round trip =\n  %+v, %v\nwant\n  %+v", got, err, sampleRoute)
	}
	empty, err := DecodeRouteInputBinary(AppendRouteInputBinary(nil, &RouteInput{}))
	if err != nil || !reflect.DeepEqual(empty, RouteInput{}) {
		t.Errorf("empty RouteInput round trip = %+v, %v", empty, err)
	}
	a := RouteAnswer{Order: []int{1, 0}, Exclude: []RouteExclusion{{Index: 2, Reason: "night"}}, RuleID: "tod"}
	if got, err := DecodeRouteAnswerBinary(AppendRouteAnswerBinary(nil, &a)); err != nil || !reflect.DeepEqual(got, a) {
		t.Errorf("RouteAnswer round trip = %+v, %v", got, err)
	}
	// Special floats survive: the encoding is the IEEE 754 bits.
	f := RouteInput{Candidates: []RouteCandidate{{Headroom: math.Inf(1), PriceIn: math.SmallestNonzeroFloat64}}}
	if got, err := DecodeRouteInputBinary(AppendRouteInputBinary(nil, &f)); err != nil || !math.IsInf(got.Candidates[0].Headroom, 1) ||
		got.Candidates[0].PriceIn != math.SmallestNonzeroFloat64 {
		t.Errorf("floats = %+v, %v", got, err)
	}
}

// TestRouteAnswerBinaryLayout pins the documented layout byte by byte.
func TestRouteAnswerBinaryLayout(t *testing.T) {
	got := AppendRouteAnswerBinary(nil, &RouteAnswer{Order: []int{2}, Exclude: []RouteExclusion{{Index: 1, Reason: "x"}}, RuleID: "r"})
	want := []byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0} // order: count 1, int 2
	want = append(want, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'x')
	want = append(want, 1, 0, 0, 0, 'r')
	if string(got) != string(want) {
		t.Errorf("RouteAnswer encoding\n  %v\nwant\n  %v", got, want)
	}
	// A bool is one byte and a float its IEEE 754 bits.
	in := AppendRouteInputBinary(nil, &RouteInput{Request: RouteRequest{Stream: true},
		Candidates: []RouteCandidate{{Eligible: true, Headroom: 0.5}}})
	if in[8] != 1 {
		t.Errorf("stream byte = %d, want 1 (after two empty strings)", in[8])
	}
	headroomAt := 8 + 1 + 4 + 4 + 16 + 4 + 3*4 + 1 + 4 + 16
	if got := math.Float64frombits(binary.LittleEndian.Uint64(in[headroomAt:])); got != 0.5 {
		t.Errorf("headroom bits decode to %v, want 0.5", got)
	}
}

func TestRouteBinaryRejectsMalformed(t *testing.T) {
	full := AppendRouteInputBinary(nil, &sampleRoute)
	for n := range len(full) {
		if _, err := DecodeRouteInputBinary(full[:n]); err == nil {
			t.Fatalf("a route input cut to %d of %d bytes decoded", n, len(full))
		}
	}
	bad := append([]byte(nil), full...)
	bad[2*(4+len("smart"))] = 2 // the stream flag, after model and combo
	if _, err := DecodeRouteInputBinary(bad); err == nil || !strings.Contains(err.Error(), "stream: boolean byte 2") {
		t.Errorf("bool 2: err = %v", err)
	}
	huge := binary.LittleEndian.AppendUint32(nil, 1<<30)
	if _, err := DecodeRouteAnswerBinary(huge); err == nil || !strings.Contains(err.Error(), "order: 1073741824 elements") {
		t.Errorf("oversized list count: err = %v", err)
	}
	a := AppendRouteAnswerBinary(nil, &RouteAnswer{Order: []int{0}})
	if _, err := DecodeRouteAnswerBinary(append(a, 0)); err == nil || !strings.Contains(err.Error(), "after the last field") {
		t.Errorf("trailing byte: err = %v", err)
	}
}

// TestRouteJSONNames pins the JSON field names of the route types, which
// JSON guests read and write.
func TestRouteJSONNames(t *testing.T) {
	b, err := json.Marshal(sampleRoute)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{`"request":`, `"candidates":`, `"model":`, `"combo":`, `"stream":true`, `"key_id":`,
		`"headers":`, `"tool_count":3`, `"prompt_tokens":1200`, `"provider":`, `"connection":`, `"eligible":false`,
		`"health":"open"`, `"cooldown_ms":3000`, `"lockout_ms":120000`, `"headroom":-1`, `"latency_ms":420`,
		`"in_flight":2`, `"price_in":0.8`, `"price_out":4`} {
		if !strings.Contains(string(b), name) {
			t.Errorf("JSON lacks %s: %s", name, b)
		}
	}
	var a RouteAnswer
	if err := json.Unmarshal([]byte(`{"order":[1,0],"exclude":[{"index":2,"reason":"r"}],"rule_id":"x"}`), &a); err != nil ||
		!reflect.DeepEqual(a, RouteAnswer{Order: []int{1, 0}, Exclude: []RouteExclusion{{2, "r"}}, RuleID: "x"}) {
		t.Errorf("RouteAnswer from JSON = %+v, %v", a, err)
	}
}

func TestRouteHookNames(t *testing.T) {
	bit, export, ok := HookFeature(HookRoute)
	if !ok || bit != FeatureRoute || export != ExportRoute {
		t.Errorf("HookFeature(route) = %v, %q, %v", bit, export, ok)
	}
	if sig, ok := ExportSignature(ExportRoute); !ok || sig.String() != "(i32, i32) -> (i64)" {
		t.Errorf("ExportSignature(route) = %s, %v", sig, ok)
	}
	if got := (FeatureRoute | FeatureBinary).String(); got != "binary|route" {
		t.Errorf("feature names %q", got)
	}
}

func FuzzDecodeRouteBinary(f *testing.F) {
	f.Add(AppendRouteInputBinary(nil, &sampleRoute))
	f.Add(AppendRouteAnswerBinary(nil, &RouteAnswer{Order: []int{1}, Exclude: []RouteExclusion{{0, "r"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := DecodeRouteInputBinary(b); err == nil {
			again, err := DecodeRouteInputBinary(AppendRouteInputBinary(nil, &v))
			if err != nil || len(again.Candidates) != len(v.Candidates) || again.Request.Model != v.Request.Model {
				t.Fatalf("re-encoding %+v gave %+v, %v", v, again, err)
			}
		}
		if v, err := DecodeRouteAnswerBinary(b); err == nil {
			if again, err := DecodeRouteAnswerBinary(AppendRouteAnswerBinary(nil, &v)); err != nil || !reflect.DeepEqual(again, v) {
				t.Fatalf("re-encoding %+v gave %+v, %v", v, again, err)
			}
		}
	})
}
