package translate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAppendString(t *testing.T) {
	cases := map[string]string{
		"plain":                 "plain",
		"quote\"slash\\":        "quote\"slash\\",
		"ctl\x00\x01\x1f\t\r\n": "ctl\x00\x01\x1f\t\r\n",
		"html <a>&":             "html <a>&",
		"sep\u2028\u2029":       "sep\u2028\u2029",
		"日本語 🚀":                 "日本語 🚀",
		"bad\xff\xfeutf8":       "bad\ufffd\ufffdutf8",
		"":                      "",
	}
	for in, want := range cases {
		b := appendString(nil, in)
		if !json.Valid(b) {
			t.Fatalf("%q → invalid JSON %s", in, b)
		}
		if strings.ContainsAny(string(b), "\u2028\u2029") {
			t.Errorf("%q: line separators must be escaped: %s", in, b)
		}
		var got string
		if err := json.Unmarshal(b, &got); err != nil || got != want {
			t.Errorf("%q → %s → %q, want %q (%v)", in, b, got, want, err)
		}
	}
}
