package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/redact"
)

// Exclusion reasons, as reported by Engine.Check and in the
// all_targets_cooling_down diagnostics of docs/resilience.md §6.
const (
	ExclusionCircuitOpen        = "circuit_open"
	ExclusionProviderCooldown   = "provider_cooldown"
	ExclusionConnectionCooldown = "connection_cooldown"
	ExclusionModelLockout       = "model_lockout"
	// ExclusionUnavailable is a connection in a terminal state.
	ExclusionUnavailable = "unavailable"
)

// Store key prefixes. Every value is JSON; path components are
// URL-path-escaped so that an id containing "/" cannot collide.
const (
	keyBreaker    = "breaker/"    // breaker/<provider>
	keyWindowGate = "windowgate/" // windowgate/<provider>
	keyCooldown   = "cooldown/"   // cooldown/<provider>/<connection>
	keyLockout    = "lockout/"    // lockout/<provider>/<connection>/<model key>
	// SettingsKey holds the accumulated resilience settings patch.
	SettingsKey = "settings/resilience"
)

// Exclusion says why a target is not eligible.
type Exclusion struct {
	// Reason is one of the Exclusion* constants.
	Reason string
	// Until is when the exclusion ends; zero for a terminal state.
	Until time.Time
	// Detail is the breaker state, the terminal state, or the error type or
	// reason behind a cooldown or lockout.
	Detail string
}

// Observer receives engine events for metrics. Every field is optional. The
// functions are called outside the engine's locks, possibly concurrently;
// they must be fast and must not block.
type Observer struct {
	// OnBreakerTransition is called for every breaker state change.
	OnBreakerTransition func(provider, from, to string)
	// OnCooldown is called when a connection cooldown is armed or extended.
	OnCooldown func(provider, connection, reason string, d time.Duration)
	// OnTerminal is called when a connection enters a terminal state.
	OnTerminal func(provider, connection, state string)
	// OnLockout is called when a model lockout is armed or extended; model
	// is the locked model key (a model id or "family:<name>").
	OnLockout func(provider, connection, model, reason string, d time.Duration)
	// OnExclusion is called by Check (not Peek) for every excluded target.
	OnExclusion func(reason string)
}

// Options configure New.
type Options struct {
	// Clock defaults to SystemClock.
	Clock Clock
	// Store is required.
	Store Store
	// Logger is the engine's logger, named by the caller ("engine"); nil
	// discards.
	Logger hclog.Logger
	// Settings are the base settings (config file and environment); a
	// zero value means DefaultSettings(). A persisted patch applies on top.
	Settings Settings
	// Providers describes every configured provider. Outcomes of other
	// providers are handled with the apikey defaults.
	Providers []ProviderSpec
	// Classifier defaults to DefaultClassifier.
	Classifier Classifier
	// ValidateTarget, when set, judges each emergency_fallback target
	// ("provider/model") instead of the default check against Providers
	// (a configured provider that lists the model, or lists no models).
	// It returns an error naming what is wrong.
	ValidateTarget func(target string) error
	// Redactor removes the configured credentials from the error messages
	// the engine keeps (a connection's last_error) and shows; nil removes
	// key-shaped tokens only (DefaultClassifier's messages never hold
	// them).
	Redactor *redact.Redactor
}

// providerState is the engine's view of one provider.
type providerState struct {
	id             string
	profile        Profile
	useHints       bool
	families       quotaFamilies
	connections    []string // configured connection ids
	disableCooling map[string]bool
	// maxWait holds the connections' rate_limit_overrides.max_wait_ms
	// (ConnectionSpec.MaxWait), where set.
	maxWait map[string]time.Duration
	// models are the models the provider serves (ProviderSpec.Models).
	models []string
	// egressBucketed marks a provider whose quota is per egress address
	// (docs/resilience.md §12; see egress.go).
	egressBucketed bool
	// breakerDirty and gateDirty are set when the breaker or window gate
	// changed outside a failure (a success, a lazy recovery) and must be
	// written by the next success or failure.
	breakerDirty atomic.Bool
	gateDirty    atomic.Bool
}

