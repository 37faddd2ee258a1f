package server

import (
	"bufio"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/breakwater-dev/breakwater/internal/runtime/proxy"
)

// largeBody is the size from which a whole response body is written with
// a write deadline renewed at every chunk (progressReader) instead of one
// deadline for the whole write: a slow but reading client gets a large
// answer, one that stopped reading is cut after the write timeout.
const largeBody = 1 << 20

// Every response is written under a deadline (server.write_timeout_ms,
// Fiber's WriteTimeout, set by fasthttp before it writes): a client that
// stops reading is cut off after it, and the handler's buffers are freed
// (issue 19: one that stopped reading pinned a 60 MB answer for
// minutes). A body written in one go (up to largeBody) must be taken
// within it; a stream and a large body renew it at every write, so only
// a write that makes no progress for that long is cut.

// sendBody answers with a whole body: small ones in one write under the
// response's deadline, large ones in chunks that each renew it.
func (s *Server) sendBody(ctx *fasthttp.RequestCtx, b []byte) {
	if len(b) < largeBody {
		ctx.Response.SetBodyRaw(b)
		return
	}
	ctx.SetBodyStream(&progressReader{b: b, conn: ctx.Conn(), timeout: s.writeTimeout}, len(b))
}

// progressReader hands a body to fasthttp's writer chunk by chunk and
// renews the connection's write deadline before each one.
type progressReader struct {
	b       []byte
	conn    net.Conn
	timeout time.Duration
}

// Read implements io.Reader.
func (r *progressReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	_ = r.conn.SetWriteDeadline(time.Now().Add(r.timeout))
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// streamBody is a committed stream as the response body: fasthttp's
// connection goroutine reads it (writing each read as a chunk and
// flushing it), and each Read relays the stream up to its next bytes
// (proxy.Stream.Next), so a stream costs no goroutine and no pipe of its
// own. Each Read renews the connection's write deadline before its bytes
// go out: a client that stops reading is cut after the write timeout, and
// the write's failure ends the stream (Close before the end). Close, which
// fasthttp calls once the body is written or abandoned, finalises the
// stream and then runs done.
type streamBody struct {
	st      *proxy.Stream
	conn    net.Conn
	timeout time.Duration
	done    func()

	rest []byte // bytes of the last Next not yet read
	end  bool   // Next reported the end
}

// Read implements io.Reader.
func (b *streamBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		if b.end {
			return 0, io.EOF
		}
		var more bool
		b.rest, more = b.st.Next()
		b.end = !more
	}
	if b.conn != nil {
		_ = b.conn.SetWriteDeadline(time.Now().Add(b.timeout))
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// Close finalises the stream: complete when every byte was read (handed
// to the connection), the client gone otherwise. It is idempotent.
func (b *streamBody) Close() error {
	if b.st == nil {
		return nil
	}
	b.st.End(!b.end || len(b.rest) > 0)
	b.st = nil
	b.done()
	return nil
}

// streamWriters pools the writers of streamTo.
var streamWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}

// streamTo runs fn with a writer whose every flush renews the
// connection's write deadline before the bytes go out. fasthttp writes
// a streamed body from another goroutine, through a pipe of a few
// buffers: once a client stops reading, the pipe fills, flushes block,
// nothing renews the deadline, and the connection's write fails when it
// passes — which fails fn's next write (the client is gone).
func (s *Server) streamTo(w *bufio.Writer, conn net.Conn, fn func(w *bufio.Writer)) {
	if conn == nil {
		fn(w)
		return
	}
	bw := streamWriters.Get().(*bufio.Writer)
	bw.Reset(deadlineWriter{w: w, conn: conn, timeout: s.writeTimeout})
	fn(bw)
	_ = bw.Flush()
	bw.Reset(nil)
	streamWriters.Put(bw)
}

// deadlineWriter renews conn's write deadline, then writes through w and
// flushes it.
type deadlineWriter struct {
	w       *bufio.Writer
	conn    net.Conn
	timeout time.Duration
}

// Write implements io.Writer.
func (d deadlineWriter) Write(p []byte) (int, error) {
	_ = d.conn.SetWriteDeadline(time.Now().Add(d.timeout))
	n, err := d.w.Write(p)
	if err == nil {
		err = d.w.Flush()
	}
	return n, err
}
