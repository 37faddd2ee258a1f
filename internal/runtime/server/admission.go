package server

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// protectionKey is the store key of a connection's explicit
// rate_limit_protection flag set through POST /api/rate-limits.
const protectionKey = "admission/protection/"

// newAdmission builds the admission manager from the configuration and the
// engine's resilience settings, and restores the protection flags set at
// run time.
func newAdmission(ctx context.Context, cfg *config.Config, st engine.Settings, store engine.Store, lookupEnv func(string) (string, bool)) (*admission.Manager, []error) {
	env, errs := admission.EnvDefaults(lookupEnv)
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
					MaxWait:          time.Duration(o.MaxWaitMS) * time.Millisecond,
					ExecutionMaxWait: time.Duration(o.ExecutionMaxWaitMS) * time.Millisecond,
					MaxQueueDepth:    o.MaxQueueDepth,
					MaxConcurrent:    o.MaxConcurrent,
				},
			})
		}
	}
	m := admission.NewManager(admission.SystemClock(), admissionSettings(env, st), specs)
	if kvs, err := store.Scan(ctx, protectionKey); err == nil {
		for _, kv := range kvs {
			ref := strings.TrimPrefix(kv.Key, protectionKey)
			p, c, _ := strings.Cut(ref, "/")
			if err := m.SetProtection(p, c, string(kv.Value) == "true"); err != nil {
				errs = append(errs, err)
			}
		}
	} else {
		errs = append(errs, err)
	}
	return m, errs
}

// admissionSettings maps the resilience settings onto the admission
// manager. Only budgets that differ from the built-in defaults count as
// persisted, so the RATE_LIMIT_* environment defaults show through
// otherwise (docs/resilience.md §7: env default < persisted < per-connection).
func admissionSettings(env admission.Defaults, st engine.Settings) admission.Settings {
	def := engine.DefaultSettings().RequestQueue
	rq := st.RequestQueue
	var persisted admission.Budgets
	if rq.MaxWaitMS != def.MaxWaitMS {
		persisted.MaxWait = new(time.Duration(rq.MaxWaitMS) * time.Millisecond)
	}
	if rq.ExecutionMaxWaitMS != def.ExecutionMaxWaitMS {
		persisted.ExecutionMaxWait = new(time.Duration(rq.ExecutionMaxWaitMS) * time.Millisecond)
	}
	if rq.MaxQueueDepth != def.MaxQueueDepth {
		persisted.MaxQueueDepth = new(rq.MaxQueueDepth)
	}
	return admission.SettingsFrom(env, persisted, rq.AutoEnableAPIKeyProviders, st.QuotaShareConcurrencyLimit.Enabled)
}

// osLookupEnv is the process environment lookup.
func osLookupEnv(k string) (string, bool) { return os.LookupEnv(k) }

// admissionError renders an admission refusal for the client.
func admissionError(err error) *wire.APIError {
	var ae *admission.Error
	if errors.As(err, &ae) {
		typ := "rate_limit_error"
		if ae.Status >= 500 {
			typ = "server_error"
		}
		return &wire.APIError{Status: ae.Status, Type: typ, Code: ae.Code, Message: ae.Message, RetryAfter: ae.RetryAfter}
	}
	return &wire.APIError{Status: 499, Type: "client_error", Code: "client_closed_request", Message: "the request was cancelled while queued"}
}

// handleRateLimits serves POST /api/rate-limits {connection_id, enabled}:
// the explicit rate_limit_protection flag of one connection, persisted.
func (s *Server) handleRateLimits(c *fiber.Ctx) error {
	var req struct {
		ConnectionID string `json:"connection_id"`
		Enabled      *bool  `json:"enabled"`
	}
	if e := decodeJSON(c, &req); e != nil {
		return s.adminError(c, e)
	}
	if req.ConnectionID == "" {
		return s.adminError(c, badRequest("connection_id", "is required"))
	}
	if req.Enabled == nil {
		return s.adminError(c, badRequest("enabled", "is required (true or false)"))
	}
	if err := s.adm.SetProtectionByID(req.ConnectionID, *req.Enabled); err != nil {
		return s.adminError(c, badRequest("connection_id", err.Error()))
	}
	for _, st := range s.adm.Snapshot() {
		if st.Connection == req.ConnectionID || st.Provider+"/"+st.Connection == req.ConnectionID {
			val, _ := json.Marshal(st.RateLimitProtection)
			if err := s.store.Put(c.UserContext(), protectionKey+st.Provider+"/"+st.Connection, val, 0); err != nil {
				return s.engineError(c, err)
			}
			return c.JSON(fiber.Map{"connection_id": st.Provider + "/" + st.Connection, "rate_limit_protection": st.RateLimitProtection, "protected": st.Protected})
		}
	}
	return s.adminError(c, badRequest("connection_id", "unknown connection"))
}
