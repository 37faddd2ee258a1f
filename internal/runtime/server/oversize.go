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
	"github.com/breakwater-dev/breakwater/internal/runtime/lazydeadline"
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
	_, lazy := c.(*net.TCPConn)
	return &lingerConn{Conn: c, limit: l.limit, lazy: lazy}, nil
}

// lingerConn is a connection that, once marked (lingerOnClose), drains
// the client's unread body before it closes.
//
// On a plain TCP socket it also sets the deadlines fasthttp asks for each
// request (the idle and read timeouts, the write timeout) only when they
// move (lazydeadline): a kept earlier deadline that passes is moved to
// the one asked for and the read or write goes on, so every timeout keeps
// its exact meaning while a keep-alive connection's requests cost no
// timer update.
type lingerConn struct {
	net.Conn
	limit  int64
	linger atomic.Bool
	// lazy: deadlines are set lazily (a plain TCP socket).
	lazy        bool
	read, write lazydeadline.Deadline
}

// SetReadDeadline implements net.Conn.
func (c *lingerConn) SetReadDeadline(t time.Time) error {
	if c.lazy && !c.read.Ask(t) {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline implements net.Conn.
func (c *lingerConn) SetWriteDeadline(t time.Time) error {
	if c.lazy && !c.write.Ask(t) {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline implements net.Conn.
func (c *lingerConn) SetDeadline(t time.Time) error {
	c.read.Forced(t)
	c.write.Forced(t)
	return c.Conn.SetDeadline(t)
}

// Read implements net.Conn: a kept read deadline that passes before the
// one asked for is moved to it, and the read goes on.
func (c *lingerConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err == nil || n > 0 || !c.lazy || !c.read.Early(err) {
			return n, err
		}
		if err := c.Conn.SetReadDeadline(c.read.Want); err != nil {
			return 0, err
		}
	}
}

// Write implements net.Conn: a kept write deadline that passes before the
// one asked for is moved to it, and the write goes on.
func (c *lingerConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	for err != nil && c.lazy && c.write.Early(err) {
		if err := c.Conn.SetWriteDeadline(c.write.Want); err != nil {
			return n, err
		}
		var m int
		m, err = c.Conn.Write(b[n:])
		n += m
	}
	return n, err
}

// exactReadDeadline sets on the socket the read deadline asked for, for a
// reader that waits on the socket itself (the client watcher's peek),
// which no kept deadline must wake early.
func (c *lingerConn) exactReadDeadline() {
	if c.lazy && c.read.Exact() {
		_ = c.Conn.SetReadDeadline(c.read.Want)
	}
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
