package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore"
)

// The receiving end of changes made by other gateway instances sharing the
// state store (the gateway's cluster sync calls these): what the server
// and its proxy keep in memory — combos defined through the admin API, the
// admission settings derived from the resilience settings, the rate-limit
// protection flags and per-model concurrency caps set at run time, cached
// session pins and lease holders — is re-read from the store.

// StoreChanged applies a change another instance made to store key key,
// re-reading it from the store. It reports whether the key is one the
// server or its proxy keeps (it also answers the engine's settings key,
// whose change moves the admission settings: call it after the engine's
// LoadKey).
func (s *Server) StoreChanged(ctx context.Context, key string) (bool, error) {
	switch {
	case key == apiCombosKey:
		return true, s.ReloadCombos(ctx)
	case key == engine.SettingsKey:
		s.proxy.SettingsChanged(s.eng.Settings())
		return true, nil
	case strings.HasPrefix(key, modelCapKey):
		return true, s.restoreModelCaps(ctx)
	}
	return s.proxy.StoreChanged(ctx, key)
}

// StoreResync re-reads everything StoreChanged covers, after changes may
// have been missed.
func (s *Server) StoreResync(ctx context.Context) error {
	s.proxy.SettingsChanged(s.eng.Settings())
	return errors.Join(s.proxy.StoreResync(ctx), s.ReloadCombos(ctx), s.restoreModelCaps(ctx))
}

// ReloadCombos re-reads the combos defined through the admin API and
// swaps the routing when they changed; combos that no longer fit the
// configuration are refused (the routing in force stays).
func (s *Server) ReloadCombos(ctx context.Context) error {
	apiCombos, err := s.loadAPICombos(ctx)
	if err != nil {
		return err
	}
	s.comboMu.Lock()
	defer s.comboMu.Unlock()
	if combosEqual(s.view.Load().apiCombos, apiCombos) {
		return nil
	}
	v, err := s.buildView(apiCombos)
	if err != nil {
		return fmt.Errorf("combos changed by another instance do not fit this configuration: %w", err)
	}
	s.install(v)
	s.log.Info("combos changed by another instance applied", "api_combos", len(apiCombos))
	return nil
}

// combosEqual compares two lists of API combos.
func combosEqual(a, b []config.Combo) bool {
	return reflect.DeepEqual(a, b)
}

// StoreStatus is the "store" member of GET /api/monitoring/health.
type StoreStatus struct {
	// Backend is the state store backend (badger, memory, redis).
	Backend string `json:"backend"`
	// Shared is true when several gateway instances share the store.
	Shared bool `json:"shared"`
	// Up is false while the store is unreachable.
	Up bool `json:"up"`
	// Detail is backend-specific (the Redis connection status).
	Detail any `json:"detail,omitempty"`
}

// storeStatus reports the state store for the health answer.
func (s *Server) storeStatus() StoreStatus {
	backend := s.cfg.State.Backend
	if backend == "" {
		backend = "badger"
	}
	st := StoreStatus{Backend: backend, Up: true}
	if rs, ok := s.store.(*redisstore.Store); ok {
		rst := rs.Status()
		st.Shared, st.Up, st.Detail = true, rst.Up, rst
	}
	return st
}
