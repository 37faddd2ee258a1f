package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// directClient is the streaming client of a direct route (no proxy): Do's
// HTTP/1.1 client that runs in the caller's goroutine. The request is
// written as the standard library's wire writer writes it (writeRequest)
// and the answer parsed with http.ReadResponse over a small reader of the
// connection; the body is read in whatever goroutine reads it. So an open
// stream costs its connection and a 1 KiB read buffer, and no goroutine of
// its own (net/http's transport runs a read and a write goroutine per
// connection).
// The call's timers are deadlines on the connection (see directConn) and
// the caller's context ending sets a past deadline (context.AfterFunc).
//
// Connections are pooled per host: one whose answer was read to its end
// goes back to the idle pool (at most maxIdlePerHost, for at most
// idleConnTimeout); one whose answer was cut, abandoned or broken is
// closed.
type directClient struct {
	p      *Pool
	dialer *net.Dialer

	mu     sync.Mutex
	idle   map[string][]*directConn // by host:port and scheme
	closed bool
}

// The idle pool's bounds, as net/http's transport of the proxied routes.
const (
	maxIdlePerHost  = 256
	idleConnTimeout = 90 * time.Second
	// max1xx bounds the informational answers skipped before the answer.
	max1xx = 5
)

// writeBufferSize is the buffer of the writer a direct request is written
// through: 16 KiB takes a typical request in one write; a larger body goes
// past it to the connection. A request is written whole before its answer
// is read, so the writers are shared by every call (Pool.writers), not
// kept by each connection.
const writeBufferSize = 16 << 10

// errHeaderTooLarge is a header read past MaxResponseHeaderBytes.
var errHeaderTooLarge = errors.New("upstream: response headers too large")

// directFor returns the route's direct client, creating it on first use.
// A route's client, once made, is found without the pool's lock.
func (p *Pool) directFor(r Route) (*directClient, error) {
	if m := p.directRead.Load(); m != nil {
		if c, ok := (*m)[r]; ok {
			return c, nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.direct[r]; ok {
		return c, nil
	}
	d, err := newDialer(p.timeouts, r)
	if err != nil {
		return nil, err
	}
	c := &directClient{p: p, dialer: d, idle: make(map[string][]*directConn)}
	if p.direct == nil {
		p.direct = make(map[Route]*directClient)
	}
	p.direct[r] = c
	read := maps.Clone(p.direct)
	p.directRead.Store(&read)
	return c, nil
}

// doDirect is DoWhile on a direct route.
func (p *Pool) doDirect(req *http.Request, r Route, lim Limits, meanwhile func()) (*http.Response, error) {
	c, err := p.directFor(r)
	if err != nil {
		return nil, &LocalError{Err: err}
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("upstream call: %w", err)
	}
	now := time.Now()
	first := lim.FirstByte
	if first <= 0 {
		first = p.timeouts.FirstByte
	}
	cl := callLimits{first: now.Add(first), firstLimit: first, idle: p.timeouts.Idle}
	if lim.Deadline > 0 {
		cl.hard, cl.hardLimit = now.Add(lim.Deadline), lim.Deadline
	}
	key, addr, tlsHost, err := target(req)
	if err != nil {
		return nil, fmt.Errorf("upstream call: %w", err)
	}
	for fresh := false; ; fresh = true {
		var conn *directConn
		if !fresh {
			conn = c.get(key)
		}
		if conn == nil {
			if conn, err = c.dial(ctx, key, addr, tlsHost, cl.headerDeadline()); err != nil {
				return nil, cl.dialError(ctx, err)
			}
			fresh = true
		}
		if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: conn.nc, Reused: !fresh})
		}
		resp, retry, err := conn.roundTrip(req, cl, !fresh, meanwhile)
		if retry && (req.Body == nil || req.GetBody != nil) {
			if req.GetBody != nil {
				b, gerr := req.GetBody()
				if gerr != nil {
					return nil, fmt.Errorf("upstream call: %w", gerr)
				}
				req = req.Clone(ctx)
				req.Body = b
			}
			continue // the pooled connection was gone: nothing reached the upstream
		}
		if err != nil {
			return nil, err
		}
		if err := decodeResponse(resp, p.maxBody); err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// target returns the pool key, the address to dial and, for https, the
// TLS server name of req's URL.
func target(req *http.Request) (key, addr, tlsHost string, err error) {
	u := req.URL
	host, port := u.Hostname(), u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
		tlsHost = host
	default:
		return "", "", "", fmt.Errorf("unsupported protocol scheme %q", u.Scheme)
	}
	if host == "" {
		return "", "", "", errors.New("no host in the request URL")
	}
	addr = net.JoinHostPort(host, port)
	return u.Scheme + "://" + addr, addr, tlsHost, nil
}

