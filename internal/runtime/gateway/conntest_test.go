package gateway_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// connTestConfig: alpha (openai, two keys) and claude (anthropic, one
// key), state in memory.
const connTestConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1, m2]
    connections:
      - {id: a1, api_key: sk-alpha-a1-conntest-secret}
      - {id: a2, api_key: sk-alpha-a2-conntest-secret}
  - id: claude
    kind: anthropic
    base_url: MOCK_URL/v1
    models: [claude-sonnet-4]
    connections:
      - {id: c1, api_key: sk-ant-c1-conntest-secret}
`

// connTest calls the connection test endpoint and returns the status and
// the raw answer.
func connTest(t *testing.T, h *harness, provider, connection, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/api/providers/"+provider+"/connections/"+connection+"/test", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-admin-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(readBody(t, resp))
}

// noSecret fails when text reveals one of the configured keys.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, k := range []string{"sk-alpha-a1-conntest-secret", "sk-alpha-a2-conntest-secret", "sk-ant-c1-conntest-secret"} {
		if strings.Contains(text, k) {
			t.Fatalf("%s reveals the key %s:\n%s", what, k, text)
		}
	}
}

// Issue 13 item 4, the connection-test exit of DEGRADED
// (docs/resilience.md §1): 5xx drive alpha's breaker to DEGRADED (7
// failures for apikey); a test of a failing connection (401 quoting the
// key, then 500) answers ok:false and changes neither the breaker nor the
// cooldowns; a test of the healthy connection answers ok and the breaker
// reads CLOSED.
func TestConnectionTestClosesADegradedBreaker(t *testing.T) {
	h := startWith(t, connTestConfig, newFakeClock())
	h.setScript(`rules: [{key: "sk-alpha-*", responses: [{status: 503}]}]`)
	for i := 0; breakerOf(t, h, "alpha")["state"] != "DEGRADED"; i++ {
		if i == 10 {
			t.Fatalf("alpha not DEGRADED after 10 failing requests: %v", breakerOf(t, h, "alpha"))
		}
		readBody(t, h.post("/v1/chat/completions", chat("alpha/m1", "")))
	}
	br := breakerOf(t, h, "alpha")
	if n := br["failure_count"].(float64); n < 7 || n >= 12 {
		t.Fatalf("DEGRADED with %v failures, want 7..11", n)
	}
	cooldowns := connectionsOf(t, h, "alpha")

	// A failing connection: the answer says why, nothing is recorded.
	unchanged := func(when string) {
		t.Helper()
		if now := breakerOf(t, h, "alpha"); now["state"] != "DEGRADED" || now["failure_count"] != br["failure_count"] {
			t.Fatalf("%s: breaker %v, want DEGRADED with %v failures", when, now, br["failure_count"])
		}
		if now := connectionsOf(t, h, "alpha"); !reflect.DeepEqual(now, cooldowns) {
			t.Fatalf("%s: cooldowns changed:\n%v\nwant\n%v", when, now, cooldowns)
		}
	}
	for _, tc := range []struct {
		script, reason string
		status         float64
	}{
		{`rules: [{key: sk-alpha-a1-conntest-secret, responses: [{echo_key: true}]}]`, "auth_error", 401},
		{`rules: [{key: sk-alpha-a1-conntest-secret, responses: [{status: 500}]}]`, "server_error", 500},
	} {
		h.setScript(tc.script)
		before := h.mock.Stats().ByKeyModel["sk-alpha-a1-conntest-secret|m1"]
		code, raw := connTest(t, h, "alpha", "a1", "")
		noSecret(t, "the failed test's answer", raw)
		var res map[string]any
		if err := json.Unmarshal([]byte(raw), &res); err != nil {
			t.Fatal(err)
		}
		if code != 200 || res["ok"] != false || res["status"] != tc.status || res["reason"] != tc.reason ||
			res["model"] != "m1" || res["message"] == "" || res["breaker_after"] != nil {
			t.Fatalf("test of a1 answered %d: %s, want ok:false status %v reason %s", code, raw, tc.status, tc.reason)
		}
		if calls := h.mock.Stats().ByKeyModel["sk-alpha-a1-conntest-secret|m1"]; calls != before+1 {
			t.Fatalf("the test made %d upstream calls with a1's key on m1, want 1", calls-before)
		}
		if tc.status == 401 && !strings.Contains(raw, "Incorrect API key provided: [redacted].") {
			t.Fatalf("the upstream message is not passed on redacted: %s", raw)
		}
		unchanged("after a failed test answered " + res["reason"].(string))
	}
	// The healthy connection: the test passes and closes the breaker.
	h.setScript(`rules: []`)
	code, raw := connTest(t, h, "alpha", "a2", "")
	noSecret(t, "the passed test's answer", raw)
	var res map[string]any
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatal(err)
	}
	if code != 200 || res["ok"] != true || res["status"] != float64(200) || res["model"] != "m1" ||
		res["breaker_before"] != "DEGRADED" || res["breaker_after"] != "CLOSED" || res["latency_ms"] == nil || res["reason"] != nil {
		t.Fatalf("test of a2 answered %d: %s", code, raw)
	}
	if now := breakerOf(t, h, "alpha"); now["state"] != "CLOSED" || now["failure_count"] != float64(0) {
		t.Fatalf("after a passed test the breaker is %v, want CLOSED with 0 failures", now)
	}
	if calls := h.mock.Stats().ByKeyModel["sk-alpha-a2-conntest-secret|m1"]; calls == 0 {
		t.Fatal("the test did not reach the upstream with a2's key")
	}
	logs := h.logs.String()
	for _, want := range []string{
		`connection test: provider=alpha connection=a2 model=m1 ok=true status=200`,
		`connection test: provider=alpha connection=a1 model=m1 ok=false status=401 reason=auth_error`,
	} {
		if !strings.Contains(logs, want) {
			t.Fatalf("no log line %q in:\n%s", want, logs)
		}
	}
	noSecret(t, "the log", logs)
}

// A model named in the body is the one tested; an anthropic-kind
// connection is tested with a Messages call.
func TestConnectionTestModelAndAnthropicKind(t *testing.T) {
	h := startWith(t, connTestConfig, newFakeClock())
	// Only m2 answers on a1: the test must ask for it.
	h.setScript(`rules: [{key: sk-alpha-a1-conntest-secret, model: m1, responses: [{status: 500}]}]`)
	code, raw := connTest(t, h, "alpha", "a1", `{"model": "m2"}`)
	if code != 200 || !strings.Contains(raw, `"ok":true`) || !strings.Contains(raw, `"model":"m2"`) ||
		h.mock.Stats().ByKeyModel["sk-alpha-a1-conntest-secret|m2"] != 1 {
		t.Fatalf("test of a1 on m2: %d %s", code, raw)
	}
	// The anthropic kind: a Messages call (the mock answers chat-shaped
	// errors elsewhere, so a 2xx proves the path).
	h.setScript(`rules: [{key: sk-ant-c1-conntest-secret, path: /v1/chat/completions, responses: [{status: 500}]}]`)
	code, raw = connTest(t, h, "claude", "c1", "")
	if code != 200 || !strings.Contains(raw, `"ok":true`) || !strings.Contains(raw, `"model":"claude-sonnet-4"`) ||
		!strings.Contains(raw, `"breaker_before":"CLOSED","breaker_after":"CLOSED"`) ||
		h.mock.Stats().ByKeyModel["sk-ant-c1-conntest-secret|claude-sonnet-4"] != 1 {
		t.Fatalf("test of c1: %d %s", code, raw)
	}
	// An anthropic error body: its message, redacted.
	h.setScript(`rules: [{key: sk-ant-c1-conntest-secret, responses: [{echo_key: true}]}]`)
	code, raw = connTest(t, h, "claude", "c1", "")
	noSecret(t, "the anthropic test's answer", raw)
	if code != 200 || !strings.Contains(raw, `"ok":false`) || !strings.Contains(raw, `"status":401`) || !strings.Contains(raw, `invalid x-api-key`) {
		t.Fatalf("failed test of c1: %d %s", code, raw)
	}
}

// Unknown provider or connection: 404 naming it; a bad body or a model
// the provider does not list: 400 naming the field; no admin token: 401.
func TestConnectionTestValidation(t *testing.T) {
	h := startWith(t, connTestConfig, newFakeClock())
	for _, tc := range []struct {
		provider, connection, body string
		status                     int
		code, param, names         string
	}{
		{"nope", "a1", "", 404, "provider_not_found", "", `"nope"`},
		{"alpha", "zz", "", 404, "connection_not_found", "", `"zz"`},
		{"alpha", "a1", `{"modle": "m1"}`, 400, "", "body", "modle"},
		{"alpha", "a1", `{"model": 5}`, 400, "", "body", "model"},
		{"alpha", "a1", `{"model": "gpt-9"}`, 400, "", "model", `"gpt-9"`},
	} {
		code, raw := connTest(t, h, tc.provider, tc.connection, tc.body)
		var res struct {
			Error struct{ Code, Param, Message string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(raw), &res)
		if code != tc.status || tc.code != "" && res.Error.Code != tc.code || res.Error.Param != tc.param ||
			!strings.Contains(res.Error.Message, tc.names) {
			t.Errorf("%s/%s %s: %d %s, want %d naming %s", tc.provider, tc.connection, tc.body, code, raw, tc.status, tc.names)
		}
	}
	if calls := h.mock.Stats().Total; calls != 0 {
		t.Fatalf("refused tests made %d upstream calls", calls)
	}
	resp := h.post("/api/providers/alpha/connections/a1/test", "")
	readBody(t, resp)
	if resp.StatusCode != 401 {
		t.Fatalf("without the admin token: %d, want 401", resp.StatusCode)
	}
	resp = h.post("/api/providers/alpha/connections/a1/test", "", "Authorization", "Bearer sk-alpha-a1-conntest-secret")
	readBody(t, resp)
	if resp.StatusCode != 401 || h.mock.Stats().Total != 0 {
		t.Fatalf("with a connection key as the token: %d, %d upstream calls", resp.StatusCode, h.mock.Stats().Total)
	}
}

// The test is bounded by the upstream client's timers: an upstream that
// sends no header within first_byte_timeout_ms fails the test (status 0)
// and records nothing.
func TestConnectionTestTimesOut(t *testing.T) {
	h := startWith(t, strings.Replace(connTestConfig, "listen: 127.0.0.1:0", "listen: 127.0.0.1:0\n  first_byte_timeout_ms: 300", 1), newFakeClock())
	h.setScript(`rules: [{key: sk-alpha-a1-conntest-secret, responses: [{latency_ms: 3000}]}]`)
	code, raw := connTest(t, h, "alpha", "a1", "")
	var res map[string]any
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatal(err)
	}
	if code != 200 || res["ok"] != false || res["status"] != float64(0) || res["reason"] != "network_error" ||
		!strings.Contains(res["message"].(string), "timeout") || res["latency_ms"].(float64) >= 3000 {
		t.Fatalf("slow upstream: %d %s, want ok:false status 0 reason network_error (a timeout) within the first-byte timeout", code, raw)
	}
	if br := breakerOf(t, h, "alpha"); br["state"] != "CLOSED" || br["failure_count"] != float64(0) {
		t.Fatalf("a timed-out test was recorded: %v", br)
	}
	if a1 := connectionsOf(t, h, "alpha")["a1"]; a1 != nil {
		t.Fatalf("a timed-out test cooled a1: %v", a1)
	}
}

// Identifiers that need escaping in a path (a space, "?", "#") reach the
// connection test percent-encoded, as the console and the CLI send them;
// a malformed escape is a 400 naming the parameter and calls nothing.
func TestConnectionTestEscapedIdentifiers(t *testing.T) {
	cfg := strings.Replace(connTestConfig, "- {id: a2,", `- {id: "team b?#2",`, 1)
	h := startWith(t, cfg, newFakeClock())
	code, raw := connTest(t, h, "alpha", url.PathEscape("team b?#2"), "")
	var res map[string]any
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatal(err)
	}
	if code != 200 || res["ok"] != true {
		t.Fatalf("test of %q answered %d: %s, want ok", "team b?#2", code, raw)
	}
	if calls := h.mock.Stats().ByKeyModel["sk-alpha-a2-conntest-secret|m1"]; calls != 1 {
		t.Fatalf("%d upstream calls with the connection's key, want 1", calls)
	}
	// Go's client refuses to send a malformed escape: write the request
	// by hand.
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("POST /api/providers/alpha/connections/team%zzb/test HTTP/1.1\r\nHost: gw\r\n" +
		"Authorization: Bearer test-admin-token-0123456789\r\nContent-Length: 0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw = string(readBody(t, resp))
	var bad struct {
		Error struct{ Param, Message string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(raw), &bad)
	if resp.StatusCode != 400 || bad.Error.Param != "connection" || !strings.Contains(bad.Error.Message, "team%zzb") {
		t.Fatalf("malformed escape answered %d: %s, want 400 naming connection", resp.StatusCode, raw)
	}
	if calls := h.mock.Stats().Total; calls != 1 {
		t.Fatalf("%d upstream calls in all, want 1", calls)
	}
}
