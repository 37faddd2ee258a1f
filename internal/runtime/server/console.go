package server

import (
	"context"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/usagewall"
	"github.com/breakwater-dev/breakwater/internal/runtime/dashboard"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/series"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

// console is the server side of the operator's console: the overview time
// series, the recent-request log, the live-update tickets and streams.
type console struct {
	series   *series.Ring
	requests *reqlog.Log
	tickets  *ticketBook
	streams  *streamCount
	// interval is the overview's sampling interval.
	interval time.Duration
	// capMu serialises changes of the per-model concurrency caps.
	capMu sync.Mutex
	// sampled is closed when the overview sampler has stopped (nil: it
	// was never started).
	sampled chan struct{}
}

// mountConsole builds the console state and mounts its endpoints. It
// starts nothing: startConsole does, at Start.
func (s *Server) mountConsole(api fiber.Router) {
	requests := s.requests
	if requests == nil {
		requests = reqlog.New(reqlog.DefaultCapacity, s.clock)
	}
	s.console = &console{
		series:   series.New(series.DefaultInterval, series.DefaultSpan),
		requests: requests,
		tickets:  newTicketBook(),
		streams:  &streamCount{},
		interval: series.DefaultInterval,
	}

	api.Get("/console/state", s.handleConsoleState)
	api.Get("/console/series", s.handleConsoleSeries)
	api.Get("/console/requests", s.handleConsoleRequests)
	api.Get("/console/requests/:seq", s.handleConsoleRequest)
	api.Get("/console/combos", s.handleConsoleCombos)
	api.Post("/console/ticket", s.handleConsoleTicket)
	api.Get("/resilience/defaults", s.handleResilienceDefaults)
	api.Get("/resilience/model-concurrency", s.handleListModelCaps)
	api.Put("/resilience/model-concurrency", s.handleSetModelCap)
}

// startConsole restores the model concurrency caps set at run time and
// starts the overview sampler (it stops with the server's base context;
// Shutdown waits for it). The request loop feeds the request log.
func (s *Server) startConsole(ctx context.Context) {
	if err := s.restoreModelCaps(ctx); err != nil {
		s.log.Warn("restoring model concurrency caps set at run time", "error", err)
	}
	if s.metrics == nil {
		return
	}
	m := s.metrics
	s.console.series.Observe(time.Now(), m.Totals())
	s.console.sampled = make(chan struct{})
	go func() { defer close(s.console.sampled); s.console.sample(s.baseCtx, m) }()
}

// sample reads the metrics into the overview ring every interval until
// ctx ends.
func (c *console) sample(ctx context.Context, m *metrics.Metrics) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.series.Observe(now, m.Totals())
		}
	}
}

// consoleState is the live state the console shows, pushed over the event
// stream when it changes. Deadlines are absolute times (the console counts
// down from Now) so that the state only changes when something happens.
type consoleState struct {
	Now       time.Time             `json:"now"`
	Counts    stateCounts           `json:"counts"`
	Providers []providerState       `json:"providers"`
	Lockouts  []lockoutState        `json:"lockouts"`
	Gates     []admission.GateStats `json:"gates"`
	// Requests is the newest request-log sequence number.
	Requests uint64 `json:"requests_seq"`
	// Streams counts the open console event streams.
	Streams int64 `json:"live_streams"`
	// Flags are the resilience feature switches, for the overview.
	Flags  map[string]bool `json:"flags"`
	byConn map[string]*connState
}

// stateCounts are the overview's counters.
type stateCounts struct {
	Open        int `json:"open"`
	Degraded    int `json:"degraded"`
	HalfOpen    int `json:"half_open"`
	Cooling     int `json:"cooling"`
	Terminal    int `json:"terminal"`
	Lockouts    int `json:"lockouts"`
	Queued      int `json:"queued"`
	Running     int `json:"running"`
	Connections int `json:"connections"`
	Providers   int `json:"providers"`
}

// providerState is one provider: breaker (with its last transitions),
// window gate, the profile's thresholds and its connections.
type providerState struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind,omitempty"`
	Profile string   `json:"profile,omitempty"`
	Models  []string `json:"models"`
	// Configured is false for a provider the engine only knows from
	// persisted state.
	Configured bool                    `json:"configured"`
	Breaker    engine.BreakerSnapshot  `json:"breaker"`
	WindowGate engine.WindowGateView   `json:"window_gate"`
	Thresholds engine.BreakerSettings  `json:"thresholds"`
	Cooldown   engine.CooldownSettings `json:"cooldown"`
	Conns      []*connState            `json:"connections"`
}

