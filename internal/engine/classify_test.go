package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/redact"
)

func errCanceled() error { return context.Canceled }

func TestDefaultClassifierStatuses(t *testing.T) {
	type want struct {
		reason    Reason
		scope     Scope
		retryable bool
		permanent bool
		ruleID    string
	}
	tests := []struct {
		name    string
		profile Profile
		status  int
		body    string
		code    string
		want    want
	}{
		{"400 plain", ProfileAPIKey, 400, `{"error":{"message":"messages: field required"}}`, "", want{ReasonBadRequest, ScopeNone, false, false, "default.400"}},
		{"400 model not found", ProfileAPIKey, 400, `{"error":{"message":"Model not found: glm-9"}}`, "", want{ReasonNotFound, ScopeModel, true, false, "default.400.model_not_found"}},
		{"400 model does not exist", ProfileAPIKey, 400, `{"error":{"message":"The model 'gpt-9' does not exist"}}`, "", want{ReasonNotFound, ScopeModel, true, false, "default.400.model_not_found"}},
		{"400 unknown model", ProfileAPIKey, 400, "Unknown model: foo", "", want{ReasonNotFound, ScopeModel, true, false, "default.400.model_not_found"}},
		{"400 code model_not_found", ProfileAPIKey, 400, `{}`, "model_not_found", want{ReasonNotFound, ScopeModel, true, false, "default.400.model_not_found"}},
		{"400 file does not exist", ProfileAPIKey, 400, "file does not exist", "", want{ReasonBadRequest, ScopeNone, false, false, "default.400"}},
		{"401", ProfileAPIKey, 401, `{"error":{"message":"Invalid API key"}}`, "", want{ReasonAuthError, ScopeConnection, true, false, "default.401"}},
		{"401 deactivated", ProfileOAuth, 401, `{"error":{"message":"Your account has been deactivated"}}`, "", want{ReasonBanned, ScopeConnection, true, true, "default.401.banned"}},
		{"401 disabled", ProfileAPIKey, 401, "This account has been disabled", "", want{ReasonBanned, ScopeConnection, true, true, "default.401.banned"}},
		{"401 suspended", ProfileAPIKey, 401, "organization suspended", "", want{ReasonBanned, ScopeConnection, true, true, "default.401.banned"}},
		{"402", ProfileAPIKey, 402, `{"error":{"message":"Your credit balance is too low"}}`, "", want{ReasonCreditsExhausted, ScopeConnection, true, true, "default.402"}},
		{"403 apikey recoverable", ProfileAPIKey, 403, `{"error":{"message":"forbidden"}}`, "", want{ReasonAuthError, ScopeConnection, true, false, "default.403"}},
		{"403 banned", ProfileAPIKey, 403, "Your account has been banned", "", want{ReasonBanned, ScopeConnection, true, true, "default.403.banned"}},
		{"403 account disabled", ProfileOAuth, 403, "Account has been disabled", "", want{ReasonBanned, ScopeConnection, true, true, "default.403.banned"}},
		{"403 suspended", ProfileAPIKey, 403, "account suspended", "", want{ReasonBanned, ScopeConnection, true, true, "default.403.banned"}},
		{"403 oauth request not allowed", ProfileOAuth, 403, `{"error":{"message":"Request not allowed"}}`, "", want{ReasonRequestRejected, ScopeConnection, true, false, "default.403.request_rejected"}},
		{"403 apikey request not allowed", ProfileAPIKey, 403, "Request not allowed", "", want{ReasonAuthError, ScopeConnection, true, false, "default.403"}},
		{"404", ProfileAPIKey, 404, "", "", want{ReasonNotFound, ScopeModel, true, false, "default.404"}},
		{"408", ProfileAPIKey, 408, "", "", want{ReasonTransient, ScopeProvider, true, false, "default.408"}},
		{"429 rate limit", ProfileAPIKey, 429, `{"error":{"message":"Rate limit reached for requests"}}`, "", want{ReasonRateLimit, ScopeConnection, true, false, "default.429"}},
		{"429 quota", ProfileAPIKey, 429, `{"error":{"message":"You exceeded your current quota"}}`, "", want{ReasonQuotaExhausted, ScopeConnection, true, false, "default.429.quota"}},
		{"429 quota code", ProfileAPIKey, 429, `{}`, "insufficient_quota", want{ReasonQuotaExhausted, ScopeConnection, true, false, "default.429.quota"}},
		{"429 concurrency", ProfileAPIKey, 429, `{"error":{"message":"Too many concurrent requests for this account"}}`, "", want{ReasonConcurrencyLimited, ScopeConnection, true, false, "default.429.concurrency"}},
		{"429 glm concurrency", ProfileAPIKey, 429, `{"error":{"code":"1302","message":"您当前使用该API的并发数过高，请降低并发"}}`, "", want{ReasonConcurrencyLimited, ScopeConnection, true, false, "default.429.concurrency"}},
		{"429 concurrency and quota is quota", ProfileAPIKey, 429, "concurrency limit reached; daily quota exhausted", "", want{ReasonQuotaExhausted, ScopeConnection, true, false, "default.429.quota"}},
		{"499", ProfileAPIKey, 499, "", "", want{ReasonClientAbort, ScopeNone, false, false, "default.499"}},
		{"500", ProfileAPIKey, 500, "internal error", "", want{ReasonServerError, ScopeProvider, true, false, "default.500"}},
		{"501", ProfileAPIKey, 501, "", "", want{ReasonServerError, ScopeProvider, true, false, "default.501"}},
		{"502", ProfileAPIKey, 502, "<html>bad gateway</html>", "", want{ReasonTransient, ScopeProvider, true, false, "default.502"}},
		{"503", ProfileAPIKey, 503, "", "", want{ReasonTransient, ScopeProvider, true, false, "default.503"}},
		{"504", ProfileAPIKey, 504, "", "", want{ReasonTransient, ScopeProvider, true, false, "default.504"}},
		{"529 overloaded", ProfileOAuth, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "", want{ReasonTransient, ScopeProvider, true, false, "default.529"}},
		{"409 other 4xx", ProfileAPIKey, 409, "", "", want{ReasonBadRequest, ScopeNone, false, false, "default.409"}},
		{"422 other 4xx", ProfileAPIKey, 422, "", "", want{ReasonBadRequest, ScopeNone, false, false, "default.422"}},
	}
	c := DefaultClassifier{}
	for _, tt := range tests {
		in := ErrorInput{
			Provider: "prov", Connection: "conn", Model: "m", Profile: tt.profile,
			Status: tt.status, Body: tt.body, ErrorCode: tt.code, Now: breakerEpoch,
		}
		o := c.Classify(in)
		got := want{o.Reason, o.Scope, o.Retryable, o.Permanent, o.RuleID}
		if got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
		if o.Provider != "prov" || o.Connection != "conn" || o.Model != "m" || o.Profile != tt.profile ||
			o.Status != tt.status || o.UpstreamStatus != tt.status || o.RuleSource != "default" || o.Transport || o.Success {
			t.Errorf("%s: identity fields %+v", tt.name, o)
		}
		if !strings.HasPrefix(o.Message, fmt.Sprintf("upstream %d", tt.status)) {
			t.Errorf("%s: Message %q", tt.name, o.Message)
		}
	}
}

