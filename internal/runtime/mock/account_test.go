package mock

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// send makes one request with extra headers and returns status, headers
// and body.
func (m *testMock) send(method, path, key, body string, hdr map[string]string) (int, http.Header, []byte) {
	m.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, m.base+path, strings.NewReader(body))
	if err != nil {
		m.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		m.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, data
}

func TestRuleHeaderMatch(t *testing.T) {
	m := startMock(t, `
rules:
  - name: the lane
    path: /v1/messages
    header: anthropic-usage-limit=slow
    responses:
      - status: 200
        headers: {anthropic-ratelimit-unified-slow-status: active}
  - name: the wall
    path: /v1/messages
    header: anthropic-usage-limit=
    responses:
      - status: 429
        headers:
          anthropic-ratelimit-unified-status: rejected
          anthropic-ratelimit-unified-slow-offer: treatment
          anthropic-ratelimit-unified-reset: "1772384400"
  - name: any other value of the header
    header: Anthropic-Usage-Limit
    responses: [{status: 418}]
  - name: glob value
    header: "x-tier=gold-*"
    responses: [{status: 202}]
`)
	body := messagesBody("claude-sonnet-4", "hi", false)
	tests := []struct {
		name       string
		path       string
		hdr        map[string]string
		wantStatus int
		wantHeader [2]string
	}{
		{"normal request hits the wall", "/v1/messages", nil, 429, [2]string{"Anthropic-Ratelimit-Unified-Status", "rejected"}},
		{"slow request gets the lane", "/v1/messages", map[string]string{"anthropic-usage-limit": "slow"}, 200, [2]string{"Anthropic-Ratelimit-Unified-Slow-Status", "active"}},
		{"other value: present-rule", "/v1/messages", map[string]string{"anthropic-usage-limit": "fast"}, 418, [2]string{}},
		{"glob header value", "/v1/chat/completions", map[string]string{"x-tier": "gold-2"}, 202, [2]string{}},
		{"glob header no match: echo", "/v1/chat/completions", map[string]string{"x-tier": "silver"}, 200, [2]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := body
			if tc.path != "/v1/messages" {
				b = chatBody("gpt-4o", "hi", false, false)
			}
			status, h, data := m.send(http.MethodPost, tc.path, "oauth-1", b, tc.hdr)
			if status != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", status, tc.wantStatus, data)
			}
			if tc.wantHeader[0] != "" && h.Get(tc.wantHeader[0]) != tc.wantHeader[1] {
				t.Fatalf("%s = %q, want %q", tc.wantHeader[0], h.Get(tc.wantHeader[0]), tc.wantHeader[1])
			}
		})
	}
}

func TestRuleHeaderValidation(t *testing.T) {
	for _, bad := range []string{"=slow", "a b=c", "x:y"} {
		_, err := ParseScript([]byte("rules:\n  - header: \"" + bad + "\"\n"))
		if err == nil || !strings.Contains(err.Error(), "rules[0].header") {
			t.Errorf("header %q: err = %v", bad, err)
		}
	}
	s, err := ParseScript([]byte(`
rules:
  - path: /api/oauth/usage
    responses:
      - juniper_tide: {arm: reset, available: false, next_available_at: "2026-03-08T12:00:00Z"}
  - path: /api/organizations/*/reset_rate_limits
    responses:
      - {result: already_used, next_available_at: "1772971200"}
`))
	if err != nil {
		t.Fatal(err)
	}
	jt := s.Rules[0].Responses[0].JuniperTide
	if jt == nil || *jt != (JuniperTide{Arm: "reset", NextAvailableAt: "2026-03-08T12:00:00Z"}) {
		t.Fatalf("juniper_tide = %+v", jt)
	}
	if st := s.Rules[1].Responses[0]; st.Result != "already_used" || st.NextAvailableAt != "1772971200" {
		t.Fatalf("reset step = %+v", st)
	}
}

type usageAnswer struct {
	JuniperTide struct {
		Arm             string          `json:"arm"`
		Available       bool            `json:"available"`
		NextAvailableAt json.RawMessage `json:"next_available_at"`
	} `json:"juniper_tide"`
}