// Engine is the resilience facade the server uses: routing asks Check,
// every attempt reports RecordSuccess or RecordFailure, and the admin API
// reads and clears state. Authoritative state lives in memory (loaded by
// New) and is written through to the Store on every change; the eligible
// Check and the clean RecordSuccess do no I/O and allocate nothing. Engine
// is goroutine-safe.
type Engine struct {
	clock      Clock
	store      Store
	log        hclog.Logger
	classifier Classifier
	redact     *redact.Redactor

	breakers  *breakers
	gate      *windowGate
	cooldowns *cooldowns
	pacer     *pacer
	lockouts  *lockouts
	egress    egressBook
	tools     *toolLimits

	validateTarget func(string) error

	providers map[string]*providerState // configured; immutable after New
	order     []string                  // configured provider ids, in order
	extraMu   sync.RWMutex
	extra     map[string]*providerState // providers first seen in an outcome

	settingsMu sync.Mutex     // serialises UpdateSettings
	base       Settings       // Options.Settings, normalised
	patch      map[string]any // accumulated persisted patch, guarded by settingsMu
	settings   atomic.Pointer[Settings]

	observer atomic.Pointer[Observer]
	// shared is set when the Store is a SharedStore (see shared.go).
	shared *sharedState
	// unsynced is the Store's UnsyncedWriter, nil when it has none: the
	// self-healing writes go through it (see durability).
	unsynced UnsyncedWriter
	// writeLocks serialise the store writes of one key (striped), so that
	// the last write of a key always carries its latest state.
	writeLocks [64]sync.Mutex
}

// New builds an engine and loads the persisted breakers, window gate,
// cooldowns, lockouts, tool limits and settings patch from o.Store, then
// starts clean every connection whose credential changed
// (SyncCredentials). A persisted patch that no longer applies, and
// unreadable entries, are logged and skipped; emergency fallback targets
// of the base settings must pass the target validator.
func New(ctx context.Context, o Options) (*Engine, error) {
	if o.Store == nil {
		return nil, errors.New("engine: a Store is required")
	}
	e := &Engine{
		clock:      o.Clock,
		store:      o.Store,
		log:        o.Logger,
		classifier: o.Classifier,
		redact:     o.Redactor,
		cooldowns:  newCooldowns(),
		pacer:      newPacer(),
		lockouts:   newLockouts(),
		tools:      newToolLimits(),
		providers:  make(map[string]*providerState, len(o.Providers)),
		extra:      make(map[string]*providerState),
	}
	if e.clock == nil {
		e.clock = SystemClock{}
	}
	if e.log == nil {
		e.log = hclog.NewNullLogger()
	}
	if e.classifier == nil {
		e.classifier = DefaultClassifier{}
	}
	if ss, ok := o.Store.(SharedStore); ok {
		e.shared = newSharedState(ss)
	}
	if uw, ok := o.Store.(UnsyncedWriter); ok {
		e.unsynced = uw
	}
	base := o.Settings
	if reflect.ValueOf(base).IsZero() {
		base = DefaultSettings()
	}
	if err := base.Validate(); err != nil {
		return nil, fmt.Errorf("engine: base settings: %w", err)
	}
	e.base = base.Clone().Normalize()

	for _, spec := range o.Providers {
		if spec.ID == "" {
			return nil, errors.New("engine: provider with empty id")
		}
		if _, dup := e.providers[spec.ID]; dup {
			return nil, fmt.Errorf("engine: provider %q declared twice", spec.ID)
		}
		fams, err := compileFamilies(spec.QuotaFamilies)
		if err != nil {
			return nil, fmt.Errorf("engine: provider %q: %w", spec.ID, err)
		}
		ps := &providerState{
			id:             spec.ID,
			profile:        spec.Profile,
			useHints:       spec.UseUpstreamRetryHints,
			families:       fams,
			disableCooling: make(map[string]bool),
			maxWait:        make(map[string]time.Duration),
			models:         spec.Models,
			egressBucketed: spec.EgressBucketed,
		}
		for _, c := range spec.Connections {
			ps.connections = append(ps.connections, c.ID)
			if c.DisableCooling {
				ps.disableCooling[c.ID] = true
			}
			if c.MaxWait > 0 {
				ps.maxWait[c.ID] = c.MaxWait
			}
		}
		e.providers[spec.ID] = ps
		e.order = append(e.order, spec.ID)
	}

	e.observer.Store(&Observer{})
	e.breakers = newBreakers(e.clock)
	e.gate = newWindowGate(e.clock)
	e.validateTarget = o.ValidateTarget
	if e.validateTarget == nil {
		e.validateTarget = e.knownTarget
	}
	if err := e.checkTargets(e.base); err != nil {
		return nil, fmt.Errorf("engine: base settings: %w", err)
	}

	s, err := e.loadSettings(ctx)
	if err != nil {
		return nil, err
	}
	e.settings.Store(&s)
	for _, ps := range e.providers {
		e.configureProvider(ps, &s)
	}
	if err := e.loadState(ctx); err != nil {
		return nil, err
	}
	if err := e.loadToolLimits(ctx); err != nil {
		return nil, err
	}
	if _, err := e.SyncCredentials(ctx, o.Providers); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.breakers.OnChange(e.onBreakerChange)
	e.gate.OnChange(e.onGateChange)
	return e, nil
}

