package policies

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// sinkDrainTimeout bounds the last flush of the sinks when the pipeline
// stops.
const sinkDrainTimeout = 5 * time.Second

// maxServiceBackoff bounds the wait between two failed uploads.
const maxServiceBackoff = 5 * time.Minute

// fileSink writes decisions to a JSON-lines file, rotating it at maxBytes
// (one previous generation kept, as path+".1"). It is fed through queue and
// writes from its own goroutine (run).
type fileSink struct {
	path      string
	maxBytes  int64
	queue     chan Decision
	rotations atomic.Uint64
	sinkCounters

	// Used by run only.
	f    *os.File
	w    *bufio.Writer
	size int64
}

func newFileSink(path string, maxBytes int64, queue int) *fileSink {
	if maxBytes <= 0 {
		maxBytes = DefaultDecisionFileMaxBytes
	}
	return &fileSink{path: path, maxBytes: maxBytes, queue: make(chan Decision, queue)}
}

func (s *fileSink) offer(rec *Decision) { s.enqueue(s.queue, rec) }

func (s *fileSink) status() *SinkStatus {
	st := s.sinkCounters.status(s.path, len(s.queue))
	st.Rotations = s.rotations.Load()
	return st
}

// run writes queued decisions until ctx is done, then writes what is left
// in the queue and closes the file.
func (s *fileSink) run(ctx context.Context) {
	defer s.close()
	for {
		select {
		case <-ctx.Done():
			s.writeQueued(nil)
			return
		case rec := <-s.queue:
			s.writeQueued(&rec)
		}
	}
}

// writeQueued writes first (when not nil) and every decision queued now,
// then flushes.
func (s *fileSink) writeQueued(first *Decision) {
	n := 0
	if first != nil {
		n += s.write(first)
	}
	for more := true; more; {
		select {
		case rec := <-s.queue:
			n += s.write(&rec)
		default:
			more = false
		}
	}
	if s.w == nil || n == 0 {
		return
	}
	if err := s.w.Flush(); err != nil {
		s.fail(fmt.Errorf("write %s: %w", s.path, err), uint64(n))
		return
	}
	s.wrote(n, time.Now())
}

// write buffers one line, opening or rotating the file as needed; it
// returns 1 when the line was buffered.
func (s *fileSink) write(rec *Decision) int {
	line, err := json.Marshal(rec)
	if err != nil {
		s.fail(fmt.Errorf("encode decision: %w", err), 1)
		return 0
	}
	line = append(line, '\n')
	if s.f != nil && s.size > 0 && s.size+int64(len(line)) > s.maxBytes {
		if err := s.rotate(); err != nil {
			s.fail(err, 1)
			return 0
		}
	}
	if s.f == nil {
		if err := s.open(); err != nil {
			s.fail(err, 1)
			return 0
		}
	}
	_, _ = s.w.Write(line) // the error sticks: Flush reports it
	s.size += int64(len(line))
	return 1
}

func (s *fileSink) open() error {
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open decision log: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("open decision log: %w", err)
	}
	s.f, s.w, s.size = f, bufio.NewWriterSize(f, 64<<10), info.Size()
	return nil
}

// rotate closes the file and renames it to path+".1".
func (s *fileSink) rotate() error {
	err := s.w.Flush()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f, s.w = nil, nil
	if err != nil {
		return fmt.Errorf("rotate decision log: %w", err)
	}
	if err := os.Rename(s.path, s.path+".1"); err != nil {
		return fmt.Errorf("rotate decision log: %w", err)
	}
	s.rotations.Add(1)
	return nil
}

// fail records err, counts n decisions as dropped and closes the file so
// that the next write reopens it.
func (s *fileSink) fail(err error, n uint64) {
	s.failed(err)
	s.dropped.Add(n)
	s.close()
}

func (s *fileSink) close() {
	if s.f == nil {
		return
	}
	_ = s.w.Flush()
	_ = s.f.Close()
	s.f, s.w = nil, nil
}

// serviceSink posts decisions to an OPA decision log service: batches of
// at most batch events, gzip-compressed JSON arrays, at least every
// interval. A failed upload is retried with a growing backoff (up to
// maxServiceBackoff); meanwhile the queue fills and drops.
type serviceSink struct {
	url      string
	target   string // url without its query, for status
	headers  map[string]string
	batch    int
	interval time.Duration
	client   *http.Client
	labels   map[string]string
	queue    chan Decision
	uploads  atomic.Uint64
	pending  atomic.Int64
	sinkCounters
}

func newServiceSink(o *DecisionLogOptions, instance string, queue int) *serviceSink {
	s := &serviceSink{url: o.URL, target: o.URL, headers: o.Headers, batch: o.BatchSize, interval: o.FlushInterval,
		client: o.Client, queue: make(chan Decision, queue), labels: map[string]string{"app": "breakwater", "id": instance}}
	if u, err := url.Parse(o.URL); err == nil {
		u.RawQuery, u.User = "", nil
		s.target = u.String()
	}
	if s.batch <= 0 {
		s.batch = DefaultDecisionBatchSize
	}
	if s.interval <= 0 {
		s.interval = DefaultDecisionFlushInterval
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: 30 * time.Second}
	}
	for k, v := range o.Labels {
		s.labels[k] = v
	}
	return s
}

func (s *serviceSink) offer(rec *Decision) { s.enqueue(s.queue, rec) }

func (s *serviceSink) status() *SinkStatus {
	st := s.sinkCounters.status(s.target, len(s.queue)+int(s.pending.Load()))
	st.Uploads = s.uploads.Load()
	return st
}

