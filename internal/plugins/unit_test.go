package plugins

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/plugins/abi"
)

func TestNegotiate(t *testing.T) {
	all := abi.FeaturesKnown
	noKV := all &^ abi.FeatureKV
	tests := []struct {
		name       string
		major      uint32
		features   abi.Feature
		configured []string
		have       abi.Feature
		want       string // hooks joined, or the error's substring
		wantErr    bool
	}{
		{"configured subset", 1, abi.FeatureClassify | abi.FeatureRestate, []string{"classify"}, all, "classify", false},
		{"derived from features, canonical order", 1, abi.FeatureOnRequest | abi.FeatureRestate | abi.FeatureLog, nil, all, "restate,on_request", false},
		{"major mismatch", 2, abi.FeatureClassify, nil, all, "guest speaks ABI major 2, host speaks 1.2", true},
		{"major zero", 0, abi.FeatureClassify, nil, all, "guest speaks ABI major 0", true},
		{"unknown feature bit", 1, abi.FeatureClassify | 1<<40, nil, all, "features the host does not know: bit40", true},
		{"KV without a store", 1, abi.FeatureClassify | abi.FeatureKV, nil, noKV, "cannot provide: kv", true},
		{"configured hook not implemented", 1, abi.FeatureClassify, []string{"restate", "classify"}, all, "hook restate is configured but the guest does not implement it", true},
		{"no hooks at all", 1, abi.FeatureLog, nil, all, "guest implements no hook (features: log)", true},
	}
	for _, tt := range tests {
		hooks, err := negotiate(tt.major, tt.features, tt.configured, tt.have)
		got := strings.Join(hooks, ",")
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tt.want) || (err != nil) != tt.wantErr {
			t.Errorf("%s: negotiate = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestAnswerValidation(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string // "" = valid
	}{
		{"decision ok", validDecision(&abi.Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 1}), ""},
		{"decision default scope", validDecision(&abi.Decision{Reason: "transient"}), ""},
		{"decision no reason", validDecision(&abi.Decision{Scope: "model"}), `unknown reason ""`},
		{"decision local reason", validDecision(&abi.Decision{Reason: "local_error"}), `unknown reason "local_error"`},
		{"decision client abort", validDecision(&abi.Decision{Reason: "client_abort"}), `unknown reason "client_abort"`},
		{"decision bad scope", validDecision(&abi.Decision{Reason: "banned", Scope: "planet"}), `unknown scope "planet"`},
		{"decision negative cooldown", validDecision(&abi.Decision{Reason: "banned", CooldownMS: -1}), "negative cooldown_ms -1"},
		{"restatement ok", validRestatement(&abi.Restatement{Status: 503, RetryAfterMS: 100}), ""},
		{"restatement 99", validRestatement(&abi.Restatement{Status: 99}), "status 99 is not an HTTP status"},
		{"restatement 600", validRestatement(&abi.Restatement{Status: 600}), "status 600"},
		{"restatement negative wait", validRestatement(&abi.Restatement{Status: 429, RetryAfterMS: -5}), "negative retry_after_ms"},
		{"action ok", validRequestAction(&abi.RequestAction{Model: "m", SetHeaders: map[string]string{"X-Team": "a b", "x-gone": ""}}), ""},
		{"action reject 400", validRequestAction(&abi.RequestAction{RejectStatus: 400}), ""},
		{"action reject 499", validRequestAction(&abi.RequestAction{RejectStatus: 499}), ""},
		{"action reject 500", validRequestAction(&abi.RequestAction{RejectStatus: 500}), "reject_status 500 is not a client error"},
		{"action reject 399", validRequestAction(&abi.RequestAction{RejectStatus: 399}), "reject_status 399"},
		{"action header injection", validRequestAction(&abi.RequestAction{SetHeaders: map[string]string{"x-a": "v\r\nx-evil: 1"}}), `invalid value for header "x-a"`},
		{"action bad header name", validRequestAction(&abi.RequestAction{SetHeaders: map[string]string{"x a": "v"}}), `invalid header name "x a"`},
		{"action empty header name", validRequestAction(&abi.RequestAction{SetHeaders: map[string]string{"": "v"}}), `invalid header name ""`},
	}
	for _, tt := range tests {
		switch {
		case tt.want == "" && tt.err != nil:
			t.Errorf("%s: %v, want valid", tt.name, tt.err)
		case tt.want != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.name, tt.err, tt.want)
		}
	}
}