// loadSettings applies the persisted settings patch to the base settings.
func (e *Engine) loadSettings(ctx context.Context) (Settings, error) {
	raw, ok, err := e.store.Get(ctx, SettingsKey)
	if err != nil {
		return Settings{}, fmt.Errorf("engine: load %s: %w", SettingsKey, err)
	}
	if !ok {
		return e.base.Clone(), nil
	}
	patch, err := parsePatch(raw)
	if err == nil {
		var s Settings
		if s, err = ApplyPatch(e.base, raw); err == nil {
			e.patch = patch
			return e.dropUnknownTargets(s), nil
		}
	}
	e.log.Warn("ignoring persisted resilience settings patch", "key", SettingsKey, "error", err)
	return e.base.Clone(), nil
}

// loadState restores every persisted breaker, window gate, cooldown and
// lockout.
func (e *Engine) loadState(ctx context.Context) error {
	load := func(prefix string, fn func(rest string, value []byte) error) error {
		kvs, err := e.store.Scan(ctx, prefix)
		if err != nil {
			return fmt.Errorf("engine: load %s*: %w", prefix, err)
		}
		for _, kv := range kvs {
			if e.shared != nil {
				e.shared.observe(kv.Key, kv.Value)
			}
			if err := fn(strings.TrimPrefix(kv.Key, prefix), kv.Value); err != nil {
				e.log.Warn("skipping unreadable state entry", "key", kv.Key, "error", err)
			}
		}
		return nil
	}
	if err := load(keyBreaker, func(rest string, v []byte) error {
		p, err := url.PathUnescape(rest)
		if err != nil {
			return err
		}
		var snap BreakerSnapshot
		if err := json.Unmarshal(v, &snap); err != nil {
			return err
		}
		e.providerFor(p, "")
		e.breakers.Restore(p, snap)
		return nil
	}); err != nil {
		return err
	}
	if err := load(keyWindowGate, func(rest string, v []byte) error {
		p, err := url.PathUnescape(rest)
		if err != nil {
			return err
		}
		var snap windowGateSnapshot
		if err := json.Unmarshal(v, &snap); err != nil {
			return err
		}
		e.providerFor(p, "")
		e.gate.Restore(p, snap)
		return nil
	}); err != nil {
		return err
	}
	if err := load(keyCooldown, func(_ string, v []byte) error {
		var st connState
		if err := json.Unmarshal(v, &st); err != nil {
			return err
		}
		if st.Provider == "" || st.Connection == "" {
			return errors.New("cooldown entry without provider or connection")
		}
		e.cooldowns.restore(st)
		return nil
	}); err != nil {
		return err
	}
	return load(keyLockout, func(_ string, v []byte) error {
		var le lockEntry
		if err := json.Unmarshal(v, &le); err != nil {
			return err
		}
		if le.Provider == "" || le.Key == "" {
			return errors.New("lockout entry without provider or model")
		}
		e.lockouts.restore(le)
		return nil
	})
}

// configureProvider applies settings s to provider ps's breaker and window
// gate.
func (e *Engine) configureProvider(ps *providerState, s *Settings) {
	e.breakers.Configure(ps.id, breakerConfigFor(s.CircuitBreaker.For(ps.profile)))
	e.gate.Configure(ps.id, s.ProviderCooldown.For(ps.profile).config())
}

// breakerConfigFor is the breakerConfig of one profile's settings.
func breakerConfigFor(bs BreakerSettings) breakerConfig {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	cfg := breakerConfig{
		DegradationThreshold: bs.DegradationThreshold,
		FailureThreshold:     bs.FailureThreshold,
		Reset:                ms(bs.ResetMS),
		CooldownByKind: KindCooldowns{
			ServerError: ms(bs.CooldownByKind.ServerErrorMS),
			Timeout:     ms(bs.CooldownByKind.TimeoutMS),
			Transport:   ms(bs.CooldownByKind.TransportMS),
			RateLimit:   ms(bs.CooldownByKind.RateLimitMS),
		},
		DegradedExitSuccesses: bs.DegradedExitSuccesses,
		MaxBackoffMultiplier:  bs.MaxBackoffMultiplier,
	}
	if cfg.DegradationThreshold == 0 {
		cfg.DegradationThreshold = DerivedDegradationThreshold(cfg.FailureThreshold)
	}
	return cfg
}

