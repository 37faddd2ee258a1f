package wire

import "testing"

func TestErrorFields(t *testing.T) {
	cases := []struct{ body, code, typ string }{
		{`{"error":{"message":"x","type":"insufficient_quota","code":"insufficient_quota"}}`, "insufficient_quota", "insufficient_quota"},
		{`{"error":{"code":1302,"message":"并发数过高"}}`, "1302", ""},
		{`{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, "", "overloaded_error"},
		{`<html>bad gateway</html>`, "", ""},
		{``, "", ""},
	}
	for _, c := range cases {
		if code, typ := ErrorFields([]byte(c.body)); code != c.code || typ != c.typ {
			t.Errorf("ErrorFields(%s) = %q, %q; want %q, %q", c.body, code, typ, c.code, c.typ)
		}
	}
}

func TestAPIErrorShapes(t *testing.T) {
	e := &APIError{Status: 429, Type: "rate_limit_error", Code: "rate_limit_error", Message: "slow", RetryAfter: 1500e6}
	if e.RetryAfterSeconds() != "2" {
		t.Fatalf("Retry-After rounds up: %q", e.RetryAfterSeconds())
	}
	if got := string(e.Body(FormatMessages)); got != `{"error":{"code":"rate_limit_error","message":"slow","type":"rate_limit_error"},"type":"error"}` {
		t.Fatalf("anthropic shape %s", got)
	}
}
