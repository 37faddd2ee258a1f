// Package gateway is Breakwater's composition root: it turns a loaded
// configuration into a running gateway (state store, resilience engine,
// topology, HTTP server) and takes it down again.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/plugins"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/redact"
	"github.com/breakwater-dev/breakwater/internal/runtime/accesslog"
	"github.com/breakwater-dev/breakwater/internal/runtime/cluster"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/server"
	"github.com/breakwater-dev/breakwater/internal/runtime/store"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/plugins/abi"
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
	// AccessLog writes the access lines (the binary builds it beside the
	// logger, see accesslog.Options); nil hands them to
	// Logger.Named("access").
	AccessLog *accesslog.Writer
}

// Gateway is a running gateway.
type Gateway struct {
	Config   *config.Config
	Store    engine.Store
	Engine   *engine.Engine
	Server   *server.Server
	Policies *policies.Pipeline
	Plugins  *plugins.Host
	proxy    *proxy.Proxy
	ln       net.Listener
	cluster  *cluster.Sync

	stopWatch context.CancelFunc
	watchDone chan struct{}
	log       hclog.Logger
	done      chan error
	closeOnce sync.Once
	closeErr  error
}

// Start builds every part from cfg and starts serving. On error,
// everything already built is closed again: no goroutine, file lock or
// socket is left behind.
func Start(ctx context.Context, cfg *config.Config, o Options) (*Gateway, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Clock == nil {
		o.Clock = engine.SystemClock{}
	}
	g := &Gateway{Config: cfg, log: o.Logger, done: make(chan error, 1)}
	if err := g.start(ctx, cfg, o); err != nil {
		_ = g.Close(context.Background())
		return nil, err
	}
	return g, nil
}

// start builds the parts in dependency order, keeping each in g as soon as
// it exists so that Close can take it down.
func (g *Gateway) start(ctx context.Context, cfg *config.Config, o Options) error {
	for _, w := range cfg.Env.Ignored {
		o.Logger.Warn("environment variable ignored", "detail", w)
	}
	topo, err := topology.Build(cfg)
	if err != nil {
		return err
	}
	for _, w := range topo.Warnings {
		o.Logger.Warn(w)
	}
	if g.Store, err = store.Open(cfg.State, o.Clock, o.Logger.Named("store")); err != nil {
		return err
	}
	red := redact.New(cfg.Secrets()...)
	g.Plugins, err = plugins.NewHost(ctx, plugins.Options{Logger: o.Logger, CacheDir: pluginCacheDir(cfg), Store: g.Store, Clock: o.Clock, Redactor: red})
	if err != nil {
		return fmt.Errorf("starting the plugin host: %w", err)
	}
	if err = g.Plugins.Load(ctx, PluginSpecs(cfg)); err != nil {
		return fmt.Errorf("loading plugins: %w", err)
	}
	g.Policies, err = policies.New(ctx, PolicyOptions(cfg, g.Store, g.Plugins, red, o))
	if err != nil {
		return fmt.Errorf("loading policies: %w", err)
	}
	settings, err := cfg.Resilience.EngineSettings()
	if err != nil {
		return err
	}
	g.Engine, err = engine.New(ctx, engine.Options{
		Clock:      o.Clock,
		Store:      g.Store,
		Logger:     o.Logger.Named("engine"),
		Settings:   settings,
		Providers:  topology.EngineSpecs(cfg),
		Classifier: g.Policies,
		Redactor:   red,
	})
	if err != nil {
		return fmt.Errorf("starting engine: %w", err)
	}
	if err = checkRoutePlugins(topo, g.Plugins); err != nil {
		return err
	}
	m := metrics.New()
	m.RegisterEngine(g.Engine)
	m.RegisterPlugins(g.Plugins.List)
	g.Engine.SetObserver(m.EngineObserver())
	requests := reqlog.New(reqlog.DefaultCapacity, o.Clock)
	g.proxy, err = proxy.New(proxy.Options{Config: cfg, Topology: topo, Engine: g.Engine, Store: g.Store,
		Logger: o.Logger.Named("proxy"), Access: o.accessLog(), Clock: timerClock(o.Clock), Metrics: m,
		UserAgent: "breakwater/" + version(o.Version),
		Classify:  g.Policies.ClassifyContext,
		Route:     g.Plugins.RouteFunc(),
		RequestObserver: func(r reqlog.Record) {
			requests.Add(&r)
		},
		Redactor: red,
	})
	if err != nil {
		return err
	}
	g.Server, err = server.New(server.Options{Config: cfg, Engine: g.Engine, Proxy: g.proxy, Store: g.Store, Logger: o.Logger.Named("server"),
		Version: o.Version, Clock: o.Clock, Metrics: m, Policies: g.Policies, Plugins: g.Plugins, Requests: requests,
		Redactor: red, Audit: o.Logger.Named("audit")})
	if err != nil {
		return err
	}
	if err = g.proxy.Start(ctx); err != nil {
		return err
	}
	if err = g.Server.Start(ctx); err != nil {
		return err
	}
	g.ln = o.Listener
	if g.ln == nil {
		if g.ln, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
			return fmt.Errorf("listening on server.listen %s: %w", cfg.Server.Listen, err)
		}
	}
	if g.cluster, err = cluster.Start(cluster.Options{Store: g.Store, Engine: g.Engine, Server: g.Server, Policies: g.Policies,
		Plugins: g.Plugins, Metrics: m, Logger: o.Logger.Named("cluster")}); err != nil {
		return fmt.Errorf("starting the cluster sync: %w", err)
	}
	wctx, stopWatch := context.WithCancel(context.Background())
	g.stopWatch, g.watchDone = stopWatch, make(chan struct{})
	srv, pipe, ln := g.Server, g.Policies, g.ln
	go func() { g.done <- srv.Serve(ln) }()
	go func() {
		defer close(g.watchDone)
		if err := pipe.Watch(wctx); err != nil && wctx.Err() == nil {
			o.Logger.Named("policies").Error("watching the operator policy directory stopped", "error", err)
		}
	}()
	return nil
}

