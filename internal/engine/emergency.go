package engine

import (
	"fmt"
	"slices"
	"strings"
)

// EmergencyTargets returns the emergency fallback targets ("provider/model",
// in order) when emergency_fallback is enabled, nil otherwise. The request
// path calls it when a request would end with no target able to serve it
// (every target excluded or failed), dispatches once to each target in
// order after EmergencyCheck, and marks the response
// X-Breakwater-Fallback: emergency (docs/resilience.md §14). The slice is
// shared; do not modify it.
func (e *Engine) EmergencyTargets() []string {
	ef := &e.settings.Load().EmergencyFallback
	if !ef.Enabled {
		return nil
	}
	return ef.Targets
}

// EmergencyCheck is Check for an emergency fallback dispatch: it bypasses
// the non-terminal exclusions of the target (connection cooldown, model
// lockout, provider window gate) and keeps the two that never yield: a
// connection in a terminal state (ExclusionUnavailable) and the provider's
// breaker, whose probe rule still applies (OPEN refuses; an expired OPEN
// lets one probe through and this call claims it, as Check does). It
// allocates nothing for an eligible target.
func (e *Engine) EmergencyCheck(provider, connection, model string) (Exclusion, bool) {
	now := e.clock.Now()
	if ex, ok := e.cooldowns.check(provider, connection, now); ok && ex.Reason == ExclusionUnavailable {
		return ex, true
	}
	if ok, retry := e.breakers.Allow(provider); !ok {
		if ex, open := e.breakerExclusion(provider, now); open {
			return ex, true
		}
		return Exclusion{Reason: ExclusionCircuitOpen, Until: now.Add(retry)}, true
	}
	return Exclusion{}, false
}

// knownTarget is the default ValidateTarget: target must be
// "provider/model" with a configured provider that lists the model (or
// lists no models).
func (e *Engine) knownTarget(target string) error {
	p, m, ok := strings.Cut(target, "/")
	if !ok || p == "" || m == "" {
		return fmt.Errorf("%q is not \"provider/model\"", target)
	}
	ps, known := e.providers[p]
	if !known {
		return fmt.Errorf("%q: unknown provider %q", target, p)
	}
	if len(ps.models) > 0 && !slices.Contains(ps.models, m) {
		return fmt.Errorf("%q: provider %q does not list model %q", target, p, m)
	}
	return nil
}

// checkTargets validates s's emergency fallback targets with the target
// validator; the error wraps ErrInvalidSettings and a FieldErrors naming
// each bad target.
func (e *Engine) checkTargets(s Settings) error {
	var fe FieldErrors
	for i, t := range s.EmergencyFallback.Targets {
		if err := e.validateTarget(t); err != nil {
			fe = append(fe, FieldError{Path: fmt.Sprintf("emergency_fallback.targets[%d]", i), Message: err.Error()})
		}
	}
	if len(fe) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidSettings, fe)
}

// dropUnknownTargets removes, with a warning, the emergency fallback
// targets the validator refuses: a persisted patch may name a target the
// configuration no longer has.
func (e *Engine) dropUnknownTargets(s Settings) Settings {
	ts := s.EmergencyFallback.Targets
	kept := ts[:0:0]
	for _, t := range ts {
		if err := e.validateTarget(t); err != nil {
			e.log.Warn("ignoring an emergency fallback target", "error", err)
			continue
		}
		kept = append(kept, t)
	}
	s.EmergencyFallback.Targets = kept
	return s
}

// touchesTargets reports whether a settings patch sets
// emergency_fallback.targets.
func touchesTargets(patch map[string]any) bool {
	ef, ok := patch["emergency_fallback"].(map[string]any)
	if !ok {
		return false
	}
	_, ok = ef["targets"]
	return ok
}