func TestUsageProbe(t *testing.T) {
	m := startMock(t, `
rules:
  - name: generation rules without a path never answer the probe
    responses: [{status: 429}]
  - key: other
    path: /api/oauth/usage
    responses: [{juniper_tide: {arm: control, available: false}}]
  - path: /api/oauth/usage
    responses:
      - juniper_tide: {arm: reset, available: true}
      - juniper_tide: {arm: reset, available: false, next_available_at: "2026-03-08T12:00:00Z"}
      - juniper_tide: {arm: reset, available: false, next_available_at: "1772971200"}
      - {status: 500}
      - {body: '{"five_hour":{"utilization":100}}', headers: {X-Probe: raw}}
`)
	const path = "/api/oauth/usage?at_wall=1&skip_spend=1"
	want := []struct {
		status  int
		arm     string
		avail   bool
		next    string
		rawPart string
	}{
		{200, "reset", true, "null", ""},
		{200, "reset", false, `"2026-03-08T12:00:00Z"`, ""},
		{200, "reset", false, "1772971200", ""},
		{500, "", false, "", `"type":"api_error"`},
		{200, "", false, "", `"five_hour"`},
	}
	for i, w := range want {
		status, h, data := m.send(http.MethodGet, path, "oauth-1", "", nil)
		if status != w.status {
			t.Fatalf("call %d: status %d, want %d (%s)", i, status, w.status, data)
		}
		if h.Get("Content-Type") != "application/json" {
			t.Fatalf("call %d: content type %q", i, h.Get("Content-Type"))
		}
		if w.rawPart != "" {
			if !strings.Contains(string(data), w.rawPart) {
				t.Fatalf("call %d: body %s, want %s", i, data, w.rawPart)
			}
			continue
		}
		var u usageAnswer
		if err := json.Unmarshal(data, &u); err != nil {
			t.Fatalf("call %d: %v: %s", i, err, data)
		}
		if u.JuniperTide.Arm != w.arm || u.JuniperTide.Available != w.avail || string(u.JuniperTide.NextAvailableAt) != w.next {
			t.Fatalf("call %d: %s", i, data)
		}
	}
	if _, h, _ := m.send(http.MethodGet, path, "oauth-1", "", nil); h.Get("X-Probe") != "raw" {
		t.Fatal("the last step does not repeat")
	}
	if _, _, data := m.send(http.MethodGet, path, "other", "", nil); !strings.Contains(string(data), `"arm":"control"`) {
		t.Fatalf("key rule: %s", data)
	}
	if status, _, _ := m.send(http.MethodPost, path, "oauth-1", "", nil); status != http.StatusMethodNotAllowed {
		t.Fatalf("POST usage: %d", status)
	}
	st := m.srv.Stats()
	if st.UsageProbes != 7 || st.Total != 0 {
		t.Fatalf("stats = %+v, want 7 usage probes and no generation calls", st)
	}
}

func TestUsageProbeDefault(t *testing.T) {
	m := startMock(t, "")
	status, h, data := m.send(http.MethodGet, "/api/oauth/usage", "oauth-1", "", nil)
	if status != 200 || strings.TrimSpace(string(data)) != `{"juniper_tide":{"arm":"reset","available":true,"next_available_at":null}}` {
		t.Fatalf("default probe: %d %s", status, data)
	}
	if got := h.Get("anthropic-organization-id"); got != DefaultOrganizationID {
		t.Fatalf("anthropic-organization-id = %q, want %q", got, DefaultOrganizationID)
	}
}

