package engine

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Window gate limits applied by windowGateConfig.Normalize.
const (
	MinWindowGateThreshold = 1
	MaxWindowGateThreshold = 1000
	MinWindowGateDuration  = time.Second
	MaxWindowGateDuration  = 24 * time.Hour
)

// windowGateConfig holds the §1b settings of one provider. It is a plain
// value.
type windowGateConfig struct {
	// Threshold is how many failures inside Window make the provider cool.
	Threshold int
	// Window is how far back failures count.
	Window time.Duration
	// Cooldown is how long the provider cools once tripped.
	Cooldown time.Duration
}

// defaultWindowGateConfig returns the §1b defaults of a profile: oauth
// 10/15 min/5 min, apikey 15/30 min/10 min, local 2/5 min/1 min. An unknown
// profile gets the apikey defaults.
func defaultWindowGateConfig(p Profile) windowGateConfig {
	switch p {
	case ProfileOAuth:
		return windowGateConfig{Threshold: 10, Window: 15 * time.Minute, Cooldown: 5 * time.Minute}
	case ProfileLocal:
		return windowGateConfig{Threshold: 2, Window: 5 * time.Minute, Cooldown: time.Minute}
	default:
		return windowGateConfig{Threshold: 15, Window: 30 * time.Minute, Cooldown: 10 * time.Minute}
	}
}

// Normalize clamps c: Threshold in 1..1000, Window and Cooldown in
// 1 s..24 h.
func (c windowGateConfig) Normalize() windowGateConfig {
	c.Threshold = min(max(c.Threshold, MinWindowGateThreshold), MaxWindowGateThreshold)
	c.Window = min(max(c.Window, MinWindowGateDuration), MaxWindowGateDuration)
	c.Cooldown = min(max(c.Cooldown, MinWindowGateDuration), MaxWindowGateDuration)
	return c
}

// gateFailure is one failure as the window gate sees it.
type gateFailure struct {
	// Kind identifies identical failures of a connection (the engine uses
	// the reason and the status).
	Kind string
	// Dispatched is when the failed attempt was sent upstream; zero when
	// unknown.
	Dispatched time.Time
	// Burst, read only when Dispatched is zero, reports that the failure
	// arrived inside the anti-herd burst of an identical failure of its
	// connection (the connection still cooling from it): routing never
	// dispatches to a cooling connection, so the attempt was sent before
	// that failure was recorded.
	Burst bool
}

// countedFailure is the last counted failure of one connection.
type countedFailure struct {
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
}

// windowGateSnapshot is the observable and persisted form of one provider's
// window gate. It is a plain value; its maps are owned by the receiver.
type windowGateSnapshot struct {
	// Failures holds the counted failures inside the window, keyed per
	// failure ("<connection>@<time>").
	Failures map[string]time.Time `json:"failures,omitempty"`
	// CoolingUntil is when the provider stops cooling; zero when it is not.
	CoolingUntil time.Time `json:"cooling_until,omitzero"`
	// Last holds each connection's last counted failure inside the window,
	// for the in-flight de-duplication.
	Last map[string]countedFailure `json:"last,omitempty"`
}

// windowState is the gate state of one provider.
type windowState struct {
	cfg          windowGateConfig
	failures     map[string]time.Time
	coolingUntil time.Time
	last         map[string]countedFailure
}

type windowChange struct {
	provider string
	snap     windowGateSnapshot
}

// windowGate is the opt-in provider cooldown window gate of
// docs/resilience.md §1b: cross-request memory that makes a provider cool
// for Cooldown once Threshold failures land inside Window, so consecutive
// combo requests stop retrying it. Every failure of the provider counts,
// however often its connection fails, except one that was in flight
// together with an identical counted failure of the same connection: same
// connection, same kind (reason and status), and dispatched before that
// failure was recorded (gateFailure). So a burst of concurrent requests
// failing together counts once, while a lone connection failing once a
// second counts every time. A success clears the window and ends the
// cooling. All timers are lazy. windowGate is goroutine-safe.
type windowGate struct {
	clock    Clock
	mu       sync.Mutex
	byName   map[string]*windowState
	onChange func(provider string, s windowGateSnapshot)
	queue    changeQueue[windowChange]
}

// newWindowGate returns an empty gate reading time from clock.
func newWindowGate(clock Clock) *windowGate {
	return &windowGate{clock: clock, byName: make(map[string]*windowState)}
}

// OnChange sets the function called after every change of a provider's
// snapshot, for persistence and metrics. It is called outside the gate's
// lock, in the order of the changes, possibly from another goroutine than
// the one that made the change; it may call back into the gate. Set it
// before the gate is used.
func (g *windowGate) OnChange(fn func(provider string, s windowGateSnapshot)) {
	g.mu.Lock()
	g.onChange = fn
	g.mu.Unlock()
}

