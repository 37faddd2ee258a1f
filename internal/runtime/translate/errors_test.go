package translate

import (
	"strings"
	"testing"
)

func TestErrorToOpenAI(t *testing.T) {
	cases := []struct {
		status         int
		body           string
		typ, code, msg any
	}{
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`, "invalid_request_error", "invalid_request_error", "max_tokens: Field required"},
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, "authentication_error", "authentication_error", "invalid x-api-key"},
		{403, `{"type":"error","error":{"type":"permission_error","message":"no access"}}`, "permission_error", "permission_error", "no access"},
		{404, `{"type":"error","error":{"type":"not_found_error","message":"model: x"}}`, "invalid_request_error", "not_found_error", "model: x"},
		{413, `{"type":"error","error":{"type":"request_too_large","message":"too big"}}`, "invalid_request_error", "request_too_large", "too big"},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "rate_limit_error", "rate_limit_error", "slow down"},
		{500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, "server_error", "api_error", "Internal server error"},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "server_error", "overloaded_error", "Overloaded"},
		{504, `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`, "server_error", "timeout_error", "Request timed out"},
		{502, `<html><body>bad gateway</body></html>`, "server_error", nil, "upstream error: Bad Gateway"},
		{503, `upstream connect error or disconnect/reset before headers`, "server_error", nil, "upstream connect error or disconnect/reset before headers"},
		{429, ``, "rate_limit_error", nil, "upstream error: Too Many Requests"},
		{400, `{"message":"bad thing"}`, "invalid_request_error", nil, "bad thing"},
		{401, `{"error":"unauthorized"}`, "authentication_error", nil, "unauthorized"},
	}
	for _, c := range cases {
		t.Run(c.body, func(t *testing.T) {
			m := obj(t, ErrorToOpenAI(c.status, []byte(c.body)))
			eq(t, "type", at(t, m, "error", "type"), c.typ)
			eq(t, "code", at(t, m, "error", "code"), c.code)
			eq(t, "message", at(t, m, "error", "message"), c.msg)
		})
	}
	same := `{"error":{"message":"already openai","type":"invalid_request_error","param":null,"code":null}}`
	eq(t, "OpenAI-shaped body unchanged", string(ErrorToOpenAI(400, []byte(same))), same)

	long := strings.Repeat("é", 600)
	msg := at(t, obj(t, ErrorToOpenAI(500, []byte(long))), "error", "message").(string)
	if len(msg) > maxErrorText+len("…") || !strings.HasSuffix(msg, "…") {
		t.Errorf("long text body not truncated: %d bytes", len(msg))
	}
}

func TestErrorToAnthropic(t *testing.T) {
	cases := []struct {
		status   int
		body     string
		typ, msg string
		code     any
	}{
		{400, `{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, "invalid_request_error", "bad", "context_length_exceeded"},
		{401, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "authentication_error", "Incorrect API key provided.", "invalid_api_key"},
		{403, `{"error":{"message":"region","type":"invalid_request_error","code":"unsupported_country_region_territory"}}`, "permission_error", "region", "unsupported_country_region_territory"},
		{404, `{"error":{"message":"no model","type":"invalid_request_error","code":"model_not_found"}}`, "not_found_error", "no model", "model_not_found"},
		{413, `{"error":{"message":"too large","type":"invalid_request_error"}}`, "request_too_large", "too large", nil},
		{422, `{"detail":"validation"}`, "invalid_request_error", `{"detail":"validation"}`, nil},
		{429, `{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`, "rate_limit_error", "quota", "insufficient_quota"},
		{500, `{"error":{"message":"oops","type":"server_error","code":null}}`, "api_error", "oops", nil},
		{503, `{"error":{"message":"overloaded","type":"server_error"}}`, "overloaded_error", "overloaded", nil},
		{529, `{"error":{"message":"overloaded","type":"server_error"}}`, "overloaded_error", "overloaded", nil},
		{504, `gateway timeout`, "timeout_error", "gateway timeout", nil},
		{502, ``, "api_error", "upstream error: Bad Gateway", nil},
		{418, `{"error":{"message":"teapot"}}`, "invalid_request_error", "teapot", nil},
	}
	for _, c := range cases {
		t.Run(c.body, func(t *testing.T) {
			m := obj(t, ErrorToAnthropic(c.status, []byte(c.body)))
			eq(t, "type", m["type"], "error")
			eq(t, "error.type", at(t, m, "error", "type"), c.typ)
			eq(t, "error.message", at(t, m, "error", "message"), c.msg)
			code, _ := m["error"].(map[string]any)["code"]
			eq(t, "error.code", code, c.code)
		})
	}
	same := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	eq(t, "Anthropic-shaped body unchanged", string(ErrorToAnthropic(529, []byte(same))), same)
}
