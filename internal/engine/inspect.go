package engine

import "time"

// WindowGateView is one provider's window gate (docs/resilience.md §1b) as
// the operator's console shows it.
type WindowGateView struct {
	// Enabled is resilience.provider_cooldown.enabled: off, the gate
	// counts nothing and cools nothing.
	Enabled    bool  `json:"enabled"`
	Threshold  int   `json:"threshold"`
	WindowMS   int64 `json:"window_ms"`
	CooldownMS int64 `json:"cooldown_ms"`
	// FailuresInWindow counts the failures still inside the window.
	FailuresInWindow int       `json:"failures_in_window"`
	CoolingUntil     time.Time `json:"cooling_until,omitzero"`
}

// WindowGateView returns provider's window gate with expired parts left
// out. It does not change routing state.
func (e *Engine) WindowGateView(provider string) WindowGateView {
	cfg := e.gate.config(provider)
	snap := e.gate.Snapshot(provider)
	return WindowGateView{
		Enabled:          e.settings.Load().ProviderCooldown.Enabled,
		Threshold:        cfg.Threshold,
		WindowMS:         cfg.Window.Milliseconds(),
		CooldownMS:       cfg.Cooldown.Milliseconds(),
		FailuresInWindow: len(snap.Failures),
		CoolingUntil:     snap.CoolingUntil,
	}
}

// config returns provider's settings (the apikey defaults for a provider
// never configured).
func (g *windowGate) config(provider string) windowGateConfig {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ws := g.byName[provider]; ws != nil {
		return ws.cfg
	}
	return defaultWindowGateConfig(ProfileAPIKey).Normalize()
}

// BreakerState returns the state of provider's breaker (lazy recovery
// applied, no probe claimed): CLOSED, DEGRADED, HALF_OPEN or OPEN; CLOSED
// for a provider without one. Routing plugins see it as a candidate's
// health. It allocates nothing.
func (e *Engine) BreakerState(provider string) BreakerState {
	return e.breakers.State(provider)
}

// BreakerSnapshot returns provider's breaker as Health reads it (lazy
// recovery applied), with its exact deadlines: RetryAt for an OPEN breaker,
// OpenedAt, LastFailureAt and the last transitions.
func (e *Engine) BreakerSnapshot(provider string) BreakerSnapshot {
	return e.breakers.Peek(provider)
}
