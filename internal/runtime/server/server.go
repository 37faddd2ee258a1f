// Package server is Breakwater's HTTP front: the Fiber application that
// speaks the OpenAI and Anthropic wire formats to clients, runs each request
// through the resilience engine and the upstream executors, relays streams,
// and serves the admin API.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/engine/affinity"
	"github.com/breakwater-dev/breakwater/internal/engine/lease"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/engine/usagewall"
	"github.com/breakwater-dev/breakwater/internal/plugins"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/leaseapi"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Version is reported by /api/version and the User-Agent sent upstream. The
// binary sets it at start.
const userAgentPrefix = "breakwater/"

// Options are the parts a Server is built from. Config, Topology, Engine and
// Logger are required.
type Options struct {
	Config   *config.Config
	Topology *topology.Topology
	Engine   *engine.Engine
	Logger   hclog.Logger
	// Version is the build version, for the User-Agent and /api/version.
	Version string
	// Clock defaults to the system clock.
	Clock engine.Clock
	// Policies is the failure classification pipeline (restate, classify,
	// explain, operator rules); required.
	Policies *policies.Pipeline
	// Plugins is the WASM plugin host (on_request hook, admin API);
	// required.
	Plugins *plugins.Host
	// Store holds leases and affinity pins; required.
	Store engine.Store
	// Metrics receives request, attempt and stream metrics; nil disables
	// them and GET /metrics.
	Metrics *metrics.Metrics
}

// Server is the gateway's HTTP server. Build it with New, run it with
// Serve, stop it with Shutdown. It is goroutine-safe.
type Server struct {
	cfg     *config.Config
	eng     *engine.Engine
	pool    *upstream.Pool
	clock   engine.Clock
	log     hclog.Logger
	access  hclog.Logger
	app     *fiber.App
	auth    *authenticator
	version string
	ua      string

	metrics *metrics.Metrics
	leases  *lease.Manager
	pins    *affinity.Pins
	adm     *admission.Manager
	// routing is the current topology with its combo strategies; the
	// combos admin API swaps it atomically.
	routing atomic.Pointer[routing]
	comboMu sync.Mutex
	// fileTopo is the topology of the configuration file.
	fileTopo   *topology.Topology
	signals    *strategy.Signals
	stratState *strategy.StateStore
	stopFlush  context.CancelFunc
	// baseCtx ends when the server shuts down: queued admissions and
	// cooldown waits give up then.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	policies   *policies.Pipeline
	plugins    *plugins.Host
	wall       *usagewall.Wall
	// selfURL and internalToken let orchestrations call the gateway
	// itself; selfClient is their HTTP client.
	selfURL       string
	internalToken string
	selfClient    *http.Client
	flushDone     chan struct{}
	admEnv        admission.Defaults
	store         engine.Store
	// leasesInUse is true when some client key may hold session leases;
	// only then do unleased requests check lease holders.
	leasesInUse bool
	reqPrefix   string
	reqSeq      atomic.Uint64
	// console is the operator console's state (console.go).
	console *console
}

