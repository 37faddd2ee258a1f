package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/watchdog"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/relay"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// exchangeOf is how the request's format reaches a candidate's provider
// kind; the candidates were filtered to those with one.
func exchangeOf(x *exchange, cd topology.Candidate) *provider.Exchange {
	return cd.Provider.Adapter.Exchange(x.format)
}

// attempt makes one upstream call. It reports done when the client has
// been answered (success, a committed stream, or a local error that ends
// the request); otherwise x.last holds the failure (or the candidate was
// refused by local admission) and the caller may fail over.
func (s *Server) attempt(c *fiber.Ctx, x *exchange, req wire.Request, body []byte, cd topology.Candidate) (bool, error) {
	if err := s.adm.Precheck(cd.Provider.ID, cd.Connection.ID); err != nil {
		s.admissionRefused(x, cd, err)
		return false, nil
	}
	out, err := exchangeOf(x, cd).Request(body, req, cd.Model)
	if err != nil {
		var fe *wire.FieldError
		if errors.As(err, &fe) {
			return true, s.answerError(c, x, wire.InvalidRequest(fe.Field, fe.Message))
		}
		return true, s.answerError(c, x, wire.InvalidRequest("body", err.Error()))
	}
	ticket, err := s.adm.Acquire(s.baseCtx, cd.Provider.ID, cd.Connection.ID, cd.Model)
	if err != nil {
		s.admissionRefused(x, cd, err)
		return false, nil
	}
	x.attempts++
	if s.metrics != nil && ticket.QueueWait() > 0 {
		s.metrics.AdmissionWait(ticket.QueueWait())
	}
	budget := ticket.ExecutionBudget(s.pool.Timeouts().FirstByte)
	route := upstream.Route{LocalAddress: cd.Connection.LocalAddress, ProxyURL: cd.Connection.ProxyURL}
	wcfg, walled := wallConfig(cd)
	if !x.stream && !walled && !cd.Provider.EgressBucketed && upstream.Buffers(route) {
		defer ticket.Release()
		return s.bufferedAttempt(c, x, cd, out, route, budget)
	}
	ctx, cancelCtx := context.WithTimeout(context.Background(), budget)
	cancel := func() { cancelCtx(); ticket.Release() }
	t0 := time.Now()
	var resp *http.Response
	for try := 0; ; try++ {
		hreq, err := s.buildRequest(ctx, c, x, cd, out)
		if err != nil {
			cancel()
			return true, s.answerError(c, x, &wire.APIError{Status: 500, Type: "server_error", Code: "local_error", Message: err.Error()})
		}
		var egress *string
		if cd.Provider.EgressBucketed {
			hreq, egress = traceEgress(hreq, route)
		}
		slow := false
		if walled {
			for k, v := range s.wall.RequestHeaders(cd.Connection.Ref, wcfg) {
				hreq.Header.Set(k, v)
				slow = true
			}
		}
		resp, err = s.pool.Do(hreq, route, cancel)
		if egress != nil && *egress != "" {
			s.eng.RecordEgress(cd.Provider.ID, cd.Connection.ID, *egress)
		}
		if err != nil {
			x.upstreamTime += time.Since(t0)
			cancel()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return true, s.answerError(c, x, executionTimeout(cd, budget))
			}
			s.recordFailure(x, cd, 0, nil, nil, err)
			return false, nil
		}
		if cd.Combo != nil {
			s.observeQuota(x, cd, lowerHeaders(resp.Header))
		}
		if walled && try < maxWallRetries && s.wallRetry(ctx, cd, wcfg, resp.StatusCode, resp.Header, slow, t0) {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
			resp.Body.Close()
			continue
		}
		break
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		eb, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		cancel()
		x.upstreamTime += time.Since(t0)
		s.recordFailure(x, cd, resp.StatusCode, resp.Header, eb, nil)
		s.pace(x, cd, eb)
		return false, nil
	}
	if x.stream {
		return s.streamAttempt(c, x, cd, resp, cancel, t0, budget)
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	x.upstreamTime += time.Since(t0)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return true, s.answerError(c, x, executionTimeout(cd, budget))
		}
		s.recordFailure(x, cd, 0, nil, nil, fmt.Errorf("reading upstream body: %w", err))
		return false, nil
	}
	return s.finishBuffered(c, x, cd, resp.StatusCode, resp.Header, rb)
}

