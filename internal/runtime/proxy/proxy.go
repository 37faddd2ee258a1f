// Package proxy is the life of one gateway request, from a parsed client
// request to the answer: resolve the model, plan the candidates (combo
// strategy, session lease, affinity), admit each attempt locally, call the
// upstream, classify and record every failure once, fail over, wait out
// short cooldowns (docs/resilience.md §6) and build the answer — or, for a
// stream, a committed relay that finalises itself exactly once.
//
// Proxy.Serve is the one entry point (loop.go reads top to bottom, in the
// spirit of net/http/httputil.ReverseProxy.ServeHTTP). It takes a Request
// value and returns a Result value; it knows no HTTP framework. The Fiber
// handlers of runtime/server parse, authenticate, build the Request and
// render the Result. The orchestrations (fusion, pipeline, context-relay)
// call Serve in-process for every panel member, step and summary.
//
// Lifecycle: New builds a Proxy without side effects; Start reads the
// persisted state it needs and starts its one background writer (strategy
// positions); Close stops it and is safe after a failed or missing Start.
// Serve is goroutine-safe.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/affinity"
	"github.com/breakwater-dev/breakwater/internal/engine/lease"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/engine/usagewall"
	"github.com/breakwater-dev/breakwater/internal/redact"
	"github.com/breakwater-dev/breakwater/internal/runtime/accesslog"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Options are the parts a Proxy is built from. Config, Topology, Engine
// and Store are required.
type Options struct {
	// Config gives the connections (admission), the upstream timeouts and
	// the environment read with the file (Config.Env).
	Config   *config.Config
	Topology *topology.Topology
	Engine   *engine.Engine
	// Store holds leases, affinity pins, strategy positions and the
	// connections' rate_limit_protection flags.
	Store engine.Store
	// Logger is the proxy's logger, named by the caller; nil discards.
	Logger hclog.Logger
	// Access writes the one access line of each client request; nil
	// discards.
	Access *accesslog.Writer
	// Clock tells the time and makes the timers of every wait (admission
	// queues, §6 combo waits); nil is the system clock.
	Clock admission.Clock
	// Metrics receives request, attempt and stream metrics; nil disables
	// them.
	Metrics *metrics.Metrics
	// Upstream sends the upstream calls; nil builds the pooled client of
	// package upstream from Config.Server's timeouts (Close closes it).
	Upstream Upstream
	// UserAgent is sent upstream.
	UserAgent string
	// Classify restates and classifies a failed attempt with the
	// request's context (the policy pipeline's ClassifyContext: Rego
	// evaluations and plugin calls end with the request, and the decision
	// log gets the request id); nil classifies with Engine.Classify.
	Classify func(ctx context.Context, in engine.ErrorInput) engine.Outcome
	// Route asks a routing plugin to order a combo's targets, for the
	// "plugin:<name>" strategies (the plugin host's RouteFunc); nil leaves
	// such combos in configured order.
	Route strategy.RouteFunc
	// RequestObserver receives every finished client request once, with
	// its attempt trail and skipped candidates (the console's request
	// log); nil discards. It runs on the request's goroutine and must not
	// block; the record's slices are only valid during the call (copy
	// what is kept).
	RequestObserver func(reqlog.Record)
	// Redactor removes credentials from every upstream text the proxy
	// passes on (error bodies, messages, relayed headers) or logs; nil
	// removes key-shaped tokens only.
	Redactor *redact.Redactor
}

