package upstream

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// Buffered is a whole upstream answer read by DoBuffered.
type Buffered struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrDeadline is the cause of a buffered call cut by its deadline.
var ErrDeadline = errors.New("upstream deadline exceeded")

// Buffers reports whether DoBuffered serves a route: direct connections
// (with or without a local address); calls through a proxy use Do.
func (p *Pool) Buffers(r Route) bool { return r.ProxyURL == "" }

// fastClient returns the route's synchronous client, creating it on first
// use. The request is written and the answer read in the calling
// goroutine, which spares the hand-offs between goroutines of net/http's
// transport: on a quiet gateway each of them is a thread wake-up.
func (p *Pool) fastClient(r Route) (*fasthttp.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.fast[r]; ok {
		return c, nil
	}
	dialer := &net.Dialer{Timeout: p.timeouts.Connect, KeepAlive: 30 * time.Second}
	if r.LocalAddress != "" {
		ip := net.ParseIP(r.LocalAddress)
		if ip == nil {
			return nil, fmt.Errorf("upstream: local_address %q is not an IP address", r.LocalAddress)
		}
		dialer.LocalAddr = &net.TCPAddr{IP: ip}
	}
	c := &fasthttp.Client{
		Dial:                func(addr string) (net.Conn, error) { return dialer.Dial("tcp", addr) },
		MaxConnsPerHost:     4096,
		MaxIdleConnDuration: 90 * time.Second,
		MaxResponseBodySize: MaxBodyBytes,
		ReadBufferSize:      MaxResponseHeaderBytes,
		// Errors never quote the upstream's bytes.
		ConfigureClient:               func(hc *fasthttp.HostClient) error { hc.SecureErrorLogMessage = true; return nil },
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: false,
		DisablePathNormalizing:        true,
		MaxIdemponentCallAttempts:     1,
	}
	if p.fast == nil {
		p.fast = make(map[Route]*fasthttp.Client)
	}
	p.fast[r] = c
	return c, nil
}

// DoBuffered sends a request and reads the whole answer before deadline,
// for non-streaming calls on a route that Buffers. It treats the answer as
// Do does: a redirect is not followed (the 3xx is the answer, its body cut
// to MaxRedirectBody), a gzip or deflate body is decoded (bounded by
// MaxBodyBytes, Content-Encoding and Content-Length removed), and
// oversized, malformed or undecodable answers fail with a *ProtocolError.
// A call cut by the deadline fails with an error wrapping ErrDeadline; one
// that cannot be sent, with a *LocalError.
func (p *Pool) DoBuffered(method, url string, h http.Header, body []byte, r Route, deadline time.Time) (*Buffered, error) {
	if err := CheckHeaders(h); err != nil {
		return nil, err
	}
	c, err := p.fastClient(r)
	if err != nil {
		return nil, &LocalError{Err: err}
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod(method)
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.SetBodyRaw(body)
	if err := c.DoDeadline(req, resp, deadline); err != nil {
		return nil, fastError(err)
	}
	out := &Buffered{Status: resp.StatusCode(), Header: make(http.Header, 8)}
	resp.Header.VisitAll(func(k, v []byte) { out.Header.Add(string(k), string(v)) })
	rb := resp.Body()
	if out.Status >= 300 && out.Status <= 399 && len(rb) > MaxRedirectBody {
		rb = rb[:MaxRedirectBody]
	}
	coding, ok := contentCoding(out.Header.Get("Content-Encoding"))
	if !ok {
		return nil, protocolErr(ErrContentEncoding, coding)
	}
	if coding == "" {
		out.Body = append([]byte(nil), rb...)
		return out, nil
	}
	if out.Body, err = decodeAll(coding, rb, p.maxBody); err != nil {
		return nil, err
	}
	out.Header.Del("Content-Encoding")
	out.Header.Del("Content-Length")
	return out, nil
}
