package proxy

import (
	"context"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// FallbackHeader marks an answer served by the emergency fallback
// (docs/resilience.md §14): "X-Breakwater-Fallback: emergency".
const FallbackHeader = "X-Breakwater-Fallback"

// fallbackEmergency is the value of FallbackHeader and of the request
// log's fallback field.
const fallbackEmergency = "emergency"

// emergency sends a request that would end with no target able to serve
// it — every candidate excluded or failed — once to the
// emergency_fallback targets, in order (docs/resilience.md §14). Each
// target gets one attempt, on its first connection that EmergencyCheck
// lets through: non-terminal cooldowns, lockouts and the window gate are
// bypassed; a terminal connection and an open breaker (its probe rule
// included) are not. An answer it returns carries X-Breakwater-Fallback:
// emergency. It returns nil when the flag is off, when the request failed
// for a reason another target would share (a bad request), when nothing
// was excluded or tried, or when every emergency target failed too; the
// request then ends with the answer it had before, its attempt count
// including the emergency attempts.
func (p *Proxy) emergency(ctx context.Context, x *state, parsed wire.Request, body []byte) *Result {
	targets := p.eng.EmergencyTargets()
	switch {
	case len(targets) == 0, x.fallback != "":
		return nil
	case x.last != nil && !x.last.outcome.Retryable:
		return nil
	case x.last == nil && len(x.excluded) == 0:
		return nil
	}
	last, nhdr := x.last, len(x.header)
	x.fallback = fallbackEmergency
	x.header = append(x.header, wire.Header{Name: FallbackHeader, Value: fallbackEmergency})
	for _, t := range targets {
		res, ok := x.rt.Topology.Resolve(t)
		if !ok {
			continue
		}
		for _, cd := range servableOf(res, x.format) {
			if ex, excluded := p.eng.EmergencyCheck(cd.Provider.ID, cd.Connection.ID, cd.Model); excluded {
				x.exclude(cd, ex)
				continue
			}
			before := x.last
			if r := p.attempt(ctx, x, parsed, body, cd); r != nil {
				outcome := "served"
				if r.Stream == nil && r.Status >= 400 {
					outcome = "failed" // a local error of the attempt
				}
				if p.metrics != nil {
					p.metrics.EmergencyFallback(outcome)
				}
				p.log.Info("emergency fallback", "request_id", x.req.ID, "model", x.req.Parsed.Model, "target", t,
					"connection", cd.Connection.ID, "outcome", outcome)
				return r
			}
			if x.last == before {
				continue // refused by local admission: try its next connection
			}
			break // one attempt per target
		}
	}
	if p.metrics != nil {
		p.metrics.EmergencyFallback("failed")
	}
	x.fallback, x.header, x.last = "", x.header[:nhdr], last
	return nil
}

// warnCooling logs the one all_targets_cooling_down warning of an answer
// that says so (docs/resilience.md §14): every excluded target with its
// reason and the seconds left (engine.CoolingDownLine). It returns res.
func (p *Proxy) warnCooling(x *state, res *Result) *Result {
	if res.Code != strategy.CodeAllTargetsCooling || !p.log.IsWarn() {
		return res
	}
	targets := make([]engine.ExcludedTarget, 0, len(x.excluded))
	for _, e := range x.excluded {
		targets = append(targets, engine.ExcludedTarget{Provider: e.Provider, Connection: e.Connection, Model: e.Model,
			Reason: e.Reason, Detail: e.detail, Until: e.until})
	}
	p.log.Warn(engine.CoolingDownLine(targets, p.clock.Now()), "request_id", x.req.ID, "model", x.req.Parsed.Model)
	return res
}