// get takes the most recently used idle connection to key that is still
// open, or returns nil. Connections idle longer than idleConnTimeout are
// closed.
func (c *directClient) get(key string) *directConn {
	now := time.Now()
	for {
		c.mu.Lock()
		list := c.idle[key]
		if len(list) == 0 {
			c.mu.Unlock()
			return nil
		}
		conn := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		var stale []*directConn
		if now.Sub(conn.idleSince) > idleConnTimeout {
			// The others are older still.
			stale, list = append(list, conn), list[:0]
			conn = nil
		}
		c.idle[key] = list
		c.mu.Unlock()
		for _, s := range stale {
			s.nc.Close()
		}
		if conn == nil {
			return nil
		}
		if alive(conn.raw) {
			return conn
		}
		conn.nc.Close()
	}
}

// put returns a connection whose answer was read to its end to the idle
// pool, or closes it when the pool is full or closed.
func (c *directClient) put(conn *directConn) {
	if conn.br.Buffered() > 0 || conn.nc.SetDeadline(time.Time{}) != nil {
		conn.nc.Close() // bytes past the answer: not a connection to reuse
		return
	}
	conn.idleSince, conn.ctx = time.Now(), nil
	c.mu.Lock()
	if !c.closed && len(c.idle[conn.key]) < maxIdlePerHost {
		c.idle[conn.key] = append(c.idle[conn.key], conn)
		conn = nil
	}
	c.mu.Unlock()
	if conn != nil {
		conn.nc.Close()
	}
}

// closeIdle closes every idle connection; later answers are not pooled.
func (c *directClient) closeIdle() {
	c.mu.Lock()
	idle := c.idle
	c.idle = make(map[string][]*directConn)
	c.mu.Unlock()
	for _, list := range idle {
		for _, conn := range list {
			conn.nc.Close()
		}
	}
}

// dial opens a connection to addr: TCP within the connect timeout, then
// TLS for an https host, both before deadline (the call's first-byte
// limit or hard deadline) and the caller's context.
func (c *directClient) dial(ctx context.Context, key, addr, tlsHost string, deadline time.Time) (*directConn, error) {
	d := *c.dialer
	d.Deadline = deadline
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	nc := raw
	if tlsHost != "" {
		tc, err := c.p.handshake(ctx, raw, tlsHost, deadline)
		if err != nil {
			return nil, err
		}
		nc = tc
	}
	conn := &directConn{nc: nc, raw: raw, key: key, c: c, limit: -1}
	conn.br = bufio.NewReaderSize(conn, connBufferSize)
	return conn, nil
}

// callLimits are the timers of one call as deadlines.
type callLimits struct {
	first      time.Time // the answer's headers by then
	firstLimit time.Duration
	hard       time.Time // the whole call by then; zero = none
	hardLimit  time.Duration
	idle       time.Duration // the longest silence of a read of the body
}

// headerDeadline is when the wait for the answer's headers ends.
func (l *callLimits) headerDeadline() time.Time {
	if !l.hard.IsZero() && l.hard.Before(l.first) {
		return l.hard
	}
	return l.first
}

// cut is the TimeoutError of a wait that ended at a deadline: the hard
// deadline's once it has passed, else the first-byte timer's before the
// answer started, the idle timer's after.
func (l *callLimits) cut(started bool) *TimeoutError {
	if !l.hard.IsZero() && !time.Now().Before(l.hard) {
		return &TimeoutError{Timer: TimerDeadline, Limit: l.hardLimit}
	}
	if !started {
		return &TimeoutError{Timer: TimerFirstByte, Limit: l.firstLimit}
	}
	return &TimeoutError{Timer: TimerIdle, Limit: l.idle}
}

