// Package load is the load generator of the benchmark: an open-loop runner
// that sends requests on a constant-rate Schedule whatever the responses do,
// a closed-loop runner that keeps a fixed number of requests in flight, and
// a streaming runner that times the first SSE "data:" line. The same Client
// and Request are meant to be used against every target so that the
// figures are comparable. Runners are safe to call from one goroutine at a
// time per Client; they start their own goroutines and wait for them.
package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxErrorKinds bounds the distinct error messages a Result keeps.
const maxErrorKinds = 16

// maxErrorBody bounds how much of an error answer is read to name its
// error code.
const maxErrorBody = 64 << 10

// Request is the HTTP call a run repeats: a POST of Body (JSON) to URL.
// Stream marks an SSE request: it succeeds only when the body carries
// "data: [DONE]". Request is read-only while a run uses it.
type Request struct {
	URL    string
	Body   []byte
	Stream bool
	// Header holds extra request headers (for example Authorization).
	Header map[string]string
	// Tally names response headers whose values the run counts, per
	// outcome, in Result.Tally.
	Tally []string
	// Spread, in a closed loop, starts the workers one after the other,
	// evenly over Spread, instead of all at once (0). Streams of one
	// length that start together stay in step for the whole run: every
	// request then arrives in a burst with all the others.
	Spread time.Duration
}

// TallyKey is one counted response header value: the header as named in
// Request.Tally, its value ("" when absent) and whether the request
// succeeded.
type TallyKey struct {
	Header, Value string
	OK            bool
}

// Result is what one run measured. Latency, FromSchedule and FirstData
// hold one sample per successful request; Lag one per request sent. A
// Result is owned by the caller once a runner returns it.
type Result struct {
	// Scheduled is how many requests the run intended to send (open loop:
	// the schedule's Count, or the arrivals due before it was stopped;
	// closed loop and streams: equal to Sent).
	Scheduled int
	// Sent is how many requests were sent.
	Sent int
	// OK is how many requests succeeded (status 200, body read in full,
	// and for streams a "data: [DONE]" line).
	OK int
	// Dropped counts scheduled requests not sent because MaxInFlight
	// requests were already waiting (open loop only).
	Dropped int
	// Latency is, per success, the time from the send — the moment the
	// request is handed to the client, so a wait for a free connection
	// counts — to the end of the body.
	Latency []time.Duration
	// FromSchedule is, per success in open loop, the time from the
	// scheduled send time to the end of the body: Latency plus the
	// generator's own send lag.
	FromSchedule []time.Duration
	// FirstData is, per successful stream (Request.Stream set), the time
	// from the send to the first line starting with "data:".
	FirstData []time.Duration
	// Lag is, per request sent in open loop, how late the generator sent it
	// compared with its scheduled time.
	Lag []time.Duration
	// Errors counts failures by kind ("HTTP 502", "HTTP 503
	// all_targets_cooling_down", "timeout", ...).
	Errors map[string]int
	// Tally counts the values of the Request.Tally headers over every
	// request that got an HTTP answer; nil when Request.Tally is empty.
	Tally map[TallyKey]int
	// Elapsed is the wall time from the first send to the last response.
	Elapsed time.Duration
}

// NewClient returns an HTTP/1.1 client tuned for load generation: keep-alive
// with at most conns connections per host, all kept idle between requests
// (so a run opens them once), no proxy, no compression, and timeout as the
// whole-request deadline. A request finding all conns connections busy
// waits in the client for one; open-loop latency, measured from the
// scheduled time, includes that wait. Use one client per target and call
// CloseIdleConnections when the run is over.
func NewClient(conns int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// errorBook counts failures by kind; goroutine-safe.
type errorBook struct {
	mu sync.Mutex
	m  map[string]int
}

func (b *errorBook) add(kind string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[string]int)
	}
	if _, ok := b.m[kind]; !ok && len(b.m) >= maxErrorKinds {
		kind = "other"
	}
	b.m[kind]++
}

func (b *errorBook) snapshot() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.m))
	for k, v := range b.m {
		out[k] = v
	}
	return out
}

// tallyBook counts response header values; goroutine-safe.
type tallyBook struct {
	mu sync.Mutex
	m  map[TallyKey]int
}

// add counts o's header values, if it got an HTTP answer.
func (b *tallyBook) add(names []string, o outcome) {
	if len(names) == 0 || o.tally == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[TallyKey]int)
	}
	for i, name := range names {
		b.m[TallyKey{Header: name, Value: o.tally[i], OK: o.errKind == ""}]++
	}
}