// New builds a Server; it opens no socket.
func New(o Options) (*Server, error) {
	if o.Config == nil || o.Topology == nil || o.Engine == nil || o.Logger == nil || o.Store == nil || o.Policies == nil || o.Plugins == nil {
		return nil, errors.New("server: Config, Topology, Engine, Store, Policies, Plugins and Logger are required")
	}
	if o.Clock == nil {
		o.Clock = engine.SystemClock{}
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	sc := o.Config.Server
	s := &Server{
		cfg:     o.Config,
		eng:     o.Engine,
		clock:   o.Clock,
		log:     o.Logger.Named("server"),
		access:  o.Logger.Named("access"),
		version: o.Version,
		metrics: o.Metrics,
		ua:      userAgentPrefix + o.Version,
		pool: upstream.NewPool(upstream.Timeouts{
			Connect:   time.Duration(sc.ConnectTimeoutMS) * time.Millisecond,
			FirstByte: time.Duration(sc.FirstByteTimeoutMS) * time.Millisecond,
			Idle:      time.Duration(sc.IdleTimeoutMS) * time.Millisecond,
		}),
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	s.reqPrefix = hex.EncodeToString(rnd[:]) + "-"
	s.auth = newAuthenticator(o.Config)
	s.store = o.Store
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.policies, s.plugins = o.Policies, o.Plugins
	var admErrs []error
	s.adm, admErrs = newAdmission(context.Background(), o.Config, o.Engine.Settings(), o.Store, osLookupEnv)
	for _, err := range admErrs {
		s.log.Warn("admission settings", "error", err)
	}
	s.admEnv, _ = admission.EnvDefaults(osLookupEnv)
	s.internalToken = newInternalToken()
	s.selfClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}
	s.wall = usagewall.New(o.Clock, nil)
	s.signals = strategy.NewSignals(o.Clock)
	s.stratState = strategy.NewStateStore(o.Store)
	if err := s.stratState.Load(context.Background()); err != nil {
		s.log.Warn("loading strategy positions", "error", err)
	}
	s.fileTopo = o.Topology
	apiCombos, err := s.loadAPICombos(context.Background())
	if err != nil {
		s.log.Warn("loading combos defined through the admin API", "error", err)
	}
	if err := s.setRouting(o.Topology, apiCombos); err != nil {
		s.log.Warn("combos defined through the admin API no longer fit the configuration; ignoring them", "error", err)
		if err := s.setRouting(o.Topology, nil); err != nil {
			return nil, err
		}
	}
	fctx, stop := context.WithCancel(context.Background())
	s.stopFlush, s.flushDone = stop, make(chan struct{})
	go func() { defer close(s.flushDone); s.flushStrategyState(fctx) }()
	if s.metrics != nil {
		s.metrics.RegisterAdmission(s.adm.Snapshot)
		s.metrics.RegisterPlugins(s.plugins.List)
	}
	s.leases = lease.New(o.Store, o.Clock, lease.Options{})
	s.pins = affinity.New(o.Store, o.Clock)
	for _, k := range o.Config.Keys {
		if slices.Contains(k.Scopes, leaseapi.Scope) && len(k.AllowedConnections) > 0 {
			s.leasesInUse = true
		}
	}

	limit := sc.MaxRequestBytes
	if limit <= 0 {
		limit = 10 << 20
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "breakwater",
		BodyLimit:             int(limit),
		DisableStartupMessage: true,
		ErrorHandler:          s.errorHandler,
		ReadTimeout:           60 * time.Second,
		IdleTimeout:           120 * time.Second,
		// Never echo client input back in framework errors.
		DisableDefaultContentType: false,
	})
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	v1 := s.app.Group("/v1", s.clientAuth)
	v1.Post("/chat/completions", s.handleChat)
	v1.Post("/messages", s.handleMessages)
	v1.Post("/responses", s.handleResponses)
	v1.Get("/models", s.handleModels)
	s.app.Post("/api/v1/session-leases", s.clientAuth, s.handleLease)

	s.adminRoutes()
}

// App returns the Fiber application, for tests.
func (s *Server) App() *fiber.App { return s.app }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.selfURL = "http://" + ln.Addr().String()
	s.log.Info("listening", "addr", ln.Addr().String())
	if err := s.app.Listener(ln); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// Shutdown stops accepting requests and waits up to the context's deadline
// for running ones, then drops pooled upstream connections.
func (s *Server) Shutdown(ctx context.Context) error {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	s.cancelBase()
	err := s.app.ShutdownWithTimeout(timeout)
	s.pool.Close()
	s.stopFlush()
	<-s.flushDone
	if err != nil {
		return fmt.Errorf("server: shutdown: %w", err)
	}
	return nil
}

func (s *Server) nextRequestID() string {
	return s.reqPrefix + strconv.FormatUint(s.reqSeq.Add(1), 36)
}

// errorHandler answers framework-level errors (body too large, unknown
// route, method not allowed) in the OpenAI error shape.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	status := fiber.StatusInternalServerError
	if errors.As(err, &fe) {
		status = fe.Code
	}
	var e *wire.APIError
	switch status {
	case fiber.StatusRequestEntityTooLarge:
		e = &wire.APIError{Status: status, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("request body exceeds server.max_request_bytes (%d bytes)", s.cfg.Server.MaxRequestBytes)}
	case fiber.StatusNotFound:
		e = &wire.APIError{Status: status, Type: "invalid_request_error", Code: "not_found", Message: "no such endpoint: " + c.Method() + " " + c.Path()}
	case fiber.StatusMethodNotAllowed:
		e = &wire.APIError{Status: status, Type: "invalid_request_error", Code: "method_not_allowed", Message: "method not allowed"}
	default:
		s.log.Error("unhandled error", "path", c.Path(), "error", err)
		e = &wire.APIError{Status: status, Type: "server_error", Code: "internal_error", Message: "internal error"}
	}
	return s.writeError(c, e, formatOf(c))
}

func formatOf(c *fiber.Ctx) wire.Format {
	switch c.Path() {
	case "/v1/messages":
		return wire.FormatMessages
	case "/v1/responses":
		return wire.FormatResponses
	}
	return wire.FormatChat
}

// writeError answers e in format f.
func (s *Server) writeError(c *fiber.Ctx, e *wire.APIError, f wire.Format) error {
	if ra := e.RetryAfterSeconds(); ra != "" {
		c.Set("Retry-After", ra)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Status(e.Status).Send(e.Body(f))
}