// Addr is the address the gateway listens on.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Done delivers the server's exit error when it stops serving.
func (g *Gateway) Done() <-chan error { return g.done }

// Close shuts the server down gracefully, then closes the request loop,
// the plugin host and the store. It closes only what was built, so it is
// safe after a failed Start, and it is idempotent.
func (g *Gateway) Close(ctx context.Context) error {
	g.closeOnce.Do(func() {
		var errs []error
		if g.Server != nil {
			errs = append(errs, g.Server.Shutdown(ctx))
		}
		if g.stopWatch != nil {
			g.stopWatch()
			<-g.watchDone
		}
		g.cluster.Close()
		if g.proxy != nil {
			g.proxy.Close()
		}
		if g.Plugins != nil {
			if err := g.Plugins.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("closing plugins: %w", err))
			}
		}
		if g.Store != nil {
			if err := g.Store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing state store: %w", err))
			}
		}
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}

// timerClock makes the request loop's clock: the engine's clock for the
// time and, unless it makes timers itself (a test clock), the system's
// timers for the waits. The engine's system clock is the system clock
// (the loop then knows its readings are the wall clock's).
func timerClock(c engine.Clock) admission.Clock {
	if _, ok := c.(engine.SystemClock); ok {
		return admission.SystemClock()
	}
	if tc, ok := c.(admission.Clock); ok {
		return tc
	}
	return engineTimers{c}
}

type engineTimers struct{ engine.Clock }

func (engineTimers) NewTimer(d time.Duration) admission.Timer {
	return admission.SystemClock().NewTimer(d)
}

// AfterFunc implements clock.AfterFuncer: the timers are the system's.
func (engineTimers) AfterFunc(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) }

func version(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}

// checkRoutePlugins refuses a combo whose strategy is "plugin:<name>"
// when no loaded plugin of that name has the route hook: such a combo
// would route by priority forever, silently.
func checkRoutePlugins(topo *topology.Topology, host *plugins.Host) error {
	hooks := map[string][]string{}
	for _, st := range host.List() {
		hooks[st.Name] = st.Hooks
	}
	var errs []error
	for _, c := range topo.Combos {
		name, ok := strategy.PluginName(c.Strategy)
		if !ok {
			continue
		}
		switch h, loaded := hooks[name]; {
		case !loaded:
			errs = append(errs, fmt.Errorf("combo %q: strategy %q names plugin %q, which is not configured (plugins:)", c.Name, c.Strategy, name))
		case !slices.Contains(h, abi.HookRoute):
			errs = append(errs, fmt.Errorf("combo %q: strategy %q: plugin %q has no %s hook (its hooks: %s)",
				c.Name, c.Strategy, name, abi.HookRoute, strings.Join(h, ", ")))
		}
	}
	return errors.Join(errs...)
}

// accessLog is the writer of the access lines: AccessLog, else the
// logger named access.
func (o Options) accessLog() *accesslog.Writer {
	if o.AccessLog != nil {
		return o.AccessLog
	}
	return accesslog.FromLogger(o.Logger.Named("access"))
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