// bufferedAttempt makes a non-streaming call on the synchronous client
// (see upstream.DoBuffered): the whole answer within the first-byte
// timeout, and within the execution budget.
func (s *Server) bufferedAttempt(c *fiber.Ctx, x *exchange, cd topology.Candidate, out []byte, route upstream.Route, budget time.Duration) (bool, error) {
	h := s.upstreamHeaders(c, x, cd)
	t0 := time.Now()
	limit := min(budget, s.pool.Timeouts().FirstByte)
	b, err := s.pool.DoBuffered(http.MethodPost, exchangeOf(x, cd).URL(cd.Provider.BaseURL), h, out, route, t0.Add(limit))
	x.upstreamTime += time.Since(t0)
	if err != nil {
		if errors.Is(err, upstream.ErrDeadline) && budget <= s.pool.Timeouts().FirstByte {
			return true, s.answerError(c, x, executionTimeout(cd, budget))
		}
		s.recordFailure(x, cd, 0, nil, nil, err)
		return false, nil
	}
	if cd.Combo != nil {
		s.observeQuota(x, cd, lowerHeaders(b.Header))
	}
	if b.Status < 200 || b.Status > 299 {
		eb := b.Body
		if len(eb) > maxErrorBody {
			eb = eb[:maxErrorBody]
		}
		s.recordFailure(x, cd, b.Status, b.Header, eb, nil)
		s.pace(x, cd, eb)
		return false, nil
	}
	return s.finishBuffered(c, x, cd, b.Status, b.Header, b.Body)
}

// finishBuffered answers the client with a whole 2xx upstream answer,
// translated when the provider speaks the other format.
func (s *Server) finishBuffered(c *fiber.Ctx, x *exchange, cd topology.Candidate, status int, h http.Header, rb []byte) (bool, error) {
	if ex := exchangeOf(x, cd); ex.Translated() {
		var err error
		if rb, err = ex.Response(rb, cd.Model); err != nil {
			// The upstream answered 2xx with a body we cannot read: a
			// broken answer from this target, not the client's fault.
			s.recordFailure(x, cd, 502, nil, nil, fmt.Errorf("translating the upstream answer: %w", err))
			return false, nil
		}
		h.Set("Content-Type", "application/json")
	}
	x.final = cd
	s.recordSuccess(x, cd)
	s.setRouteHeaders(c, x, cd)
	copyResponseHeaders(c, h)
	c.Status(status)
	err := c.Send(rb)
	s.logAccess(x, status, "")
	return true, err
}

// traceEgress records the egress address of an upstream call (§12): the
// proxy's host when the connection goes through a proxy, else the local
// address of the outgoing socket.
func traceEgress(req *http.Request, route upstream.Route) (*http.Request, *string) {
	addr := new(string)
	if route.ProxyURL != "" {
		if u, err := url.Parse(route.ProxyURL); err == nil {
			*addr = u.Hostname()
		}
		return req, addr
	}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if host, _, err := net.SplitHostPort(info.Conn.LocalAddr().String()); err == nil {
			*addr = host
		}
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace)), addr
}

// relayConfig is the stream relay configuration of one attempt.
func (s *Server) relayConfig(x *exchange, cd topology.Candidate) relay.Config {
	st := s.eng.CurrentSettings().StreamRecovery
	tw := st.ThroughputWatchdog
	return relay.Config{
		ClientFormat: x.format,
		Events:       exchangeOf(x, cd).Events(),
		CommitPoint:  st.CommitPoint,
		Stall:        watchdog.StallFromEnv(osLookupEnv, watchdog.StallFromSetting(st.ContentStallTimeoutMS)),
		Throughput: watchdog.ThroughputFromEnv(osLookupEnv, watchdog.ThroughputConfig{
			Enabled:           tw.Enabled,
			Warmup:            time.Duration(tw.WarmupMS) * time.Millisecond,
			Window:            time.Duration(tw.WindowMS) * time.Millisecond,
			MinBytesPerSecond: tw.MinUsefulBytesPerSecond,
			MinBytes:          tw.MinUsefulBytes,
		}),
		Idle: s.pool.Timeouts().Idle,
	}
}