// lookupProvider returns the state of provider, nil when it was never
// configured nor seen. It allocates nothing.
func (e *Engine) lookupProvider(provider string) *providerState {
	if ps, ok := e.providers[provider]; ok {
		return ps
	}
	e.extraMu.RLock()
	ps := e.extra[provider]
	e.extraMu.RUnlock()
	return ps
}

// providerFor returns the state of provider, creating an unconfigured one
// with profile (apikey when "") on first sight.
func (e *Engine) providerFor(provider string, profile Profile) *providerState {
	if ps := e.lookupProvider(provider); ps != nil {
		return ps
	}
	if profile == "" {
		profile = ProfileAPIKey
	}
	e.extraMu.Lock()
	ps, ok := e.extra[provider]
	if !ok {
		ps = &providerState{id: provider, profile: profile, useHints: profile == ProfileAPIKey}
		e.extra[provider] = ps
	}
	e.extraMu.Unlock()
	if !ok {
		e.configureProvider(ps, e.settings.Load())
	}
	return ps
}

// allProviders returns the configured providers in order, then the others.
func (e *Engine) allProviders() []*providerState {
	out := make([]*providerState, 0, len(e.order))
	for _, id := range e.order {
		out = append(out, e.providers[id])
	}
	e.extraMu.RLock()
	for _, ps := range e.extra {
		out = append(out, ps)
	}
	e.extraMu.RUnlock()
	return out
}

// SetObserver installs the metrics hooks, replacing any earlier ones.
func (e *Engine) SetObserver(o Observer) {
	e.observer.Store(&o)
}

// obs returns the current observer (New installs an empty one).
func (e *Engine) obs() *Observer { return e.observer.Load() }

// Check reports whether target provider/connection/model is excluded from
// routing now, and why. When every other layer allows it, it asks the
// provider's breaker, which claims the HALF_OPEN probe for this caller.
// When several layers exclude a target the open breaker is reported first,
// then the window gate, a terminal or cooling connection, a model lockout.
// An eligible target costs no store I/O and no allocation.
func (e *Engine) Check(provider, connection, model string) (Exclusion, bool) {
	return e.check(provider, connection, model, true)
}

// Peek is Check without claiming a breaker probe, for diagnostics.
func (e *Engine) Peek(provider, connection, model string) (Exclusion, bool) {
	return e.check(provider, connection, model, false)
}

func (e *Engine) check(provider, connection, model string, claim bool) (Exclusion, bool) {
	now := e.clock.Now()
	ex, excluded := e.localExclusion(provider, connection, model, now)
	switch {
	case excluded:
		if bx, open := e.breakerExclusion(provider, now); open {
			ex = bx
		}
	case claim:
		if ok, retry := e.breakers.Allow(provider); !ok {
			if ex, excluded = e.breakerExclusion(provider, now); !excluded {
				ex, excluded = Exclusion{Reason: ExclusionCircuitOpen, Until: now.Add(retry)}, true
			}
		}
	default:
		ex, excluded = e.breakerExclusion(provider, now)
	}
	if excluded && claim {
		if fn := e.obs().OnExclusion; fn != nil {
			fn(ex.Reason)
		}
	}
	return ex, excluded
}

// localExclusion checks every layer but the breaker.
func (e *Engine) localExclusion(provider, connection, model string, now time.Time) (Exclusion, bool) {
	if e.settings.Load().ProviderCooldown.Enabled {
		if cooling, until := e.gate.Cooling(provider); cooling {
			return Exclusion{Reason: ExclusionProviderCooldown, Until: until}, true
		}
	}
	ex, cooling := e.cooldowns.check(provider, connection, now)
	if cooling && ex.Reason == ExclusionUnavailable {
		return ex, true
	}
	if until, paced := e.pacer.check(connKey{provider, connection}, now); paced && (!cooling || until.After(ex.Until)) {
		return Exclusion{Reason: ExclusionConnectionCooldown, Until: until, Detail: DetailPaced}, true
	}
	if cooling {
		return ex, true
	}
	var fams quotaFamilies
	if ps := e.lookupProvider(provider); ps != nil {
		fams = ps.families
	}
	return e.lockouts.check(provider, connection, model, fams, now)
}

// breakerExclusion reads the breaker without claiming a probe: OPEN
// excludes until its retry time, HALF_OPEN with its probe taken until the
// probe slot frees.
func (e *Engine) breakerExclusion(provider string, now time.Time) (Exclusion, bool) {
	return e.breakerExclusionAt(provider, func() time.Time { return now })
}

