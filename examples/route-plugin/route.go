package main

import (
	"slices"
	"time"

	"github.com/breakwater-dev/breakwater/sdk"
)

const (
	// providerHeader names the provider to try first.
	providerHeader = "x-route-provider"
	// peakStart and peakEnd bound the peak hours, UTC: [peakStart, peakEnd).
	peakStart, peakEnd = 8, 20
	// Rule ids, shown by the gateway with the decision.
	ruleHeader  = "route.header"
	rulePeak    = "route.peak.fastest"
	ruleOffPeak = "route.offpeak.cheapest"
	// reasonDegraded explains an exclusion.
	reasonDegraded = "breaker degraded during peak hours"
)

// route answers the route hook (see the package documentation). It
// declines when it has nothing to add: no eligible candidate of the
// header's provider.
func route(in sdk.RouteInput) (sdk.RouteAnswer, bool) {
	if want := in.Request.Headers.Get(providerHeader); want != "" {
		return byProvider(in.Candidates, want)
	}
	if isPeak(sdk.Now()) {
		return fastest(in.Candidates), true
	}
	return cheapest(in.Candidates), true
}

// isPeak reports whether t falls in the peak hours.
func isPeak(t time.Time) bool {
	h := t.UTC().Hour()
	return h >= peakStart && h < peakEnd
}

// eligible returns the indexes of the eligible candidates, in configured
// order.
func eligible(cs []sdk.RouteCandidate) []int {
	out := make([]int, 0, len(cs))
	for i := range cs {
		if cs[i].Eligible {
			out = append(out, i)
		}
	}
	return out
}

// byProvider puts the eligible candidates of provider first.
func byProvider(cs []sdk.RouteCandidate, provider string) (sdk.RouteAnswer, bool) {
	a := sdk.RouteAnswer{RuleID: ruleHeader}
	for _, i := range eligible(cs) {
		if cs[i].Provider == provider {
			a.Order = append(a.Order, i)
		}
	}
	return a, len(a.Order) > 0
}

// fastest orders the eligible candidates by recent latency, unknown
// latency last, and leaves out those whose breaker is degraded while a
// healthy candidate remains.
func fastest(cs []sdk.RouteCandidate) sdk.RouteAnswer {
	a := sdk.RouteAnswer{RuleID: rulePeak}
	idx := eligible(cs)
	healthy := slices.ContainsFunc(idx, func(i int) bool { return cs[i].Health != sdk.HealthDegraded })
	keep := idx[:0]
	for _, i := range idx {
		if healthy && cs[i].Health == sdk.HealthDegraded {
			a.Exclude = append(a.Exclude, sdk.RouteExclusion{Index: i, Reason: reasonDegraded})
			continue
		}
		keep = append(keep, i)
	}
	slices.SortStableFunc(keep, func(x, y int) int {
		lx, ly := cs[x].LatencyMS, cs[y].LatencyMS
		switch {
		case lx == ly:
			return 0
		case lx <= 0: // unknown after known
			return 1
		case ly <= 0:
			return -1
		case lx < ly:
			return -1
		}
		return 1
	})
	a.Order = keep
	return a
}

// cheapest orders the eligible candidates by declared price (input plus
// output), ties in configured order.
func cheapest(cs []sdk.RouteCandidate) sdk.RouteAnswer {
	idx := eligible(cs)
	slices.SortStableFunc(idx, func(x, y int) int {
		px, py := cs[x].PriceIn+cs[x].PriceOut, cs[y].PriceIn+cs[y].PriceOut
		switch {
		case px < py:
			return -1
		case px > py:
			return 1
		}
		return 0
	})
	return sdk.RouteAnswer{Order: idx, RuleID: ruleOffPeak}
}
