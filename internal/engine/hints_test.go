package engine

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestParseResetText(t *testing.T) {
	tests := []struct {
		body string
		want time.Duration
		ok   bool
	}{
		// The spec's examples (docs/resilience.md §2, §7).
		{"reset after 2h30m14s", 9_014_000 * time.Millisecond, true},
		{"45m", 2_700_000 * time.Millisecond, true},
		{"Your quota will reset after 45m.", 2_700_000 * time.Millisecond, true},
		{"Usage limit reached. Resets in 164h27m24s", (164*3600 + 27*60 + 24) * time.Second, true},
		{"Rate limited, retry after 20s", 20 * time.Second, true},
		{"Rate limit reached for gpt-4o. Please try again in 1.5s.", 1500 * time.Millisecond, true},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay": "86399s"}]}}`, 86399 * time.Second, true},
		{`{"retryDelay":"0.5s"}`, 500 * time.Millisecond, true},
		// More shapes.
		{"Please try again in 6m0s.", 6 * time.Minute, true},
		{"Please try again in 20ms.", 20 * time.Millisecond, true},
		{"RETRY AFTER 30 SECONDS", 30 * time.Second, true},
		{"retry after 20", 20 * time.Second, true},
		{"retry in 2 hours 30 minutes", 150 * time.Minute, true},
		{"resets in 1d2h", 26 * time.Hour, true},
		{`{"retry_after": 12}`, 12 * time.Second, true},
		{`{"retry_after_ms": 250}`, 250 * time.Millisecond, true},
		{"limit resets after 5min30s", 330 * time.Second, true},
		// Capped at 30 days.
		{"resets in 999h", MaxRetryHint, true},
		{"retry after 99999999999999999999999d", MaxRetryHint, true},
		// Nothing to find.
		{"", 0, false},
		{"rate limit exceeded", 0, false},
		{"please retry after some time", 0, false},
		{"model gpt-4o 45m tokens", 0, false},
		{"retry after .", 0, false},
		{"<html>502 Bad Gateway</html>", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseResetText(tt.body)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseResetText(%q) = %v, %v; want %v, %v", tt.body, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseRetryHint(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	epoch := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	tests := []struct {
		name    string
		headers map[string]string
		body    string
		now     time.Time
		want    time.Duration
		source  string
		ok      bool
	}{
		{"retry-after-ms", map[string]string{"retry-after-ms": "1500"}, "", now, 1500 * time.Millisecond, "retry-after-ms", true},
		{"retry-after-ms wins", map[string]string{"retry-after-ms": "250", "retry-after": "9"}, "retry after 99s", now, 250 * time.Millisecond, "retry-after-ms", true},
		{"bad retry-after-ms falls through", map[string]string{"retry-after-ms": "soon", "retry-after": "9"}, "", now, 9 * time.Second, "retry-after", true},
		{"retry-after seconds", map[string]string{"retry-after": "30"}, "", now, 30 * time.Second, "retry-after", true},
		{"retry-after zero", map[string]string{"retry-after": "0"}, "", now, 0, "retry-after", true},
		{"retry-after http date", map[string]string{"retry-after": "Sun, 01 Jun 2025 12:02:00 GMT"}, "", now, 2 * time.Minute, "retry-after", true},
		{"retry-after past date", map[string]string{"retry-after": "Sun, 01 Jun 2025 11:00:00 GMT"}, "", now, 0, "retry-after", true},
		{"retry-after rfc850", map[string]string{"retry-after": "Sunday, 01-Jun-25 12:00:30 GMT"}, "", now, 30 * time.Second, "retry-after", true},
		{"retry-after date without now", map[string]string{"retry-after": "Sun, 01 Jun 2025 12:02:00 GMT"}, "", time.Time{}, 0, "", false},
		{"retry-after capped", map[string]string{"retry-after": "99999999"}, "", now, MaxRetryHint, "retry-after", true},
		{"retry-after negative ignored", map[string]string{"retry-after": "-5"}, "", now, 0, "", false},
		{"retry-after wins over reset", map[string]string{"retry-after": "7", "x-ratelimit-reset": "60"}, "", now, 7 * time.Second, "retry-after", true},
		{"reset seconds", map[string]string{"x-ratelimit-reset": "42"}, "", now, 42 * time.Second, "x-ratelimit-reset", true},
		{"reset epoch seconds", map[string]string{"x-ratelimit-reset": epoch(90 * time.Second)}, "", now, 90 * time.Second, "x-ratelimit-reset", true},
		{"reset epoch past", map[string]string{"x-ratelimit-reset": epoch(-time.Hour)}, "", now, 0, "x-ratelimit-reset", true},
		{"reset epoch ms", map[string]string{"x-ratelimit-reset": strconv.FormatInt(now.Add(1500*time.Millisecond).UnixMilli(), 10)}, "", now, 1500 * time.Millisecond, "x-ratelimit-reset", true},
		{"reset epoch without now", map[string]string{"x-ratelimit-reset": epoch(90 * time.Second)}, "", time.Time{}, 0, "", false},
		{"reset rfc3339", map[string]string{"x-ratelimit-reset": "2025-06-01T12:00:10Z"}, "", now, 10 * time.Second, "x-ratelimit-reset", true},
		{"openai duration text, largest", map[string]string{
			"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
		}, "", now, 6 * time.Minute, "x-ratelimit-reset", true},
		{"openai only the exhausted limit", map[string]string{
			"x-ratelimit-reset-requests": "20ms", "x-ratelimit-remaining-requests": "0",
			"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "1500",
		}, "", now, 20 * time.Millisecond, "x-ratelimit-reset", true},
		{"limits not hit: resets ignored, body used", map[string]string{
			"x-ratelimit-reset-requests": "20ms", "x-ratelimit-remaining-requests": "3",
			"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "1500",
		}, "Please try again in 2s.", now, 2 * time.Second, "body", true},
		{"bad reset ignored", map[string]string{"x-ratelimit-reset": "later"}, "", now, 0, "", false},
		{"body", nil, "reset after 2h30m14s", now, 9_014_000 * time.Millisecond, "body", true},
		{"body capped", nil, "resets in 800h", now, MaxRetryHint, "body", true},
		{"nothing", map[string]string{"content-type": "application/json"}, `{"error":"bad"}`, now, 0, "", false},
	}
	for _, tt := range tests {
		d, source, ok := parseRetryHint(tt.headers, tt.body, tt.now)
		if d != tt.want || source != tt.source || ok != tt.ok {
			t.Errorf("%s: ParseRetryHint = %v, %q, %v; want %v, %q, %v", tt.name, d, source, ok, tt.want, tt.source, tt.ok)
		}
	}
}

func FuzzParseResetText(f *testing.F) {
	for _, s := range []string{"reset after 2h30m14s", "45m", "retry after 1.5.5s", "retryDelay: \"9s\"", "İİ 45m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		d, ok := ParseResetText(body)
		if d < 0 || d > MaxRetryHint || (!ok && d != 0) {
			t.Fatalf("ParseResetText(%q) = %v, %v", body, d, ok)
		}
	})
}

