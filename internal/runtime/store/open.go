// Package store opens the engine.Store backend the configuration names:
// Badger (default), memory or Redis. The backends live in the subpackages
// badgerstore, memstore and redisstore; storetest is their shared
// conformance suite.
package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

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
		o, err := RedisOptions(cfg)
		if err != nil {
			return nil, fmt.Errorf("state store: %w", err)
		}
		s, err := redisstore.Open(o, clock, logger.Named("redis"))
		if err != nil {
			return nil, fmt.Errorf("state store: %w", err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("state store: unknown state.backend %q (want %s, %s or %s)",
			cfg.Backend, BackendBadger, BackendMemory, BackendRedis)
	}
}

// RedisOptions turns the state.redis_* settings into the Redis store's
// options, loading the TLS files. Errors name the setting, never a secret.
func RedisOptions(cfg config.State) (redisstore.Options, error) {
	o := redisstore.Options{
		Mode:             cfg.RedisMode,
		URL:              cfg.RedisURL.Value(),
		Addrs:            cfg.RedisAddrs,
		MasterName:       cfg.RedisMasterName,
		Username:         cfg.RedisUsername.Value(),
		Password:         cfg.RedisPassword.Value(),
		SentinelUsername: cfg.RedisSentinelUsername.Value(),
		SentinelPassword: cfg.RedisSentinelPassword.Value(),
		DB:               cfg.RedisDB,
		KeyPrefix:        cfg.RedisKeyPrefix,
		Timeout:          time.Duration(cfg.RedisTimeoutMS) * time.Millisecond,
	}
	if (o.Mode == "" || o.Mode == redisstore.ModeSingle) && o.URL == "" {
		return o, errors.New("state.redis_url is required for backend redis")
	}
	if !cfg.RedisTLS && cfg.RedisTLSCAFile == "" && cfg.RedisTLSCertFile == "" && cfg.RedisTLSServerName == "" {
		return o, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.RedisTLSServerName}
	if cfg.RedisTLSCAFile != "" {
		pem, err := os.ReadFile(cfg.RedisTLSCAFile)
		if err != nil {
			return o, fmt.Errorf("state.redis_tls_ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("state.redis_tls_ca_file: no PEM certificate in %s", cfg.RedisTLSCAFile)
		}
	}
	if cfg.RedisTLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.RedisTLSCertFile, cfg.RedisTLSKeyFile)
		if err != nil {
			return o, fmt.Errorf("state.redis_tls_cert_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	o.TLS = tc
	return o, nil
}
