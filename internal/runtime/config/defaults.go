package config

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/breakwater-dev/breakwater/internal/engine"
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
	DefaultFirstByteTimeoutMS = 600000
	DefaultIdleTimeoutMS      = 60000
	// DefaultRequestDeadlineMS is 15 minutes.
	DefaultRequestDeadlineMS = 900000
	// DefaultMaxInflightBodyBytes is 64 MiB of request bodies at once
	// (at least max_request_bytes).
	DefaultMaxInflightBodyBytes = 67108864
	DefaultWriteTimeoutMS       = 60000
	DefaultBackend              = BackendBadger
	DefaultStatePath            = "./data"
	DefaultPoliciesDir          = "./policies.d"
	DefaultEvalTimeoutMS        = 50
	DefaultStrategy             = "priority"
	// Policy bundle and decision log defaults (docs/policies.md).
	DefaultBundlePollIntervalMS = 30000
	DefaultBundleAlgorithm      = "RS256"
	DefaultDecisionBuffer       = 1000
	DefaultDecisionFileMaxBytes = 104857600
	DefaultDecisionBatchSize    = 100
	DefaultDecisionFlushMS      = 5000
	DefaultDecisionQueueSize    = 10000
	PluginStrategyPrefix        = "plugin:"
)

// bundleAlgorithms are the signing algorithms OPA verifies bundles with.
var bundleAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "HS256", "HS384", "HS512"}

// pluginHooks lists the plugin hook names.
var pluginHooks = []string{"restate", "classify", "on_request", "route"}

// kinds lists the accepted provider kinds: those with an adapter. The lists
// below are read-only.
var kinds = provider.Kinds()

// profiles lists the accepted provider profiles.
var profiles = []string{ProfileAPIKey, ProfileOAuth, ProfileLocal}

// backends lists the accepted state backends.
var backends = []string{BackendBadger, BackendMemory, BackendRedis}

// Redis topologies of state.redis_mode.
const (
	RedisSingle   = "single"
	RedisSentinel = "sentinel"
	RedisCluster  = "cluster"
)

// redisModes lists the accepted state.redis_mode values.
var redisModes = []string{RedisSingle, RedisSentinel, RedisCluster}