// dialError turns a failed dial into the call's error: the caller's
// context ending, a timer's cut (the connect timeout itself is a transport
// failure), or a transport error.
func (l *callLimits) dialError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("upstream call: %w", ctx.Err())
	case isTimeout(err) && !time.Now().Before(l.headerDeadline()):
		return l.cut(false)
	}
	return fmt.Errorf("upstream call: %w", err)
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// directConn is one connection of a direct client. It reads for the
// connection's bufio.Reader under the call's timers: until the answer's
// headers are in, the socket's deadline is the first-byte limit (or the
// hard deadline, if sooner) and the reads are counted against
// MaxResponseHeaderBytes; after, each read may wait at most the idle
// timeout (never past the hard deadline). As phasedConn does, the idle
// deadline is set once and moved only when it passes before the read in
// progress has waited its idle timeout.
type directConn struct {
	nc  net.Conn // the connection (TLS above TCP for https)
	raw net.Conn // the TCP socket
	br  *bufio.Reader
	key string
	c   *directClient

	idleSince time.Time // in the idle pool since

	// The current call; set by the goroutine that makes it.
	lim     callLimits
	limit   int64 // header bytes left to read; -1 once the headers are in
	started bool  // the headers are in
	armed   bool  // the idle deadline is set on the socket
	since   time.Time
	ctx     context.Context

	mu        sync.Mutex // orders deadlines with the context's cancel
	cancelled bool
}

// alongTimeAgo is the deadline that fails every wait at once.
var alongTimeAgo = time.Unix(1, 0)

// setDeadline sets the socket's read (and write) deadline unless the
// caller's context ended, which set a past one for good.
func (c *directConn) setDeadline(t time.Time, write bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return nil
	}
	if write {
		return c.nc.SetDeadline(t)
	}
	return c.nc.SetReadDeadline(t)
}

// cancel fails the read or write in progress: the caller's context ended.
func (c *directConn) cancel() {
	c.mu.Lock()
	c.cancelled = true
	_ = c.nc.SetDeadline(alongTimeAgo)
	c.mu.Unlock()
}

// isCancelled reports whether the caller's context ended the call.
func (c *directConn) isCancelled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelled
}

// Read implements io.Reader for the connection's bufio.Reader.
func (c *directConn) Read(b []byte) (int, error) {
	if c.limit >= 0 {
		if c.limit == 0 {
			return 0, errHeaderTooLarge
		}
		if int64(len(b)) > c.limit {
			b = b[:c.limit]
		}
		n, err := c.read(b)
		c.limit -= int64(n)
		return n, err
	}
	return c.read(b)
}

// read reads under the deadline of the call's phase.
func (c *directConn) read(b []byte) (int, error) {
	if c.started {
		c.since = time.Now()
		if !c.armed {
			if err := c.setDeadline(c.idleUntil(), false); err != nil {
				return 0, err
			}
			c.armed = true
		}
	}
	for {
		n, err := c.nc.Read(b)
		if err == nil || n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if c.isCancelled() {
			return 0, c.ctx.Err()
		}
		if c.started {
			// The deadline was set by an earlier read: this one has
			// waited less than the idle timeout and goes on waiting.
			if until := c.idleUntil(); time.Now().Before(until) {
				if err := c.setDeadline(until, false); err != nil {
					return 0, err
				}
				continue
			}
		}
		return 0, c.lim.cut(c.started)
	}
}

// idleUntil is when the read in progress has waited the idle timeout, or
// the hard deadline if sooner.
func (c *directConn) idleUntil() time.Time {
	t := c.since.Add(c.lim.idle)
	if !c.lim.hard.IsZero() && c.lim.hard.Before(t) {
		return c.lim.hard
	}
	return t
}

