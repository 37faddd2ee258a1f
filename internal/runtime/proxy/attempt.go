package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/runtime/provider"
	"github.com/breakwater-dev/breakwater/internal/runtime/relay"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/upstream"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// maxErrorBody bounds how much of an upstream error body is read and
// handed to classification.
const maxErrorBody = 64 << 10

// attempt makes one upstream call to cd. It returns the answer when the
// attempt ended the request: a success, a committed stream, or a local
// error (an untranslatable body). It returns nil when the caller may fail
// over: then x.last holds the recorded failure (a cut by one of the
// gateway's timers included: a local_timeout), or x.admissionErr the local
// admission refusal (x.last unchanged).
//
// The attempt's timers (docs/timeouts.md, timers.go): the execution
// budget from the request for admission to the first byte, the first-byte
// timeout from each upstream call, then only the idle timeout between two
// reads (a non-streaming body) or the stream watchdogs; the hard
// deadline, when set, over the whole attempt.
func (p *Proxy) attempt(ctx context.Context, x *state, parsed wire.Request, body []byte, cd topology.Candidate) *Result {
	ex := cd.Provider.Adapter.Exchange(x.format)
	if ex.Local() {
		return p.answerLocal(x, cd, ex, x.clientBody(body, parsed))
	}
	if err := p.adm.Precheck(cd.Provider.ID, cd.Connection.ID); err != nil {
		p.admissionRefused(x, cd, err)
		return nil
	}
	out, err := ex.Splice(x.clientBody(body, parsed), cd.Model)
	if err != nil {
		x.bodyErr = wire.InvalidRequestFor(err, "body")
		return nil
	}
	ticket, err := p.admit(ctx, x, cd)
	if err != nil {
		p.admissionRefused(x, cd, err)
		return nil
	}
	p.attemptStarted(x)
	if p.metrics != nil && ticket.QueueWait() > 0 {
		p.metrics.AdmissionWait(ticket.QueueWait())
	}
	// The attempt is admitted and sent at x.tryAt: its timers are planned
	// from that one reading of the clock.
	timers := p.newAttemptTimers(x.tryAt, ticket.QueueWait(), ticket.ExecutionBudget(p.up.Timeouts().FirstByte))
	route := upstream.Route{LocalAddress: cd.Connection.LocalAddress, ProxyURL: cd.Connection.ProxyURL}
	wcfg, walled := wallConfig(cd)
	if !x.stream && !walled && !cd.Provider.EgressBucketed && timers.hard == 0 && p.up.Buffers(route) {
		defer ticket.Release()
		return p.bufferedAttempt(ctx, x, cd, ex, out, route, &timers)
	}
	tm := new(attemptTimers) // a stream keeps it: on the heap only here
	*tm = timers
	detached := out.Detached() // the transport may read it after the handler returned
	// The call runs under the request's own context: closing the answer's
	// body ends it (upstream.Pool.Do), so the attempt needs no context of
	// its own; ending the attempt releases its admission ticket.
	cancel := context.CancelFunc(ticket.Release)
	t0 := time.Now()
	var sent time.Time
	var resp *http.Response
	// A stream's relay is made ready while the upstream answers
	// (upstream.Pool.DoWhile), not after its first byte.
	var pre *preparedStream
	var meanwhile func()
	if x.stream {
		meanwhile = func() {
			if pre == nil {
				pre = p.prepareStream(ctx, x, cd, ex, tm, cancel, t0)
			}
		}
	}
	for try := 0; ; try++ {
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.upstreamURL(x, cd, ex), bytes.NewReader(detached))
		if err != nil {
			cancel()
			return p.fail(x, &wire.APIError{Status: 500, Type: "server_error", Code: "local_error",
				Message: fmt.Sprintf("building the upstream request for %s: %v", cd.Provider.ID, err)})
		}
		h, shared := p.plainHeadersOf(x, cd)
		if !shared {
			h = p.upstreamHeaders(x, cd)
		} else if walled {
			h = h.Clone() // the wall adds its headers to the request's own
		}
		hreq.Header = h
		var egress *string
		if cd.Provider.EgressBucketed {
			hreq, egress = traceEgress(hreq, route)
		}
		slow := false
		if walled {
			for k, v := range p.wall.RequestHeaders(cd.Connection.Ref, wcfg) {
				hreq.Header.Set(k, v)
				slow = true
			}
		}
		now := p.clock.Now()
		if sent.IsZero() {
			sent = now
		}
		lim, firstBy := tm.call(now, x.stream)
		resp, err = p.up.DoWhile(hreq, route, lim, meanwhile)
		if egress != nil && *egress != "" {
			p.eng.RecordEgress(cd.Provider.ID, cd.Connection.ID, *egress)
		}
		if err != nil {
			x.upstreamTime += time.Since(t0)
			cancel()
			if timer, limit, cut := tm.cut(err, firstBy); cut {
				p.recordLocalTimeout(ctx, x, cd, timer, limit)
				return nil
			}
			p.recordFailure(ctx, x, cd, 0, nil, nil, err)
			return nil
		}
		p.observeRateLimit(x, cd, resp.Header)
		if walled && try < maxWallRetries && p.wallRetry(ctx, cd, wcfg, resp.StatusCode, resp.Header, slow, t0) {
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
		p.recordFailure(ctx, x, cd, resp.StatusCode, resp.Header, eb, nil)
		return nil
	}
	if x.stream {
		if pre == nil {
			pre = p.prepareStream(ctx, x, cd, ex, tm, cancel, t0)
		}
		return p.streamAttempt(ctx, x, cd, pre, resp, cancel, t0, sent)
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	x.upstreamTime += time.Since(t0)
	if err != nil {
		if timer, limit, cut := tm.cut(err, timerFirstByte); cut {
			p.recordLocalTimeout(ctx, x, cd, timer, limit)
			return nil
		}
		p.recordFailure(ctx, x, cd, 0, nil, nil, fmt.Errorf("reading upstream body: %w", err))
		return nil
	}
	return p.answerBuffered(ctx, x, cd, ex, resp.StatusCode, answerHeader{h: resp.Header}, rb)
}

// admit admits an attempt to cd. A non-streaming attempt is admitted into
// the request's own ticket (x.ticket), which it releases before it ends
// whatever its path; a stream's ticket outlives its attempt (the relay
// releases it), so it gets one of its own.
func (p *Proxy) admit(ctx context.Context, x *state, cd topology.Candidate) (*admission.Ticket, error) {
	if x.stream {
		return p.adm.AcquireFor(ctx, cd.Provider.ID, cd.Connection.ID, cd.Model, x.req.Key.ID)
	}
	if err := p.adm.AcquireInto(ctx, &x.ticket, cd.Provider.ID, cd.Connection.ID, cd.Model, x.req.Key.ID); err != nil {
		return nil, err
	}
	return &x.ticket, nil
}

// bufferedAttempt makes a non-streaming call on the synchronous client
// (see upstream.Pool.DoBuffered): the first byte within the first-byte
// timeout and what is left of the execution budget and of the request
// deadline, then as long as the answer keeps arriving (never silent longer
// than the idle timeout). The call cannot be cancelled once sent; its
// timers bound it.
func (p *Proxy) bufferedAttempt(ctx context.Context, x *state, cd topology.Candidate, ex *provider.Exchange, out wire.Splice, route upstream.Route, tm *attemptTimers) *Result {
	if err := ctx.Err(); err != nil {
		return p.fail(x, cancelled(ctx))
	}
	target := p.bufferedTarget(x, cd, ex)
	// The call is sent when the attempt started (attemptStarted): nothing
	// but building its headers lies between.
	t0 := x.tryStart
	lim, firstBy := tm.call(x.tryAt, false)
	fb, byDeadline := x.firstByteBefore(lim.FirstByte, t0)
	b, err := p.up.DoBuffered(target, out, route, fb)
	end := time.Now()
	x.upstreamTime += end.Sub(t0)
	if err != nil {
		if te, ok := upstream.AsTimeout(err); ok && te.Timer == upstream.TimerFirstByte && byDeadline {
			return p.fail(x, endedBy(ErrRequestDeadline)) // our own deadline: not upstream health
		}
		if timer, limit, cut := tm.cut(err, firstBy); cut {
			p.recordLocalTimeout(ctx, x, cd, timer, limit)
			return nil
		}
		p.recordFailure(ctx, x, cd, 0, nil, nil, err)
		return nil
	}
	ah := answerHeader{b: &b}
	p.observeAnswerRateLimit(x, cd, ah)
	if b.Status < 200 || b.Status > 299 {
		eb := b.Body
		if len(eb) > maxErrorBody {
			eb = eb[:maxErrorBody]
		}
		p.recordFailure(ctx, x, cd, b.Status, b.Header(), eb, nil)
		return nil
	}
	x.tryEnd = end // a success's trail entry ends when its answer was read
	return p.answerBuffered(ctx, x, cd, ex, b.Status, ah, b.Body)
}

// upstreamHeaders are the headers of an upstream request: the
// connection's credential, and only the client headers the provider kind
// forwards (never client keys, session or lease headers); an on_request
// plugin may add or remove headers, never the credential.
func (p *Proxy) upstreamHeaders(x *state, cd topology.Candidate) http.Header {
	return p.buildUpstreamHeaders(cd.Provider, cd.Connection, x.stream, x.req.Extra, x.req.Forward)
}

// bufferedTarget is the upstream call of a buffered attempt to cd through
// ex: the connection's endpoint kept with the routing view (laid out once)
// when the request forwards no client header or query parameter and has
// no plugin header, else one made of bufferedHeaders and upstreamURL.
func (p *Proxy) bufferedTarget(x *state, cd topology.Candidate, ex *provider.Exchange) upstream.Target {
	if !x.stream && len(x.req.Extra) == 0 && len(x.req.Forward) == 0 && len(x.req.Query) == 0 && cd.Provider.Adapter.Exchange(x.format) == ex {
		if t, ok := x.rt.plainTargets[plainTarget{cd.Connection, x.format}]; ok {
			return t
		}
	}
	return upstream.Target{Method: http.MethodPost, URL: p.upstreamURL(x, cd, ex), Header: p.bufferedHeaders(x, cd)}
}

// bufferedHeaders are upstreamHeaders for a buffered call, which only
// reads them: shared ones when plainHeadersOf has them (the caller must
// not modify them).
func (p *Proxy) bufferedHeaders(x *state, cd topology.Candidate) http.Header {
	if h, ok := p.plainHeadersOf(x, cd); ok {
		return h
	}
	return p.upstreamHeaders(x, cd)
}

// plainHeadersOf returns the upstreamHeaders of a request that forwards
// no client header and has no plugin header: its connection's own for a
// streaming or a non-streaming request, built once with the routing view
// and shared (the caller must not modify them). ok is false for any other
// request.
func (p *Proxy) plainHeadersOf(x *state, cd topology.Candidate) (http.Header, bool) {
	if len(x.req.Extra) != 0 || len(x.req.Forward) != 0 {
		return nil, false
	}
	hs, ok := x.rt.plainHeaders[cd.Connection]
	if !ok {
		return nil, false
	}
	if x.stream {
		return hs[1], true
	}
	return hs[0], true
}

// buildUpstreamHeaders builds the headers of an upstream request to cn
// (upstreamHeaders).
func (p *Proxy) buildUpstreamHeaders(pv *topology.Provider, cn *topology.Connection, stream bool, extra map[string]string, forward []wire.Header) http.Header {
	// The three fixed headers share one backing array (names already
	// canonical): one allocation instead of three.
	fixed := make([]string, 3)
	fixed[0], fixed[1], fixed[2] = "application/json", p.ua, "application/json"
	if stream {
		fixed[2] = "text/event-stream"
	}
	h := make(http.Header, 6)
	h["Content-Type"], h["User-Agent"], h["Accept"] = fixed[0:1:1], fixed[1:2:2], fixed[2:3:3]
	for k, v := range extra {
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
	}
	pv.Adapter.SetHeaders(h, cn.APIKey, forward)
	return h
}

// upstreamURL is the upstream URL of the request to cd through ex: with no
// client query parameter to pass on, the one built with the routing view.
func (p *Proxy) upstreamURL(x *state, cd topology.Candidate, ex *provider.Exchange) string {
	if len(x.req.Query) == 0 && cd.Provider.Adapter.Exchange(x.format) == ex {
		if u, ok := x.rt.plainURLs[plainURL{cd.Provider, x.format}]; ok {
			return u
		}
	}
	return ex.URL(cd.Provider.BaseURL, x.req.Query)
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

// preparedStream is the part of a stream attempt's answer that needs no
// byte of it: made while the upstream answers (prepareStream).
type preparedStream struct {
	ex *provider.Exchange
	s  *relay.Stream
	tr relay.Translator // nil: the identity
	// res and st are the answer and its Stream, but for what the
	// upstream's answer decides (status, its headers, the primed relay).
	res *Result
	st  *Stream
}

// prepareStream makes ready the answer of a stream attempt to cd through
// ex: its relay's configuration (the stream_recovery settings as they
// stand when the call is made), state and timer (relay.Prepare), the
// translator of a provider that speaks another format than the client,
// and the Result with its route headers and the Stream that will finalise
// the request. Nothing of it holds a resource: an attempt that fails
// before its commit point drops it (and a later answer of the request
// remakes the state's Result).
func (p *Proxy) prepareStream(ctx context.Context, x *state, cd topology.Candidate, ex *provider.Exchange, tm *attemptTimers, cancel context.CancelFunc, t0 time.Time) *preparedStream {
	pre := &preparedStream{ex: ex, s: relay.Prepare(p.relayConfig(x, ex, tm))}
	if tr := ex.Stream(&x.body, cd.Model); tr != nil {
		pre.tr = tr
	}
	pre.res = p.answer(x, http.StatusOK)
	pre.res.Header = routeHeaders(pre.res.Header, x, cd)
	pre.st = &Stream{p: p, x: x, cd: cd, tm: tm, ctx: ctx, cancel: cancel, t0: t0}
	return pre
}

// streamAttempt primes a 2xx streamed answer up to the commit point. A
// failure before commit is recorded and the caller fails over; otherwise
// the answer is a committed Stream that finalises the request once. The
// relay runs on the proxy's clock from sent, when the upstream call was
// made (the first stall budget and the hard deadline count from it).
func (p *Proxy) streamAttempt(ctx context.Context, x *state, cd topology.Candidate, pre *preparedStream, resp *http.Response, cancel context.CancelFunc, t0, sent time.Time) *Result {
	ex, tm := pre.ex, pre.st.tm
	if err := upstream.CheckEventStream(resp.Header); err != nil {
		// A JSON or HTML body where an event stream was asked for: the
		// upstream's protocol error, not a transport failure.
		resp.Body.Close()
		cancel()
		x.upstreamTime += time.Since(t0)
		p.recordFailure(ctx, x, cd, 0, nil, nil, err)
		return nil
	}
	s, fail := pre.s.Prime(ctx, relay.Attempt{Body: resp.Body, Cancel: cancel, Translator: pre.tr, Start: sent})
	if fail != nil {
		cancel()
		x.upstreamTime += time.Since(t0)
		p.recordStreamEnd(ctx, x, cd, tm, fail)
		if p.metrics != nil {
			p.metrics.Stream("failover", fail.Reason)
		}
		return nil
	}
	if !p.committed(ctx, x, cd, s, resp.StatusCode, t0) {
		cancel()
		return nil
	}
	x.final = cd
	if p.metrics != nil {
		p.metrics.Stream("commit", "")
	}
	res := pre.res
	res.Status = resp.StatusCode
	res.Route = x.route()
	p.copyResponseHeaders(res, resp.Header)
	if ex.Translated() || resp.Header.Get("Content-Type") == "" {
		res.set("Content-Type", "text/event-stream")
	}
	res.set("Cache-Control", "no-cache")
	res.set("X-Accel-Buffering", "no")
	res.Stream = pre.st
	res.Stream.s, res.Stream.status = s, resp.StatusCode
	return res
}

// recordStreamEnd records how a stream attempt failed: a cut by one of
// the gateway's timers (the idle timeout, the hard deadline) is a local
// timeout; anything else is recordStreamFailure's.
func (p *Proxy) recordStreamEnd(ctx context.Context, x *state, cd topology.Candidate, tm *attemptTimers, f *relay.Failure) {
	if timer, limit, cut := tm.streamCut(f); cut {
		p.recordLocalTimeout(ctx, x, cd, timer, limit)
		return
	}
	p.recordStreamFailure(ctx, x, cd, f)
}

// relayConfig is the stream relay configuration of one attempt: the
// watchdogs read the upstream format's events through the exchange and
// run on the proxy's clock; the idle timeout and the hard deadline are
// the attempt's.
func (p *Proxy) relayConfig(x *state, ex *provider.Exchange, tm *attemptTimers) relay.Config {
	st := p.eng.CurrentSettings().StreamRecovery
	return relay.Config{
		ClientFormat: x.format,
		Events:       ex.Events(),
		CommitPoint:  st.CommitPoint,
		Stall:        p.stallConfig(st),
		Throughput:   p.throughputConfig(st),
		Idle:         tm.idle,
		HardDeadline: tm.hard,
		Clock:        p.clock,
		Redact:       p.red.Bytes,
	}
}

// executionTimeout is the 504 of an attempt that outran its execution
// budget (docs/resilience.md §7); it is a local error.
func executionTimeout(cd topology.Candidate, budget time.Duration) *wire.APIError {
	e := admission.ExecutionTimeoutError(cd.Provider.ID, cd.Connection.ID, budget)
	return &wire.APIError{Status: e.Status, Type: "timeout_error", Code: e.Code, Message: e.Message}
}

// lowerHeaders maps header names to lower case, first values only, for
// the classifier and the quota strategies.
func lowerHeaders(h http.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	m := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			m[strings.ToLower(k)] = v[0]
		}
	}
	return m
}