// strategies lists the routing strategy names of docs/resilience.md §13.
var strategies = []string{
	"priority", "weighted", "round-robin", "fill-first", "p2c", "random",
	"strict-random", "least-used", "cost-optimized", "reset-aware",
	"reset-window", "headroom", "quota-weighted", "lkgp", "context-optimized",
	"cache-optimized", "context-relay", "auto", "fusion", "pipeline",
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
	setDefault(&s.RequestDeadlineMS, DefaultRequestDeadlineMS)
	setDefault(&s.MaxInflightBodyBytes, max(DefaultMaxInflightBodyBytes, s.MaxRequestBytes))
	setDefault(&s.WriteTimeoutMS, DefaultWriteTimeoutMS)

	setDefault(&c.State.Backend, DefaultBackend)
	setDefault(&c.State.Path, DefaultStatePath)
	setDefault(&c.Policies.Dir, DefaultPoliciesDir)
	setDefault(&c.Policies.EvalTimeoutMS, DefaultEvalTimeoutMS)
	b := &c.Policies.Bundle
	setDefault(&b.PollIntervalMS, DefaultBundlePollIntervalMS)
	setDefault(&b.Algorithm, DefaultBundleAlgorithm)
	setDefaultBool(&b.SigningRequired, b.PublicKey != "")
	dl := &c.Policies.DecisionLog
	setDefault(&dl.Buffer, DefaultDecisionBuffer)
	setDefault(&dl.FileMaxBytes, DefaultDecisionFileMaxBytes)
	setDefault(&dl.BatchSize, DefaultDecisionBatchSize)
	setDefault(&dl.FlushIntervalMS, DefaultDecisionFlushMS)
	setDefault(&dl.QueueSize, DefaultDecisionQueueSize)

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

// applyResilienceDefaults fills the resilience block from the engine's
// defaults (engine.DefaultSettings), the one place they are written.
func applyResilienceDefaults(r *Resilience) {
	def := engine.DefaultSettings()
	if r.CircuitBreaker == nil {
		r.CircuitBreaker = make(map[string]BreakerProfile)
	}
	if r.ConnectionCooldown == nil {
		r.ConnectionCooldown = make(map[string]CooldownProfile)
	}
	for _, name := range profiles {
		bd := def.CircuitBreaker.For(engine.Profile(name))
		b := r.CircuitBreaker[name]
		setDefault(&b.FailureThreshold, bd.FailureThreshold)
		setDefault(&b.ResetMS, bd.ResetMS)
		setDefault(&b.DegradedExitSuccesses, bd.DegradedExitSuccesses)
		setDefault(&b.MaxBackoffMultiplier, bd.MaxBackoffMultiplier)
		if b.DegradationThreshold == 0 {
			b.DegradationThreshold = bd.DegradationThreshold
			if b.DegradationThreshold == 0 || b.DegradationThreshold >= b.FailureThreshold {
				b.DegradationThreshold = engine.DerivedDegradationThreshold(b.FailureThreshold)
			}
		}
		r.CircuitBreaker[name] = b

		cdd := def.ConnectionCooldown.For(engine.Profile(name))
		cd := r.ConnectionCooldown[name]
		setDefault(&cd.BaseMS, cdd.BaseMS)
		setDefault(&cd.MaxBackoffLevel, cdd.MaxBackoffLevel)
		r.ConnectionCooldown[name] = cd
	}

	pc := &r.ProviderCooldown
	for name, g := range map[string]*GateProfile{ProfileAPIKey: &pc.APIKey, ProfileOAuth: &pc.OAuth, ProfileLocal: &pc.Local} {
		gd := def.ProviderCooldown.For(engine.Profile(name))
		setDefault(&g.FailureThreshold, gd.FailureThreshold)
		setDefault(&g.FailureWindowMS, gd.FailureWindowMS)
		setDefault(&g.CooldownMS, gd.CooldownMS)
	}

	setDefaultBool(&r.StreamStallCooldown.Enabled, def.StreamStallCooldown.Enabled)
	setDefaultBool(&r.LocalTimeoutCooldown.Enabled, def.LocalTimeoutCooldown.Enabled)

	ml, mld := &r.ModelLockout, def.ModelLockout
	if ml.ErrorCodes == nil {
		ml.ErrorCodes = slices.Clone(mld.ErrorCodes)
	}
	setDefault(&ml.BaseCooldownMS, mld.BaseCooldownMS)
	setDefault(&ml.MaxCooldownMS, mld.MaxCooldownMS)
	setDefault(&ml.MaxBackoffSteps, mld.MaxBackoffSteps)
	setDefaultBool(&ml.UseExponentialBackoff, mld.UseExponentialBackoff)

	cw, cwd := &r.ComboCooldownWait, def.ComboCooldownWait
	setDefaultBool(&cw.Enabled, cwd.Enabled)
	setDefault(&cw.MaxWaitMS, cwd.MaxWaitMS)
	setDefault(&cw.MaxAttempts, cwd.MaxAttempts)
	setDefault(&cw.BudgetMS, cwd.BudgetMS)

	rq, rqd := &r.RequestQueue, def.RequestQueue
	setDefault(&rq.MaxWaitMS, rqd.MaxWaitMS)
	setDefault(&rq.ExecutionMaxWaitMS, rqd.ExecutionMaxWaitMS)
	setDefaultBool(&rq.AutoEnableAPIKeyProviders, rqd.AutoEnableAPIKeyProviders)

	setDefaultBool(&r.QuotaShareConcurrencyLimit.Enabled, def.QuotaShareConcurrencyLimit.Enabled)

	tw, twd := &r.StreamRecovery.ThroughputWatchdog, def.StreamRecovery.ThroughputWatchdog
	setDefault(&tw.WarmupMS, twd.WarmupMS)
	setDefault(&tw.WindowMS, twd.WindowMS)
	setDefault(&tw.MinUsefulBytesPerSecond, twd.MinUsefulBytesPerSecond)
	setDefault(&tw.MinUsefulBytes, twd.MinUsefulBytes)

	setDefault(&r.MaxAttemptsPerRequest, def.MaxAttemptsPerRequest)
}

func oneOf(v string, set []string) bool { return slices.Contains(set, v) }

// EngineSettings turns the resilience block into engine settings: the
// engine's defaults overlaid with the block's values, normalised.
func (r Resilience) EngineSettings() (engine.Settings, error) {
	patch, err := json.Marshal(r)
	if err != nil {
		return engine.Settings{}, fmt.Errorf("encoding resilience settings: %w", err)
	}
	s, err := engine.ApplyPatch(engine.DefaultSettings(), patch)
	if err != nil {
		return engine.Settings{}, fmt.Errorf("resilience: %w", err)
	}
	return s, nil
}
