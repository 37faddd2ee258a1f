package engine

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Window gate limits applied by WindowGateConfig.Normalize, and the backoff
// of its connection entries.
const (
	MinWindowGateThreshold = 1
	MaxWindowGateThreshold = 1000
	MinWindowGateDuration  = time.Second
	MaxWindowGateDuration  = 24 * time.Hour
	// WindowGateConnectionBase is the first cooldown of a connection entry.
	WindowGateConnectionBase = 5 * time.Second
	// WindowGateConnectionMax caps the cooldown of a connection entry.
	WindowGateConnectionMax = 300 * time.Second
)

// WindowGateConfig holds the §1b settings of one provider. It is a plain
// value.
type WindowGateConfig struct {
	// Threshold is how many failures inside Window make the provider cool.
	Threshold int
	// Window is how far back failures count.
	Window time.Duration
	// Cooldown is how long the provider cools once tripped.
	Cooldown time.Duration
}

// DefaultWindowGateConfig returns the §1b defaults of a profile: oauth
// 10/15 min/5 min, apikey 15/30 min/10 min, local 2/5 min/1 min. An unknown
// profile gets the apikey defaults.
func DefaultWindowGateConfig(p Profile) WindowGateConfig {
	switch p {
	case ProfileOAuth:
		return WindowGateConfig{Threshold: 10, Window: 15 * time.Minute, Cooldown: 5 * time.Minute}
	case ProfileLocal:
		return WindowGateConfig{Threshold: 2, Window: 5 * time.Minute, Cooldown: time.Minute}
	default:
		return WindowGateConfig{Threshold: 15, Window: 30 * time.Minute, Cooldown: 10 * time.Minute}
	}
}

// Normalize clamps c: Threshold in 1..1000, Window and Cooldown in
// 1 s..24 h.
func (c WindowGateConfig) Normalize() WindowGateConfig {
	c.Threshold = min(max(c.Threshold, MinWindowGateThreshold), MaxWindowGateThreshold)
	c.Window = min(max(c.Window, MinWindowGateDuration), MaxWindowGateDuration)
	c.Cooldown = min(max(c.Cooldown, MinWindowGateDuration), MaxWindowGateDuration)
	return c
}

// ConnectionBackoff is one connection entry of the window gate.
type ConnectionBackoff struct {
	// Level counts consecutive failures; the cooldown is
	// 5 s × 2^(Level-1), capped at 300 s.
	Level         int       `json:"level"`
	Until         time.Time `json:"until"`
	LastFailureAt time.Time `json:"last_failure_at"`
}

// WindowGateSnapshot is the observable and persisted form of one provider's
// window gate. It is a plain value; its maps are owned by the receiver.
type WindowGateSnapshot struct {
	// Failures maps each connection that failed inside the window to its
	// latest failure.
	Failures map[string]time.Time `json:"failures,omitempty"`
	// CoolingUntil is when the provider stops cooling; zero when it is not.
	CoolingUntil time.Time `json:"cooling_until,omitzero"`
	// Connections holds the connection entries still cooling or
	// remembered.
	Connections map[string]ConnectionBackoff `json:"connections,omitempty"`
}

// windowState is the gate state of one provider.
type windowState struct {
	cfg          WindowGateConfig
	failures     map[string]time.Time
	coolingUntil time.Time
	conns        map[string]ConnectionBackoff
}

type windowChange struct {
	provider string
	snap     WindowGateSnapshot
}

// WindowGate is the opt-in provider cooldown window gate of docs/resilience.md
// §1b: cross-request memory that makes a provider cool for Cooldown once
// Threshold failures land inside Window, so consecutive combo requests stop
// retrying it. A failure that arrives while its connection is still inside
// the backoff of an earlier counted failure is a duplicate and counts once,
// so a burst from one key does not trip the gate while a lone key that
// keeps failing still does. A success clears
// the window. Alongside, each connection has an entry with exponential
// backoff from 5 s doubling to 300 s per consecutive failure. All timers are
// lazy. WindowGate is goroutine-safe.
type WindowGate struct {
	clock    Clock
	mu       sync.Mutex
	byName   map[string]*windowState
	onChange func(provider string, s WindowGateSnapshot)
	queue    changeQueue[windowChange]
}