func TestDefaultClassifierTransport(t *testing.T) {
	secretURL := "https://generativelanguage.googleapis.com/v1beta/models/x:generate?key=AIzaSyDUMMYDUMMYDUMMYDUMMYDUMMY12345"
	tests := []struct {
		name    string
		err     error
		reason  Reason
		message string
	}{
		{"refused", &url.Error{Op: "Post", URL: secretURL, Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}}, ReasonNetworkError, "upstream transport error: connection refused"},
		{"reset", errors.New("read tcp 1.2.3.4:443: connection reset by peer"), ReasonNetworkError, "upstream transport error: connection reset"},
		{"dns", &url.Error{Op: "Post", URL: secretURL, Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}, ReasonNetworkError, "upstream transport error: dns lookup failed"},
		{"tls", errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority"), ReasonNetworkError, "upstream transport error: tls error"},
		{"deadline", fmt.Errorf("await headers: %w", context.DeadlineExceeded), ReasonNetworkError, "upstream transport error: timeout"},
		{"net timeout", &url.Error{Op: "Post", URL: secretURL, Err: &net.DNSError{Err: "i/o", IsTimeout: true}}, ReasonNetworkError, "upstream transport error: timeout"},
		{"eof", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), ReasonNetworkError, "upstream transport error: connection closed"},
		{"other", errors.New("something odd " + secretURL), ReasonNetworkError, "upstream transport error: network error"},
		{"client cancelled", fmt.Errorf("do: %w", context.Canceled), ReasonClientAbort, "request cancelled before upstream answered"},
	}
	for _, tt := range tests {
		o := DefaultClassifier{}.Classify(ErrorInput{Provider: "p", TransportErr: tt.err, Now: breakerEpoch})
		if o.Reason != tt.reason || o.Message != tt.message || o.RuleSource != "default" {
			t.Errorf("%s: reason %s message %q", tt.name, o.Reason, o.Message)
		}
		if strings.Contains(o.Message, "AIza") || strings.Contains(o.Message, "key=") {
			t.Errorf("%s: message leaks the URL: %q", tt.name, o.Message)
		}
		if tt.reason == ReasonNetworkError {
			if o.Scope != ScopeProvider || !o.Transport || !o.Retryable || o.RuleID != "default.transport" || !TripsBreaker(o) {
				t.Errorf("%s: %+v, want transport provider-scoped retryable tripping", tt.name, o)
			}
		} else if o.Scope != ScopeNone || o.Retryable || TripsBreaker(o) {
			t.Errorf("%s: %+v, want a client abort that locks nothing", tt.name, o)
		}
	}
}

