package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// maxRouteReasonBytes bounds an exclusion reason; longer ones are cut.
const maxRouteReasonBytes = 256

// Route runs the route hook of plugin name for one request (the combo
// strategy "plugin:<name>"). It returns ok false and a nil error when the
// plugin declines, and an error when plugin name is not loaded with the
// route hook, or its call traps, overruns the deadline or answers an
// invalid order (strategy.CheckRouteAnswer; counted as the plugin's
// error). Before the call, request headers lose credentials and are
// bounded (abi.MaxRouteHeaders, abi.MaxRouteHeaderBytes) and candidates
// beyond abi.MaxRouteCandidates are left out. An exclusion without a
// reason gets "excluded by plugin <name>"; an answer without a rule id
// gets "plugin.<name>". Route is goroutine-safe.
func (h *Host) Route(ctx context.Context, name string, in abi.RouteInput) (abi.RouteAnswer, bool, error) {
	p := h.routePlugin(name)
	if p == nil {
		return abi.RouteAnswer{}, false, fmt.Errorf("plugin %q is not loaded with the %s hook", name, abi.HookRoute)
	}
	in.Request.Headers = routeHeaders(in.Request.Headers)
	if len(in.Candidates) > abi.MaxRouteCandidates {
		in.Candidates = in.Candidates[:abi.MaxRouteCandidates]
	}
	var ebuf [32]bool
	eligible := ebuf[:0]
	for i := range in.Candidates {
		eligible = append(eligible, in.Candidates[i].Eligible)
	}
	var input []byte
	if p.binary() {
		input = abi.AppendRouteInputBinary(nil, &in)
	} else {
		var err error
		if input, err = json.Marshal(in); err != nil {
			return abi.RouteAnswer{}, false, fmt.Errorf("plugin %q: encode route input: %w", name, err)
		}
	}
	var out abi.RouteAnswer
	answered, err := p.invoke(ctx, hookRoute, input, func(b []byte, binary bool) error {
		return decodeAnswer(b, binary, abi.DecodeRouteAnswerBinary, func(a *abi.RouteAnswer) error {
			return validRouteAnswer(a, eligible)
		}, &out)
	})
	if err != nil {
		return abi.RouteAnswer{}, false, fmt.Errorf("plugin %q: %w", name, err)
	}
	if !answered {
		return abi.RouteAnswer{}, false, nil
	}
	if out.RuleID == "" {
		out.RuleID = p.defaultRuleID
	}
	for i := range out.Exclude {
		if out.Exclude[i].Reason == "" {
			out.Exclude[i].Reason = "excluded by plugin " + name
		}
	}
	return out, true, nil
}

// routePlugin returns the loaded plugin name when it runs the route hook.
func (h *Host) routePlugin(name string) *plugin {
	if h == nil {
		return nil
	}
	p := h.set.Load().byName[name]
	if p == nil || !slices.Contains(p.hooks, abi.HookRoute) {
		return nil
	}
	return p
}

// validRouteAnswer checks a route answer against the candidates'
// eligibility and cuts long exclusion reasons.
func validRouteAnswer(a *abi.RouteAnswer, eligible []bool) error {
	sa := strategy.RouteAnswer{Order: a.Order, Exclude: make([]strategy.RouteExclusion, len(a.Exclude))}
	for i, x := range a.Exclude {
		sa.Exclude[i] = strategy.RouteExclusion{Index: x.Index}
		if len(x.Reason) > maxRouteReasonBytes {
			a.Exclude[i].Reason = cutUTF8(x.Reason, maxRouteReasonBytes)
		}
	}
	return strategy.CheckRouteAnswer(sa, eligible)
}

// cutUTF8 cuts s to at most n bytes on a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// routeHeaders returns the request headers a route hook sees: names
// lower-cased, credentials removed, at most abi.MaxRouteHeaders (the first
// lower-cased names in sorted order), values cut to abi.MaxRouteHeaderBytes. It copies
// h only when something changes.
func routeHeaders(h map[string]string) map[string]string {
	clean := len(h) <= abi.MaxRouteHeaders
	for k, v := range h {
		if !clean {
			break
		}
		clean = len(v) <= abi.MaxRouteHeaderBytes && strings.ToLower(k) == k && !credentialHeaders[k]
	}
	if clean {
		return h
	}
	out := make(map[string]string, min(len(h), abi.MaxRouteHeaders))
	names := slices.SortedFunc(maps.Keys(h), func(a, b string) int {
		return strings.Compare(strings.ToLower(a), strings.ToLower(b))
	})
	for _, k := range names {
		name := strings.ToLower(k)
		if credentialHeaders[name] {
			continue
		}
		if _, dup := out[name]; dup {
			continue
		}
		if len(out) == abi.MaxRouteHeaders {
			break
		}
		out[name] = cutUTF8(h[k], abi.MaxRouteHeaderBytes)
	}
	return out
}

// RouteFunc returns the strategy.RouteFunc asking h's plugins, for
// strategy.Options.Route: it converts the strategy's request and
// candidates to the ABI's (durations in milliseconds) and calls Route.
func (h *Host) RouteFunc() strategy.RouteFunc {
	return func(ctx context.Context, plugin string, req strategy.RouteRequest, cands []strategy.RouteCandidate) (strategy.RouteAnswer, bool, error) {
		in := abi.RouteInput{
			Request: abi.RouteRequest{Model: req.Model, Combo: req.Combo, Stream: req.Stream, KeyID: req.KeyID,
				Headers: req.Headers, ToolCount: req.ToolCount, PromptTokens: req.PromptTokens},
			Candidates: make([]abi.RouteCandidate, len(cands)),
		}
		for i := range cands {
			c := &cands[i]
			in.Candidates[i] = abi.RouteCandidate{
				Provider: c.Provider, Model: c.Model, Connection: c.Connection, Eligible: c.Eligible,
				Health: c.Health, CooldownMS: c.Cooldown.Milliseconds(), LockoutMS: c.Lockout.Milliseconds(),
				Headroom: c.Headroom, LatencyMS: c.Latency.Milliseconds(), InFlight: c.InFlight,
				PriceIn: c.PriceIn, PriceOut: c.PriceOut,
			}
		}
		a, ok, err := h.Route(ctx, plugin, in)
		if err != nil || !ok {
			return strategy.RouteAnswer{}, false, err
		}
		out := strategy.RouteAnswer{Order: a.Order, RuleID: a.RuleID, Exclude: make([]strategy.RouteExclusion, len(a.Exclude))}
		for i, x := range a.Exclude {
			out.Exclude[i] = strategy.RouteExclusion{Index: x.Index, Reason: x.Reason}
		}
		return out, true, nil
	}
}