// roundTrip sends req on the connection, runs meanwhile (when not nil)
// once the request is written, and reads the answer's headers. retry
// reports a pooled connection whose request could not be written whole
// (the upstream closed it while it was idle): the upstream cannot have
// taken the request, and the caller may send it again on a new one (then
// meanwhile has not run). On success the answer's body owns the
// connection.
func (c *directConn) roundTrip(req *http.Request, lim callLimits, reused bool, meanwhile func()) (resp *http.Response, retry bool, err error) {
	ctx := req.Context()
	c.lim, c.ctx, c.started, c.armed, c.cancelled = lim, ctx, false, false, false
	stop := context.AfterFunc(ctx, c.cancel)
	fail := func(err error) (*http.Response, bool, error) {
		stop()
		c.nc.Close()
		return nil, false, err
	}
	if err := c.setDeadline(lim.headerDeadline(), true); err != nil {
		return fail(fmt.Errorf("upstream call: %w", err))
	}
	writers := &c.c.p.writers
	w, _ := writers.Get().(*bufio.Writer)
	if w == nil {
		w = bufio.NewWriterSize(nil, writeBufferSize)
	}
	w.Reset(c.nc)
	err = writeRequest(w, req)
	if err == nil {
		err = w.Flush()
	}
	w.Reset(nil)
	writers.Put(w)
	if err != nil {
		_, _, err = fail(c.callError(err))
		_, cut := AsTimeout(err)
		return nil, reused && !cut && !c.isCancelled(), err
	}
	if meanwhile != nil {
		meanwhile()
	}
	c.limit = MaxResponseHeaderBytes
	for n := 0; ; n++ {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return fail(c.callError(err))
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if n == max1xx {
			return fail(protocolErr(ErrMalformedResponse, "too many 1xx answers"))
		}
	}
	c.limit, c.started = -1, true
	b := &directBody{rc: resp.Body, c: c, stop: stop, reuse: !resp.Close && !req.Close}
	resp.Body = b
	if b.rc == http.NoBody {
		b.done()
	}
	return resp, false, nil
}

// callError turns a failed write or header read into the call's error.
func (c *directConn) callError(err error) error {
	var te *TimeoutError
	switch {
	case c.isCancelled():
		return fmt.Errorf("upstream call: %w", c.ctx.Err())
	case errors.As(err, &te):
		return te
	case errors.Is(err, os.ErrDeadlineExceeded):
		return c.lim.cut(c.started)
	case errors.Is(err, errHeaderTooLarge):
		return protocolErr(ErrHeaderTooLarge, "")
	}
	return netError(fmt.Errorf("upstream call: %w", err))
}

// directBody is the body of a direct answer. Read to its end, it gives
// its connection back to the pool at once (the caller may cancel its
// context next); closed before, cut or broken, it closes the connection.
// Close may run while a Read is blocked (it makes the read return).
type directBody struct {
	rc    io.ReadCloser
	c     *directConn
	stop  func() bool  // stops the watch of the caller's context
	reuse bool         // the answer allows the connection to serve another
	state atomic.Int32 // bodyOpen, bodyDone or bodyClosed
}

// The states of a directBody.
const (
	bodyOpen   = iota
	bodyDone   // read to its end, the connection handed back
	bodyClosed // closed first, the connection closed
)

// Read implements io.Reader.
func (b *directBody) Read(p []byte) (int, error) {
	switch b.state.Load() {
	case bodyDone:
		return 0, io.EOF
	case bodyClosed:
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.done()
	case err != nil && b.c.isCancelled():
		err = b.c.ctx.Err()
	}
	return n, err
}

// done hands the connection back once the answer was read to its end,
// unless Close or the caller's context came first.
func (b *directBody) done() {
	if b.reuse && b.stop() && b.state.CompareAndSwap(bodyOpen, bodyDone) {
		b.c.c.put(b.c)
	}
}

// Close ends the answer: unless it was read to its end, the connection is
// closed.
func (b *directBody) Close() error {
	if !b.state.CompareAndSwap(bodyOpen, bodyClosed) {
		return nil
	}
	b.stop()
	return b.c.nc.Close()
}

// handshake sets up TLS over conn for host, before deadline (zero: the
// connect timeout from now, the limit in any case) and the end of ctx;
// the connection is closed on failure.
func (p *Pool) handshake(ctx context.Context, conn net.Conn, host string, deadline time.Time) (*tls.Conn, error) {
	cfg := &tls.Config{}
	if p.tls != nil {
		cfg = p.tls.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if limit := time.Now().Add(p.timeouts.Connect); deadline.IsZero() || limit.Before(deadline) {
		deadline = limit
	}
	tc := tls.Client(conn, cfg)
	_ = tc.SetDeadline(deadline)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("upstream: tls handshake with %s: %w", host, err)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// newDialer returns the dialer of a route's connections: the connect
// timeout, TCP keep-alive, and the route's local address if any.
func newDialer(t Timeouts, r Route) (*net.Dialer, error) {
	d := &net.Dialer{Timeout: t.Connect, KeepAlive: 30 * time.Second}
	if r.LocalAddress != "" {
		ip := net.ParseIP(r.LocalAddress)
		if ip == nil {
			return nil, fmt.Errorf("upstream: local_address %q is not an IP address", r.LocalAddress)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return d, nil
}