func TestDefaultClassifierRetryHint(t *testing.T) {
	c := DefaultClassifier{}
	o := c.Classify(ErrorInput{Status: 429, Headers: map[string]string{"retry-after": "17"}, Now: breakerEpoch})
	if o.RetryHint != 17*time.Second || o.RetryHintSource != "retry-after" {
		t.Errorf("header hint: %v %q", o.RetryHint, o.RetryHintSource)
	}
	o = c.Classify(ErrorInput{Status: 429, Body: `{"error":{"message":"Usage limit reached. Resets in 164h27m24s"}}`, Now: breakerEpoch})
	if o.RetryHint != (164*3600+27*60+24)*time.Second || o.RetryHintSource != "body" || o.Reason != ReasonQuotaExhausted {
		t.Errorf("body hint: %v %q %s", o.RetryHint, o.RetryHintSource, o.Reason)
	}
	o = c.Classify(ErrorInput{Status: 503, Now: breakerEpoch})
	if o.RetryHint != 0 || o.RetryHintSource != "" {
		t.Errorf("no hint: %v %q", o.RetryHint, o.RetryHintSource)
	}
}

func TestDefaultClassifierMessage(t *testing.T) {
	long := strings.Repeat("quota details ", 200)
	tests := []struct {
		name string
		body string
		want string
	}{
		{"openai shape", `{"error":{"message":"Rate limit reached","type":"requests"}}`, "upstream 429: Rate limit reached"},
		{"string error", `{"error":"too busy"}`, "upstream 429: too busy"},
		{"top-level message", `{"message":"slow down"}`, "upstream 429: slow down"},
		{"detail", `{"detail":"nope"}`, "upstream 429: nope"},
		{"array", `[{"error":{"code":429,"message":"Resource exhausted"}}]`, "upstream 429: Resource exhausted"},
		{"plain short", "  too many\trequests  ", "upstream 429: too many requests"},
		{"html", "<html><body>secret page</body></html>", "upstream 429"},
		{"multi-line text", "line one\nline two", "upstream 429"},
		{"long text", long, "upstream 429"},
		{"empty", "", "upstream 429"},
		{"key redacted", `{"error":{"message":"Incorrect API key provided: sk-proj-abcdefghijklmnop1234567890XYZ. See docs."}}`, "upstream 429: Incorrect API key provided: [redacted]. See docs."},
		{"google key redacted", `{"error":{"message":"API key AIzaSyA1b2C3d4E5f6G7h8 not valid"}}`, "upstream 429: API key [redacted] not valid"},
		{"token redacted", `{"error":{"message":"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc is expired"}}`, "upstream 429: token [redacted] is expired"},
		{"masked key kept", `{"error":{"message":"Incorrect API key provided: sk-proj-****abcd"}}`, "upstream 429: Incorrect API key provided: sk-proj-****abcd"},
		{"model names survive", `{"error":{"message":"claude-3-5-sonnet-20241022 is overloaded"}}`, "upstream 429: claude-3-5-sonnet-20241022 is overloaded"},
	}
	for _, tt := range tests {
		o := DefaultClassifier{}.Classify(ErrorInput{Status: 429, Body: tt.body, Now: breakerEpoch})
		if o.Message != tt.want {
			t.Errorf("%s: Message %q, want %q", tt.name, o.Message, tt.want)
		}
	}
	o := DefaultClassifier{}.Classify(ErrorInput{Status: 500, Body: `{"error":{"message":"` + long + `"}}`})
	if len(o.Message) > maxMessageLen+len("upstream 500: ") || !strings.HasSuffix(o.Message, "…") {
		t.Errorf("long JSON message not truncated: %d bytes", len(o.Message))
	}
	o = DefaultClassifier{}.Classify(ErrorInput{Status: 500, Body: `{"error":{"message":"` + strings.Repeat("额", 300) + `"}}`})
	if !strings.HasSuffix(o.Message, "…") || strings.ContainsRune(o.Message, '\uFFFD') || len(o.Message) > maxMessageLen+len("upstream 500: ") {
		t.Errorf("multi-byte truncation broke a rune: %q", o.Message)
	}
}

