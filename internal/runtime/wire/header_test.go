package wire

import "testing"

func TestValidHeader(t *testing.T) {
	for _, c := range []struct {
		v  string
		ok bool
	}{
		{"", true},
		{"prompt-caching-2024-07-31,tools-2024-05-16", true},
		{"a\tb", true},
		{"é ünïcode", true},
		{"a\x01b", false},
		{"a\r\nX-Injected: 1", false},
		{"a\x00", false},
		{"a\x7f", false},
	} {
		if got := ValidHeaderValue(c.v); got != c.ok {
			t.Errorf("ValidHeaderValue(%q) = %v", c.v, got)
		}
	}
	for _, c := range []struct {
		n  string
		ok bool
	}{{"anthropic-beta", true}, {"X_Y.z~1", true}, {"", false}, {"a b", false}, {"a:b", false}, {"é", false}} {
		if got := ValidHeaderName(c.n); got != c.ok {
			t.Errorf("ValidHeaderName(%q) = %v", c.n, got)
		}
	}
}