// run uploads queued decisions until ctx is done, then makes one last
// attempt (bounded by sinkDrainTimeout) for what is left.
func (s *serviceSink) run(ctx context.Context) {
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	var pending []Decision
	var backoff time.Duration
	var retryAt time.Time
	flush := func(ctx context.Context) {
		if len(pending) == 0 || time.Now().Before(retryAt) {
			return
		}
		n := min(len(pending), s.batch)
		if err := s.upload(ctx, pending[:n]); err != nil {
			s.failed(err)
			backoff = min(max(s.interval, 2*backoff), maxServiceBackoff)
			retryAt = time.Now().Add(backoff)
			return
		}
		s.uploads.Add(1)
		s.wrote(n, time.Now())
		pending = append(pending[:0], pending[n:]...)
		backoff, retryAt = 0, time.Time{}
		s.pending.Store(int64(len(pending)))
	}
	for {
		var in chan Decision
		if len(pending) < s.batch {
			in = s.queue // stop taking decisions while a full batch waits
		}
		select {
		case <-ctx.Done():
			s.drain(pending)
			return
		case rec := <-in:
			pending = append(pending, rec)
			s.pending.Store(int64(len(pending)))
			if len(pending) >= s.batch {
				flush(ctx)
			}
		case <-tick.C:
			flush(ctx)
		}
	}
}

// drain makes one last upload of pending and the queue, counting what
// fails as dropped.
func (s *serviceSink) drain(pending []Decision) {
	for more := true; more; {
		select {
		case rec := <-s.queue:
			pending = append(pending, rec)
		default:
			more = false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sinkDrainTimeout)
	defer cancel()
	for len(pending) > 0 {
		n := min(len(pending), s.batch)
		if err := s.upload(ctx, pending[:n]); err != nil {
			s.failed(err)
			s.dropped.Add(uint64(len(pending)))
			break
		}
		s.uploads.Add(1)
		s.wrote(n, time.Now())
		pending = pending[n:]
	}
	s.pending.Store(0)
}

// upload posts decs as one gzip-compressed JSON array of OPA events.
func (s *serviceSink) upload(ctx context.Context, decs []Decision) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	events := make([]opaEvent, len(decs))
	for i := range decs {
		events[i] = s.event(&decs[i])
	}
	if err := json.NewEncoder(zw).Encode(events); err != nil {
		return fmt.Errorf("encode decision events: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress decision events: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, &buf)
	if err != nil {
		return fmt.Errorf("decision log upload: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("decision log upload to %s: %w", s.target, redactURLError(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("decision log upload to %s: %s", s.target, resp.Status)
	}
	return nil
}

// redactURLError drops the URL a *url.Error repeats (it may carry a query
// token), keeping the cause.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// opaEvent is a decision as an OPA decision log event (the fields of OPA's
// decision log API that apply).
type opaEvent struct {
	Labels     map[string]string    `json:"labels"`
	DecisionID string               `json:"decision_id"`
	Bundles    map[string]opaBundle `json:"bundles,omitempty"`
	Path       string               `json:"path"`
	Input      opaInput             `json:"input"`
	Result     DecisionResult       `json:"result"`
	Erased     []string             `json:"erased,omitempty"`
	Masked     []string             `json:"masked,omitempty"`
	Timestamp  time.Time            `json:"timestamp"`
	Metrics    map[string]int64     `json:"metrics,omitempty"`
	Custom     map[string]string    `json:"custom,omitempty"`
}

type opaBundle struct {
	Revision string `json:"revision"`
}

// opaInput is the input the pipeline judged, body erased, headers masked.
type opaInput struct {
	Provider   string            `json:"provider"`
	Connection string            `json:"connection,omitempty"`
	Model      string            `json:"model,omitempty"`
	Profile    string            `json:"profile,omitempty"`
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers,omitempty"`
	Error      opaError          `json:"error"`
}

type opaError struct {
	Code string `json:"code"`
	Type string `json:"type"`
}

// decisionPath is the OPA event's path: the document the gateway queries.
const decisionPath = "breakwater/pipeline"

// event converts d to an OPA event: Erased and Masked become pointers
// into the event's input.
func (s *serviceSink) event(d *Decision) opaEvent {
	e := opaEvent{
		Labels:     s.labels,
		DecisionID: d.ID,
		Bundles:    map[string]opaBundle{"breakwater": {Revision: d.Revision}},
		Path:       decisionPath,
		Input: opaInput{Provider: d.Provider, Connection: d.Connection, Model: d.Model, Profile: d.Profile,
			Status: d.Status, Headers: d.Headers, Error: opaError{Code: d.ErrorCode, Type: d.ErrorType}},
		Result:    d.DecisionResult,
		Timestamp: d.Time,
		Metrics:   map[string]int64{"timer_breakwater_pipeline_eval_ns": d.DurationNS},
	}
	if d.BundleRevision != "" {
		e.Bundles["operator"] = opaBundle{Revision: d.BundleRevision}
	}
	if d.RequestID != "" {
		e.Custom = map[string]string{"request_id": d.RequestID}
	}
	e.Erased = inputPaths(d.Erased)
	e.Masked = inputPaths(d.Masked)
	return e
}

// inputPaths prefixes record pointers with "/input".
func inputPaths(ps []string) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = "/input" + p
	}
	return out
}

// runSinks runs the decision log's sinks until ctx is done and they have
// flushed.
func (l *decisionLog) runSinks(ctx context.Context) {
	var wg sync.WaitGroup
	if l.file != nil {
		wg.Go(func() { l.file.run(ctx) })
	}
	if l.service != nil {
		wg.Go(func() { l.service.run(ctx) })
	}
	wg.Wait()
}