func TestIsConcurrencyLimitedText(t *testing.T) {
	tests := map[string]bool{
		"Too Many Concurrent Requests":            true,
		"account concurrency limit exceeded":      true,
		"Parallel request limit reached":          true,
		"您当前使用该API的并发数过高，请降低并发":                   true,
		`{"code":"concurrency_limit_exceeded"}`:   true,
		"rate limit exceeded":                     false,
		"You exceeded your current quota":         false,
		"":                                        false,
		"too many requests, please slow down now": false,
	}
	for body, want := range tests {
		if got := IsConcurrencyLimitedText(body); got != want {
			t.Errorf("IsConcurrencyLimitedText(%q) = %v, want %v", body, got, want)
		}
	}
}

func TestIsQuotaText(t *testing.T) {
	tests := map[string]bool{
		"You exceeded your current quota, please check your plan": true,
		`{"code":"insufficient_quota"}`:                           true,
		"QUOTA exceeded for metric":                               true,
		"Usage limit reached for this billing period":             true,
		"用户额度不足":                                                  true,
		"daily limit reached":                                     true,
		"rate limit exceeded":                                     false,
		"too many concurrent requests":                            false,
		"":                                                        false,
	}
	for body, want := range tests {
		if got := IsQuotaText(body); got != want {
			t.Errorf("IsQuotaText(%q) = %v, want %v", body, got, want)
		}
	}
}

func BenchmarkDefaultClassifierClassify(b *testing.B) {
	in := ErrorInput{
		Provider: "openai", Connection: "key-a", Model: "gpt-4o", Profile: ProfileAPIKey, Status: 429,
		Headers: map[string]string{
			"x-ratelimit-reset-requests": "20ms", "x-ratelimit-remaining-requests": "0",
			"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "1500",
		},
		Body: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.","type":"requests","code":"rate_limit_exceeded"}}`,
		Now:  time.Now(),
	}
	c := DefaultClassifier{}
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(in)
	}
}

// protocolFault stands in for upstream.ProtocolError.
type protocolFault struct{}

func (protocolFault) Error() string         { return "upstream protocol error: response headers exceed 64 KiB" }
func (protocolFault) ProtocolFault() string { return "response headers exceed 64 KiB" }