// NewWindowGate returns an empty gate reading time from clock.
func NewWindowGate(clock Clock) *WindowGate {
	return &WindowGate{clock: clock, byName: make(map[string]*windowState)}
}

// OnChange sets the function called after every change of a provider's
// snapshot, for persistence and metrics. It is called outside the gate's
// lock, in the order of the changes, possibly from another goroutine than
// the one that made the change; it may call back into the gate. Set it
// before the gate is used.
func (g *WindowGate) OnChange(fn func(provider string, s WindowGateSnapshot)) {
	g.mu.Lock()
	g.onChange = fn
	g.mu.Unlock()
}

// state returns provider's state, creating it with the apikey defaults.
// Must hold g.mu.
func (g *WindowGate) state(provider string) *windowState {
	ws := g.byName[provider]
	if ws == nil {
		ws = &windowState{cfg: DefaultWindowGateConfig(ProfileAPIKey).Normalize()}
		g.byName[provider] = ws
	}
	return ws
}

// Configure sets provider's settings, normalised. Providers never
// configured use the apikey defaults.
func (g *WindowGate) Configure(provider string, cfg WindowGateConfig) {
	g.mu.Lock()
	g.state(provider).cfg = cfg.Normalize()
	g.mu.Unlock()
}

// RecordFailure records a failure of connection on provider. The
// connection's entry backs off (5 s, 10 s, … 300 s); a failure while the
// entry is still cooling is a duplicate (e.g. concurrent requests failing
// together) and does not raise its level, and a failure after a quiet
// Window starts again at 5 s. Unless the provider is already cooling (which
// is never extended), the connection is counted in the window once; when
// Threshold distinct connections failed inside Window the provider cools
// for Cooldown and the window starts afresh.
func (g *WindowGate) RecordFailure(provider, connection string) {
	g.mu.Lock()
	now := g.clock.Now()
	ws := g.state(provider)
	ws.prune(now)

	if ws.conns == nil {
		ws.conns = make(map[string]ConnectionBackoff)
	}
	e := ws.conns[connection]
	// A failure counts toward the provider's window unless its connection
	// is still inside the backoff of an earlier counted failure: a burst of
	// duplicate failures from one connection counts once, while a lone
	// connection failing again and again still trips the gate.
	duplicate := now.Before(e.Until)
	if !e.LastFailureAt.IsZero() && now.Sub(e.LastFailureAt) >= ws.cfg.Window && !now.Before(e.Until) {
		e.Level = 0
	}
	if e.Level == 0 || !now.Before(e.Until) {
		e.Level++
		if until := now.Add(connectionBackoff(e.Level)); until.After(e.Until) {
			e.Until = until
		}
	}
	e.LastFailureAt = now
	ws.conns[connection] = e

	if !now.Before(ws.coolingUntil) && !duplicate {
		ws.coolingUntil = time.Time{}
		if ws.failures == nil {
			ws.failures = make(map[string]time.Time)
		}
		// Keyed per counted failure; the key keeps the connection for
		// diagnostics.
		ws.failures[connection+"@"+strconv.FormatInt(now.UnixNano(), 36)] = now
		if len(ws.failures) >= ws.cfg.Threshold {
			ws.coolingUntil = now.Add(ws.cfg.Cooldown)
			clear(ws.failures)
		}
	}
	g.finish(provider, ws)
}

// connectionBackoff is the cooldown of a connection entry at level ≥ 1.
func connectionBackoff(level int) time.Duration {
	d := WindowGateConnectionBase
	for i := 1; i < level && d < WindowGateConnectionMax; i++ {
		d *= 2
	}
	return min(d, WindowGateConnectionMax)
}

// RecordSuccess records a success on provider: it clears the failure window
// and ends any provider cooling. Connection entries are kept; see
// RecordConnectionSuccess.
func (g *WindowGate) RecordSuccess(provider string) {
	g.mu.Lock()
	ws := g.byName[provider]
	if ws == nil || (len(ws.failures) == 0 && ws.coolingUntil.IsZero()) {
		g.mu.Unlock()
		return
	}
	clear(ws.failures)
	ws.coolingUntil = time.Time{}
	g.finish(provider, ws)
}

