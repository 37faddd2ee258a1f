// Package server is Breakwater's HTTP front: the fasthttp server that
// speaks the OpenAI and Anthropic wire formats to clients and serves the
// admin API through a Fiber application. A client request is parsed and
// authenticated here, handed to the request loop (runtime/proxy) as a
// proxy.Request, and its proxy.Result is rendered in one place (render).
// The client API calls on their exact paths skip Fiber's router and
// context (admit, leanRoute); every other request goes through Fiber.
//
// Lifecycle: New builds the application without side effects; Start reads
// the combos defined through the admin API from the store; Serve accepts
// connections; Shutdown stops them and may be called after a partial
// start, more than once.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/plugins"
	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/redact"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Options are the parts a Server is built from. Every field but Version,
// Clock and Metrics is required.
type Options struct {
	Config *config.Config
	Engine *engine.Engine
	// Proxy is the request loop; the caller starts and closes it.
	Proxy *proxy.Proxy
	// Logger is the server's logger, named by the caller.
	Logger hclog.Logger
	// Version is the build version, for /api/version.
	Version string
	// Clock defaults to the system clock.
	Clock engine.Clock
	// Policies is the failure classification pipeline (explain, operator
	// rules).
	Policies *policies.Pipeline
	// Plugins is the WASM plugin host (on_request hook, admin API).
	Plugins *plugins.Host
	// Store holds the combos defined through the admin API.
	Store engine.Store
	// Metrics serves GET /metrics; nil disables it.
	Metrics *metrics.Metrics
	// Requests is the console's request log, which the request loop feeds
	// (proxy.Options.RequestObserver); nil keeps an empty one.
	Requests *reqlog.Log
	// Redactor removes credentials from what the server logs; nil removes
	// key-shaped tokens only.
	Redactor *redact.Redactor
	// Audit receives one line per refused authentication (never the key);
	// nil discards.
	Audit hclog.Logger
}

// Server is the gateway's HTTP server. It is goroutine-safe.
type Server struct {
	cfg      *config.Config
	eng      *engine.Engine
	proxy    *proxy.Proxy
	clock    engine.Clock
	log      hclog.Logger
	app      *fiber.App
	auth     *authenticator
	version  string
	metrics  *metrics.Metrics
	policies *policies.Pipeline
	plugins  *plugins.Host
	store    engine.Store
	requests *reqlog.Log
	red      *redact.Redactor
	audit    hclog.Logger
	// budget bounds the request bodies held at once.
	budget *bodyBudget
	// writeTimeout bounds a response write that makes no progress.
	writeTimeout time.Duration

	// fileTopology is the topology of the configuration file.
	fileTopology *topology.Topology
	// view holds what the admin API and /v1/models show of the routing;
	// the proxy holds the routing itself. comboMu serialises changes.
	view    atomic.Pointer[view]
	comboMu sync.Mutex

	// baseCtx is the context of the server's own work (body budget
	// waits, connection tests, the console); Shutdown cancels it.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	// scopes are the client API requests' contexts; Shutdown cancels
	// them, which ends queued admissions, waits and upstream calls.
	scopes *scopeSet

	reqPrefix string
	reqSeq    atomic.Uint64

	shutdown sync.Once

	// console is the operator console's state (console.go).
	console *console
}

