// Package upstream is Breakwater's HTTP client towards upstream providers:
// pooled keep-alive connections, separate connect, first-byte and idle
// timers with one job each (docs/timeouts.md), an optional local bind
// address per connection and an optional proxy. A call cut by one of its
// own timers fails with a *TimeoutError, which callers record as a local
// timeout rather than a failure of the provider. It never
// follows a redirect, bounds answers (MaxResponseHeaderBytes,
// MaxBodyBytes), decodes an unsolicited gzip or deflate body, and reports
// an answer it cannot use as a *ProtocolError, which callers tell apart
// from a transport failure.
package upstream

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Timeouts are the upstream client's time limits. A zero field takes the
// default of DefaultTimeouts.
type Timeouts struct {
	// Connect bounds the TCP (and TLS) connection set-up. A connect
	// timeout is a transport failure of the upstream, not a TimeoutError.
	Connect time.Duration
	// FirstByte bounds the wait from the call to the first byte of the
	// answer (a call's Limits may lower it).
	FirstByte time.Duration
	// Idle bounds the silence between two reads of an answer once it has
	// started.
	Idle time.Duration
}

// DefaultTimeouts returns connect 10 s, first byte 10 min, idle 60 s.
func DefaultTimeouts() Timeouts {
	return Timeouts{Connect: 10 * time.Second, FirstByte: 10 * time.Minute, Idle: 60 * time.Second}
}

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	if t.Connect <= 0 {
		t.Connect = d.Connect
	}
	if t.FirstByte <= 0 {
		t.FirstByte = d.FirstByte
	}
	if t.Idle <= 0 {
		t.Idle = d.Idle
	}
	return t
}

// connBufferSize is the read buffer of each connection of the streaming
// clients (the direct one's, and the read and write buffers of net/http's
// transport through a proxy; net/http's default is 4 KiB each). A stream
// holds its connection, and so its buffers, for as long as it is open:
// 1 KiB fits reads of a response's headers and of the event stream's
// chunk lines (and, through a proxy, a request's headers; larger request
// bodies are written past the buffer in large writes), and the stream
// reader's reads of chunk data bypass it.
const connBufferSize = 1 << 10

// Route says how one connection reaches its upstream: the local address
// to bind the outgoing socket to and the proxy to go through. The zero
// value dials directly from the system's choice of address.
type Route struct {
	LocalAddress string
	ProxyURL     string
}

// Pool hands out one pooled *http.Client per distinct Route, so keep-alive
// connections are shared by every connection with the same route. It is
// goroutine-safe.
type Pool struct {
	timeouts Timeouts
	maxBody  int         // MaxBodyBytes; lowered in tests
	tls      *tls.Config // nil = the system's roots; tests trust their own
	// fastTransport is the round trip of the buffered calls' host
	// clients: nil, fasthttp's over their connections; benchmarks replace it.
	fastTransport fasthttp.RoundTripper

	mu      sync.Mutex
	clients map[Route]*http.Client
	// fast holds the synchronous host clients of buffered calls
	// (hostClient), fastRead the same for lookups without the lock; urls
	// the parsed URLs of buffered calls (destOf), urlCount their number.
	fast     map[fastHost]*fasthttp.HostClient
	fastRead sync.Map
	urls     sync.Map
	urlCount atomic.Int32
	direct   map[Route]*directClient
	// directRead is a copy of direct for lookups without the lock,
	// replaced (under mu) when a route's client is made.
	directRead atomic.Pointer[map[Route]*directClient]
	writers    sync.Pool // *bufio.Writer of the direct clients' requests
}

// NewPool returns a Pool whose clients use the given timeouts.
func NewPool(t Timeouts) *Pool {
	return &Pool{timeouts: t.withDefaults(), maxBody: MaxBodyBytes, clients: make(map[Route]*http.Client)}
}

// Timeouts returns the pool's effective timeouts.
func (p *Pool) Timeouts() Timeouts { return p.timeouts }

// Client returns the shared client for a route, creating it on first use.
func (p *Pool) Client(r Route) (*http.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[r]; ok {
		return c, nil
	}
	tr, err := p.transport(r)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: tr, CheckRedirect: refuseRedirect}
	p.clients[r] = c
	return c, nil
}

