// Package gateway is Breakwater's composition root: it turns a loaded
// configuration into a running gateway (state store, resilience engine,
// topology, HTTP server) and takes it down again.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/plugins"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/server"
	"github.com/breakwater-dev/breakwater/internal/runtime/store"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

// Options tune Start.
type Options struct {
	Logger  hclog.Logger
	Version string
	// Listener, when set, is used instead of listening on
	// cfg.Server.Listen (tests pass a 127.0.0.1:0 listener).
	Listener net.Listener
	// Clock defaults to the system clock.
	Clock engine.Clock
}

// Gateway is a running gateway.
type Gateway struct {
	Config   *config.Config
	Store    engine.Store
	Engine   *engine.Engine
	Server   *server.Server
	Policies *policies.Pipeline
	Plugins  *plugins.Host
	ln       net.Listener

	stopWatch context.CancelFunc
	watchDone chan struct{}
	log       hclog.Logger
	done      chan error
}

// Start builds every part from cfg and starts serving. On error,
// everything already built is closed again.
func Start(ctx context.Context, cfg *config.Config, o Options) (g *Gateway, err error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Clock == nil {
		o.Clock = engine.SystemClock{}
	}
	topo, err := topology.Build(cfg)
	if err != nil {
		return nil, err
	}
	for _, w := range topo.Warnings {
		o.Logger.Warn(w)
	}
	st, err := store.Open(cfg.State, o.Clock, o.Logger.Named("store"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = st.Close()
		}
	}()
	host, err := plugins.NewHost(ctx, plugins.Options{Logger: o.Logger, CacheDir: pluginCacheDir(cfg), Store: st, Clock: o.Clock})
	if err != nil {
		return nil, fmt.Errorf("starting the plugin host: %w", err)
	}
	defer func() {
		if err != nil {
			_ = host.Close(context.Background())
		}
	}()
	if err = host.Load(ctx, PluginSpecs(cfg)); err != nil {
		return nil, fmt.Errorf("loading plugins: %w", err)
	}
	pipe, err := policies.New(ctx, PolicyOptions(cfg, st, host, o))
	if err != nil {
		return nil, fmt.Errorf("loading policies: %w", err)
	}
	settings, err := SettingsFromConfig(cfg.Resilience)
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(ctx, engine.Options{
		Clock:      o.Clock,
		Store:      st,
		Logger:     o.Logger.Named("engine"),
		Settings:   settings,
		Providers:  topology.EngineSpecs(cfg),
		Classifier: pipe,
	})
	if err != nil {
		return nil, fmt.Errorf("starting engine: %w", err)
	}
	m := metrics.New()
	m.RegisterEngine(eng)
	eng.SetObserver(m.EngineObserver())
	srv, err := server.New(server.Options{Config: cfg, Topology: topo, Engine: eng, Store: st, Logger: o.Logger, Version: o.Version, Clock: o.Clock, Metrics: m,
		Policies: pipe, Plugins: host})
	if err != nil {
		return nil, err
	}
	ln := o.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", cfg.Server.Listen)
		if err != nil {
			return nil, fmt.Errorf("listening on server.listen %s: %w", cfg.Server.Listen, err)
		}
	}
	wctx, stopWatch := context.WithCancel(context.Background())
	g = &Gateway{Config: cfg, Store: st, Engine: eng, Server: srv, Policies: pipe, Plugins: host, ln: ln, log: o.Logger,
		done: make(chan error, 1), stopWatch: stopWatch, watchDone: make(chan struct{})}
	go func() { g.done <- srv.Serve(ln) }()
	go func() {
		defer close(g.watchDone)
		if err := pipe.Watch(wctx); err != nil && wctx.Err() == nil {
			o.Logger.Named("policies").Error("watching the operator policy directory stopped", "error", err)
		}
	}()
	return g, nil
}

// Addr is the address the gateway listens on.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Done delivers the server's exit error when it stops serving.
func (g *Gateway) Done() <-chan error { return g.done }

// Close shuts the server down gracefully and closes the store.
func (g *Gateway) Close(ctx context.Context) error {
	err := g.Server.Shutdown(ctx)
	g.stopWatch()
	<-g.watchDone
	if perr := g.Plugins.Close(ctx); perr != nil {
		err = errors.Join(err, fmt.Errorf("closing plugins: %w", perr))
	}
	if cerr := g.Store.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("closing state store: %w", cerr))
	}
	return err
}

// PluginSpecs lists the configured plugins for the plugin host.
func PluginSpecs(cfg *config.Config) []plugins.Spec {
	out := make([]plugins.Spec, 0, len(cfg.Plugins))
	for _, p := range cfg.Plugins {
		out = append(out, plugins.Spec{Name: p.Name, Path: p.Path, Hooks: p.Hooks})
	}
	return out
}

// pluginCacheDir keeps compiled plugins beside the Badger data so a
// restart skips recompilation; other backends cache in memory.
func pluginCacheDir(cfg *config.Config) string {
	if len(cfg.Plugins) == 0 || (cfg.State.Backend != "" && cfg.State.Backend != "badger") || cfg.State.Path == "" {
		return ""
	}
	return filepath.Join(cfg.State.Path, "plugin-cache")
}

// SettingsFromConfig turns the configuration's resilience block into engine
// settings: the defaults, overlaid with the configured values, normalised.
func SettingsFromConfig(r config.Resilience) (engine.Settings, error) {
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