// Proxy serves gateway requests. Build it with New, call Start before
// Serve and Close when done. It is goroutine-safe.
type Proxy struct {
	// states holds request states given back by Release, zeroed, for
	// reuse: a state is a few kilobytes, allocated per request otherwise.
	states sync.Pool

	cfg    *config.Config
	eng    *engine.Engine
	store  engine.Store
	log    hclog.Logger
	access *accesslog.Writer
	clock  admission.Clock
	// wallClock: clock is the wall clock, so that one reading of it is
	// also the wall-clock time (attemptStarted).
	wallClock bool
	metrics   *metrics.Metrics
	up        Upstream
	ownUp     bool
	ua        string
	red       *redact.Redactor

	classify func(context.Context, engine.ErrorInput) engine.Outcome
	route    strategy.RouteFunc
	observe  func(reqlog.Record)

	adm        *admission.Manager
	admEnv     admission.Defaults
	leases     *lease.Manager
	pins       *affinity.Pins
	wall       *usagewall.Wall
	signals    *strategy.Signals
	stratState *strategy.StateStore
	// reported is set once any upstream answer reported its quota
	// (topology.Connection.Reported); until then the headroom order
	// costs one load (plan_pace.go).
	reported atomic.Bool
	routing  atomic.Pointer[Routing]
	// leasesInUse is true when some client key may hold session leases;
	// only then do unleased requests check lease holders.
	leasesInUse bool

	mu        sync.Mutex // guards the lifecycle fields below
	started   bool
	closed    bool
	stopFlush context.CancelFunc
	flushDone chan struct{}
}

// Upstream sends upstream calls. *upstream.Pool is the real one (pooled
// keep-alive connections); upstreamtest.Upstream serves an http.Handler in
// memory for tests.
type Upstream interface {
	// Do sends a request under the call's limits; the caller reads and
	// closes the response body. A call cut by one of the client's timers
	// fails (or its body reads fail) with an *upstream.TimeoutError.
	Do(req *http.Request, r upstream.Route, lim upstream.Limits) (*http.Response, error)
	// DoWhile is Do running meanwhile (when not nil) at most once, in the
	// calling goroutine, while the answer is awaited: once the request is
	// sent and before its answer is read, where the client can tell; not
	// at all when the request could not be sent.
	DoWhile(req *http.Request, r upstream.Route, lim upstream.Limits, meanwhile func()) (*http.Response, error)
	// DoBuffered sends a request to t with body and reads the whole
	// answer: its first byte within firstByte, then never silent longer
	// than the idle timeout (non-streaming calls on routes it Buffers).
	// It only reads t, which may be shared by concurrent calls.
	DoBuffered(t upstream.Target, body wire.Splice, r upstream.Route, firstByte time.Duration) (upstream.Buffered, error)
	// Buffers reports whether DoBuffered serves a route.
	Buffers(r upstream.Route) bool
	// Timeouts are the client's connect, first-byte and idle timeouts.
	Timeouts() upstream.Timeouts
	// Close drops idle connections.
	Close()
}

var _ Upstream = (*upstream.Pool)(nil)

// New builds a Proxy. It reads no store and starts no goroutine.
func New(o Options) (*Proxy, error) {
	if o.Config == nil || o.Topology == nil || o.Engine == nil || o.Store == nil {
		return nil, errors.New("proxy: Config, Topology, Engine and Store are required")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Access == nil {
		o.Access = accesslog.FromLogger(nil)
	}
	if o.Clock == nil {
		o.Clock = admission.SystemClock()
	}
	p := &Proxy{
		cfg: o.Config, eng: o.Engine, store: o.Store, log: o.Logger, access: o.Access,
		clock: o.Clock, metrics: o.Metrics, up: o.Upstream, ua: o.UserAgent, red: o.Redactor,
		classify: o.Classify, route: o.Route, observe: o.RequestObserver,
		wallClock: o.Clock == admission.SystemClock(),
	}
	if p.classify == nil {
		eng := o.Engine
		p.classify = func(_ context.Context, in engine.ErrorInput) engine.Outcome { return eng.Classify(in) }
	}
	if p.up == nil {
		sc := o.Config.Server
		p.up = upstream.NewPool(upstream.Timeouts{
			Connect:   time.Duration(sc.ConnectTimeoutMS) * time.Millisecond,
			FirstByte: time.Duration(sc.FirstByteTimeoutMS) * time.Millisecond,
			Idle:      time.Duration(sc.IdleTimeoutMS) * time.Millisecond,
		})
		p.ownUp = true
	}
	p.admEnv = admissionEnv(o.Config.Env)
	p.adm = newAdmission(o.Config, p.admEnv, o.Engine.Settings(), o.Clock)
	p.wall = usagewall.New(o.Clock, nil)
	p.signals = strategy.NewSignals(o.Clock)
	p.stratState = strategy.NewStateStore(o.Store)
	p.leases = lease.New(o.Store, o.Clock, lease.Options{})
	p.pins = affinity.New(o.Store, o.Clock)
	for _, k := range o.Config.Keys {
		if slices.Contains(k.Scopes, leaseapi.Scope) && len(k.AllowedConnections) > 0 {
			p.leasesInUse = true
		}
	}
	p.routing.Store(p.NewRouting(o.Topology))
	warnWallOptIns(o.Topology, p.log)
	return p, nil
}

// Start restores what the proxy keeps in the store (rate_limit_protection
// flags set at run time, round-robin and sticky positions), registers the
// admission and metrics collectors, and starts the writer that persists
// strategy positions every second. Problems reading the store are logged,
// not fatal. A second call does nothing.
func (p *Proxy) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("proxy: start after close")
	}
	if p.started {
		return nil
	}
	p.started = true
	if err := restoreProtection(ctx, p.store, p.adm); err != nil {
		p.log.Warn("restoring rate_limit_protection flags", "error", err)
	}
	if err := p.stratState.Load(ctx); err != nil {
		p.log.Warn("loading strategy positions", "error", err)
	}
	if p.metrics != nil {
		p.metrics.RegisterAdmission(p.adm.Snapshot)
	}
	fctx, stop := context.WithCancel(context.Background())
	p.stopFlush, p.flushDone = stop, make(chan struct{})
	go func() { defer close(p.flushDone); p.flushStrategyState(fctx) }()
	return nil
}