// FuzzParseRetryHint: whatever the headers and body say, a hint is never
// negative nor over MaxRetryHint, and no hint means no wait.
func FuzzParseRetryHint(f *testing.F) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Add("retry-after", "120", "", int64(0))
	f.Add("retry-after", "Sun, 01 Jun 2025 12:00:30 GMT", "", int64(0))
	f.Add("retry-after-ms", "1500.5", "", int64(0))
	f.Add("x-ratelimit-reset-requests", "6m0s", "x-ratelimit-remaining-requests: 0", int64(0))
	f.Add("x-ratelimit-reset", "1748779260", "", int64(0))
	f.Add("x-ratelimit-reset-tokens", "2025-06-01T12:01:00Z", "", int64(-5))
	f.Add("x", "y", `{"error":{"message":"Please retry after 2h30m14s"}}`, int64(1))
	f.Add("retry-after", "1e309", "Resets in 164h27m24s", int64(0))
	f.Fuzz(func(t *testing.T, name, value, body string, offset int64) {
		h := map[string]string{name: value, "x-ratelimit-remaining-requests": "0"}
		for _, at := range []time.Time{{}, now.Add(time.Duration(offset))} {
			d, source, ok := parseRetryHint(h, body, at)
			if d < 0 || d > MaxRetryHint || (!ok && (d != 0 || source != "")) || (ok && source == "") {
				t.Fatalf("ParseRetryHint(%q: %q, %q, %v) = %v, %q, %v", name, value, body, at, d, source, ok)
			}
		}
	})
}

