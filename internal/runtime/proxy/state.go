package proxy

import (
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// state is one request's progress through the loop. It is used by the
// request's goroutine, and by a committed stream's finaliser once Serve
// has returned.
type state struct {
	req    *Request
	format wire.Format
	stream bool
	start  time.Time
	// rt is the routing view the request started with.
	rt *Routing

	attempts int
	// upstreamTime is the time spent waiting on upstream calls.
	upstreamTime time.Duration
	excluded     []exclusionEntry
	last         *failure
	final        topology.Candidate

	// pinned is the connection ref the affinity session was pinned to when
	// the request arrived.
	pinned string
	// lease is the session lease the request dispatches under (nil =
	// none); leaseSkips the expiries of other owners' leases that held a
	// candidate of an unleased request.
	lease      *leaseContext
	leaseSkips []time.Time
	// deadConns are connections a connection-scoped quota outcome ruled
	// out for the rest of this request.
	deadConns map[*topology.Connection]bool
	// failedHard are the candidates (by index) that failed in this request
	// for a reason a short wait does not cure; later rounds skip them.
	failedHard map[int]bool
	// admissionErr is the last local admission refusal.
	admissionErr *wire.APIError

	// sreq is the strategy request of each combo on the route; sig the
	// signals of the running combo attempt.
	sreq  map[*topology.Combo]strategy.Request
	sig   strategy.Attempt
	sigOn bool
	// header holds the response headers decided before the answer
	// (auto-strategy factors, context relay).
	header []wire.Header
}

func (p *Proxy) newState(req *Request) *state {
	x := &state{req: req, format: req.Format, stream: req.Parsed.Stream, start: req.Start, rt: p.routing.Load()}
	if x.start.IsZero() {
		x.start = time.Now()
	}
	return x
}

// exclusionEntry is one candidate the engine excluded, as the 503
// diagnostics show it.
type exclusionEntry struct {
	Provider    string  `json:"provider"`
	Connection  string  `json:"connection"`
	Model       string  `json:"model"`
	Reason      string  `json:"reason"`
	SecondsLeft float64 `json:"seconds_left"`
	until       time.Time
	detail      string
}

// failure is the last failed attempt of a request.
type failure struct {
	cand    topology.Candidate
	outcome engine.Outcome
	status  int
	header  http.Header
	body    []byte
}

// routedModel is the model label of the request for metrics: the model
// the configuration routed to, never a free-form client string.
func (x *state) routedModel() string {
	switch {
	case x.final.Provider != nil:
		return x.final.Model
	case x.last != nil:
		return x.last.cand.Model
	default:
		return "other"
	}
}

// route is where the request went.
func (x *state) route() Route {
	r := Route{Attempts: x.attempts}
	cd := x.final
	if cd.Provider == nil && x.last != nil {
		cd = x.last.cand
	}
	if cd.Provider != nil {
		r.Provider, r.Connection, r.Model = cd.Provider.ID, cd.Connection.ID, cd.Model
	}
	return r
}

// skips lists the request's exclusions for the pre-dispatch decision.
func (x *state) skips() []strategy.Skip {
	out := make([]strategy.Skip, 0, len(x.excluded))
	for _, e := range x.excluded {
		out = append(out, strategy.Skip{Reason: e.Reason, Detail: e.detail, Until: e.until,
			Transient: e.Reason == engine.ExclusionModelLockout && strategy.TransientDetail(e.detail)})
	}
	return out
}

// diagnostics describes the request's exclusions for 503 answers.
func (x *state) diagnostics(pool int, now time.Time) map[string]any {
	terminal := ""
	for i := range x.excluded {
		e := &x.excluded[i]
		if !e.until.IsZero() {
			e.SecondsLeft = float64(e.until.Sub(now).Milliseconds()) / 1000
		}
		terminal = e.Reason
	}
	excluded := x.excluded
	if excluded == nil {
		excluded = []exclusionEntry{}
	}
	return map[string]any{"pool_size": pool, "attempted": x.attempts, "excluded": excluded, "terminal_reason": terminal}
}
