package strategy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// PluginPrefix starts the name of a plugin strategy: "plugin:<name>" routes
// a combo with the route hook of the WebAssembly plugin <name>.
const PluginPrefix = "plugin:"

// PluginName returns the plugin a strategy name designates ("plugin:acme"
// → "acme"; the prefix in any case, the name as written), and false when
// the name is not a plugin strategy or names no plugin.
func PluginName(strategy string) (string, bool) {
	s := strings.TrimSpace(strategy)
	if len(s) <= len(PluginPrefix) || !strings.EqualFold(s[:len(PluginPrefix)], PluginPrefix) {
		return "", false
	}
	return s[len(PluginPrefix):], true
}

// RouteRequest is what a Plugin strategy tells its plugin about the
// request being routed: Request plus the request summary of the plugin
// ABI. Headers are the request headers the caller chooses to show (the
// plugin host removes credentials and bounds them).
type RouteRequest struct {
	Request
	// Model is the model the client asked for.
	Model     string
	Stream    bool
	KeyID     string
	Headers   map[string]string
	ToolCount int
}

// CandidateState is what the engine knows of one target: its provider's
// breaker state ("closed", "degraded", "half_open", "open"; "" unknown)
// and the time left on the connection's cooldown and the model's lockout.
type CandidateState struct {
	Health   string
	Cooldown time.Duration
	Lockout  time.Duration
}

// StateFromExclusion describes a target from engine.Engine.Peek's answer at
// now: an open breaker gives its state as Health, a cooldown or lockout its
// time left. An eligible target's Health is "" (Peek does not tell a closed
// breaker from a degraded one).
func StateFromExclusion(ex engine.Exclusion, excluded bool, now time.Time) CandidateState {
	var s CandidateState
	if !excluded {
		return s
	}
	left := time.Duration(0)
	if !ex.Until.IsZero() {
		left = max(ex.Until.Sub(now), 0)
	}
	switch ex.Reason {
	case engine.ExclusionCircuitOpen:
		s.Health = strings.ToLower(ex.Detail)
		if s.Health == "" {
			s.Health = strings.ToLower(string(engine.StateOpen))
		}
	case engine.ExclusionConnectionCooldown, engine.ExclusionProviderCooldown:
		s.Cooldown = left
	case engine.ExclusionModelLockout:
		s.Lockout = left
	}
	return s
}

// RouteCandidate is one target of a combo as a routing plugin sees it.
// Headroom is the remaining upstream quota as a fraction 0..1, -1 when
// unknown; Latency the recent average, 0 when unknown.
type RouteCandidate struct {
	Target
	Eligible bool
	CandidateState
	Headroom float64
	Latency  time.Duration
	InFlight int
}

// RouteAnswer is a routing plugin's answer; its indexes are positions in
// the candidates (the combo's targets). See Plugin for how it is applied
// and CheckRouteAnswer for what makes it invalid.
type RouteAnswer struct {
	Order   []int
	Exclude []RouteExclusion
	RuleID  string
}

// RouteExclusion removes candidate Index from one request, for Reason.
type RouteExclusion struct {
	Index  int
	Reason string
}

// RouteFunc asks plugin to route one request over cands. It returns ok
// false with a nil error when the plugin declines (the configured order
// stands), and an error when the plugin could not answer (not loaded,
// trapped, too slow, garbage). Implementations are goroutine-safe and
// bound their own run time.
type RouteFunc func(ctx context.Context, plugin string, req RouteRequest, cands []RouteCandidate) (RouteAnswer, bool, error)

// CheckRouteAnswer reports why a is not a valid answer for len(eligible)
// candidates: an index out of range, listed twice, both ordered and
// excluded, or exclusions that leave no eligible candidate (a routing
// plugin cannot refuse a request; the on_request hook can).
func CheckRouteAnswer(a RouteAnswer, eligible []bool) error {
	n := len(eligible)
	mark := make([]byte, n) // 1 ordered, 2 excluded
	for _, i := range a.Order {
		switch {
		case i < 0 || i >= n:
			return fmt.Errorf("order names candidate %d of %d", i, n)
		case mark[i] != 0:
			return fmt.Errorf("order names candidate %d twice", i)
		}
		mark[i] = 1
	}
	for _, x := range a.Exclude {
		switch {
		case x.Index < 0 || x.Index >= n:
			return fmt.Errorf("exclude names candidate %d of %d", x.Index, n)
		case mark[x.Index] == 1:
			return fmt.Errorf("candidate %d is both ordered and excluded", x.Index)
		case mark[x.Index] == 2:
			return fmt.Errorf("exclude names candidate %d twice", x.Index)
		}
		mark[x.Index] = 2
	}
	some, left := false, false
	for i, e := range eligible {
		some = some || e
		left = left || (e && mark[i] != 2)
	}
	if some && !left {
		return errors.New("the exclusions leave no eligible candidate")
	}
	return nil
}

// Fallback reasons of RouteResult.
const (
	FallbackNoRouter = "no plugin host"
	FallbackDeclined = "declined"
)