// streamAttempt primes a 2xx streamed answer up to the commit point. A
// failure before commit is recorded and the caller fails over; otherwise
// the response is committed and relayed, and finalised exactly once when
// the stream ends.
func (s *Server) streamAttempt(c *fiber.Ctx, x *exchange, cd topology.Candidate, resp *http.Response, cancel context.CancelFunc, t0 time.Time, budget time.Duration) (bool, error) {
	a := relay.Attempt{Body: resp.Body, Cancel: cancel, Start: t0}
	if tr := exchangeOf(x, cd).Stream(cd.Model); tr != nil {
		a.Translator = tr
	}
	stream, fail := relay.Prime(context.Background(), s.relayConfig(x, cd), a)
	if fail != nil {
		cancel()
		x.upstreamTime += time.Since(t0)
		s.recordStreamFailure(x, cd, fail)
		if s.metrics != nil {
			s.metrics.Stream("failover", fail.Reason)
		}
		return false, nil
	}
	x.final = cd
	if s.metrics != nil {
		s.metrics.Stream("commit", "")
	}
	s.setRouteHeaders(c, x, cd)
	copyResponseHeaders(c, resp.Header)
	if exchangeOf(x, cd).Translated() || resp.Header.Get("Content-Type") == "" {
		c.Set(fiber.HeaderContentType, "text/event-stream")
	}
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	status := resp.StatusCode
	c.Status(status)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		res := stream.Run(w)
		cancel()
		x.upstreamTime += time.Since(t0)
		code := ""
		switch res.End {
		case relay.EndComplete:
			s.recordSuccess(x, cd)
		case relay.EndClientGone:
			// A client that went away says nothing about upstream health.
			code = string(engine.ReasonClientAbort)
			if s.metrics != nil {
				s.metrics.Stream("client_gone", "")
			}
		default:
			code = res.Failure.Reason
			s.recordStreamFailure(x, cd, res.Failure)
			s.comboOutcome(x, cd, false)
			if s.metrics != nil {
				s.metrics.Stream("abort", res.Failure.Reason)
			}
		}
		s.logAccess(x, status, code)
	})
	return true, nil
}

// recordStreamFailure records how a stream attempt failed: a content stall
// or too-slow throughput is a stream stall (no connection cooldown unless
// stream_stall_cooldown is on); an upstream error event is classified
// like an error answer; a broken body is a transport failure; a local
// cancellation touches nothing.
func (s *Server) recordStreamFailure(x *exchange, cd topology.Candidate, f *relay.Failure) {
	switch f.Reason {
	case relay.ReasonCancelled:
		return
	case relay.ReasonContentStall, relay.ReasonThroughputTooLow:
		o := engine.Outcome{
			Provider: cd.Provider.ID, Connection: cd.Connection.ID, Model: cd.Model, Profile: cd.Provider.Profile,
			Status: 502, Reason: engine.ReasonStreamStall, Retryable: true,
			RuleSource: "default", RuleID: "stream." + f.Reason, Message: f.Reason,
		}
		if err := s.eng.RecordFailure(context.Background(), o); err != nil {
			s.log.Error("recording a stream stall", "error", err)
		}
		x.last = &failure{cand: cd, outcome: o, status: 502, body: streamFailureBody(x, f)}
		if s.metrics != nil {
			s.metrics.Attempt(cd.Provider.ID, cd.Connection.ID, cd.Model, string(o.Reason))
		}
	case relay.ReasonUpstreamErrorEvent:
		s.recordFailure(x, cd, 502, nil, f.Data, nil)
	default:
		s.recordFailure(x, cd, 0, nil, nil, f)
	}
}

// streamFailureBody is the error answer of a stream that failed before
// commit, in the client's format.
func streamFailureBody(x *exchange, f *relay.Failure) []byte {
	e := &wire.APIError{Status: f.Status, Type: "stream_error", Code: f.Reason, Message: "the upstream stream failed before any output: " + f.Reason}
	return e.Body(x.format)
}