// state returns provider's state, creating it with the apikey defaults.
// Must hold g.mu.
func (g *windowGate) state(provider string) *windowState {
	ws := g.byName[provider]
	if ws == nil {
		ws = &windowState{cfg: defaultWindowGateConfig(ProfileAPIKey).Normalize()}
		g.byName[provider] = ws
	}
	return ws
}

// Configure sets provider's settings, normalised. Providers never
// configured use the apikey defaults.
func (g *windowGate) Configure(provider string, cfg windowGateConfig) {
	g.mu.Lock()
	g.state(provider).cfg = cfg.Normalize()
	g.mu.Unlock()
}

// RecordFailure records failure f of connection on provider and reports
// whether it was counted. A duplicate (in flight together with the
// connection's last counted failure of the same kind: f.Dispatched before
// it was recorded, or f.Burst when the dispatch time is unknown) is not
// counted; nor is a failure while the provider is already cooling (which
// is never extended). When Threshold counted failures lie inside Window
// the provider cools for Cooldown and the window starts afresh.
func (g *windowGate) RecordFailure(provider, connection string, f gateFailure) bool {
	g.mu.Lock()
	now := g.clock.Now()
	ws := g.state(provider)
	ws.prune(now)
	last, seen := ws.last[connection]
	if seen && last.Kind == f.Kind {
		inFlight := f.Burst
		if !f.Dispatched.IsZero() {
			inFlight = f.Dispatched.Before(last.At)
		}
		if inFlight {
			g.mu.Unlock()
			return false
		}
	}
	if now.Before(ws.coolingUntil) {
		g.mu.Unlock()
		return false
	}
	if ws.last == nil {
		ws.last = make(map[string]countedFailure)
	}
	ws.last[connection] = countedFailure{Kind: f.Kind, At: now}
	if ws.failures == nil {
		ws.failures = make(map[string]time.Time)
	}
	// Keyed per counted failure; the key keeps the connection for
	// diagnostics. Two failures of one connection at the same instant are
	// one key: they were in flight together.
	ws.failures[connection+"@"+strconv.FormatInt(now.UnixNano(), 36)] = now
	if len(ws.failures) >= ws.cfg.Threshold {
		ws.coolingUntil = now.Add(ws.cfg.Cooldown)
		clear(ws.failures)
	}
	g.finish(provider, ws)
	return true
}

// RecordSuccess records a success on provider: it clears the failure
// window and any provider cooling. The de-duplication memory stays (until
// it leaves the window): requests in flight with a counted failure that
// fail after the success are still its duplicates. With nothing to clear
// it allocates nothing.
func (g *windowGate) RecordSuccess(provider string) {
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

// Cooling reports whether provider is cooling and until when.
func (g *windowGate) Cooling(provider string) (bool, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.byName[provider]
	if ws == nil || !g.clock.Now().Before(ws.coolingUntil) {
		return false, time.Time{}
	}
	return true, ws.coolingUntil
}

// Snapshot returns provider's current state with expired parts left out.
func (g *windowGate) Snapshot(provider string) windowGateSnapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.byName[provider]
	if ws == nil {
		return windowGateSnapshot{}
	}
	ws.prune(g.clock.Now())
	return ws.snapshot()
}

// Restore replaces provider's state with a persisted snapshot, keeping its
// settings. It does not call OnChange.
func (g *windowGate) Restore(provider string, s windowGateSnapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws := g.state(provider)
	ws.failures = maps.Clone(s.Failures)
	ws.coolingUntil = s.CoolingUntil
	ws.last = maps.Clone(s.Last)
}

// Reset clears provider's state ("" clears every provider) and returns the
// providers cleared, sorted.
func (g *windowGate) Reset(provider string) []string {
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
		ws.failures, ws.coolingUntil, ws.last = nil, time.Time{}, nil
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
func (g *windowGate) Providers() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.byName))
}

// prune drops failures outside the window, an expired cooling and
// last-failure entries outside the window. Must hold the gate's lock.
func (ws *windowState) prune(now time.Time) {
	for c, at := range ws.failures {
		if now.Sub(at) >= ws.cfg.Window {
			delete(ws.failures, c)
		}
	}
	if !ws.coolingUntil.IsZero() && !now.Before(ws.coolingUntil) {
		ws.coolingUntil = time.Time{}
	}
	for c, e := range ws.last {
		if now.Sub(e.At) >= ws.cfg.Window {
			delete(ws.last, c)
		}
	}
}

// snapshot copies the state. Must hold the gate's lock.
func (ws *windowState) snapshot() windowGateSnapshot {
	s := windowGateSnapshot{CoolingUntil: ws.coolingUntil}
	if len(ws.failures) > 0 {
		s.Failures = maps.Clone(ws.failures)
	}
	if len(ws.last) > 0 {
		s.Last = maps.Clone(ws.last)
	}
	return s
}

// finish queues a change notification for provider, unlocks g.mu and
// delivers when this goroutine is the deliverer. Must hold g.mu.
func (g *windowGate) finish(provider string, ws *windowState) {
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