// breakerExclusionAt is breakerExclusion with the time read from now only
// when the breaker has something to recover.
func (e *Engine) breakerExclusionAt(provider string, now func() time.Time) (Exclusion, bool) {
	state, retryAt, probeAt := e.breakers.gate(provider, now)
	switch {
	case state == StateOpen:
		return Exclusion{Reason: ExclusionCircuitOpen, Until: retryAt, Detail: string(state)}, true
	case state == StateHalfOpen && !probeAt.IsZero():
		return Exclusion{Reason: ExclusionCircuitOpen, Until: probeAt.Add(e.breakerReset(provider)), Detail: string(state)}, true
	}
	return Exclusion{}, false
}

// breakerReset is the configured reset timeout of provider's breaker.
func (e *Engine) breakerReset(provider string) time.Duration {
	profile := ProfileAPIKey
	if ps := e.lookupProvider(provider); ps != nil {
		profile = ps.profile
	}
	return time.Duration(e.settings.Load().CircuitBreaker.For(profile).ResetMS) * time.Millisecond
}

// ProviderOpen reports whether provider's breaker refuses traffic (OPEN,
// or HALF_OPEN with its probe in flight) and how long until it may allow a
// request, for the provider_circuit_open answer. It claims nothing.
// A provider whose breaker has nothing to recover is answered without
// reading the clock.
func (e *Engine) ProviderOpen(provider string) (bool, time.Duration) {
	var now time.Time
	ex, open := e.breakerExclusionAt(provider, func() time.Time {
		now = e.clock.Now()
		return now
	})
	if !open {
		return false, 0
	}
	return true, max(ex.Until.Sub(now), 0)
}

// Classify turns a failed upstream attempt into an Outcome with the
// engine's classifier.
func (e *Engine) Classify(in ErrorInput) Outcome {
	return e.classifier.Classify(in)
}

// RecordSuccess records a successful attempt: the breaker and the window
// gate count a success, and the connection's error fields, backoff level
// and rejection or expired streaks are cleared (a terminal state stays);
// the model's lockouts decay. State that changed is written to the store
// (errors are logged); a clean target does no I/O and allocates nothing.
func (e *Engine) RecordSuccess(provider, connection, model string) {
	e.breakers.RecordSuccess(provider)
	ps := e.lookupProvider(provider)
	s := e.settings.Load()
	if s.ProviderCooldown.Enabled {
		e.gate.RecordSuccess(provider)
	}
	if e.shared != nil {
		e.shareSuccess(ps, provider, connection, model)
		return
	}
	ctx := context.Background()
	var errs []error
	if ps != nil {
		if ps.breakerDirty.Load() {
			errs = append(errs, e.persistBreaker(ctx, ps, selfHealing))
		}
		if ps.gateDirty.Load() {
			errs = append(errs, e.persistGate(ctx, ps, selfHealing))
		}
	}
	if e.cooldowns.recordSuccess(provider, connection) {
		errs = append(errs, e.persistConn(ctx, provider, connection, selfHealing))
	}
	var fams quotaFamilies
	if ps != nil {
		fams = ps.families
	}
	for _, k := range e.lockouts.recordSuccess(provider, connection, model, fams, e.clock) {
		errs = append(errs, e.persistLock(ctx, k, selfHealing))
	}
	if err := errors.Join(errs...); err != nil {
		e.log.Error("persisting state after a success failed", "provider", provider, "error", err)
	}
}

