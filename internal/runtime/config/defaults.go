package config

import (
	"slices"

	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
)

// Provider profiles; a profile picks the resilience defaults.
const (
	ProfileAPIKey = "apikey"
	ProfileOAuth  = "oauth"
	ProfileLocal  = "local"
)

// State store backends.
const (
	BackendBadger = "badger"
	BackendMemory = "memory"
	BackendRedis  = "redis"
)

// Defaults of the server, state and policies sections.
const (
	DefaultListen             = "127.0.0.1:8080"
	DefaultMaxRequestBytes    = 10485760
	DefaultConnectTimeoutMS   = 10000
	DefaultFirstByteTimeoutMS = 120000
	DefaultIdleTimeoutMS      = 60000
	DefaultBackend            = BackendBadger
	DefaultStatePath          = "./data"
	DefaultPoliciesDir        = "./policies.d"
	DefaultEvalTimeoutMS      = 50
	DefaultStrategy           = "priority"
)

// kinds lists the accepted provider kinds: those with an adapter. The lists
// below are read-only.
var kinds = provider.Kinds()

// profiles lists the accepted provider profiles.
var profiles = []string{ProfileAPIKey, ProfileOAuth, ProfileLocal}

// backends lists the accepted state backends.
var backends = []string{BackendBadger, BackendMemory, BackendRedis}

// strategies lists the routing strategy names of docs/resilience.md §13.
var strategies = []string{
	"priority", "weighted", "round-robin", "fill-first", "p2c", "random",
	"strict-random", "least-used", "cost-optimized", "reset-aware",
	"reset-window", "headroom", "quota-weighted", "lkgp", "context-optimized",
	"cache-optimized", "context-relay", "auto", "fusion", "pipeline",
}

// defaultBreakers are the circuit breaker thresholds per profile (§1). A zero
// DegradationThreshold is derived: ceil(60% of FailureThreshold).
func defaultBreakers() map[string]BreakerProfile {
	return map[string]BreakerProfile{
		ProfileAPIKey: {DegradationThreshold: 7, FailureThreshold: 12, ResetMS: 30000},
		ProfileOAuth:  {DegradationThreshold: 5, FailureThreshold: 8, ResetMS: 60000},
		ProfileLocal:  {FailureThreshold: 2, ResetMS: 15000},
	}
}

// Breaker defaults common to every profile (§1, amendments).
const (
	DefaultDegradedExitSuccesses = 3
	DefaultMaxBackoffMultiplier  = 16
)

// defaultGates are the window gate settings per profile (§1b).
func defaultGates() map[string]GateProfile {
	return map[string]GateProfile{
		ProfileAPIKey: {FailureThreshold: 15, FailureWindowMS: 1800000, CooldownMS: 600000},
		ProfileOAuth:  {FailureThreshold: 10, FailureWindowMS: 900000, CooldownMS: 300000},
		ProfileLocal:  {FailureThreshold: 2, FailureWindowMS: 300000, CooldownMS: 60000},
	}
}

// defaultCooldowns are the connection cooldown settings per profile (§2).
func defaultCooldowns() map[string]CooldownProfile {
	return map[string]CooldownProfile{
		ProfileAPIKey: {BaseMS: 3000, MaxBackoffLevel: 5},
		ProfileOAuth:  {BaseMS: 5000, MaxBackoffLevel: 8},
		ProfileLocal:  {BaseMS: 2000, MaxBackoffLevel: 3},
	}
}

func boolPtr(b bool) *bool { return &b }

// DefaultResilience returns every resilience default of docs/resilience.md, as
// written in docs/api.md's resilience block. Each call returns a fresh value.
func DefaultResilience() Resilience {
	var r Resilience
	applyResilienceDefaults(&r)
	return r
}