// TestResetQuickCheckIsExact pins what mayStateReset relies on: every
// reset keyword contains "try" or "reset", and no character but ASCII
// letters lower-cases to one of the letters of those words.
func TestResetQuickCheckIsExact(t *testing.T) {
	for _, kw := range resetKeywords {
		if !strings.Contains(kw.phrase, "try") && !strings.Contains(kw.phrase, "reset") {
			t.Errorf("reset keyword %q contains neither \"try\" nor \"reset\": mayStateReset would skip it", kw.phrase)
		}
	}
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if l := strings.ToLower(string(r)); strings.ContainsAny(l, "tryes") {
			t.Errorf("%U lower-cases to %q", r, l)
		}
	}
	for _, body := range []string{"Please RETRY after 2s", "rate limit resets in 5m", " 45m ", "TRY AGAIN IN 3 SECONDS"} {
		if !mayStateReset(body) {
			t.Errorf("mayStateReset(%q) = false", body)
		}
	}
	for _, body := range []string{`{"error":{"message":"Rate limit reached for gpt-4o"}}`, "用户额度不足", "  "} {
		if mayStateReset(body) {
			t.Errorf("mayStateReset(%q) = true", body)
		}
	}
}

// FuzzResetQuickCheck: a body mayStateReset rules out has no wait.
func FuzzResetQuickCheck(f *testing.F) {
	for _, s := range []string{"retry after 20s", "İ try again in 1.5s", "RESETS IN 164h27m24s", "45m", ".5s", "用户额度不足"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if d, ok := parseResetText(body); ok && !mayStateReset(body) {
			t.Fatalf("body %q states a wait of %s, but mayStateReset rules it out", body, d)
		}
	})
}

// TestContainsFoldASCII compares containsFoldASCII with lower-casing s's
// ASCII letters and strings.Contains, on hand-picked and generated
// strings (many places of the first letter in both cases, matches at the
// ends, words cut by the end).
func TestContainsFoldASCII(t *testing.T) {
	want := func(s, lower string) bool {
		b := []byte(s)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return strings.Contains(string(b), lower)
	}
	cases := []string{"", "t", "T", "tr", "TRY", "tRy", "xxtrY", "ttttttry", "TTTTTtRy", "tTtTtTr", "try again",
		"Please TRY", "RESET at", "rese", "reseT", "rreset", "RrEsEt", "额度 try", "ſtry", "\u212atry", "tr\u00ffy"}
	for _, w := range []string{"try", "reset", "a", "t"} {
		for _, s := range cases {
			if got := containsFoldASCII(s, w); got != want(s, w) {
				t.Errorf("containsFoldASCII(%q, %q) = %t", s, w, got)
			}
		}
	}
	// Generated: every string of up to 7 letters from {t, T, r, R, y, Y, x}.
	alphabet := "tTrRyYx"
	var gen func(prefix string)
	gen = func(prefix string) {
		for _, w := range []string{"try", "tr", "t"} {
			if got := containsFoldASCII(prefix, w); got != want(prefix, w) {
				t.Fatalf("containsFoldASCII(%q, %q) = %t", prefix, w, got)
			}
		}
		if len(prefix) == 7 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			gen(prefix + alphabet[i:i+1])
		}
	}
	gen("")
}