// connState is one connection: cooldown, terminal state, admission and
// usage-wall opt-ins. It never holds credentials.
type connState struct {
	ID           string            `json:"id"`
	Ref          string            `json:"ref"`
	Status       engine.TestStatus `json:"status"`
	Terminal     bool              `json:"terminal"`
	CoolingUntil time.Time         `json:"cooling_until,omitzero"`
	BackoffLevel int               `json:"backoff_level"`
	// TerminalAt, TerminalReason and TerminalRule say when and why the
	// connection entered its terminal state.
	TerminalAt          time.Time      `json:"terminal_at,omitzero"`
	TerminalReason      string         `json:"terminal_reason,omitempty"`
	TerminalRule        string         `json:"terminal_rule,omitempty"`
	LastError           string         `json:"last_error,omitempty"`
	LastErrorType       string         `json:"last_error_type,omitempty"`
	ErrorCode           int            `json:"error_code,omitempty"`
	Protected           bool           `json:"protected"`
	RateLimitProtection bool           `json:"rate_limit_protection"`
	Queued              int            `json:"queued"`
	Running             int            `json:"running"`
	Rejections          int64          `json:"rejections"`
	PausedUntil         time.Time      `json:"paused_until,omitzero"`
	LowPriorityMode     bool           `json:"low_priority_mode"`
	AutoLimitReset      bool           `json:"auto_limit_reset"`
	Wall                *wallStateView `json:"usage_wall,omitempty"`
}

// wallStateView is a connection's usage-wall lane and reset state (§2b).
type wallStateView struct {
	LaneActive      bool      `json:"lane_active"`
	LaneUntil       time.Time `json:"lane_until,omitzero"`
	CoolOffUntil    time.Time `json:"cool_off_until,omitzero"`
	LastEndReason   string    `json:"last_end_reason,omitempty"`
	LastEndAt       time.Time `json:"last_end_at,omitzero"`
	LastResetResult string    `json:"last_reset_result,omitempty"`
	LastResetAt     time.Time `json:"last_reset_at,omitzero"`
	NextResetAt     time.Time `json:"next_reset_at,omitzero"`
}

