//go:build !wasip1

package main

import (
	"slices"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/sdk"
)

// candidates are three targets: a slow cheap one, a fast expensive one
// whose breaker is degraded, and one with unknown latency and a mid price.
func candidates() []sdk.RouteCandidate {
	return []sdk.RouteCandidate{
		{Provider: "openai", Model: "gpt-4o-mini", Eligible: true, Health: sdk.HealthClosed, LatencyMS: 900, PriceIn: 0.15, PriceOut: 0.6},
		{Provider: "anthropic", Model: "claude-haiku-4", Eligible: true, Health: sdk.HealthDegraded, LatencyMS: 300, PriceIn: 0.8, PriceOut: 4},
		{Provider: "mistral", Model: "small", Eligible: true, Health: sdk.HealthClosed, PriceIn: 0.2, PriceOut: 0.6},
		{Provider: "google", Model: "flash", Eligible: true, Health: sdk.HealthClosed, LatencyMS: 400, PriceIn: 0.1, PriceOut: 0.4},
	}
}

func at(hour int) time.Time { return time.Date(2026, 3, 2, hour, 30, 0, 0, time.UTC) }

func TestRoute(t *testing.T) {
	t.Cleanup(sdk.ResetFakes)
	tests := []struct {
		name    string
		now     time.Time
		headers map[string]string
		cands   []sdk.RouteCandidate
		want    sdk.RouteAnswer
		decided bool
	}{
		{"peak: fastest first, degraded left out", at(9), nil, candidates(),
			sdk.RouteAnswer{Order: []int{3, 0, 2}, Exclude: []sdk.RouteExclusion{{Index: 1, Reason: reasonDegraded}}, RuleID: rulePeak}, true},
		{"peak ends at 20:00: cheapest first", at(20), nil, candidates(),
			sdk.RouteAnswer{Order: []int{3, 0, 2, 1}, RuleID: ruleOffPeak}, true},
		{"off-peak at night", at(2), nil, candidates(),
			sdk.RouteAnswer{Order: []int{3, 0, 2, 1}, RuleID: ruleOffPeak}, true},
		{"header picks the provider", at(9), map[string]string{"X-Route-Provider": "anthropic"}, candidates(),
			sdk.RouteAnswer{Order: []int{1}, RuleID: ruleHeader}, true},
		{"header names no candidate: declined", at(9), map[string]string{"x-route-provider": "cohere"}, candidates(), sdk.RouteAnswer{}, false},
		{"peak with only degraded targets keeps them", at(12), nil, func() []sdk.RouteCandidate {
			cs := candidates()
			for i := range cs {
				cs[i].Health = sdk.HealthDegraded
			}
			return cs
		}(), sdk.RouteAnswer{Order: []int{1, 3, 0, 2}, RuleID: rulePeak}, true},
		{"ineligible targets are never ordered", at(3), nil, func() []sdk.RouteCandidate {
			cs := candidates()
			cs[3].Eligible = false
			return cs
		}(), sdk.RouteAnswer{Order: []int{0, 2, 1}, RuleID: ruleOffPeak}, true},
	}
	for _, tt := range tests {
		sdk.SetNow(tt.now)
		got, decided := sdk.CallRoute(sdk.RouteInput{
			Request:    sdk.RouteRequest{Model: "smart", Combo: "smart", Headers: sdk.NewHeaders(tt.headers)},
			Candidates: tt.cands,
		})
		if decided != tt.decided || !equal(got, tt.want) {
			t.Errorf("%s: route = %+v, %v; want %+v, %v", tt.name, got, decided, tt.want, tt.decided)
		}
	}
}

func equal(a, b sdk.RouteAnswer) bool {
	return slices.Equal(a.Order, b.Order) && slices.Equal(a.Exclude, b.Exclude) && a.RuleID == b.RuleID
}
