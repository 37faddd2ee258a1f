package server

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
)

// Delivering the 413 of an oversized body. fasthttp refuses a body over
// server.max_request_bytes as soon as it reads the Content-Length: it
// writes the 413 and closes the connection while the client is still
// sending. Closing a socket with unread data makes the kernel answer with
// a reset, and a client that is still writing (the official openai SDK,
// Node's fetch) then fails with ECONNRESET — "Connection error." — before
// it reads the 413 that is already in its receive buffer. So a connection
// closed after a 413 lingers, as net/http and Apache do: it half-closes
// (the client sees the whole answer and the end of the stream), then
// reads and discards what the client still sends, within a bound, and
// only then closes.

// Bounds of the linger after a 413: at least lingerMinBytes (and four
// times the body limit), within lingerTimeout. A client that sends more,
// or more slowly, gets the reset.
const (
	lingerMinBytes = 64 << 20
	lingerTimeout  = 10 * time.Second
)

// lingerListener wraps the gateway's listener so that its connections can
// linger on close (lingerConn).
type lingerListener struct {
	net.Listener
	limit int64 // bytes to discard at most
}

// Accept implements net.Listener.
func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c, limit: l.limit}, nil
}

// lingerConn is a connection that, once marked (lingerOnClose), drains
// the client's unread body before it closes.
type lingerConn struct {
	net.Conn
	limit  int64
	linger atomic.Bool
}

// Close implements net.Conn: a marked connection half-closes, discards up
// to limit bytes for up to lingerTimeout, then closes.
func (c *lingerConn) Close() error {
	if c.linger.Load() {
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.CopyN(io.Discard, c.Conn, c.limit)
	}
	return c.Conn.Close()
}

// NetConn returns the wrapped connection (as tls.Conn.NetConn does), for
// code that needs the socket itself.
func (c *lingerConn) NetConn() net.Conn { return c.Conn }

// SyscallConn passes the wrapped connection's raw connection through, so
// wrapping hides nothing a *net.TCPConn offers to a liveness check.
func (c *lingerConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// lingerOnClose marks the connection of a request refused before its body
// was read, so that closing it lets the client read the answer.
func lingerOnClose(c net.Conn) {
	if lc, ok := c.(*lingerConn); ok {
		lc.linger.Store(true)
	}
}

// listener returns ln wrapped for the linger of 413 answers.
func (s *Server) listener(ln net.Listener) net.Listener {
	return lingerListener{Listener: ln, limit: max(lingerMinBytes, 4*s.bodyLimit())}
}

// lingerOversized makes fasthttp's refusal of an oversized body (answered
// by errorHandler) linger on close.
func (s *Server) lingerOversized() {
	srv := s.app.Server()
	answer := srv.ErrorHandler
	srv.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			lingerOnClose(ctx.Conn())
		}
		answer(ctx, err)
	}
}

// bodyLimit is server.max_request_bytes, or its default.
func (s *Server) bodyLimit() int64 {
	if l := s.cfg.Server.MaxRequestBytes; l > 0 {
		return l
	}
	return config.DefaultMaxRequestBytes
}