// RecordFailure records a failed attempt: the breaker (when BreakerKind
// is not KindNone), the window gate (when provider_cooldown is enabled and
// the failure counts, see countsForWindowGate and windowGate), the
// connection cooldown, the model lockout (when enabled and the status is
// one of error_codes, or a rule scoped the failure to the model; and,
// whatever the switch, a model-scoped quota whose wait exceeds the
// connection's pacing bound, capped at 24 h), the learned tool limit of a
// tool_limit refusal, and for an egress-bucketed provider the connections
// sharing the failing one's egress (see egress.go). A failure that does
// not trip the breaker frees a HALF_OPEN probe it may hold. Client aborts
// and local errors touch nothing else. Every resulting state write is
// durable in the Store before RecordFailure returns; the error joins the
// failed writes (the in-memory state has changed regardless).
func (e *Engine) RecordFailure(ctx context.Context, o Outcome) error {
	if o.Success {
		return nil
	}
	ps := e.providerFor(o.Provider, o.Profile)
	o = egressScope(ps, o)
	o.Message = e.redact.String(o.Message)
	if !TripsBreaker(o) {
		e.breakers.ReleaseProbe(o.Provider)
	}
	switch o.Reason {
	case ReasonNone, ReasonClientAbort, ReasonLocalError:
		return nil
	}
	s := e.settings.Load()
	now := e.clock.Now()
	ob := e.obs()
	var errs []error

	if TripsBreaker(o) {
		errs = append(errs, e.updateBreaker(ctx, ps, func(b *breakers) { b.RecordFailure(o.Provider, o) }, false))
	}
	if s.ProviderCooldown.Enabled && countsForWindowGate(o) {
		errs = append(errs, e.updateGate(ctx, ps, func(g *windowGate) { g.RecordFailure(o.Provider, o.Connection, e.gateFailure(o, now)) }, false))
	}

	var eff cooldownEffect
	cpol := e.cooldownPolicy(ps, o.Connection, s)
	errs = append(errs, e.updateConn(ctx, o.Provider, o.Connection, func(c *cooldowns) bool {
		var changed bool
		eff, changed = c.recordFailure(o, cpol, now)
		return changed
	}, false))
	switch {
	case eff.terminal != "":
		e.log.Warn("connection entered a terminal state", "provider", o.Provider,
			"connection", o.Connection, "state", string(eff.terminal), "reason", string(o.Reason))
		if ob.OnTerminal != nil {
			ob.OnTerminal(o.Provider, o.Connection, string(eff.terminal))
		}
	case eff.cooled > 0 && ob.OnCooldown != nil:
		ob.OnCooldown(o.Provider, o.Connection, string(o.Reason), eff.cooled)
	}

	errs = append(errs, e.coolEgressSiblings(ctx, ps, o, now))

	errs = append(errs, e.learnToolLimit(ctx, o))

	pol := newLockoutPolicy(s.ModelLockout)
	switch lock, quota := e.modelQuotaLockout(ps, o, s); {
	case quota:
		// A long wait scoped to one model: a model lockout on that model
		// (or its quota family) for that connection, whatever
		// model_lockout.enabled says, capped at 24 h; the connection
		// is not cooled (affectsConnection) and other models flow.
		o.CooldownHint = lock
		pol.max = max(pol.max, MaxModelQuotaLockout)
		key, family := modelQuotaKey(o, ps.families)
		errs = append(errs, e.lockModel(ctx, o, key, family, pol, now))
	case lockoutApplies(o, &s.ModelLockout) && !egressLocksConnection(ps, o):
		key, family := lockoutKeyFor(o, ps.families)
		errs = append(errs, e.lockModel(ctx, o, key, family, pol, now))
	}
	return errors.Join(errs...)
}

// lockModel records failure o as a lock of model key on its connection
// under policy pol, persists it and reports it to the observer.
func (e *Engine) lockModel(ctx context.Context, o Outcome, key, family string, pol lockoutPolicy, now time.Time) error {
	var d time.Duration
	err := e.updateLock(ctx, lockKey{o.Provider, o.Connection, key}, func(l *lockouts) bool {
		var changed bool
		_, d, changed = l.recordFailure(o, key, family, pol, now)
		return changed
	}, false)
	if fn := e.obs().OnLockout; d > 0 && fn != nil {
		fn(o.Provider, o.Connection, key, string(o.Reason), d)
	}
	return err
}

// ModelQuotaLockout reports whether RecordFailure makes failure o a model
// lockout of a model-scoped quota (docs/resilience.md §2/§3/§7,
// amendments), and for how long: a quota or rate limit a rule scoped to
// one model (modelQuotaWait) whose wait exceeds the connection's pacing
// bound (its rate_limit_overrides.max_wait_ms, else
// request_queue.max_wait_ms), capped at 24 h. This is the one rule: the
// request path asks it before pacing the connection's limiter with the
// body's retry hint, and paces only when it says no — a model lockout
// never pauses the limiter, a shorter wait paces it. It is read-only and
// allocates nothing.
func (e *Engine) ModelQuotaLockout(o Outcome) (time.Duration, bool) {
	ps := e.lookupProvider(o.Provider)
	if ps == nil {
		ps = &providerState{}
	}
	return e.modelQuotaLockout(ps, o, e.settings.Load())
}

// modelQuotaLockout is ModelQuotaLockout for provider state ps under
// settings s.
func (e *Engine) modelQuotaLockout(ps *providerState, o Outcome, s *Settings) (time.Duration, bool) {
	wait, quota := modelQuotaWait(o)
	if !quota || wait <= e.pacingBound(ps, o.Connection, s) {
		return 0, false
	}
	return min(wait, MaxModelQuotaLockout), true
}

// pacingBound is the longest wait that is pacing rather than a lockout on
// a connection (docs/resilience.md §7): its rate_limit_overrides.max_wait_ms,
// else request_queue.max_wait_ms.
func (e *Engine) pacingBound(ps *providerState, connection string, s *Settings) time.Duration {
	if d := ps.maxWait[connection]; d > 0 {
		return d
	}
	return time.Duration(s.RequestQueue.MaxWaitMS) * time.Millisecond
}