func (p *Pool) transport(r Route) (*http.Transport, error) {
	dialer, err := newDialer(p.timeouts, r)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    p.timeouts.Connect,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		// Upstream bodies are relayed as they arrive; compression would
		// make the transport buffer and decode.
		DisableCompression: true,
		// Each connection keeps its buffers for life, and an open stream
		// holds one connection: see connBufferSize.
		ReadBufferSize:  connBufferSize,
		WriteBufferSize: connBufferSize,
	}
	if p.tls != nil {
		tr.TLSClientConfig = p.tls.Clone()
	}
	if r.ProxyURL != "" {
		u, err := url.Parse(r.ProxyURL)
		if err != nil || u.Host == "" {
			// The proxy URL may hold credentials: never echo it.
			return nil, errors.New("upstream: proxy_url is not a valid URL")
		}
		tr.Proxy = http.ProxyURL(u)
	}
	return tr, nil
}

// Close drops every pooled idle connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients {
		c.CloseIdleConnections()
	}
	for _, c := range p.fast {
		c.CloseIdleConnections()
	}
	for _, c := range p.direct {
		c.closeIdle()
	}
}

// refuseRedirect is every client's CheckRedirect: a redirect is never
// followed. Following one would send the connection's credentials and the
// prompt to another host and relay a foreign answer as the provider's; the
// 3xx comes back as the answer instead, for the caller to classify as the
// upstream's error (engine.DefaultClassifier: server_error, connection
// scope).
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Do sends req under the call's timers (docs/timeouts.md), on a direct
// route with the synchronous HTTP/1.1 client in the caller's goroutine
// (directClient), through a proxy with the route's net/http client: the first byte of the answer must arrive within
// lim.FirstByte (default Timeouts.FirstByte); once it has, the body may be
// silent at most Timeouts.Idle between two reads, and lim.Deadline, when
// set, ends the call whatever its progress. A call cut by a timer fails
// (or its body reads fail) with a *TimeoutError; the caller's context
// ending cancels it as usual.
//
// A redirect is not followed: the 3xx is the answer, its body cut to
// MaxRedirectBody. A gzip or deflate body is decoded as it is read
// (bounded by MaxBodyBytes, Content-Encoding and Content-Length removed
// from the answer's headers). An answer with headers over
// MaxResponseHeaderBytes, a malformed one or one in an encoding the client
// cannot decode fails with a *ProtocolError; a request that cannot be sent
// (an invalid header, a route that cannot be built) fails with a
// *LocalError before anything is sent. The caller must close the body;
// closing it stops the timers.
func (p *Pool) Do(req *http.Request, r Route, lim Limits) (*http.Response, error) {
	return p.DoWhile(req, r, lim, nil)
}

// DoWhile is Do that lets the caller work while the upstream answers:
// meanwhile, when not nil, runs at most once, in the calling goroutine,
// before DoWhile returns — on a direct route once the request is written,
// before its answer is read; through a proxy, where net/http writes the
// request in a goroutine of its own, just before the call. It does not run
// when the request could not be sent (an invalid header, a route that
// cannot be built, a connection that failed before the request was
// written). Work the caller needs only once the answer is in (the stream
// relay's set-up) is then done in the time the upstream takes to answer
// instead of after its first byte.
func (p *Pool) DoWhile(req *http.Request, r Route, lim Limits, meanwhile func()) (*http.Response, error) {
	if err := CheckHeaders(req.Header); err != nil {
		return nil, err
	}
	if r.ProxyURL == "" {
		return p.doDirect(req, r, lim, meanwhile)
	}
	c, err := p.Client(r)
	if err != nil {
		return nil, &LocalError{Err: err}
	}
	if meanwhile != nil {
		meanwhile()
	}
	first := lim.FirstByte
	if first <= 0 {
		first = p.timeouts.FirstByte
	}
	t := startTimers(req.Context(), first, p.timeouts.Idle, lim)
	resp, err := c.Do(req.WithContext(t.ctx))
	if err != nil {
		te, cut := t.cut()
		t.stop()
		if cut {
			return nil, te
		}
		return nil, netError(err)
	}
	if !t.started() {
		te, _ := t.cut()
		t.stop()
		resp.Body.Close()
		return nil, te
	}
	resp.Body = &timedBody{rc: resp.Body, t: t}
	if err := decodeResponse(resp, p.maxBody); err != nil {
		return nil, err
	}
	return resp, nil
}
