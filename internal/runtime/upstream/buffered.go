package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/lazydeadline"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// Buffered is a whole upstream answer read by DoBuffered.
type Buffered struct {
	Status int
	// Fields are the answer's headers in the order they came, names in
	// canonical form (a repeated header appears once per value).
	Fields []wire.Header
	Body   []byte
}

// Header returns the answer's headers as an http.Header, built on each
// call.
func (b *Buffered) Header() http.Header {
	h := make(http.Header, len(b.Fields))
	for _, f := range b.Fields {
		h[f.Name] = append(h[f.Name], f.Value)
	}
	return h
}

// Get returns the first value of the header name (in canonical form), ""
// when the answer has none.
func (b *Buffered) Get(name string) string {
	for _, f := range b.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// Buffers reports whether DoBuffered serves a route: direct connections
// (with or without a local address); calls through a proxy use Do.
func (p *Pool) Buffers(r Route) bool { return r.ProxyURL == "" }

// fastHost names a synchronous host client: the route and the host and
// scheme of the URLs it serves, as fasthttp.Client keys its own (one per
// host as the URL spells it, https apart).
type fastHost struct {
	route Route
	host  string
	tls   bool
}

// hostClient returns the synchronous client of a route's calls to host,
// creating it on first use: configured as fasthttp.Client configures the
// host clients it makes, and called directly, which spares the lookup
// under a lock that fasthttp.Client makes on every call. The request is
// written and the answer read in the calling goroutine, which spares the
// hand-offs between goroutines of net/http's transport: on a quiet
// gateway each of them is a thread wake-up. Its connections are
// phasedConns (TLS included, set up by the dialer) so that the call's
// deadline bounds only the wait for the first byte.
func (p *Pool) hostClient(r Route, host string, isTLS bool) (*fasthttp.HostClient, error) {
	k := fastHost{route: r, host: host, tls: isTLS}
	if c, ok := p.fastRead.Load(k); ok {
		return c.(*fasthttp.HostClient), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.fast[k]; ok {
		return c, nil
	}
	dialer, err := newDialer(p.timeouts, r)
	if err != nil {
		return nil, err
	}
	c := &fasthttp.HostClient{
		Addr:                      fasthttp.AddMissingPort(host, isTLS),
		IsTLS:                     isTLS,
		MaxConns:                  4096,
		MaxIdleConnDuration:       90 * time.Second,
		MaxResponseBodySize:       MaxBodyBytes,
		ReadBufferSize:            MaxResponseHeaderBytes,
		NoDefaultUserAgentHeader:  true,
		DisablePathNormalizing:    true,
		MaxIdemponentCallAttempts: 1,
		// Errors never quote the upstream's bytes.
		SecureErrorLogMessage: true,
	}
	c.Dial = p.phasedDial(dialer, isTLS)
	c.Transport = p.fastTransport
	if p.fast == nil {
		p.fast = make(map[fastHost]*fasthttp.HostClient)
	}
	p.fast[k] = c
	p.fastRead.Store(k, c)
	return c, nil
}

// dest is where a parsed URL sends a buffered call: its parse, and the
// host and scheme that pick its host client; err is the error of a scheme
// the client does not speak (fasthttp.Client's).
type dest struct {
	uri  *fasthttp.URI
	host string
	tls  bool
	err  error
}

// destOf reads a request's URI as fasthttp.Client does to pick the host
// client of a call.
func destOf(u *fasthttp.URI) dest {
	d := dest{uri: u, host: string(u.Host())}
	switch string(u.Scheme()) {
	case "https":
		d.tls = true
	case "http":
	default:
		d.err = fmt.Errorf("unsupported protocol %q. http and https are supported", u.Scheme())
	}
	return d
}

// maxParsedURLs bounds the parsed URLs a Pool keeps (parsedURL): a call
// to a URL past them parses it as before.
const maxParsedURLs = 1024

// parsedURL returns the destination of url parsed as fasthttp's client
// parses a request's URL, kept for the next calls to it (most calls go
// to a few URLs, a connection's endpoints): a request set from it
// (Request.SetURI) copies the parse instead of parsing again. nil for a
// URL that does not parse (the caller sets it as is, to fail as before)
// or one past maxParsedURLs. The dest returned is shared: it must not be
// modified.
func (p *Pool) parsedURL(url string) *dest {
	if d, ok := p.urls.Load(url); ok {
		return d.(*dest)
	}
	if p.urlCount.Load() >= maxParsedURLs {
		return nil
	}
	d := parseDest(url)
	if d == nil {
		return nil
	}
	if _, loaded := p.urls.LoadOrStore(url, d); !loaded {
		p.urlCount.Add(1)
	}
	return d
}

// parseDest parses url as fasthttp's client parses a request's URL; nil
// when it does not parse.
func parseDest(url string) *dest {
	u := new(fasthttp.URI)
	if err := u.Parse(nil, []byte(url)); err != nil {
		return nil
	}
	d := destOf(u)
	return &d
}

// phasedDial dials a connection of the synchronous client: TCP, then TLS
// for an https host (within the connect timeout), wrapped in a phasedConn.
func (p *Pool) phasedDial(dialer *net.Dialer, isTLS bool) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) {
		conn, err := dialer.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		if !isTLS {
			return &phasedConn{Conn: conn, idle: p.timeouts.Idle, retryWrites: true}, nil
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		tc, err := p.handshake(context.Background(), conn, host, time.Time{})
		if err != nil {
			return nil, err
		}
		return &phasedConn{Conn: tc, idle: p.timeouts.Idle}, nil
	}
}

// phasedConn is a connection of the synchronous client. fasthttp sets one
// read deadline for a whole answer: the call's deadline, which is the
// first-byte limit. phasedConn keeps it only until the first byte of the
// answer arrives; after that every read is bounded by the idle timeout
// instead, so a slow answer that keeps arriving is never cut and a silent
// one is, with a *TimeoutError for TimerIdle. It sits above TLS, so only
// the answer's bytes (not a TLS session ticket) start the answer. A
// connection serves one call at a time.
//
// The idle deadline is set on the socket once per answer, when the answer
// has started, not before every read: each read only notes when it began.
// When the socket's deadline passes, the read is cut only if it has itself
// waited the idle timeout; a read that began later is given the rest of
// its own idle timeout (the deadline moved once, then) and goes on. So the
// idle timer keeps its exact meaning (a silence longer than the idle
// timeout from the start of a read) at the price of one deadline per
// answer instead of one per read.
//
// The call's own deadlines (fasthttp sets a write and a read deadline for
// every call) are set on the socket only when they move
// (lazydeadline): a kept earlier deadline that passes is moved to the
// call's own and the read or write goes on, so each timer keeps its exact
// meaning while back-to-back calls on a connection cost no timer update.
// A write over TLS cannot go on after its deadline passed (the TLS state
// is then broken), so there the write deadline is always set as asked.
type phasedConn struct {
	net.Conn
	idle time.Duration
	// retryWrites: a write cut by its deadline may go on (not TLS).
	retryWrites bool
	// started: a byte of the current answer has arrived.
	started bool
	// armed: the idle deadline is set on the socket for this answer.
	armed bool
	// since is when the latest read of a started answer began.
	since time.Time
	// read and write are the call's deadlines and the socket's.
	read, write lazydeadline.Deadline
}

// setRead sets the socket's read deadline (the idle timer's).
func (c *phasedConn) setRead(deadline time.Time) error {
	c.read.Set = deadline
	return c.Conn.SetReadDeadline(deadline)
}

// SetReadDeadline starts a new answer: deadline bounds the wait for its
// first byte.
func (c *phasedConn) SetReadDeadline(deadline time.Time) error {
	c.started, c.armed = false, false
	if !c.read.Ask(deadline) {
		return nil
	}
	return c.Conn.SetReadDeadline(deadline)
}

// SetWriteDeadline bounds the writes of the call.
func (c *phasedConn) SetWriteDeadline(deadline time.Time) error {
	if !c.retryWrites {
		c.write.Forced(deadline)
	} else if !c.write.Ask(deadline) {
		return nil
	}
	return c.Conn.SetWriteDeadline(deadline)
}

// SetDeadline starts a new answer, as SetReadDeadline does, and bounds
// the writes.
func (c *phasedConn) SetDeadline(deadline time.Time) error {
	c.started, c.armed = false, false
	c.read.Forced(deadline)
	c.write.Forced(deadline)
	return c.Conn.SetDeadline(deadline)
}

// Write writes under the call's write deadline: one kept on the socket
// that passes before it is moved to it, and the write goes on.
func (c *phasedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	for err != nil && c.write.Early(err) {
		if err := c.Conn.SetWriteDeadline(c.write.Want); err != nil {
			return n, err
		}
		var m int
		m, err = c.Conn.Write(b[n:])
		n += m
	}
	return n, err
}

// Read reads under the first-byte deadline until the answer has started,
// under the idle timeout after.
func (c *phasedConn) Read(b []byte) (int, error) {
	if c.started {
		c.since = time.Now()
		if !c.armed {
			if err := c.setRead(c.since.Add(c.idle)); err != nil {
				return 0, err
			}
			c.armed = true
		}
	}
	for {
		n, err := c.Conn.Read(b)
		if err != nil && n == 0 && !c.started && c.read.Early(err) {
			// A deadline kept from an earlier call passed before this
			// one's: wait on until this one's.
			if err := c.Conn.SetReadDeadline(c.read.Want); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil && c.started && errors.Is(err, os.ErrDeadlineExceeded) {
			// The deadline was set by an earlier read: this one has
			// waited less than the idle timeout and goes on waiting.
			if until := c.since.Add(c.idle); n == 0 && time.Now().Before(until) {
				if err := c.setRead(until); err != nil {
					return 0, err
				}
				continue
			}
			return n, &TimeoutError{Timer: TimerIdle, Limit: c.idle}
		}
		if n > 0 {
			c.started = true
		}
		return n, err
	}
}

// Handshake tells fasthttp that the dialer already set up TLS (a plain
// connection has none to do).
func (c *phasedConn) Handshake() error {
	if tc, ok := c.Conn.(*tls.Conn); ok {
		return tc.Handshake()
	}
	return nil
}

// Target is what a buffered call sends besides its body: its method, its
// URL and its headers (DoBuffered only reads them, so they may be shared
// by concurrent calls). A Target literal is laid out into a request at
// every call; one made by NewTarget is laid out once for all its calls.
type Target struct {
	Method, URL string
	Header      http.Header

	// laid, when set, is the Target's request laid out once (NewTarget).
	laid *layout
}

// NewTarget returns the Target of method, url and h for any number of
// calls, concurrent ones included: on its first call its headers are
// checked and its URL parsed, and its calls reuse requests laid out with
// its method, URL and headers, each call setting only its body. Its calls
// behave as those of the same Target literal. Neither h nor the Target's
// fields may be modified afterwards.
func NewTarget(method, url string, h http.Header) Target {
	return Target{Method: method, URL: url, Header: h, laid: new(layout)}
}

// layout is a Target's request laid out once (NewTarget), on its first
// call.
type layout struct {
	once sync.Once
	// dest is the URL's parse; nil for a URL that does not parse, whose
	// calls are laid out one by one, to fail as a literal's.
	dest *dest
	// err is the headers' check: a Target whose headers cannot be sent
	// fails every call with it.
	err error
	// reqs are requests laid out with the Target's method, URI and
	// headers, their body reset.
	reqs sync.Pool
	// bound is the host client of the latest Pool and route the Target
	// was sent on.
	bound atomic.Pointer[boundHost]
}

// boundHost is a layout's host client on a Pool's route.
type boundHost struct {
	p  *Pool
	r  Route
	hc *fasthttp.HostClient
}

// lay lays t out, once.
func (l *layout) lay(t *Target) { l.once.Do(func() { l.prepare(*t) }) }

// prepare lays t out (lay): a copy of t is kept to lay out more requests.
func (l *layout) prepare(t Target) {
	if l.dest = parseDest(t.URL); l.dest == nil {
		return
	}
	first := new(fasthttp.Request)
	if l.err = t.layOut(first, l.dest.uri); l.err != nil {
		return
	}
	u := l.dest.uri
	l.reqs.New = func() any {
		req := new(fasthttp.Request)
		_ = t.layOut(req, u) // checked with the first
		return req
	}
	l.reqs.Put(first)
}

// layOut sets the method, headers and URI of req: the request of a call
// but its body. A header that cannot be sent (CheckHeaders) fails it.
// u, when set, is the URL's parse.
func (t *Target) layOut(req *fasthttp.Request, u *fasthttp.URI) error {
	for k, vs := range t.Header {
		if !wire.ValidHeaderName(k) {
			return invalidHeaderName(k)
		}
		for _, v := range vs {
			if !wire.ValidHeaderValue(v) {
				return invalidHeaderValue(k)
			}
			req.Header.Add(k, v)
		}
	}
	if u != nil {
		req.SetURI(u)
	} else {
		req.SetRequestURI(t.URL)
	}
	req.Header.SetMethod(t.Method)
	return nil
}

// DoBuffered sends a request to t with body and reads the whole answer,
// for non-streaming calls on a route that Buffers. The answer's first
// byte must arrive within firstByte (0 = Timeouts.FirstByte); after that
// the answer may take as long as it needs while it keeps arriving: only a
// silence longer than Timeouts.Idle between two reads cuts it. A call cut
// by either timer fails with a *TimeoutError (TimerFirstByte or
// TimerIdle). DoBuffered has no whole-call deadline: a caller that needs
// one (Limits.Deadline) uses Do.
//
// It treats the answer as Do does: a redirect is not followed (the 3xx is
// the answer, its body cut to MaxRedirectBody), a gzip or deflate body is
// decoded (bounded by MaxBodyBytes, Content-Encoding and Content-Length
// removed), and oversized, malformed or undecodable answers fail with a
// *ProtocolError. A call that cannot be sent fails with a *LocalError,
// checked in this order: a route that cannot be built, a header that
// cannot be sent (CheckHeaders); then a scheme other than http and https
// fails the call.
//
// The body is written from its pieces, without a copy of the client's
// bytes (setBody); it must stay valid until DoBuffered returns. The answer
// is returned by value: a caller that keeps it on its stack allocates
// only its body and headers.
func (p *Pool) DoBuffered(t Target, body wire.Splice, r Route, firstByte time.Duration) (Buffered, error) {
	if firstByte <= 0 {
		firstByte = p.timeouts.FirstByte
	}
	l := t.laid
	if l == nil {
		return p.doUnlaid(&t, body, r, firstByte)
	}
	l.lay(&t)
	if l.dest == nil {
		return p.doUnlaid(&t, body, r, firstByte)
	}
	b := l.bound.Load()
	if b == nil || b.p != p || b.r != r {
		hc, err := p.routeHost(r, l.dest)
		if err != nil {
			return Buffered{}, err
		}
		if l.err != nil {
			return Buffered{}, l.err
		}
		if l.dest.err != nil {
			return Buffered{}, fastError(l.dest.err, firstByte)
		}
		b = &boundHost{p: p, r: r, hc: hc}
		l.bound.Store(b)
	}
	req := l.reqs.Get().(*fasthttp.Request)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	setBody(req, body)
	err := b.hc.DoTimeout(req, resp, firstByte)
	// The request goes back laid out as it came: its method, URI and
	// headers are what every call sends (writing it sets its Host,
	// request URI and Content-Length again, from its URI and body).
	req.ResetBody()
	l.reqs.Put(req)
	if err != nil {
		return Buffered{}, fastError(err, firstByte)
	}
	return p.readBuffered(resp)
}

// routeHost returns the host client of a call to d on route r; nil, once
// the route is checked, for a scheme the client does not speak. A route
// that cannot be built fails with a *LocalError.
func (p *Pool) routeHost(r Route, d *dest) (*fasthttp.HostClient, error) {
	var hc *fasthttp.HostClient
	var err error
	if d.err == nil {
		hc, err = p.hostClient(r, d.host, d.tls)
	} else {
		_, err = newDialer(p.timeouts, r)
	}
	if err != nil {
		return nil, &LocalError{Err: err}
	}
	return hc, nil
}

// doUnlaid is DoBuffered for a Target literal, or a kept one whose URL
// does not parse: its request is laid out for this call, its headers
// checked as they are copied.
func (p *Pool) doUnlaid(t *Target, body wire.Splice, r Route, firstByte time.Duration) (Buffered, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	d := p.parsedURL(t.URL)
	var hc *fasthttp.HostClient
	var u *fasthttp.URI
	var err error
	if d != nil {
		u = d.uri
		hc, err = p.routeHost(r, d)
	} else if _, derr := newDialer(p.timeouts, r); derr != nil {
		err = &LocalError{Err: derr}
	}
	if err != nil {
		return Buffered{}, err
	}
	if err := t.layOut(req, u); err != nil {
		return Buffered{}, err
	}
	if d == nil {
		// A URL that does not parse: its host client picked as
		// fasthttp.Client picks it, from the request's URI.
		nd := destOf(req.URI())
		if d = &nd; nd.err == nil {
			if hc, err = p.routeHost(r, d); err != nil {
				return Buffered{}, err
			}
		}
	}
	if d.err != nil {
		return Buffered{}, fastError(d.err, firstByte)
	}
	setBody(req, body)
	if err := hc.DoTimeout(req, resp, firstByte); err != nil {
		return Buffered{}, fastError(err, firstByte)
	}
	return p.readBuffered(resp)
}

// readBuffered copies a whole answer out of resp: its headers (fieldsIn)
// and its body in one allocation, the headers first. The body is the
// allocation's tail, capped, so that writing it or appending to it never
// touches the headers.
func (p *Pool) readBuffered(resp *fasthttp.Response) (Buffered, error) {
	var first [24]rawField
	kv := rawFields(&resp.Header, first[:0])
	out := Buffered{Status: resp.StatusCode()}
	rb := resp.Body()
	if out.Status >= 300 && out.Status <= 399 && len(rb) > MaxRedirectBody {
		rb = rb[:MaxRedirectBody]
	}
	coding, ok := contentCoding(firstValue(kv, "Content-Encoding"))
	if !ok {
		return Buffered{}, protocolErr(ErrContentEncoding, coding)
	}
	keep := 0
	if coding == "" {
		keep = len(rb)
	}
	size := fieldBytes(kv)
	buf := make([]byte, size+keep)
	out.Fields = fieldsIn(kv, buf[:size])
	if coding == "" {
		if keep > 0 {
			out.Body = buf[size:len(buf):len(buf)]
			copy(out.Body, rb)
		}
		return out, nil
	}
	var err error
	if out.Body, err = decodeAll(coding, rb, p.maxBody); err != nil {
		return Buffered{}, err
	}
	out.Fields = slices.DeleteFunc(out.Fields, func(f wire.Header) bool {
		return f.Name == "Content-Encoding" || f.Name == "Content-Length"
	})
	return out, nil
}

// fieldsOf copies an answer's headers in two allocations whatever their
// number: one string holding every name and value, and the list
// (fieldsIn).
func fieldsOf(rh *fasthttp.ResponseHeader) []wire.Header {
	var first [24]rawField
	kv := rawFields(rh, first[:0])
	return fieldsIn(kv, make([]byte, fieldBytes(kv)))
}

// rawFields appends an answer's headers to kv as the response holds them,
// visiting them once (the bytes stay valid while the response is held).
func rawFields(rh *fasthttp.ResponseHeader, kv []rawField) []rawField {
	rh.VisitAll(func(k, v []byte) { kv = append(kv, rawField{k, v}) })
	return kv
}

// fieldBytes is the size of the names and values of kv.
func fieldBytes(kv []rawField) int {
	size := 0
	for _, f := range kv {
		size += len(f.k) + len(f.v)
	}
	return size
}

// firstValue returns the value of the first header of kv whose name in
// canonical form is name, "" when there is none (Buffered.Get of the
// fields of kv). name must be canonical and made of letters and '-': a
// raw name is then canonically name exactly when it is name in ASCII
// letters of any case.
func firstValue(kv []rawField, name string) string {
	for _, f := range kv {
		if asciiFold(f.k, name) {
			return string(f.v)
		}
	}
	return ""
}

// asciiFold reports whether b is s with ASCII letters of any case.
func asciiFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// fieldsIn copies the headers kv into buf, which holds fieldBytes(kv)
// bytes and is never written again, and lists them over it: names in
// canonical form (fasthttp has put them so already, so
// CanonicalMIMEHeaderKey returns them as they are), values in order. The
// list is the only other allocation.
func fieldsIn(kv []rawField, buf []byte) []wire.Header {
	at := 0
	for _, f := range kv {
		at += copy(buf[at:], f.k)
		at += copy(buf[at:], f.v)
	}
	all := ""
	if len(buf) > 0 {
		// buf is written above and never after: the string is immutable.
		all = unsafe.String(unsafe.SliceData(buf), len(buf))
	}
	out := make([]wire.Header, len(kv))
	at = 0
	for i, f := range kv {
		out[i] = wire.Header{Name: textproto.CanonicalMIMEHeaderKey(all[at : at+len(f.k)]), Value: all[at+len(f.k) : at+len(f.k)+len(f.v)]}
		at += len(f.k) + len(f.v)
	}
	return out
}

// rawField is a header as the response holds it.
type rawField struct{ k, v []byte }

// copiedBody is the size up to which setBody copies a spliced body into
// the request's own buffer: below it a copy costs less than writing the
// pieces one by one.
const copiedBody = 16 << 10

// setBody makes body the request's body: a body of one piece is used as
// is, a small spliced one is copied into the request's buffer, and a large
// one is streamed from its pieces with its Content-Length, each piece
// written straight to the connection.
func setBody(req *fasthttp.Request, body wire.Splice) {
	if b, ok := body.Single(); ok {
		req.SetBodyRaw(b)
		return
	}
	if body.Len() <= copiedBody {
		for _, p := range body.Pieces() {
			req.AppendBody(p)
		}
		return
	}
	req.SetBodyStream(&pieces{left: body.Pieces()}, body.Len())
}

// pieces reads a spliced body. fasthttp copies a body stream with
// io.CopyBuffer, which prefers WriteTo: the pieces then reach the
// connection's writer whole, and a large one bypasses its buffer.
type pieces struct {
	left [3][]byte // what is left to read of each piece
}

// WriteTo writes what is left of the body to w, piece by piece.
func (p *pieces) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for i := range p.left {
		if len(p.left[i]) == 0 {
			continue
		}
		m, err := w.Write(p.left[i])
		n += int64(m)
		p.left[i] = p.left[i][m:]
		if err == nil && len(p.left[i]) > 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Read implements io.Reader for a caller that does not use WriteTo.
func (p *pieces) Read(b []byte) (int, error) {
	for i := range p.left {
		if len(p.left[i]) > 0 {
			n := copy(b, p.left[i])
			p.left[i] = p.left[i][n:]
			return n, nil
		}
	}
	return 0, io.EOF
}
