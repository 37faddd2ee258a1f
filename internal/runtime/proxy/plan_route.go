package proxy

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

// routeNote is what a routing plugin did for one request, for the
// request log: its decision's rule id, why the configured order was used
// instead (its failure, "declined", ...; "" when its order was applied)
// and the targets it excluded with its reasons.
type routeNote struct {
	plugin, rule, fallback string
	excluded               []reqlog.Skip
}

// SkipRoutePlugin is the request log's reason for a target a routing
// plugin excluded.
const SkipRoutePlugin = "route_plugin"

// routeByPlugin orders a combo's targets with its "plugin:<name>"
// strategy: the plugin sees the request summary (model, combo, stream,
// client key id, the request's headers without credentials, tool count,
// prompt size estimate) and every target with its state, and answers an
// order and exclusions (docs/policies.md, "Routing plugins"). It returns
// the order and, when the plugin excluded targets, which ones (by target
// index): those are not tried for this request. A plugin that declines
// or fails leaves the configured order; the request log says why.
func (p *Proxy) routeByPlugin(ctx context.Context, x *state, r *comboRoute, pl *strategy.Plugin, sreq strategy.Request, eligible func(int) bool) ([]int, []bool) {
	rr := strategy.RouteRequest{Request: sreq, Model: x.req.Parsed.Model, Stream: x.stream, KeyID: x.req.Key.ID, ToolCount: x.tools}
	if x.req.Headers != nil {
		rr.Headers = x.req.Headers.RouteHeaders()
	}
	order, res := pl.Route(ctx, rr, r.targets, eligible)
	x.routed.plugin, x.routed.rule, x.routed.fallback = pl.PluginName(), res.RuleID, res.Fallback
	if res.Fallback != "" && res.Fallback != strategy.FallbackDeclined && p.log.IsDebug() {
		p.log.Debug("routing plugin fell back to the configured order", "request_id", x.req.ID, "combo", r.combo.Name,
			"plugin", pl.PluginName(), "reason", res.Fallback)
	}
	if len(res.Excluded) == 0 {
		return order, nil
	}
	dropped := make([]bool, len(r.targets))
	for _, e := range res.Excluded {
		dropped[e.Index] = true
		t := &r.targets[e.Index]
		x.routed.excluded = append(x.routed.excluded, reqlog.Skip{Provider: t.Provider, Connection: t.Connection, Model: t.Model,
			Reason: SkipRoutePlugin, Detail: e.Reason})
	}
	return order, dropped
}

// candidateStateOf describes a combo target's engine state to routing
// plugins (strategy.Options.CandidateState): its provider's breaker as
// health (closed, degraded, half_open, open), and, when every connection
// the target may use is excluded, the time left on the exclusion that
// ends first (a connection cooldown or a model lockout).
func (p *Proxy) candidateStateOf(topo *topology.Topology) func(strategy.Target) strategy.CandidateState {
	return func(t strategy.Target) strategy.CandidateState {
		health := breakerHealth(p.eng.BreakerState(t.Provider))
		check := func(conn string) (strategy.CandidateState, time.Time, bool) {
			ex, excluded := p.eng.Peek(t.Provider, conn, t.Model)
			if !excluded {
				return strategy.CandidateState{Health: health}, time.Time{}, true
			}
			return strategy.StateFromExclusion(ex, true, p.clock.Now()), ex.Until, false
		}
		var best strategy.CandidateState
		var bestUntil time.Time
		seen := false
		consider := func(conn string) bool {
			s, until, ok := check(conn)
			if ok {
				best = s
				return true
			}
			if !seen || (!until.IsZero() && (bestUntil.IsZero() || until.Before(bestUntil))) {
				best, bestUntil, seen = s, until, true
			}
			return false
		}
		if t.Connection != "" {
			consider(t.Connection)
		} else if pr, ok := topo.Provider(t.Provider); ok {
			for _, c := range pr.Connections {
				if consider(c.ID) {
					break
				}
			}
		}
		if best.Health == "" {
			best.Health = health
		}
		return best
	}
}

// breakerHealth is a breaker state as routing plugins read it.
func breakerHealth(s engine.BreakerState) string {
	switch s {
	case engine.StateDegraded:
		return "degraded"
	case engine.StateHalfOpen:
		return "half_open"
	case engine.StateOpen:
		return "open"
	}
	return "closed"
}

// RouteStrategyStats are the counters of one combo's routing plugin
// strategy: how often the plugin was asked, declined, or failed and left
// the configured order (strategy.PluginStats).
type RouteStrategyStats struct {
	Combo     string `json:"combo"`
	Plugin    string `json:"plugin"`
	Calls     uint64 `json:"calls"`
	Declined  uint64 `json:"declined"`
	Fallbacks uint64 `json:"fallbacks"`
}

// RouteStrategies lists the counters of every combo routed by a plugin in
// the current routing view, sorted by combo, for the admin API and the
// console.
func (p *Proxy) RouteStrategies() []RouteStrategyStats {
	out := []RouteStrategyStats{}
	for c, r := range p.routing.Load().routes {
		if pl, ok := r.strat.(*strategy.Plugin); ok {
			st := pl.Stats()
			out = append(out, RouteStrategyStats{Combo: c.Name, Plugin: pl.PluginName(), Calls: st.Calls, Declined: st.Declined, Fallbacks: st.Fallbacks})
		}
	}
	slices.SortFunc(out, func(a, b RouteStrategyStats) int { return strings.Compare(a.Combo, b.Combo) })
	return out
}