// countsForWindowGate reports whether a failure counts toward the §1b
// provider cooldown window: a retryable upstream failure that is not a
// busy account (concurrency-limited), not narrowed to one model, not an
// empty answer, not a cut by the gateway's own timer and not a terminal
// state of one key.
func countsForWindowGate(o Outcome) bool {
	switch o.Reason {
	case ReasonConcurrencyLimited, ReasonEmptyResponse, ReasonToolLimit, ReasonLocalTimeout:
		return false
	}
	return o.Retryable && !o.Permanent && o.Scope != ScopeModel
}

// gateFailure describes failure o, arriving at now, for the window gate:
// its kind is its reason and status, its dispatch time o.Started; when
// that is unknown, the failure is a burst duplicate if its connection is
// still cooling from an identical failure (read before o is applied).
func (e *Engine) gateFailure(o Outcome, now time.Time) gateFailure {
	f := gateFailure{Kind: string(o.Reason) + "/" + strconv.Itoa(o.Status), Dispatched: o.Started}
	if f.Dispatched.IsZero() {
		f.Burst = e.cooldowns.coolingFrom(o.Provider, o.Connection, o.Reason, o.Status, now)
	}
	return f
}

// cooldownPolicy assembles the connection cooldown rules of a connection.
func (e *Engine) cooldownPolicy(ps *providerState, connection string, s *Settings) cooldownPolicy {
	cs := s.ConnectionCooldown.For(ps.profile)
	return cooldownPolicy{
		profile:        ps.profile,
		base:           time.Duration(cs.BaseMS) * time.Millisecond,
		maxLevel:       cs.MaxBackoffLevel,
		useHints:       ps.useHints,
		disableCooling: ps.disableCooling[connection],
		stallCooldown:  s.StreamStallCooldown.Enabled,

		localTimeoutCooldown: s.LocalTimeoutCooldown.Enabled,
	}
}

// onBreakerChange is the breakers' OnChange hook: it marks the breaker for
// the next write (never writing itself, so that Check stays I/O-free) and
// reports transitions to the observer.
func (e *Engine) onBreakerChange(provider string, _ BreakerSnapshot, t *BreakerTransition) {
	e.providerFor(provider, "").breakerDirty.Store(true)
	if t != nil {
		if fn := e.obs().OnBreakerTransition; fn != nil {
			fn(provider, string(t.From), string(t.To))
		}
	}
}

// onGateChange is the window gate's OnChange hook; see onBreakerChange.
func (e *Engine) onGateChange(provider string, _ windowGateSnapshot) {
	e.providerFor(provider, "").gateDirty.Store(true)
}

// Settings returns the current settings.
func (e *Engine) Settings() Settings {
	return e.settings.Load().Clone()
}

// CurrentSettings returns the live settings without copying, for the
// request hot path. The value is shared and must not be modified; an
// update replaces it as a whole, so a caller keeps a consistent view.
func (e *Engine) CurrentSettings() *Settings {
	return e.settings.Load()
}

// UpdateSettings applies a JSON merge patch to the current settings (see
// ApplyPatch), persists the accumulated patch under SettingsKey and
// reconfigures the breakers. Precedence: Options.Settings < every patch
// applied so far (a null member drops its override, back to
// Options.Settings). An invalid patch returns an error wrapping
// ErrInvalidSettings; a store failure any other error; either way the
// current settings are unchanged and returned.
func (e *Engine) UpdateSettings(ctx context.Context, patch []byte) (Settings, error) {
	e.settingsMu.Lock()
	defer e.settingsMu.Unlock()
	cur := e.settings.Load()
	if _, err := ApplyPatch(*cur, patch); err != nil {
		return cur.Clone(), err
	}
	p, err := parsePatch(patch)
	if err != nil {
		return cur.Clone(), err
	}
	acc := mergePatch(e.patch, p)
	raw, err := json.Marshal(acc)
	if err != nil {
		return cur.Clone(), fmt.Errorf("encode settings patch: %w", err)
	}
	next, err := ApplyPatch(e.base, raw)
	if err != nil {
		return cur.Clone(), err
	}
	if touchesTargets(p) {
		if err := e.checkTargets(next); err != nil {
			return cur.Clone(), err
		}
	}
	next = e.dropUnknownTargets(next)
	if err := e.store.Put(ctx, SettingsKey, raw, 0); err != nil {
		return cur.Clone(), fmt.Errorf("persist resilience settings: %w", err)
	}
	e.patch = acc
	e.settings.Store(&next)
	for _, ps := range e.allProviders() {
		e.configureProvider(ps, &next)
	}
	return next.Clone(), nil
}

