package server

import (
	"errors"
	"io"
	"net"
	"sync"
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
	// lazy: deadlines are set lazily (a plain TCP socket). mu guards
	// read and write: a connection's deadlines may be set from several
	// goroutines (a streamed body's writer, the client watcher).
	lazy        bool
	mu          sync.Mutex
	read, write lazydeadline.Deadline
}

// SetReadDeadline implements net.Conn.
func (c *lingerConn) SetReadDeadline(t time.Time) error {
	return c.ask(&c.read, c.Conn.SetReadDeadline, t)
}

// SetWriteDeadline implements net.Conn.
func (c *lingerConn) SetWriteDeadline(t time.Time) error {
	return c.ask(&c.write, c.Conn.SetWriteDeadline, t)
}

// ask sets deadline t of one direction (d) on the socket (set) when it
// moves, or always on a connection that is not lazy.
func (c *lingerConn) ask(d *lazydeadline.Deadline, set func(time.Time) error, t time.Time) error {
	if !c.lazy {
		return set(t)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !d.Ask(t) {
		return nil
	}
	return set(t)
}

// SetDeadline implements net.Conn.
func (c *lingerConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read.Forced(t)
	c.write.Forced(t)
	return c.Conn.SetDeadline(t)
}

// early reports whether err, from a read or write under d, is a kept
// deadline passing before the one asked for, and then moves the socket's
// deadline (set) to it: the read or write goes on.
func (c *lingerConn) early(d *lazydeadline.Deadline, set func(time.Time) error, err error) (bool, error) {
	if !c.lazy {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !d.Early(err) {
		return false, nil
	}
	return true, set(d.Want)
}

// Read implements net.Conn: a kept read deadline that passes before the
// one asked for is moved to it, and the read goes on.
func (c *lingerConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err == nil || n > 0 {
			return n, err
		}
		again, serr := c.early(&c.read, c.Conn.SetReadDeadline, err)
		if serr != nil {
			return 0, serr
		}
		if !again {
			return n, err
		}
	}
}

// Write implements net.Conn: a kept write deadline that passes before the
// one asked for is moved to it, and the write goes on.
func (c *lingerConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	for err != nil {
		again, serr := c.early(&c.write, c.Conn.SetWriteDeadline, err)
		if serr != nil {
			return n, serr
		}
		if !again {
			break
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
	if !c.lazy {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read.Exact() {
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