func (b *tallyBook) snapshot() map[TallyKey]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		return nil
	}
	out := make(map[TallyKey]int, len(b.m))
	for k, v := range b.m {
		out[k] = v
	}
	return out
}

// outcome is one request's measurement, relative to its send time.
type outcome struct {
	total     time.Duration // send → end of body
	firstData time.Duration // send → first "data:" line (streams)
	errKind   string        // empty on success
	tally     []string      // values of Request.Tally; nil without an HTTP answer
}

// do sends req once and reads the whole answer.
func do(ctx context.Context, c *http.Client, req Request) outcome {
	start := time.Now()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return outcome{errKind: classify(err)}
	}
	hr.Header.Set("Content-Type", "application/json")
	if req.Stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	resp, err := c.Do(hr)
	if err != nil {
		return outcome{errKind: classify(err)}
	}
	defer resp.Body.Close()
	var o outcome
	switch {
	case resp.StatusCode != http.StatusOK:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_, _ = io.Copy(io.Discard, resp.Body)
		o.errKind = httpErrorKind(resp.StatusCode, body)
	case req.Stream:
		o = readStream(resp.Body, start)
	default:
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			o.errKind = classify(err)
		}
	}
	o.total = time.Since(start)
	if len(req.Tally) > 0 {
		o.tally = make([]string, len(req.Tally))
		for i, name := range req.Tally {
			o.tally[i] = resp.Header.Get(name)
		}
	}
	return o
}