// TestDefaultClassifierProtocolErrors pins issue 19 items 3 and 10: a
// redirect and a broken answer are the provider's failure (fail over, back
// the connection off) but never a transport failure of the provider, and
// never trip the breaker.
func TestDefaultClassifierProtocolErrors(t *testing.T) {
	for _, in := range []ErrorInput{
		{Provider: "p", Status: 301, Body: "<html>moved</html>"},
		{Provider: "p", Status: 302},
		{Provider: "p", Status: 307},
		{Provider: "p", Status: 308},
		{Provider: "p", TransportErr: fmt.Errorf("call: %w", protocolFault{})},
	} {
		o := DefaultClassifier{}.Classify(in)
		if o.Reason != ReasonServerError || o.Scope != ScopeConnection || !o.Retryable || o.Permanent || o.Transport || TripsBreaker(o) {
			t.Fatalf("%d/%v classified %+v", in.Status, in.TransportErr, o)
		}
		if !affectsConnection(o) || !countsForWindowGate(o) {
			t.Fatalf("%d: a protocol error must back the connection off", in.Status)
		}
		if in.Status != 0 && (o.RuleID != fmt.Sprintf("default.%d.redirect", in.Status) || !strings.Contains(o.Message, "redirect not followed")) {
			t.Fatalf("%d: rule %q message %q", in.Status, o.RuleID, o.Message)
		}
		if in.Status == 0 && (o.RuleID != "default.protocol" || o.Message != "upstream protocol error: response headers exceed 64 KiB") {
			t.Fatalf("protocol fault: rule %q message %q", o.RuleID, o.Message)
		}
	}
}

// TestLastErrorIsRedacted pins issue 19 item 4 for the engine: an upstream
// that echoes the gateway's key must not leave it in the connection's
// last_error, neither for a configured value of any shape nor for a
// key-shaped token.
func TestLastErrorIsRedacted(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	e, err := New(context.Background(), Options{Clock: clock, Store: newMemStore(clock), Providers: testProviders(),
		Redactor: redact.New("plain-configured-value")})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"error":{"message":"Incorrect API key provided: plain-configured-value","code":"invalid_api_key"}}`,
		`{"error":{"message":"Incorrect API key provided: sk-proj-AbC123dEf456GhI789jKl012mNo345","code":"invalid_api_key"}}`,
	} {
		o := e.Classify(ErrorInput{Provider: "openai", Connection: "key-a", Model: "gpt-4o", Status: 401, Body: body, Now: clock.Now()})
		if err := e.RecordFailure(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		cs := e.Cooldowns("openai")
		if len(cs) == 0 {
			t.Fatal("no cooldown recorded")
		}
		for _, c := range cs {
			if strings.Contains(c.LastError, "plain-configured-value") || strings.Contains(c.LastError, "sk-proj-") || !strings.Contains(c.LastError, redact.Mask) {
				t.Fatalf("last_error %q", c.LastError)
			}
		}
		clock.Advance(time.Hour)
	}
}

// TestSingleSpaced checks that singleSpaced(s) holds exactly when
// collapsing s's white space (strings.Fields, joined by one space) leaves
// it as it is, on hand-picked strings and every short string over an
// alphabet of spaces, words and invalid UTF-8.
func TestSingleSpaced(t *testing.T) {
	same := func(s string) bool { return strings.Join(strings.Fields(s), " ") == s }
	for _, s := range []string{"", " ", "a", "a b", "a  b", " a", "a ", "a\tb", "a\nb", "a\u00a0b", "a\u2003b",
		"a\u0085b", "额度 不足", "a\xffb", "\xff \xfe", "rate limit reached for gpt-4o"} {
		if got := singleSpaced(s); got != same(s) {
			t.Errorf("singleSpaced(%q) = %t, want %t", s, got, same(s))
		}
	}
	pieces := []string{"a", " ", "\t", "\u00a0", "\xff", "额"}
	var gen func(s string, n int)
	gen = func(s string, n int) {
		if got := singleSpaced(s); got != same(s) {
			t.Fatalf("singleSpaced(%q) = %t, want %t", s, got, same(s))
		}
		if n == 0 {
			return
		}
		for _, p := range pieces {
			gen(s+p, n-1)
		}
	}
	gen("", 5)
}