// ApplyDefaults fills every unset (zero or nil) setting of c with its default,
// in place. It is idempotent. Per-profile maps keep defaults for the profiles
// not mentioned and for their zero fields. Not safe for concurrent use with
// other access to c.
func ApplyDefaults(c *Config) {
	s := &c.Server
	setDefault(&s.Listen, DefaultListen)
	setDefault(&s.MaxRequestBytes, DefaultMaxRequestBytes)
	setDefault(&s.ConnectTimeoutMS, DefaultConnectTimeoutMS)
	setDefault(&s.FirstByteTimeoutMS, DefaultFirstByteTimeoutMS)
	setDefault(&s.IdleTimeoutMS, DefaultIdleTimeoutMS)

	setDefault(&c.State.Backend, DefaultBackend)
	setDefault(&c.State.Path, DefaultStatePath)
	setDefault(&c.Policies.Dir, DefaultPoliciesDir)
	setDefault(&c.Policies.EvalTimeoutMS, DefaultEvalTimeoutMS)

	for i := range c.Providers {
		p := &c.Providers[i]
		setDefault(&p.Profile, ProfileAPIKey)
		if p.UseUpstreamRetryHints == nil {
			p.UseUpstreamRetryHints = boolPtr(p.Profile == ProfileAPIKey)
		}
	}
	for i := range c.Combos {
		setDefault(&c.Combos[i].Strategy, DefaultStrategy)
	}
	applyResilienceDefaults(&c.Resilience)
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

func setDefaultBool(p **bool, def bool) {
	if *p == nil {
		*p = boolPtr(def)
	}
}

func applyResilienceDefaults(r *Resilience) {
	if r.CircuitBreaker == nil {
		r.CircuitBreaker = make(map[string]BreakerProfile)
	}
	for name, def := range defaultBreakers() {
		b := r.CircuitBreaker[name]
		setDefault(&b.FailureThreshold, def.FailureThreshold)
		setDefault(&b.ResetMS, def.ResetMS)
		setDefault(&b.DegradedExitSuccesses, DefaultDegradedExitSuccesses)
		setDefault(&b.MaxBackoffMultiplier, DefaultMaxBackoffMultiplier)
		if b.DegradationThreshold == 0 {
			b.DegradationThreshold = def.DegradationThreshold
			if b.DegradationThreshold == 0 || b.DegradationThreshold >= b.FailureThreshold {
				b.DegradationThreshold = DerivedDegradationThreshold(b.FailureThreshold)
			}
		}
		r.CircuitBreaker[name] = b
	}

	if r.ConnectionCooldown == nil {
		r.ConnectionCooldown = make(map[string]CooldownProfile)
	}
	for name, def := range defaultCooldowns() {
		cd := r.ConnectionCooldown[name]
		setDefault(&cd.BaseMS, def.BaseMS)
		setDefault(&cd.MaxBackoffLevel, def.MaxBackoffLevel)
		r.ConnectionCooldown[name] = cd
	}

	pc := &r.ProviderCooldown
	gates := defaultGates()
	for name, g := range map[string]*GateProfile{ProfileAPIKey: &pc.APIKey, ProfileOAuth: &pc.OAuth, ProfileLocal: &pc.Local} {
		def := gates[name]
		setDefault(&g.FailureThreshold, def.FailureThreshold)
		setDefault(&g.FailureWindowMS, def.FailureWindowMS)
		setDefault(&g.CooldownMS, def.CooldownMS)
	}

	setDefaultBool(&r.StreamStallCooldown.Enabled, false)

	ml := &r.ModelLockout
	if ml.ErrorCodes == nil {
		ml.ErrorCodes = []int{403, 404, 429, 502, 503, 504}
	}
	setDefault(&ml.BaseCooldownMS, 120000)
	setDefault(&ml.MaxCooldownMS, 1800000)
	setDefault(&ml.MaxBackoffSteps, 10)
	setDefaultBool(&ml.UseExponentialBackoff, true)

	cw := &r.ComboCooldownWait
	setDefaultBool(&cw.Enabled, true)
	setDefault(&cw.MaxWaitMS, 5000)
	setDefault(&cw.MaxAttempts, 2)
	setDefault(&cw.BudgetMS, 8000)

	rq := &r.RequestQueue
	setDefault(&rq.MaxWaitMS, 30000)
	setDefault(&rq.ExecutionMaxWaitMS, 600000)
	setDefaultBool(&rq.AutoEnableAPIKeyProviders, true)

	setDefaultBool(&r.QuotaShareConcurrencyLimit.Enabled, true)

	tw := &r.StreamRecovery.ThroughputWatchdog
	setDefault(&tw.WarmupMS, 5000)
	setDefault(&tw.WindowMS, 10000)
	setDefault(&tw.MinUsefulBytesPerSecond, 8)
	setDefault(&tw.MinUsefulBytes, 64)

	setDefault(&r.MaxAttemptsPerRequest, 10)
}

// DerivedDegradationThreshold returns the degraded threshold derived from an
// open threshold, ceil(60% of failureThreshold) as docs/resilience.md §1 says for
// the local profile (2 for the default of 2: no separate degraded stage).
// The engine's normalisation may clamp it further.
func DerivedDegradationThreshold(failureThreshold int) int {
	if failureThreshold <= 0 {
		return 0
	}
	return (failureThreshold*6 + 9) / 10
}

func oneOf(v string, set []string) bool { return slices.Contains(set, v) }
