//go:build !wasip1

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/sdk"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		want    sdk.Decision
		decided bool
		log     string // substring of the one expected log message
	}{
		{
			name:    "exhausted with relative reset",
			headers: map[string]string{"x-acme-quota-remaining": "0", "x-acme-quota-reset": "30"},
			want:    sdk.Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 30000, RuleID: "acme.quota_header"},
			decided: true,
			log:     "cooling down for 30s",
		},
		{
			name:    "fractional seconds",
			headers: map[string]string{"x-acme-quota-remaining": " 0 ", "x-acme-quota-reset": "1.5"},
			want:    sdk.Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 1500, RuleID: "acme.quota_header"},
			decided: true,
			log:     "cooling down for 1.5s",
		},
		{
			name: "exhausted with Unix reset 90 s ahead",
			headers: map[string]string{"x-acme-quota-remaining": "0",
				"x-acme-quota-reset": "1772366490"}, // now + 90 s
			want:    sdk.Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 90000, RuleID: "acme.quota_header"},
			decided: true,
			log:     "cooling down for 1m30s",
		},
		{
			name:    "negative remaining counts as exhausted",
			headers: map[string]string{"x-acme-quota-remaining": "-3", "x-acme-quota-reset": "2"},
			want:    sdk.Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 2000, RuleID: "acme.quota_header"},
			decided: true,
			log:     "cooling down for 2s",
		},
		{
			name:    "reset capped at 24 h",
			headers: map[string]string{"x-acme-quota-remaining": "0", "x-acme-quota-reset": "999999"},
			want:    sdk.Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 86400000, RuleID: "acme.quota_header"},
			decided: true,
			log:     "cooling down for 24h0m0s",
		},
		{
			name:    "no reset header leaves the cooldown to the gateway",
			headers: map[string]string{"x-acme-quota-remaining": "0"},
			want:    sdk.Decision{Reason: "quota_exhausted", Scope: "connection", RuleID: "acme.quota_header"},
			decided: true,
			log:     "the gateway picks the cooldown",
		},
		{
			name:    "reset already passed",
			headers: map[string]string{"x-acme-quota-remaining": "0", "x-acme-quota-reset": "1772366000"},
			want:    sdk.Decision{Reason: "quota_exhausted", Scope: "connection", RuleID: "acme.quota_header"},
			decided: true,
			log:     "the gateway picks the cooldown",
		},
		{
			name:    "malformed reset",
			headers: map[string]string{"x-acme-quota-remaining": "0", "x-acme-quota-reset": "soon"},
			want:    sdk.Decision{Reason: "quota_exhausted", Scope: "connection", RuleID: "acme.quota_header"},
			decided: true,
			log:     "the gateway picks the cooldown",
		},
		{
			name:    "quota left",
			headers: map[string]string{"x-acme-quota-remaining": "12", "x-acme-quota-reset": "30"},
		},
		{
			name:    "no quota header",
			headers: map[string]string{"retry-after": "30"},
		},
		{
			name:    "malformed remaining is ignored with a warning",
			headers: map[string]string{"x-acme-quota-remaining": "zero"},
			log:     `ignoring unparsable x-acme-quota-remaining "zero" on connection acme/main`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sdk.ResetFakes()
			sdk.SetNow(now)
			in := sdk.ErrorInput{Provider: "acme", Connection: "acme/main", Model: "acme-large",
				Profile: "apikey", Status: 429, Headers: sdk.NewHeaders(tt.headers)}
			got, decided := sdk.CallClassify(in)
			if decided != tt.decided || got != tt.want {
				t.Fatalf("CallClassify = %+v, %v; want %+v, %v", got, decided, tt.want, tt.decided)
			}
			logs := sdk.FakeLogs()
			if tt.log == "" {
				if len(logs) != 0 {
					t.Fatalf("logs = %+v, want none", logs)
				}
				return
			}
			if len(logs) != 1 || !strings.Contains(logs[0].Message, tt.log) {
				t.Fatalf("logs = %+v, want one containing %q", logs, tt.log)
			}
		})
	}
}

func TestExhaustedLogsAtInfoNamingTheConnection(t *testing.T) {
	sdk.ResetFakes()
	sdk.SetNow(now)
	_, _ = sdk.CallClassify(sdk.ErrorInput{Connection: "acme/backup", Status: 403,
		Headers: sdk.NewHeaders(map[string]string{"x-acme-quota-remaining": "0", "x-acme-quota-reset": "60"})})
	logs := sdk.FakeLogs()
	if len(logs) != 1 || logs[0].Level != sdk.LevelInfo || !strings.Contains(logs[0].Message, "acme/backup") {
		t.Fatalf("logs = %+v, want one info message naming acme/backup", logs)
	}
}

func TestRegistersOnlyClassify(t *testing.T) {
	if got := sdk.Features(); got != sdk.FeatureClassify|sdk.FeatureBinary {
		t.Fatalf("Features() = %b, want only FeatureClassify (and the SDK's FeatureBinary)", got)
	}
}