// RouteResult tells what a Plugin strategy did for one request.
type RouteResult struct {
	// Excluded are the eligible candidates the plugin excluded, with its
	// reasons; the caller must not try them for this request.
	Excluded []RouteExclusion
	// RuleID names the plugin's decision ("plugin.<name>" by default).
	RuleID string
	// Fallback is why the configured order was used instead of the
	// plugin's ("" when the plugin's order was applied): FallbackNoRouter,
	// FallbackDeclined, or the plugin's failure.
	Fallback string
}

// PluginStats counts a Plugin strategy's calls: Calls asked the plugin,
// Declined of them it declined, Fallbacks failed (error or invalid answer)
// and fell back to the configured order.
type PluginStats struct {
	Calls, Declined, Fallbacks uint64
}

// Plugin is the "plugin:<name>" strategy: for every request it asks the
// route hook of plugin <name>, through the injected RouteFunc, to order
// the combo's targets. It shows the plugin every target with its state
// (eligibility, the injected CandidateState, and headroom, latency and
// in-flight attempts from Signals) and applies the answer: the ordered
// eligible targets first, then the other eligible targets in configured
// order, minus the excluded ones. A missing RouteFunc, a plugin that
// declines, fails or answers an invalid order (CheckRouteAnswer) leaves
// the configured order — priority — and a failure is counted
// (PluginStats). With no eligible target the plugin is not asked.
//
// Plugin keeps no per-request state and is goroutine-safe; the engine
// knows nothing of WebAssembly: the runtime injects the RouteFunc.
type Plugin struct {
	env   *env
	name  string
	route RouteFunc
	state func(Target) CandidateState

	calls, declined, fallbacks atomic.Uint64
}

var _ Strategy = (*Plugin)(nil)

func newPlugin(name string, e *env, opts Options) *Plugin {
	return &Plugin{env: e, name: name, route: opts.Route, state: opts.CandidateState}
}

// Name returns "plugin:<name>".
func (p *Plugin) Name() string { return PluginPrefix + p.name }

// PluginName returns the plugin's name.
func (p *Plugin) PluginName() string { return p.name }

// Order is Route with no request summary beyond req and no context.
func (p *Plugin) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out, _ := p.Route(context.Background(), RouteRequest{Request: req}, targets, eligible)
	return out
}

// Report does nothing: the plugin keeps its own state, if any.
func (*Plugin) Report(Request, []Target, int, bool) {}

// Stats returns the strategy's counters.
func (p *Plugin) Stats() PluginStats {
	return PluginStats{Calls: p.calls.Load(), Declined: p.declined.Load(), Fallbacks: p.fallbacks.Load()}
}

// Route orders targets for req as Plugin describes, calling eligible
// exactly once per index in index order, and reports what it did.
func (p *Plugin) Route(ctx context.Context, req RouteRequest, targets []Target, eligible func(int) bool) ([]int, RouteResult) {
	n := len(targets)
	var ebuf [32]bool
	elig := ebuf[:0]
	if n > len(ebuf) {
		elig = make([]bool, 0, n)
	}
	base := make([]int, 0, n)
	for i := range n {
		ok := eligible == nil || eligible(i)
		elig = append(elig, ok)
		if ok {
			base = append(base, i)
		}
	}
	if len(base) == 0 {
		return base, RouteResult{}
	}
	if p.route == nil {
		p.fallbacks.Add(1)
		return base, RouteResult{Fallback: FallbackNoRouter}
	}
	now := p.env.now(req.Request)
	cands := make([]RouteCandidate, n)
	for i := range targets {
		t := &targets[i]
		c := &cands[i]
		c.Target, c.Eligible, c.Headroom = *t, elig[i], -1
		if p.state != nil {
			c.CandidateState = p.state(*t)
		}
		sig := p.env.signals
		c.Latency, c.InFlight = sig.Latency(t.Key), sig.InFlight(t.Key)
		if q, ok := sig.Quota(t.Key); ok {
			c.Headroom = q.Headroom(now)
		}
	}
	p.calls.Add(1)
	a, ok, err := p.route(ctx, p.name, req, cands)
	switch {
	case err != nil:
		p.fallbacks.Add(1)
		return base, RouteResult{Fallback: err.Error()}
	case !ok:
		p.declined.Add(1)
		return base, RouteResult{Fallback: FallbackDeclined}
	}
	if err := CheckRouteAnswer(a, elig); err != nil {
		p.fallbacks.Add(1)
		return base, RouteResult{Fallback: "invalid answer: " + err.Error()}
	}
	res := RouteResult{RuleID: a.RuleID}
	skip := make([]bool, n)
	for _, x := range a.Exclude {
		skip[x.Index] = true
		if elig[x.Index] {
			if x.Reason == "" {
				x.Reason = "excluded by plugin " + p.name
			}
			res.Excluded = append(res.Excluded, x)
		}
	}
	out := make([]int, 0, len(base))
	for _, i := range a.Order {
		if elig[i] {
			out = append(out, i)
			skip[i] = true
		}
	}
	for _, i := range base {
		if !skip[i] {
			out = append(out, i)
		}
	}
	return out, res
}