// RecordConnectionSuccess is RecordSuccess that also clears connection's
// entry (its backoff starts again at 5 s).
func (g *WindowGate) RecordConnectionSuccess(provider, connection string) {
	g.mu.Lock()
	ws := g.byName[provider]
	if ws == nil {
		g.mu.Unlock()
		return
	}
	_, hadConn := ws.conns[connection]
	if !hadConn && len(ws.failures) == 0 && ws.coolingUntil.IsZero() {
		g.mu.Unlock()
		return
	}
	delete(ws.conns, connection)
	clear(ws.failures)
	ws.coolingUntil = time.Time{}
	g.finish(provider, ws)
}

// Cooling reports whether provider is cooling and until when.
func (g *WindowGate) Cooling(provider string) (bool, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.byName[provider]
	if ws == nil || !g.clock.Now().Before(ws.coolingUntil) {
		return false, time.Time{}
	}
	return true, ws.coolingUntil
}

// ConnectionCooling reports whether connection's entry on provider is
// cooling and until when.
func (g *WindowGate) ConnectionCooling(provider, connection string) (bool, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.byName[provider]
	if ws == nil {
		return false, time.Time{}
	}
	e, ok := ws.conns[connection]
	if !ok || !g.clock.Now().Before(e.Until) {
		return false, time.Time{}
	}
	return true, e.Until
}

// Snapshot returns provider's current state with expired parts left out.
func (g *WindowGate) Snapshot(provider string) WindowGateSnapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.byName[provider]
	if ws == nil {
		return WindowGateSnapshot{}
	}
	ws.prune(g.clock.Now())
	return ws.snapshot()
}

// Restore replaces provider's state with a persisted snapshot, keeping its
// settings. It does not call OnChange.
func (g *WindowGate) Restore(provider string, s WindowGateSnapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.state(provider)
	ws.failures = maps.Clone(s.Failures)
	ws.coolingUntil = s.CoolingUntil
	ws.conns = maps.Clone(s.Connections)
}

// Reset clears provider's state ("" clears every provider) and returns the
// providers cleared, sorted.
func (g *WindowGate) Reset(provider string) []string {
	g.mu.Lock()
	var names []string
	if provider == "" {
		names = slices.Sorted(maps.Keys(g.byName))
	} else if g.byName[provider] != nil {
		names = []string{provider}
	}
	deliver := false
	for _, p := range names {
		ws := g.byName[p]
		ws.failures, ws.coolingUntil, ws.conns = nil, time.Time{}, nil
		if g.onChange != nil {
			deliver = g.queue.push(windowChange{provider: p, snap: ws.snapshot()}) || deliver
		}
	}
	fn := g.onChange
	g.mu.Unlock()
	if deliver {
		drain(&g.mu, &g.queue, func(c windowChange) { fn(c.provider, c.snap) })
	}
	return names
}

// Providers returns the providers the gate knows, sorted.
func (g *WindowGate) Providers() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.byName))
}

// prune drops failures outside the window, an expired cooling and
// connection entries that are neither cooling nor inside the window. Must
// hold the gate's lock.
func (ws *windowState) prune(now time.Time) {
	for c, at := range ws.failures {
		if now.Sub(at) >= ws.cfg.Window {
			delete(ws.failures, c)
		}
	}
	if !ws.coolingUntil.IsZero() && !now.Before(ws.coolingUntil) {
		ws.coolingUntil = time.Time{}
	}
	for c, e := range ws.conns {
		if !now.Before(e.Until) && now.Sub(e.LastFailureAt) >= ws.cfg.Window {
			delete(ws.conns, c)
		}
	}
}

// snapshot copies the state. Must hold the gate's lock.
func (ws *windowState) snapshot() WindowGateSnapshot {
	s := WindowGateSnapshot{CoolingUntil: ws.coolingUntil}
	if len(ws.failures) > 0 {
		s.Failures = maps.Clone(ws.failures)
	}
	if len(ws.conns) > 0 {
		s.Connections = maps.Clone(ws.conns)
	}
	return s
}

// finish queues a change notification for provider, unlocks g.mu and
// delivers when this goroutine is the deliverer. Must hold g.mu.
func (g *WindowGate) finish(provider string, ws *windowState) {
	fn := g.onChange
	if fn == nil {
		g.mu.Unlock()
		return
	}
	deliver := g.queue.push(windowChange{provider: provider, snap: ws.snapshot()})
	g.mu.Unlock()
	if deliver {
		drain(&g.mu, &g.queue, func(c windowChange) { fn(c.provider, c.snap) })
	}
}
