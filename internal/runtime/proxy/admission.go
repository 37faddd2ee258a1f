package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
)

// protectionKey is the store key prefix of a connection's explicit
// rate_limit_protection flag set through POST /api/rate-limits.
const protectionKey = "admission/protection/"

// newAdmission builds the admission manager from the configuration's
// connections, the environment defaults and the engine's resilience
// settings. It reads no store (restoreProtection does, at Start).
//
// The two concurrency controls of docs/resilience.md §5 stay apart: a
// connection's max_concurrent sizes only its fail-open quota-share
// semaphore; rate_limit_overrides.max_concurrent is its cap in the
// composite gate, providers[].max_concurrent the provider's and
// resilience.concurrency.global the gateway's.
func newAdmission(cfg *config.Config, env admission.Defaults, st engine.Settings, clock admission.Clock) *admission.Manager {
	var specs []admission.ConnSpec
	for _, p := range cfg.Providers {
		profile := engine.Profile(p.Profile)
		if profile == "" {
			profile = engine.ProfileAPIKey
		}
		for _, c := range p.Connections {
			o := c.RateLimitOverrides
			specs = append(specs, admission.ConnSpec{
				Provider: p.ID, Connection: c.ID, Profile: profile,
				RateLimitProtection: c.RateLimitProtection,
				MaxConcurrent:       c.MaxConcurrent,
				ModelConcurrency:    o.ModelConcurrency,
				Overrides: admission.Overrides{
					MaxWait:          ms(o.MaxWaitMS),
					ExecutionMaxWait: ms(o.ExecutionMaxWaitMS),
					MaxQueueDepth:    o.MaxQueueDepth,
					MaxConcurrent:    o.MaxConcurrent,
				},
			})
		}
	}
	return admission.NewManager(clock, admissionSettings(env, st, providerCaps(cfg)), specs)
}

// providerCaps are the providers' max_concurrent, the provider level of
// the composite gate (providers without one are left out).
func providerCaps(cfg *config.Config) map[string]int {
	caps := map[string]int{}
	for _, p := range cfg.Providers {
		if p.MaxConcurrent > 0 {
			caps[p.ID] = p.MaxConcurrent
		}
	}
	return caps
}

// admissionEnv is the environment layer of the request-queue budgets
// (RATE_LIMIT_*, read with the configuration).
func admissionEnv(e config.Env) admission.Defaults {
	var d admission.Defaults
	if e.RateLimitMaxWaitMS != nil {
		d.MaxWait = new(ms(*e.RateLimitMaxWaitMS))
	}
	if e.RateLimitExecutionMaxWaitMS != nil {
		d.ExecutionMaxWait = new(ms(*e.RateLimitExecutionMaxWaitMS))
	}
	d.MaxQueueDepth = e.RateLimitMaxQueueDepth
	d.AutoEnable = e.RateLimitAutoEnable
	return d
}

// admissionSettings maps the resilience settings and the providers' caps
// onto the admission manager. Only budgets that differ from the built-in
// defaults count as persisted, so the RATE_LIMIT_* environment defaults
// show through otherwise (docs/resilience.md §7: env default < persisted <
// per-connection).
func admissionSettings(env admission.Defaults, st engine.Settings, providers map[string]int) admission.Settings {
	def := engine.DefaultSettings().RequestQueue
	rq := st.RequestQueue
	var persisted admission.Budgets
	if rq.MaxWaitMS != def.MaxWaitMS {
		persisted.MaxWait = new(ms(rq.MaxWaitMS))
	}
	if rq.ExecutionMaxWaitMS != def.ExecutionMaxWaitMS {
		persisted.ExecutionMaxWait = new(ms(rq.ExecutionMaxWaitMS))
	}
	if rq.MaxQueueDepth != def.MaxQueueDepth {
		persisted.MaxQueueDepth = new(rq.MaxQueueDepth)
	}
	as := admission.SettingsFrom(env, persisted, rq.AutoEnableAPIKeyProviders, st.QuotaShareConcurrencyLimit.Enabled)
	as.GlobalConcurrency = st.Concurrency.Global
	as.ProviderConcurrency = providers
	return as
}

// restoreProtection applies the rate_limit_protection flags set at run
// time and persisted by persistProtection.
func restoreProtection(ctx context.Context, store engine.Store, m *admission.Manager) error {
	kvs, err := store.Scan(ctx, protectionKey)
	if err != nil {
		return err
	}
	var errs []error
	for _, kv := range kvs {
		p, c, _ := strings.Cut(strings.TrimPrefix(kv.Key, protectionKey), "/")
		if err := m.SetProtection(p, c, string(kv.Value) == "true"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// persistProtection stores a connection's explicit rate_limit_protection
// flag.
func persistProtection(ctx context.Context, store engine.Store, st admission.ConnStats) error {
	val, _ := json.Marshal(st.RateLimitProtection)
	return store.Put(ctx, protectionKey+st.Provider+"/"+st.Connection, val, 0)
}
