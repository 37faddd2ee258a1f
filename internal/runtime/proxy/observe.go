package proxy

import (
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/admission"

	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
)

// observeRequest hands the finished client request to the request
// observer (the console's request log), once: where it went, each attempt
// with its outcome, status and timings, the candidates skipped with their
// reason and time left, the emergency fallback and what a routing plugin
// decided. The record's slices point into the request's state; the
// observer copies what it keeps.
func (p *Proxy) observeRequest(x *state, r Route, status int, code string, total time.Duration) {
	rec := reqlog.Record{
		ID: x.req.ID, Endpoint: x.format.String(), Model: x.req.Parsed.Model, Stream: x.stream,
		Provider: r.Provider, Connection: r.Connection, Served: r.Model,
		Status: status, Code: code, Attempts: r.Attempts, Trail: x.trail, Skipped: x.skipped(p.clock),
		Fallback:      x.fallback,
		RoutePlugin:   x.routed.plugin,
		RouteRule:     x.routed.rule,
		RouteFallback: x.routed.fallback,
		DurationMS:    total.Milliseconds(),
		UpstreamMS:    x.upstreamTime.Milliseconds(),
		OverheadMS:    max(total-x.upstreamTime, 0).Milliseconds(),
		TTFBMS:        x.ttfb.Milliseconds(),
	}
	if x.combo != nil {
		rec.Route = x.combo.label
	}
	p.observe(rec)
}

// skipped lists the candidates the request's last round passed over, with
// the seconds their exclusion had left at the clock's now (read only when
// there is one), and those a routing plugin excluded, for the request
// log; the first entries live in the state.
func (x *state) skipped(clock admission.Clock) []reqlog.Skip {
	if len(x.excluded) == 0 && len(x.routed.excluded) == 0 {
		return nil
	}
	var now time.Time
	if len(x.excluded) > 0 {
		now = clock.Now()
	}
	out := x.skipBuf[:0]
	for _, e := range x.excluded {
		s := reqlog.Skip{Provider: e.Provider, Connection: e.Connection, Model: e.Model, Reason: e.Reason, Detail: e.detail}
		if !e.until.IsZero() {
			s.SecondsLeft = float64(max(e.until.Sub(now), 0).Milliseconds()) / 1000
		}
		out = append(out, s)
	}
	return append(out, x.routed.excluded...)
}