type lockoutState struct {
	Provider     string    `json:"provider"`
	Connection   string    `json:"connection"`
	Model        string    `json:"model"`
	Family       string    `json:"family,omitempty"`
	Reason       string    `json:"reason"`
	Status       int       `json:"status,omitempty"`
	FailureCount int       `json:"failure_count"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// consoleSnapshot reads the live state from the engine, the admission
// manager and the usage wall.
func (s *Server) consoleSnapshot() consoleState {
	now := s.clock.Now()
	topo := s.view.Load().routing.Topology
	settings := s.eng.CurrentSettings()
	st := consoleState{Now: now, Providers: []providerState{}, Lockouts: []lockoutState{}, Gates: s.proxy.Admission().Gates(),
		Flags: map[string]bool{}, byConn: map[string]*connState{}}
	seen := map[string]bool{}
	addProvider := func(id string, p *topology.Provider) *providerState {
		ps := providerState{ID: id, Models: []string{}, Conns: []*connState{},
			Breaker: s.eng.BreakerSnapshot(id), WindowGate: s.eng.WindowGateView(id)}
		profile := engine.ProfileAPIKey
		if p != nil {
			ps.Kind, ps.Profile, ps.Models, ps.Configured = p.Adapter.Kind(), string(p.Profile), p.Models, true
			profile = p.Profile
			for _, c := range p.Connections {
				cs := &connState{ID: c.ID, Ref: c.Ref, Status: engine.TestStatusActive,
					LowPriorityMode: c.LowPriorityMode, AutoLimitReset: c.AutoLimitReset}
				if c.LowPriorityMode || c.AutoLimitReset {
					cs.Wall = wallView(s.proxy.UsageWall().State(c.Ref))
				}
				ps.Conns = append(ps.Conns, cs)
				st.byConn[c.Ref] = cs
			}
		}
		ps.Thresholds = settings.CircuitBreaker.For(profile)
		ps.Cooldown = settings.ConnectionCooldown.For(profile)
		if ps.Breaker.Transitions == nil {
			ps.Breaker.Transitions = []engine.BreakerTransition{}
		}
		seen[id] = true
		st.Providers = append(st.Providers, ps)
		return &st.Providers[len(st.Providers)-1]
	}
	for _, p := range topo.Providers {
		addProvider(p.ID, p)
	}
	for id := range s.eng.Health().Providers {
		if !seen[id] {
			addProvider(id, nil)
		}
	}
	for _, cd := range s.eng.Cooldowns("") {
		cs := st.byConn[cd.Provider+"/"+cd.Connection]
		if cs == nil {
			for i := range st.Providers {
				if st.Providers[i].ID == cd.Provider {
					cs = &connState{ID: cd.Connection, Ref: cd.Provider + "/" + cd.Connection}
					st.Providers[i].Conns = append(st.Providers[i].Conns, cs)
					st.byConn[cs.Ref] = cs
				}
			}
			if cs == nil {
				continue
			}
		}
		cs.Status, cs.BackoffLevel = cd.TestStatus, cd.BackoffLevel
		cs.LastError, cs.LastErrorType, cs.ErrorCode = cd.LastError, cd.LastErrorType, cd.ErrorCode
		cs.Terminal = isTerminal(cd.TestStatus)
		cs.TerminalAt, cs.TerminalReason, cs.TerminalRule = cd.TerminalAt, cd.TerminalReason, cd.TerminalRule
		if cd.RateLimitedUntil.After(now) {
			cs.CoolingUntil = cd.RateLimitedUntil
		}
		for _, l := range cd.Lockouts {
			st.Lockouts = append(st.Lockouts, lockoutState{Provider: l.Provider, Connection: l.Connection, Model: l.Model,
				Family: l.Family, Reason: l.Reason, Status: l.Status, FailureCount: l.FailureCount, ExpiresAt: l.ExpiresAt})
		}
	}
	for _, a := range s.proxy.Admission().Snapshot() {
		if cs := st.byConn[a.Provider+"/"+a.Connection]; cs != nil {
			cs.Protected, cs.RateLimitProtection = a.Protected, a.RateLimitProtection
			cs.Queued, cs.Running, cs.Rejections, cs.PausedUntil = a.Queued, a.Running, a.Rejections, a.PausedUntil
		}
		st.Counts.Queued += a.Queued
		st.Counts.Running += a.Running
	}
	if st.Gates == nil {
		st.Gates = []admission.GateStats{}
	}
	for _, p := range st.Providers {
		st.Counts.Providers++
		switch p.Breaker.State {
		case engine.StateOpen:
			st.Counts.Open++
		case engine.StateDegraded:
			st.Counts.Degraded++
		case engine.StateHalfOpen:
			st.Counts.HalfOpen++
		}
		for _, c := range p.Conns {
			st.Counts.Connections++
			switch {
			case c.Terminal:
				st.Counts.Terminal++
			case !c.CoolingUntil.IsZero():
				st.Counts.Cooling++
			}
		}
	}
	st.Counts.Lockouts = len(st.Lockouts)
	st.Flags["provider_cooldown"] = settings.ProviderCooldown.Enabled
	st.Flags["model_lockout"] = settings.ModelLockout.Enabled
	st.Flags["combo_cooldown_wait"] = settings.ComboCooldownWait.Enabled
	st.Flags["quota_share_concurrency_limit"] = settings.QuotaShareConcurrencyLimit.Enabled
	st.Flags["stream_stall_cooldown"] = settings.StreamStallCooldown.Enabled
	st.Flags["throughput_watchdog"] = settings.StreamRecovery.ThroughputWatchdog.Enabled
	st.Flags["emergency_fallback"] = settings.EmergencyFallback.Enabled
	st.Requests = s.console.requests.Last()
	st.Streams = s.console.streams.active()
	return st
}

// wallView is the console's view of a usage-wall snapshot.
func wallView(w usagewall.Snapshot) *wallStateView {
	return &wallStateView{LaneActive: w.LaneActive, LaneUntil: w.LaneUntil, CoolOffUntil: w.CoolOffUntil,
		LastEndReason: w.LastEndReason, LastEndAt: w.LastEndAt, LastResetResult: w.LastResetResult,
		LastResetAt: w.LastResetAt, NextResetAt: w.ResetNextAvailableAt}
}

func isTerminal(t engine.TestStatus) bool {
	switch t {
	case engine.TestStatusBanned, engine.TestStatusExpired, engine.TestStatusCreditsExhausted:
		return true
	}
	return false
}

// consoleCSP is the console's content security policy: scripts, styles
// and API calls from the gateway itself only, no inline script or style,
// no framing.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleHeaders sets the security headers of every console file.
func consoleHeaders(c *fiber.Ctx) {
	c.Set("Content-Security-Policy", consoleCSP)
	c.Set("X-Frame-Options", "DENY")
	c.Set("Referrer-Policy", "no-referrer")
	c.Set("X-Content-Type-Options", "nosniff")
}

// handleConsolePage serves the console's page at / and /dashboard.
func (s *Server) handleConsolePage(c *fiber.Ctx) error {
	consoleHeaders(c)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Send(dashboard.Page())
}

// handleConsoleAsset serves the console's scripts and stylesheets.
func (s *Server) handleConsoleAsset(c *fiber.Ctx) error {
	body, ct, ok := dashboard.Asset(c.Params("name"))
	if !ok {
		return fiber.ErrNotFound
	}
	consoleHeaders(c)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderContentType, ct)
	return c.Send(body)
}