// New builds a Server; it opens no socket, reads no store and starts no
// goroutine.
func New(o Options) (*Server, error) {
	if o.Config == nil || o.Engine == nil || o.Proxy == nil || o.Logger == nil || o.Store == nil || o.Policies == nil || o.Plugins == nil {
		return nil, errors.New("server: Config, Engine, Proxy, Store, Policies, Plugins and Logger are required")
	}
	if o.Clock == nil {
		o.Clock = engine.SystemClock{}
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Audit == nil {
		o.Audit = hclog.NewNullLogger()
	}
	s := &Server{
		cfg: o.Config, eng: o.Engine, proxy: o.Proxy, clock: o.Clock, log: o.Logger, version: o.Version,
		metrics: o.Metrics, policies: o.Policies, plugins: o.Plugins, store: o.Store, requests: o.Requests,
		auth: newAuthenticator(o.Config), red: o.Redactor, audit: o.Audit,
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	s.reqPrefix = hex.EncodeToString(rnd[:]) + "-"
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.scopes = newScopeSet()
	s.fileTopology = o.Proxy.Routing().Topology
	s.view.Store(&view{routing: o.Proxy.Routing(), models: modelsList(s.fileTopology)})

	limit := s.bodyLimit()
	inflight := max(o.Config.Server.MaxInflightBodyBytes, limit)
	if o.Config.Server.MaxInflightBodyBytes == 0 {
		inflight = max(config.DefaultMaxInflightBodyBytes, limit)
	}
	writeTimeout := time.Duration(o.Config.Server.WriteTimeoutMS) * time.Millisecond
	if writeTimeout <= 0 {
		writeTimeout = config.DefaultWriteTimeoutMS * time.Millisecond
	}
	s.writeTimeout = writeTimeout
	s.budget = newBodyBudget(inflight, limit, readTimeout, s.queueWait, s.baseCtx.Done())
	s.app = fiber.New(fiber.Config{
		AppName:               "breakwater",
		BodyLimit:             int(limit),
		DisableStartupMessage: true,
		ErrorHandler:          s.errorHandler,
		ReadTimeout:           readTimeout,
		// A response must make progress within the write timeout; a
		// stream or a large body extends it at every write (writes.go).
		WriteTimeout: writeTimeout,
		IdleTimeout:  120 * time.Second,
		// Never echo client input back in framework errors.
		DisableDefaultContentType: false,
	})
	s.routes()
	s.installConnHooks()
	s.lingerOversized() // after installConnHooks: it wraps connError
	return s, nil
}

// Start restores the console's persisted state and starts its sampler,
// and installs the combos defined through the admin API (persisted in the
// store) over the file's. A stored list that no longer fits the
// configuration is logged and ignored.
func (s *Server) Start(ctx context.Context) error {
	s.startConsole(ctx)
	apiCombos, err := s.loadAPICombos(ctx)
	if err != nil {
		s.log.Warn("loading combos defined through the admin API", "error", err)
		return nil
	}
	if len(apiCombos) == 0 {
		return nil
	}
	s.comboMu.Lock()
	defer s.comboMu.Unlock()
	v, err := s.buildView(apiCombos)
	if err != nil {
		s.log.Warn("combos defined through the admin API no longer fit the configuration; ignoring them", "error", err)
		return nil
	}
	s.install(v)
	return nil
}

func (s *Server) routes() {
	v1 := s.app.Group("/v1", s.clientAuth)
	v1.Post("/chat/completions", s.handleChat)
	v1.Post("/messages", s.handleMessages)
	v1.Post("/responses", s.handleResponses)
	v1.Post("/messages/count_tokens", s.handleCountTokens)
	v1.Post("/embeddings", s.handleEmbeddings)
	v1.Post("/completions", s.handleCompletions)
	v1.Get("/models", s.handleModels)
	v1.Get("/models/*", s.handleModel)
	s.app.Post("/api/v1/session-leases", s.clientAuth, s.handleLease)

	s.adminRoutes()
}

// App returns the Fiber application, for tests.
func (s *Server) App() *fiber.App { return s.app }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.log.Info("listening", "addr", ln.Addr().String())
	if err := s.app.Listener(s.listener(ln)); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// Shutdown cancels the requests' context (queued admissions, waits and
// upstream calls end), stops accepting requests and waits up to the
// context's deadline for running handlers. It is safe before Serve and
// idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutdown.Do(func() {
		timeout := 10 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		s.cancelBase()
		s.scopes.close()
		if e := s.app.ShutdownWithTimeout(timeout); e != nil {
			err = fmt.Errorf("server: shutdown: %w", e)
		}
		if s.console != nil && s.console.sampled != nil {
			<-s.console.sampled
		}
	})
	return err
}

// queueWait is the queue-wait budget (request_queue.max_wait_ms): how
// long a request may wait for room in the body budget.
func (s *Server) queueWait() time.Duration {
	return time.Duration(s.eng.CurrentSettings().RequestQueue.MaxWaitMS) * time.Millisecond
}

// nextRequestID names a new request: the server's prefix and a sequence
// number, in one allocation (the digits are formatted on the stack).
func (s *Server) nextRequestID() string {
	var digits [16]byte
	return s.reqPrefix + string(strconv.AppendUint(digits[:0], s.reqSeq.Add(1), 36))
}

// errorHandler answers the errors a route returns and Fiber's own (body
// too large, unknown route, method not allowed) in the client's error
// shape. A route's own error is logged redacted; no request bytes are.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	status := fiber.StatusInternalServerError
	if errors.As(err, &fe) {
		status = fe.Code
	}
	var e *wire.APIError
	switch status {
	case fiber.StatusRequestEntityTooLarge:
		e = bodyTooLarge(s.bodyLimit())
	case fiber.StatusNotFound:
		e = &wire.APIError{Status: status, Type: "invalid_request_error", Code: "not_found", Message: "no such endpoint: " + c.Method() + " " + wire.Clip(c.Path())}
	case fiber.StatusMethodNotAllowed:
		e = &wire.APIError{Status: status, Type: "invalid_request_error", Code: "method_not_allowed", Message: "method not allowed"}
	default:
		if fe != nil && status < 500 {
			e = &wire.APIError{Status: status, Type: "invalid_request_error", Code: "bad_request", Message: http.StatusText(status)}
			break
		}
		s.log.Error("unhandled error", "path", wire.Clip(c.Path()), "error", s.red.String(err.Error()))
		e = &wire.APIError{Status: 500, Type: "server_error", Code: "internal_error", Message: "internal error"}
	}
	return s.writeError(c, e, formatOf(c))
}

func formatOf(c *fiber.Ctx) wire.Format { return errorFormat(c.Path()) }

// errorFormat is the format of the gateway's own errors on a path.
func errorFormat(path string) wire.Format {
	switch path {
	case "/v1/messages":
		return wire.FormatMessages
	case "/v1/messages/count_tokens":
		return wire.FormatCountTokens
	case "/v1/responses":
		return wire.FormatResponses
	}
	return wire.FormatChat
}

// writeError answers e in format f.
func (s *Server) writeError(c *fiber.Ctx, e *wire.APIError, f wire.Format) error {
	writeErrorTo(c.Context(), e, f)
	return nil
}

// writeErrorTo answers e in format f on a fasthttp request, keeping the
// headers already set.
func writeErrorTo(ctx *fasthttp.RequestCtx, e *wire.APIError, f wire.Format) {
	if ra := e.RetryAfterSeconds(); ra != "" {
		ctx.Response.Header.Set("Retry-After", ra)
	}
	ctx.Response.Header.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	ctx.Response.SetStatusCode(e.Status)
	ctx.Response.SetBodyRaw(e.Body(f))
}