// The account endpoints answer an OAuth access token only (Authorization:
// Bearer): an x-api-key or no credential is a 401 authentication_error
// that uses no step and is not counted. A step names the organization of
// the usage probe's answer, or none.
func TestAccountEndpointsNeedABearerToken(t *testing.T) {
	m := startMock(t, `
rules:
  - key: oauth-2
    path: /api/oauth/usage
    responses: [{organization_id: "org-from-header"}, {organization_id: ""}]
`)
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/oauth/usage", ""},
		{http.MethodPost, "/api/organizations/org-1/reset_rate_limits", `{"program":"juniper_tide"}`},
	} {
		status, _, data := m.send(tc.method, tc.path, "", tc.body, map[string]string{"x-api-key": "sk-ant-api-key"})
		if status != 401 || !strings.Contains(string(data), "authentication_error") {
			t.Fatalf("%s %s with x-api-key: %d %s, want 401 authentication_error", tc.method, tc.path, status, data)
		}
	}
	if st := m.srv.Stats(); st.UsageProbes != 0 || st.ResetClaims != 0 {
		t.Fatalf("refused calls were counted: %+v", st)
	}
	if _, h, _ := m.send(http.MethodGet, "/api/oauth/usage", "oauth-2", "", nil); h.Get("anthropic-organization-id") != "org-from-header" {
		t.Fatalf("scripted organization: %q", h.Get("anthropic-organization-id"))
	}
	if _, h, _ := m.send(http.MethodGet, "/api/oauth/usage", "oauth-2", "", nil); h.Get("anthropic-organization-id") != "" {
		t.Fatalf("organization_id \"\" still sent %q", h.Get("anthropic-organization-id"))
	}
}

func TestResetClaim(t *testing.T) {
	m := startMock(t, `
rules:
  - path: /api/organizations/org-1/reset_rate_limits
    responses:
      - {result: reset}
      - {result: not_limited}
      - {result: already_used, next_available_at: "2026-03-08T12:00:00Z"}
      - {result: not_offered, next_available_at: "1772971200"}
      - {status: 503}
      - {reset: true}
`)
	const claim = `{"program":"juniper_tide"}`
	path := "/api/organizations/org-1/reset_rate_limits"
	for i, want := range []string{
		`{"result":"reset"}`,
		`{"result":"not_limited"}`,
		`{"result":"already_used","next_available_at":"2026-03-08T12:00:00Z"}`,
		`{"result":"not_offered","next_available_at":1772971200}`,
	} {
		status, _, data := m.send(http.MethodPost, path, "oauth-1", claim, nil)
		if status != 200 || strings.TrimSpace(string(data)) != want {
			t.Fatalf("claim %d: %d %s, want %s", i, status, data, want)
		}
	}
	status, _, data := m.send(http.MethodPost, path, "oauth-1", claim, nil)
	if status != 503 || !strings.Contains(string(data), `"type":"error"`) || !strings.Contains(string(data), "overloaded_error") {
		t.Fatalf("scripted 503: %d %s", status, data)
	}
	req, _ := http.NewRequest(http.MethodPost, m.base+path, strings.NewReader(claim))
	req.Header.Set("Authorization", "Bearer oauth-1")
	if resp, err := m.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("reset step did not drop the connection")
	}

	// Another org has no rule: the default answer.
	if status, _, data := m.send(http.MethodPost, "/api/organizations/org-2/reset_rate_limits", "oauth-1", claim, nil); status != 200 || strings.TrimSpace(string(data)) != `{"result":"reset"}` {
		t.Fatalf("default claim: %d %s", status, data)
	}
	before := m.srv.Stats().ResetClaims
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"wrong program", http.MethodPost, path, `{"program":"other"}`, 400},
		{"not json", http.MethodPost, path, `program=juniper_tide`, 400},
		{"GET", http.MethodGet, path, "", 405},
		{"no org", http.MethodPost, "/api/organizations//reset_rate_limits", claim, 404},
		{"nested org", http.MethodPost, "/api/organizations/a/b/reset_rate_limits", claim, 404},
	} {
		status, _, data := m.send(tc.method, tc.path, "oauth-1", tc.body, nil)
		if status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, data, tc.want)
		}
		if status == 400 && !strings.Contains(string(data), "juniper_tide") {
			t.Errorf("%s: body %s does not name the program", tc.name, data)
		}
	}
	if got := m.srv.Stats().ResetClaims; got != before {
		t.Fatalf("invalid claims were counted: %d → %d", before, got)
	}
	if before != 7 {
		t.Fatalf("ResetClaims = %d, want 7", before)
	}
}
