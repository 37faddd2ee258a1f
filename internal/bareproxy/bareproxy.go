// Package bareproxy is the floor of the benchmark: the thinnest reverse
// proxy that can stand where the gateway stands. One fasthttp server, one
// fasthttp.HostClient to one upstream, no routing, no logging, no body
// parsing. Answers with a length are copied whole; answers without one
// (chunked, such as server-sent events) are passed on piece by piece, each
// piece flushed as it arrives, so a stream's first byte is not held back.
// Whatever the gateway adds beyond this proxy is its own cost.
package bareproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/valyala/fasthttp"
)

// Proxy forwards every request to one upstream address. It is
// goroutine-safe; serve it with Serve.
type Proxy struct {
	upstream *fasthttp.HostClient
	server   *fasthttp.Server
}

// New returns a Proxy for the upstream host:port (plain HTTP). A non-nil
// local is the source address of its upstream connections.
func New(upstream string, local net.IP) *Proxy {
	p := &Proxy{upstream: &fasthttp.HostClient{
		Addr: upstream,
		// No bound of its own: the gateway has none either, and the slow
		// stream curve holds thousands of streams open at once.
		MaxConns:           1 << 20,
		StreamResponseBody: true,
	}}
	if local != nil {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: local}}
		p.upstream.Dial = func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) }
	}
	p.server = &fasthttp.Server{
		Handler:               p.handle,
		NoDefaultServerHeader: true,
		MaxRequestBodySize:    64 << 20,
	}
	return p
}

// Serve accepts connections on ln until Shutdown; it returns nil after a
// Shutdown.
func (p *Proxy) Serve(ln net.Listener) error { return p.server.Serve(ln) }

// Shutdown stops accepting and waits for the open connections to finish.
func (p *Proxy) Shutdown() error { return p.server.Shutdown() }

func (p *Proxy) handle(ctx *fasthttp.RequestCtx) {
	resp := fasthttp.AcquireResponse()
	if err := p.upstream.Do(&ctx.Request, resp); err != nil {
		fasthttp.ReleaseResponse(resp)
		ctx.Error("bare proxy: "+err.Error(), fasthttp.StatusBadGateway)
		return
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	if resp.Header.ContentLength() >= 0 {
		ctx.Response.SetBody(resp.Body())
		fasthttp.ReleaseResponse(resp)
		return
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		if pass(w, resp.BodyStream()) != nil {
			// The stream was cut (the client left, or the upstream): its
			// connection holds unread data and must not be reused.
			resp.SetConnectionClose()
		}
		fasthttp.ReleaseResponse(resp)
	})
}

// pass copies r to w, flushing after every read so each piece leaves as
// soon as it came in.
func pass(w *bufio.Writer, r io.Reader) error {
	buf := make([]byte, 16<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if werr := w.Flush(); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the upstream stream: %w", err)
		}
	}
}
