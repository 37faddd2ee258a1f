package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/engine"
	"github.com/breakwater-dev/breakwater/runtime/topology"
	"github.com/breakwater-dev/breakwater/runtime/wire"
)

var relayBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// streamEnd is how a relayed stream ended.
type streamEnd int

const (
	endComplete   streamEnd = iota // upstream finished the body
	endClientGone                  // a write or flush to the client failed
	endUpstream                    // the upstream body broke mid-stream
)

// relayStream commits the response and relays the upstream SSE body to the
// client, flushing each read as it arrives. A failed write or flush means
// the client went away: the upstream call is cancelled at once. The
// request is finalised exactly once, whichever way the stream ends.
func (s *Server) relayStream(c *fiber.Ctx, x *exchange, cd topology.Candidate, resp *http.Response, cancel context.CancelFunc, t0 time.Time) {
	s.setRouteHeaders(c, x, cd)
	copyResponseHeaders(c, resp.Header)
	if resp.Header.Get("Content-Type") == "" {
		c.Set(fiber.HeaderContentType, "text/event-stream")
	}
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	c.Status(resp.StatusCode)
	status := resp.StatusCode
	body := resp.Body
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		bp := relayBufPool.Get().(*[]byte)
		buf := *bp
		end := endComplete
		var rerr error
		for {
			n, err := body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					end = endClientGone
					break
				}
				if ferr := w.Flush(); ferr != nil {
					end = endClientGone
					break
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				end, rerr = endUpstream, err
				break
			}
		}
		relayBufPool.Put(bp)
		cancel()
		body.Close()
		s.finishStream(w, x, cd, status, end, rerr, t0)
	})
}

// finishStream records the stream's outcome and writes the access line.
func (s *Server) finishStream(w *bufio.Writer, x *exchange, cd topology.Candidate, status int, end streamEnd, rerr error, t0 time.Time) {
	x.upstreamTime += time.Since(t0)
	code := ""
	switch end {
	case endComplete:
		s.recordSuccess(x, cd)
	case endClientGone:
		// A client that went away says nothing about upstream health.
		code = string(engine.ReasonClientAbort)
	case endUpstream:
		code = "stream_early_eof"
		s.recordFailure(x, cd, 0, nil, nil, rerr)
		writeStreamError(w, x.format, &wire.APIError{Status: 502, Type: "stream_error", Code: code,
			Message: "the upstream stream ended before completion"})
		if errors.Is(rerr, context.Canceled) {
			code = "stream_cancelled"
		}
	}
	s.logAccess(x, status, code)
}

// writeStreamError ends a committed stream with a well-formed terminal
// error event in the client's wire format.
func writeStreamError(w *bufio.Writer, f wire.Format, e *wire.APIError) {
	if f == wire.FormatAnthropic {
		_, _ = w.WriteString("event: error\ndata: ")
		_, _ = w.Write(e.Body(f))
		_, _ = w.WriteString("\n\n")
	} else {
		_, _ = w.WriteString("data: ")
		_, _ = w.Write(e.Body(f))
		_, _ = w.WriteString("\n\n")
	}
	_ = w.Flush()
}