// durability says when a state write returns (docs/architecture.md,
// "State store"): the guarantee is that a crash loses no lease, terminal
// state or setting that was acknowledged.
type durability uint8

const (
	// durable writes reach stable storage before they return: every
	// change an operator asked for (a reset, a setting, a cleared
	// lockout), a learned tool limit, and terminal connection states.
	durable durability = iota
	// selfHealing writes do not wait for stable storage
	// (UnsyncedWriter.PutUnsynced; Badger queues them and commits them to
	// its log within a fraction of a millisecond): the breaker, window
	// gate, cooldown and lockout changes the request path makes. A crash
	// may drop the last few queued, a power loss the last few not synced;
	// they heal by themselves (a breaker re-trips, a cooldown is re-armed
	// by the next failure).
	selfHealing
)

// persist writes the current state of key with durability d, produced by
// snap under the key's write lock (so a later write never carries older
// state): snap returns the value and its TTL, or ok false to delete the
// key.
func (e *Engine) persist(ctx context.Context, key string, d durability, snap func() (value []byte, ttl time.Duration, ok bool, err error)) error {
	mu := &e.writeLocks[stripe(key)]
	mu.Lock()
	defer mu.Unlock()
	v, ttl, ok, err := snap()
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	unsynced := e.unsynced
	if d == durable {
		unsynced = nil
	}
	if !ok {
		if unsynced != nil {
			err = unsynced.DeleteUnsynced(ctx, key)
		} else {
			err = e.store.Delete(ctx, key)
		}
		if err != nil {
			e.unshared(key)
			return fmt.Errorf("delete %s: %w", key, err)
		}
		e.observed(key, nil)
		return nil
	}
	if unsynced != nil {
		err = unsynced.PutUnsynced(ctx, key, v, ttl)
	} else {
		err = e.store.Put(ctx, key, v, ttl)
	}
	if err != nil {
		e.unshared(key)
		return fmt.Errorf("write %s: %w", key, err)
	}
	e.observed(key, v)
	return nil
}

// observed records, in shared mode, that key now holds v (nil: absent).
func (e *Engine) observed(key string, v []byte) {
	if e.shared != nil {
		e.shared.observe(key, v)
	}
}

// unshared records, in shared mode, that the local change of key did not
// reach the store (Resync writes it).
func (e *Engine) unshared(key string) {
	if e.shared != nil {
		e.shared.markDirty(key)
	}
}

func (e *Engine) persistBreaker(ctx context.Context, ps *providerState, d durability) error {
	ps.breakerDirty.Store(false)
	return e.persist(ctx, keyBreaker+url.PathEscape(ps.id), d, func() ([]byte, time.Duration, bool, error) {
		snap := e.breakers.Peek(ps.id)
		if e.shared != nil {
			snap = sharedBreakerSnapshot(snap)
		}
		v, err := json.Marshal(snap)
		return v, 0, true, err
	})
}

func (e *Engine) persistGate(ctx context.Context, ps *providerState, d durability) error {
	ps.gateDirty.Store(false)
	return e.persist(ctx, keyWindowGate+url.PathEscape(ps.id), d, func() ([]byte, time.Duration, bool, error) {
		v, ttl, ok := gateValue(e.gate.Snapshot(ps.id))
		return v, ttl, ok, nil
	})
}

// persistConn writes a connection's cooldown state; a terminal state is
// always written durably. (It leaves the terminal state only through
// durable writes, an operator reset or a credential change; and the write
// that enters it sees it here, so a self-healing write that snapshots a
// terminal state entered concurrently is followed by a durable one.)
func (e *Engine) persistConn(ctx context.Context, provider, connection string, d durability) error {
	if st, ok := e.cooldowns.get(provider, connection); ok && st.TestStatus.Terminal() {
		d = durable
	}
	return e.persist(ctx, connStoreKey(provider, connection), d, func() ([]byte, time.Duration, bool, error) {
		v, ttl, ok := e.connValue(e.cooldowns, provider, connection)
		return v, ttl, ok, nil
	})
}

func (e *Engine) persistLock(ctx context.Context, k lockKey, d durability) error {
	return e.persist(ctx, lockStoreKey(k), d, func() ([]byte, time.Duration, bool, error) {
		v, ttl, ok := e.lockValue(e.lockouts, k)
		return v, ttl, ok, nil
	})
}

// stripe picks the write lock of key (FNV-1a).
func stripe(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % 64)
}
