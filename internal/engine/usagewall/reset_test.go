package usagewall

import (
	"strings"
	"testing"
	"time"
)

func TestPaths(t *testing.T) {
	if got := UsageProbePath(); got != "/api/oauth/usage?at_wall=1&skip_spend=1" {
		t.Errorf("UsageProbePath = %q", got)
	}
	if got := ResetPath("0f6c-org"); got != "/api/organizations/0f6c-org/reset_rate_limits" {
		t.Errorf("ResetPath = %q", got)
	}
	if got := ResetPath("a/b c"); got != "/api/organizations/a%2Fb%20c/reset_rate_limits" {
		t.Errorf("ResetPath escapes: %q", got)
	}
	if got := string(ResetBody()); got != `{"program":"juniper_tide"}` {
		t.Errorf("ResetBody = %s", got)
	}
}

func TestParseUsage(t *testing.T) {
	next := time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		status    int
		body      string
		want      Usage
		claimable bool
		outcome   ResetOutcome
		wantErr   string
	}{
		{name: "reset available", status: 200,
			body: `{"five_hour":{"utilization":100},"juniper_tide":{"arm":"reset","available":true,"next_available_at":null}}`,
			want: Usage{Arm: "reset", Available: true}, claimable: true},
		{name: "reset used, rfc3339", status: 200,
			body:    `{"juniper_tide":{"arm":"reset","available":false,"next_available_at":"2026-03-08T12:00:00Z"}}`,
			want:    Usage{Arm: "reset", NextAvailableAt: next},
			outcome: ResetOutcome{Result: ResultAlreadyUsed, NextAvailableAt: next}},
		{name: "epoch seconds", status: 200,
			body:    `{"juniper_tide":{"arm":"reset","available":false,"next_available_at":1772971200}}`,
			want:    Usage{Arm: "reset", NextAvailableAt: next},
			outcome: ResetOutcome{Result: ResultAlreadyUsed, NextAvailableAt: next}},
		{name: "control arm", status: 200,
			body:    `{"juniper_tide":{"arm":"control","available":true}}`,
			want:    Usage{Arm: "control", Available: true},
			outcome: ResetOutcome{Result: ResultNotOffered}},
		{name: "no block", status: 200, body: `{"five_hour":{}}`, outcome: ResetOutcome{Result: ResultNotOffered}},
		{name: "status 500", status: 500, body: `{"error":"boom"}`, wantErr: "status 500"},
		{name: "not json", status: 200, body: `<html>`, wantErr: "decode"},
		{name: "bad time", status: 200, body: `{"juniper_tide":{"arm":"reset","next_available_at":"tomorrow"}}`, wantErr: "next_available_at"},
		{name: "bool time", status: 200, body: `{"juniper_tide":{"arm":"reset","next_available_at":true}}`, wantErr: "next_available_at"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseUsage(tc.status, nil, []byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !u.NextAvailableAt.Equal(tc.want.NextAvailableAt) || u.Arm != tc.want.Arm || u.Available != tc.want.Available {
				t.Fatalf("usage = %+v, want %+v", u, tc.want)
			}
			if u.Claimable() != tc.claimable {
				t.Fatalf("Claimable = %v", u.Claimable())
			}
			if !tc.claimable {
				o := u.Outcome()
				if o.Result != tc.outcome.Result || !o.NextAvailableAt.Equal(tc.outcome.NextAvailableAt) || o.Err != nil {
					t.Fatalf("Outcome = %+v, want %+v", o, tc.outcome)
				}
			}
		})
	}
}

func TestParseResetResponse(t *testing.T) {
	next := time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		status  int
		body    string
		want    ResetOutcome
		wantErr string
	}{
		{name: "reset", status: 200, body: `{"result":"reset"}`, want: ResetOutcome{Result: ResultReset}},
		{name: "not_limited", status: 200, body: `{"result":"not_limited"}`, want: ResetOutcome{Result: ResultNotLimited}},
		{name: "already_used with time", status: 200, body: `{"result":"already_used","next_available_at":"2026-03-08T12:00:00Z"}`,
			want: ResetOutcome{Result: ResultAlreadyUsed, NextAvailableAt: next}},
		{name: "not_offered", status: 200, body: `{"result":"not_offered"}`, want: ResetOutcome{Result: ResultNotOffered}},
		{name: "unknown result", status: 200, body: `{"result":"granted"}`, wantErr: "unknown result"},
		{name: "403", status: 403, body: `{"type":"error"}`, wantErr: "status 403"},
		{name: "not json", status: 200, body: `ok`, wantErr: "decode"},
		{name: "long error body is cut", status: 502, body: strings.Repeat("x", 5000), wantErr: "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseResetResponse(tc.status, []byte(tc.body))
			if tc.wantErr != "" {
				if got.Err == nil || !strings.Contains(got.Err.Error(), tc.wantErr) || len(got.Err.Error()) > 400 {
					t.Fatalf("err = %v, want %q", got.Err, tc.wantErr)
				}
				return
			}
			if got.Err != nil || got.Result != tc.want.Result || !got.NextAvailableAt.Equal(tc.want.NextAvailableAt) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestHeaderParsing(t *testing.T) {
	sec := time.Date(2026, 3, 1, 17, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"1772384400", sec, true},
		{" 1772384400.5 ", sec.Add(500 * time.Millisecond), true},
		{"1772384400000", sec, true},
		{"2026-03-01T17:00:00Z", sec, true},
		{"", time.Time{}, false},
		{"-5", time.Time{}, false},
		{"NaN", time.Time{}, false},
		{"later", time.Time{}, false},
	} {
		got, ok := parseTime(tc.in)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"20", 20 * time.Second, true},
		{"0.25", 250 * time.Millisecond, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"20s", 0, false},
		{"Inf", 0, false},
	} {
		got, ok := parseSeconds(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseSeconds(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// The organization of the reset claim: the configured organization_uuid
// wins; else the anthropic-organization-id header of the probe's answer
// (Anthropic's documented response header); else an organization id the
// body names (undocumented member names); else none, and the flow fails.
func TestUsageOrganization(t *testing.T) {
	const body = `{"five_hour":{"utilization":100},"juniper_tide":{"arm":"reset","available":true}}`
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   string
		cfg    Config
		want   string
	}{
		{"configured wins", map[string]string{OrganizationHeader: "org-header"}, body, Config{OrgUUID: "org-config"}, "org-config"},
		{"from the header", map[string]string{OrganizationHeader: " 0b7e5d9c-3f1a "}, body, Config{}, "0b7e5d9c-3f1a"},
		{"header over body", map[string]string{OrganizationHeader: "org-header"}, `{"organization_uuid":"org-body"}`, Config{}, "org-header"},
		{"organization_uuid", nil, `{"organization_uuid":"org-uuid"}`, Config{}, "org-uuid"},
		{"organization_id", nil, `{"organization_id":"org-id"}`, Config{}, "org-id"},
		{"organization object", nil, `{"organization":{"uuid":"org-obj"}}`, Config{}, "org-obj"},
		{"none", nil, body, Config{}, ""},
	} {
		u, err := ParseUsage(200, tc.header, []byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, ok := u.ResetOrg(tc.cfg)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: ResetOrg = %q %v, want %q", tc.name, got, ok, tc.want)
		}
	}
}