func TestErrorInputEncoder(t *testing.T) {
	in := abi.ErrorInput{Provider: "p", Status: 429,
		Headers: map[string]string{"Authorization": "Bearer sk-1", "set-cookie": "s=1", "retry-after": "3"},
		Body:    strings.Repeat("a", abi.MaxBodyBytes-1) + "€"} // the euro sign straddles the limit
	enc := errorInputEncoder(in)
	for _, binary := range []bool{false, true} {
		b, err := enc(binary)
		if err != nil {
			t.Fatal(err)
		}
		var got abi.ErrorInput
		if binary {
			got, err = abi.DecodeErrorInputBinary(b)
		} else {
			err = json.Unmarshal(b, &got)
		}
		if err != nil {
			t.Fatalf("binary %v: %v", binary, err)
		}
		if len(got.Headers) != 1 || got.Headers["retry-after"] != "3" {
			t.Errorf("binary %v: headers = %v, want only retry-after", binary, got.Headers)
		}
		if len(got.Body) != abi.MaxBodyBytes-1 || strings.ContainsRune(got.Body, '\uFFFD') {
			t.Errorf("binary %v: body is %d bytes, want %d cut before the straddling rune", binary, len(got.Body), abi.MaxBodyBytes-1)
		}
		if bytes.Contains(b, []byte("sk-1")) {
			t.Errorf("binary %v: a credential reached the guest input", binary)
		}
	}
	if in.Headers["Authorization"] == "" {
		t.Error("the caller's header map was modified")
	}
}

func TestLatencyWindowP99(t *testing.T) {
	var w latencyWindow
	if w.p99() != 0 {
		t.Fatal("empty window p99 != 0")
	}
	for i := 1; i <= 100; i++ {
		w.add(time.Duration(i) * time.Microsecond)
	}
	if got := w.p99(); got != 99*time.Microsecond {
		t.Fatalf("p99 of 1..100 µs = %v, want 99µs", got)
	}
	// Only the last latencyWindowSize calls count.
	for range latencyWindowSize {
		w.add(time.Millisecond)
	}
	if got := w.p99(); got != time.Millisecond {
		t.Fatalf("p99 after the window rolled = %v, want 1ms", got)
	}
	w.add(time.Second) // 1 of 1024 slow calls is within the top 1 %
	if got := w.p99(); got != time.Millisecond {
		t.Fatalf("p99 with one outlier = %v, want 1ms", got)
	}
}

func TestErrorLogLimiter(t *testing.T) {
	var l errorLogLimiter
	t0 := time.Unix(1000, 0)
	if ok, _ := l.allow(t0); !ok {
		t.Fatal("first failure not logged")
	}
	for i := range 3 {
		if ok, _ := l.allow(t0.Add(time.Duration(i+1) * 100 * time.Millisecond)); ok {
			t.Fatal("failure within the interval logged")
		}
	}
	ok, suppressed := l.allow(t0.Add(errorLogInterval))
	if !ok || suppressed != 3 {
		t.Fatalf("after the interval: allow = %v, suppressed %d; want true, 3", ok, suppressed)
	}
}

func TestLineWriter(t *testing.T) {
	var lines []string
	w := newLineWriter(func(l hclog.Level, line string) { lines = append(lines, l.String()+" "+line) }, hclog.Warn)
	_, _ = w.Write([]byte("pan"))
	_, _ = w.Write([]byte("ic: boom\r\n\ngoroutine 1"))
	_, _ = w.Write([]byte(strings.Repeat("x", 2*abi.MaxLogBytes)))
	w.flush()
	if len(lines) != 2 {
		t.Fatalf("got %d log lines, want 2 (empty lines dropped): %q", len(lines), lines)
	}
	if lines[0] != "warn panic: boom" {
		t.Errorf("line 0 = %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "warn goroutine 1xxx") || len(lines[1]) != len("warn ")+abi.MaxLogBytes {
		t.Errorf("line 1 (%d bytes) not bounded to MaxLogBytes", len(lines[1]))
	}
}

func TestFeatureNames(t *testing.T) {
	if got := (abi.FeatureClassify | abi.FeatureKV | 1<<9).String(); got != "classify|kv|bit9" {
		t.Errorf("String = %q", got)
	}
	if got := abi.Feature(0).String(); got != "none" {
		t.Errorf("String(0) = %q", got)
	}
}

func TestNilHost(t *testing.T) {
	var h *Host
	if _, ok := h.Classify(t.Context(), abi.ErrorInput{}); ok {
		t.Error("nil Classify answered")
	}
	if _, ok := h.Restate(t.Context(), abi.ErrorInput{}); ok {
		t.Error("nil Restate answered")
	}
	if _, ok := h.OnRequest(t.Context(), abi.RequestInfo{}); ok {
		t.Error("nil OnRequest answered")
	}
	if h.List() != nil {
		t.Error("nil List not empty")
	}
}