// Close stops the background writer (saving the positions once more) and
// closes the upstream client the proxy built. It is idempotent and safe
// without Start. Requests in flight are the caller's to end first.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.stopFlush != nil {
		p.stopFlush()
		<-p.flushDone
	}
	if p.ownUp {
		p.up.Close()
	}
}

// Admission returns the admission manager, for the admin API.
func (p *Proxy) Admission() *admission.Manager { return p.adm }

// UsageWall returns the usage-wall state, for the console.
func (p *Proxy) UsageWall() *usagewall.Wall { return p.wall }

// StrategyPosition returns a combo's persisted round-robin or sticky
// position, for the console.
func (p *Proxy) StrategyPosition(combo string) (strategy.Position, bool) {
	return p.stratState.Position(combo)
}

// Leases returns the session lease manager, for the lease API.
func (p *Proxy) Leases() *lease.Manager { return p.leases }

// SettingsChanged applies new resilience settings to admission (the
// engine already holds them).
func (p *Proxy) SettingsChanged(st engine.Settings) {
	p.adm.UpdateSettings(admissionSettings(p.admEnv, st, providerCaps(p.cfg)))
}

// SetProtection sets and persists the explicit rate_limit_protection flag
// of a connection ("connection" or "provider/connection"), and returns the
// connection's admission state.
func (p *Proxy) SetProtection(ctx context.Context, connectionID string, enabled bool) (admission.ConnStats, error) {
	if err := p.adm.SetProtectionByID(connectionID, enabled); err != nil {
		return admission.ConnStats{}, fmt.Errorf("%w: %w", ErrUnknownConnection, err)
	}
	for _, st := range p.adm.Snapshot() {
		if st.Connection == connectionID || st.Provider+"/"+st.Connection == connectionID {
			if err := persistProtection(ctx, p.store, st); err != nil {
				return st, err
			}
			return st, nil
		}
	}
	return admission.ConnStats{}, ErrUnknownConnection
}

// ErrUnknownConnection is returned by SetProtection for a connection id the
// configuration does not have.
var ErrUnknownConnection = errors.New("unknown connection")

// flushStrategyState persists round-robin and sticky positions every
// second until ctx ends, and once more at the end.
func (p *Proxy) flushStrategyState(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := p.stratState.Flush(context.Background()); err != nil {
				p.log.Warn("saving strategy positions", "error", err)
			}
			return
		case <-t.C:
			if err := p.stratState.Flush(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("saving strategy positions", "error", err)
			}
		}
	}
}