// httpErrorKind names a non-200 answer: "HTTP <status>", followed by the
// error code of an OpenAI-shaped body ({"error": {"code": ...}}), else
// its error type (OpenAI or Anthropic shape), when the body has one.
func httpErrorKind(status int, body []byte) string {
	kind := "HTTP " + strconv.Itoa(status)
	var e struct {
		Error struct {
			Code any    `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return kind
	}
	name := e.Error.Type
	if code, ok := e.Error.Code.(string); ok && code != "" {
		name = code
	}
	if len(name) > 60 {
		name = name[:60]
	}
	if name != "" {
		kind += " " + name
	}
	return kind
}

// readStream reads an SSE body to its end, noting when the first "data:"
// line arrived and whether "data: [DONE]" came.
func readStream(body io.Reader, start time.Time) outcome {
	var o outcome
	br := bufio.NewReaderSize(body, 4096)
	sawData, done, lineStart := false, false, true
	for {
		line, err := br.ReadSlice('\n')
		if lineStart && len(line) > 0 {
			if !sawData && bytes.HasPrefix(line, []byte("data:")) {
				sawData = true
				o.firstData = time.Since(start)
			}
			if bytes.Equal(bytes.TrimSpace(line), []byte("data: [DONE]")) {
				done = true
			}
		}
		// A line longer than the buffer arrives in pieces; only the first
		// piece starts a line.
		lineStart = err == nil
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			o.errKind = classify(err)
			return o
		}
	}
	if !done {
		o.errKind = "stream ended without data: [DONE]"
	}
	return o
}

// classify names an error kind without URLs or other request details.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected EOF"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if len(msg) > 100 {
		msg = msg[:100]
	}
	return msg
}

// OpenLoop sends req on sched: arrival i at start+sched.At(i), each in its
// own goroutine, whatever earlier requests are doing, so a slow answer
// never delays later sends (no coordinated omission). Latency runs from
// the send, FromSchedule from the scheduled time, and Lag is the gap; a
// streaming req also gets FirstData.
// When maxInFlight requests are already outstanding an arrival is dropped
// (counted, not sent). OpenLoop waits for every request it sent; it returns
// ctx.Err() if ctx ends first.
func OpenLoop(ctx context.Context, c *http.Client, req Request, sched Schedule, maxInFlight int) (*Result, error) {
	return OpenLoopUntil(ctx, c, req, sched, maxInFlight, nil)
}

// OpenLoopUntil is OpenLoop that also ends the schedule early when stop is
// closed: arrivals not yet due then are neither sent nor counted in
// Scheduled, and the requests already sent are waited for. A nil stop
// never closes.
func OpenLoopUntil(ctx context.Context, c *http.Client, req Request, sched Schedule, maxInFlight int, stop <-chan struct{}) (*Result, error) {
	n := sched.Count()
	const (
		stPending = iota
		stOK
		stFailed
		stDropped
	)
	status := make([]uint8, n)
	fromSchedule := make([]time.Duration, n)
	latency := make([]time.Duration, n)
	firstData := make([]time.Duration, n)
	lag := make([]time.Duration, n)
	var (
		errs     errorBook
		tallies  tallyBook
		wg       sync.WaitGroup
		inFlight atomic.Int64
		lastEnd  atomic.Int64 // offset from start, ns
	)
	start := time.Now()
	fire := func(i int) {
		if inFlight.Load() >= int64(maxInFlight) {
			status[i] = stDropped
			return
		}
		inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			due := sched.At(i)
			lag[i] = time.Since(start) - due
			o := do(ctx, c, req)
			end := time.Since(start)
			tallies.add(req.Tally, o)
			for {
				cur := lastEnd.Load()
				if int64(end) <= cur || lastEnd.CompareAndSwap(cur, int64(end)) {
					break
				}
			}
			if o.errKind != "" {
				status[i] = stFailed
				errs.add(o.errKind)
				return
			}
			status[i] = stOK
			fromSchedule[i] = end - due
			latency[i] = o.total
			firstData[i] = o.firstData
		}()
	}
	dctx := ctx
	if stop != nil {
		var cancel context.CancelFunc
		dctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-dctx.Done():
			}
		}()
	}
	_ = dispatch(dctx, sched, func() time.Duration { return time.Since(start) }, sleepCtx, fire)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open loop at %.0f req/s: %w", sched.Rate, err)
	}
	r := &Result{Errors: errs.snapshot(), Tally: tallies.snapshot(), Elapsed: time.Duration(lastEnd.Load())}
	for i, st := range status {
		if st != stPending {
			r.Scheduled++
		}
		switch st {
		case stPending:
			continue // never due: the run was stopped
		case stDropped:
			r.Dropped++
			continue
		case stOK:
			r.OK++
			r.Latency = append(r.Latency, latency[i])
			r.FromSchedule = append(r.FromSchedule, fromSchedule[i])
			if req.Stream {
				r.FirstData = append(r.FirstData, firstData[i])
			}
		}
		r.Sent++
		r.Lag = append(r.Lag, lag[i])
	}
	return r, nil
}

// ClosedLoop keeps workers requests in flight for d: each worker sends req,
// reads the answer and sends the next. It returns ctx.Err() if ctx ends first.
func ClosedLoop(ctx context.Context, c *http.Client, req Request, workers int, d time.Duration) (*Result, error) {
	return loop(ctx, c, req, workers, d)
}

// Streams keeps workers streaming requests in flight for d, timing each
// one's first "data:" line (FirstData) and its whole body (Latency). req
// should have Stream set. It returns ctx.Err() if ctx ends first.
func Streams(ctx context.Context, c *http.Client, req Request, workers int, d time.Duration) (*Result, error) {
	req.Stream = true
	return loop(ctx, c, req, workers, d)
}

// pause waits d (none when d ≤ 0); false means ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func loop(ctx context.Context, c *http.Client, req Request, workers int, d time.Duration) (*Result, error) {
	type part struct {
		sent, ok  int
		total     []time.Duration
		firstData []time.Duration
	}
	parts := make([]part, workers)
	var (
		errs    errorBook
		tallies tallyBook
		wg      sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range parts {
		wg.Add(1)
		go func(p *part, offset time.Duration) {
			defer wg.Done()
			if !pause(ctx, offset) {
				return
			}
			for ctx.Err() == nil && time.Now().Before(deadline) {
				o := do(ctx, c, req)
				tallies.add(req.Tally, o)
				p.sent++
				if o.errKind != "" {
					errs.add(o.errKind)
					continue
				}
				p.ok++
				p.total = append(p.total, o.total)
				if req.Stream {
					p.firstData = append(p.firstData, o.firstData)
				}
			}
		}(&parts[w], time.Duration(w)*req.Spread/time.Duration(workers))
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("closed loop with %d workers: %w", workers, err)
	}
	r := &Result{Errors: errs.snapshot(), Tally: tallies.snapshot(), Elapsed: elapsed}
	for _, p := range parts {
		r.Sent += p.sent
		r.OK += p.ok
		r.Latency = append(r.Latency, p.total...)
		r.FirstData = append(r.FirstData, p.firstData...)
	}
	r.Scheduled = r.Sent
	return r, nil
}
