// Package store opens the engine.Store backend the configuration names:
// Badger (default), memory or Redis. The backends live in the subpackages
// badgerstore, memstore and redisstore; storetest is their shared
// conformance suite.
package store

import (
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/badgerstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore"
)

// DefaultPath is the Badger directory used when state.path is empty.
const DefaultPath = "./data"

// Backend names accepted in state.backend ("" means BackendBadger).
const (
	BackendBadger = "badger"
	BackendMemory = "memory"
	BackendRedis  = "redis"
)

// Open opens the backend cfg.Backend names, judging expiry with clock and
// logging under logger (nil discards), which the caller names ("store");
// the backend logs under its sub-logger "badger" or "redis". The caller owns the returned Store and
// must Close it. Errors never contain the Redis URL's password.
func Open(cfg config.State, clock engine.Clock, logger hclog.Logger) (engine.Store, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	switch cfg.Backend {
	case "", BackendBadger:
		path := cfg.Path
		if path == "" {
			path = DefaultPath
		}
		s, err := badgerstore.Open(path, clock, logger.Named("badger"))
		if err != nil {
			return nil, fmt.Errorf("state store: %w", err)
		}
		return s, nil
	case BackendMemory:
		return memstore.New(clock), nil
	case BackendRedis:
		if cfg.RedisURL.Value() == "" {
			return nil, errors.New("state store: state.redis_url is required for backend redis")
		}
		s, err := redisstore.Open(cfg.RedisURL.Value(), clock, logger.Named("redis"))
		if err != nil {
			return nil, fmt.Errorf("state store: %w", err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("state store: unknown state.backend %q (want %s, %s or %s)",
			cfg.Backend, BackendBadger, BackendMemory, BackendRedis)
	}
}
