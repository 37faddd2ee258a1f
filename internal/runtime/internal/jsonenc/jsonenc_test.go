package jsonenc

import (
	"encoding/json"
	"testing"
)

func TestAppendStringRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "line\nfeed\r\ttab\x01\x1f", "é ü 日本 🎉", "sep\u2028par\u2029", "bad\xffutf8"} {
		out := AppendString(nil, s)
		if !json.Valid(out) {
			t.Fatalf("%q → invalid JSON %s", s, out)
		}
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		want := s
		if s == "bad\xffutf8" {
			want = "bad\ufffdutf8"
		}
		if back != want {
			t.Fatalf("%q → %s → %q", s, out, back)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("hello \"world\"\n")
	f.Fuzz(func(t *testing.T, s string) {
		if out := AppendString(nil, s); !json.Valid(out) {
			t.Fatalf("invalid JSON for %q: %s", s, out)
		}
	})
}

// TestAppendStringStdIsEncodingJSON: AppendStringStd writes what
// json.Marshal writes, byte for byte, and AppendString differs from it
// only where documented.
func TestAppendStringStdIsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "line\nfeed\r\ttab\x01\x1f\b\f\x7f", "é ü 日本 🎉",
		"sep\u2028par\u2029", "bad\xffutf8\xc3", "<script>&amp;</script>"} {
		want, _ := json.Marshal(s)
		if got := AppendStringStd(nil, s); string(got) != string(want) {
			t.Errorf("%q: %s, encoding/json %s", s, got, want)
		}
	}
	if got := string(AppendString(nil, "<\b>")); got != `"<\u0008>"` {
		t.Errorf("AppendString changed: %s", got)
	}
}

func FuzzAppendStringStd(f *testing.F) {
	f.Add("<a href=\"x\">\b\f\u2028\xff</a>")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendStringStd(nil, s); string(got) != string(want) {
			t.Fatalf("%q: %s, encoding/json %s", s, got, want)
		}
	})
}
