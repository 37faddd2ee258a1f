package policies

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/redact"
)

// secretHeaders are response headers whose values must never reach a
// decision log, beside headers the decision needs.
func secretHeaders() map[string]string {
	return map[string]string{
		"Set-Cookie":                   "session=s3cr3t-cookie",
		"www-authenticate":             `Bearer realm="sk-realm-secret"`,
		"x-upstream-token":             "tok-s3cr3t",
		"x-echo":                       "Bearer sk-echoed-secret",
		"x-ratelimit-remaining-tokens": "0",
		"retry-after-ms":               "5000",
	}
}

// waitFor polls cond until it holds or 10 s pass: the sinks run in their
// own goroutines, and the test waits for their effect, not for a time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runWatch runs p.Watch until the test ends and waits for it to return.
func runWatch(t *testing.T, p *Pipeline) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	return cancel
}

func TestDecisionLogContentsAndMasking(t *testing.T) {
	f := newFixture(t, Options{DecisionLog: &DecisionLogOptions{}, Redactor: redact.New("conf1gured-s3cret-value")})
	hdr := secretHeaders()
	hdr["x-note"] = "account conf1gured-s3cret-value over its limit"
	in := failure("agentrouter", 403, agentQuotaBody, hdr)
	in.RequestID = "req-7f3a"
	in.ErrorType = "new_api_error"
	o := f.p.Classify(in)
	if o.Status != 429 || o.RuleID != "agentrouter.quota" {
		t.Fatalf("outcome %+v", o)
	}
	got := f.p.Decisions(0)
	if len(got) != 1 {
		t.Fatalf("%d decisions, want 1", len(got))
	}
	d := got[0]
	if d.DurationNS <= 0 || !strings.HasSuffix(d.ID, "-1") {
		t.Errorf("duration %d, id %q", d.DurationNS, d.ID)
	}
	d.DurationNS, d.ID = 0, ""
	want := Decision{
		Time: epoch, RequestID: "req-7f3a", Provider: "agentrouter", Connection: "conn-1", Model: "model-x", Profile: "apikey",
		Status: 403, DecisionResult: DecisionResult{RestatedStatus: 429, RestateRuleID: "agentrouter.quota_429", RestateSource: SourceBuiltin,
			RuleID: "agentrouter.quota", RuleSource: SourceBuiltin, Reason: "quota_exhausted", Scope: "connection",
			ClientRetryAfterMS: 5000},
		Revision: f.p.Revision(), ErrorType: "new_api_error",
		Headers: map[string]string{"set-cookie": Masked, "www-authenticate": Masked, "x-upstream-token": Masked, "x-echo": Masked,
			"x-ratelimit-remaining-tokens": "0", "retry-after-ms": "5000", "x-note": "account " + redact.Mask + " over its limit"},
		Erased: []string{"/body"},
		Masked: []string{"/headers/set-cookie", "/headers/www-authenticate", "/headers/x-echo", "/headers/x-note", "/headers/x-upstream-token"},
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("decision\n  %+v\nwant\n  %+v", d, want)
	}
	b, _ := json.Marshal(got[0])
	for _, secret := range []string{"s3cr3t", "sk-", "额度不足", "剩余额度", "request id"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the decision record holds %q: %s", secret, b)
		}
	}
	// Explain is not a request: it records nothing.
	f.p.Explain(in)
	if n := len(f.p.Decisions(0)); n != 1 {
		t.Errorf("%d decisions after Explain, want 1", n)
	}
	// A transport error is a decision too, by the default classifier.
	tr := engine.ErrorInput{Provider: "openai", Connection: "k", TransportErr: errors.New("dial tcp 10.0.0.1:443: connection refused"), Now: epoch}
	f.p.Classify(tr)
	d = f.p.Decisions(1)[0]
	if !d.Transport || d.Status != 0 || d.RuleSource != SourceDefault || d.Reason == "" || d.Erased != nil {
		t.Errorf("transport decision %+v", d)
	}
	if st := f.p.Status().DecisionLog; st == nil || st.Recorded != 2 || st.Buffered != 2 || st.Capacity != DefaultDecisionBuffer {
		t.Errorf("status %+v", st)
	}
}

func TestDecisionLogRingIsBounded(t *testing.T) {
	f := newFixture(t, Options{DecisionLog: &DecisionLogOptions{Buffer: 3}})
	for i := range 5 {
		in := failure("openai", 429, "", nil)
		in.RequestID = fmt.Sprint("r", i)
		f.p.Classify(in)
	}
	ids := func(ds []Decision) string {
		var out []string
		for _, d := range ds {
			out = append(out, d.RequestID)
		}
		return strings.Join(out, ",")
	}
	if got := ids(f.p.Decisions(0)); got != "r4,r3,r2" {
		t.Errorf("all: %s, want the 3 newest, newest first", got)
	}
	if got := ids(f.p.Decisions(2)); got != "r4,r3" {
		t.Errorf("limit 2: %s", got)
	}
	if got := ids(f.p.Decisions(10)); got != "r4,r3,r2" {
		t.Errorf("limit 10: %s", got)
	}
	st := f.p.Status().DecisionLog
	if st.Recorded != 5 || st.Buffered != 3 || st.Capacity != 3 {
		t.Errorf("status %+v", st)
	}
	// Without a decision log nothing is kept and nothing is allocated for it.
	g := newFixture(t, Options{})
	g.p.Classify(failure("openai", 429, "", nil))
	if ds := g.p.Decisions(0); ds == nil || len(ds) != 0 || g.p.Status().DecisionLog != nil {
		t.Errorf("no log: %v, %+v", ds, g.p.Status().DecisionLog)
	}
}

// readLines reads the JSON lines of a decision log file.
func readLines(t *testing.T, path string) []Decision {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []Decision
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var d Decision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	return out
}

func TestDecisionLogFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	in := failure("agentrouter", 403, agentQuotaBody, secretHeaders())
	in.RequestID = "r0"
	// The file holds two lines and a half: the third rotates it.
	ring := newFixture(t, Options{DecisionLog: &DecisionLogOptions{}})
	ring.p.Classify(in)
	line, _ := json.Marshal(ring.p.Decisions(1)[0])
	f := newFixture(t, Options{DecisionLog: &DecisionLogOptions{File: path, FileMaxBytes: int64(5 * (len(line) + 1) / 2)}})
	runWatch(t, f.p)
	for i := range 5 {
		in.RequestID = fmt.Sprint("r", i)
		f.p.Classify(in)
		// One at a time, so that the rotation points do not depend on
		// how the sink batches its writes.
		waitFor(t, "the decision written", func() bool { return f.p.Status().DecisionLog.File.Written == uint64(i+1) })
	}
	st := f.p.Status().DecisionLog.File
	if st.Target != path || st.Rotations != 2 || st.Dropped != 0 || st.Failures != 0 || st.LastWrite.IsZero() {
		t.Errorf("file status %+v", st)
	}
	cur, old := readLines(t, path), readLines(t, path+".1")
	if len(cur) != 1 || cur[0].RequestID != "r4" || len(old) != 2 || old[0].RequestID != "r2" || old[1].RequestID != "r3" {
		t.Errorf("current file %d lines, previous %d", len(cur), len(old))
	}
	if cur[0].RestatedStatus != 429 || cur[0].Headers["set-cookie"] != Masked {
		t.Errorf("line %+v", cur[0])
	}
	for _, p := range []string{path, path + ".1"} {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "s3cr3t") || strings.Contains(string(b), "额度不足") {
			t.Errorf("%s holds a secret or the body", p)
		}
		if info, err := os.Stat(p); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, %v", p, info.Mode(), err)
		}
	}
}

// logService is an OPA decision log service in the test: it records each
// upload's headers and events.
type logService struct {
	mu      sync.Mutex
	batches [][]map[string]any
	headers []http.Header
	fail    bool
	srv     *httptest.Server
}

func newLogService(t *testing.T) *logService {
	s := &logService{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fail {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/logs" {
			http.Error(w, "bad route", http.StatusNotFound)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var events []map[string]any
		if err := json.NewDecoder(zr).Decode(&events); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.batches = append(s.batches, events)
		s.headers = append(s.headers, r.Header.Clone())
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *logService) events() (n int, batches []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.batches {
		n += len(b)
		batches = append(batches, len(b))
	}
	return n, batches
}

func TestDecisionLogServiceOPAEvents(t *testing.T) {
	svc := newLogService(t)
	f := newFixture(t, Options{DecisionLog: &DecisionLogOptions{
		URL: svc.srv.URL + "/logs?token=q-s3cr3t", Headers: map[string]string{"Authorization": "Bearer log-token"},
		BatchSize: 2, FlushInterval: 20 * time.Millisecond, Labels: map[string]string{"id": "gw-1", "env": "test"},
	}})
	runWatch(t, f.p)
	for i := range 5 {
		in := failure("agentrouter", 403, agentQuotaBody, secretHeaders())
		in.RequestID = fmt.Sprint("r", i)
		f.p.Classify(in)
	}
	waitFor(t, "5 events uploaded and counted", func() bool {
		n, _ := svc.events()
		return n == 5 && f.p.Status().DecisionLog.Service.Written == 5
	})
	_, batches := svc.events()
	if slices.Max(batches) > 2 {
		t.Errorf("batch sizes %v, want at most 2", batches)
	}
	svc.mu.Lock()
	h := svc.headers[0]
	ev := svc.batches[0][0]
	svc.mu.Unlock()
	if h.Get("Content-Encoding") != "gzip" || h.Get("Content-Type") != "application/json" || h.Get("Authorization") != "Bearer log-token" {
		t.Errorf("upload headers %v", h)
	}
	// OPA's decision log event fields (docs: "Decision Logs", event format).
	for _, k := range []string{"labels", "decision_id", "bundles", "path", "input", "result", "erased", "masked", "timestamp", "metrics", "custom"} {
		if _, ok := ev[k]; !ok {
			t.Errorf("event lacks %q: %v", k, ev)
		}
	}
	labels := ev["labels"].(map[string]any)
	if labels["id"] != "gw-1" || labels["app"] != "breakwater" || labels["env"] != "test" {
		t.Errorf("labels %v", labels)
	}
	if ev["path"] != "breakwater/pipeline" || ev["custom"].(map[string]any)["request_id"] != "r0" {
		t.Errorf("path %v, custom %v", ev["path"], ev["custom"])
	}
	if rev := ev["bundles"].(map[string]any)["breakwater"].(map[string]any)["revision"]; rev != f.p.Revision() {
		t.Errorf("bundle revision %v", rev)
	}
	input := ev["input"].(map[string]any)
	if input["provider"] != "agentrouter" || input["status"] != float64(403) || input["body"] != nil ||
		input["headers"].(map[string]any)["set-cookie"] != Masked {
		t.Errorf("input %v", input)
	}
	result := ev["result"].(map[string]any)
	if result["restated_status"] != float64(429) || result["rule_id"] != "agentrouter.quota" || result["reason"] != "quota_exhausted" {
		t.Errorf("result %v", result)
	}
	if !reflect.DeepEqual(ev["erased"], []any{"/input/body"}) || !slices.Contains(ev["masked"].([]any), any("/input/headers/set-cookie")) {
		t.Errorf("erased %v, masked %v", ev["erased"], ev["masked"])
	}
	raw, _ := json.Marshal(svc.batches)
	if strings.Contains(string(raw), "s3cr3t") || strings.Contains(string(raw), "额度不足") {
		t.Error("an uploaded event holds a secret or the body")
	}
	st := f.p.Status().DecisionLog.Service
	if st.Written != 5 || st.Dropped != 0 || st.Failures != 0 || st.Uploads < 3 || strings.Contains(st.Target, "s3cr3t") {
		t.Errorf("service status %+v", st)
	}
}

func TestDecisionLogServiceRetriesAndDrops(t *testing.T) {
	svc := newLogService(t)
	svc.fail = true
	f := newFixture(t, Options{DecisionLog: &DecisionLogOptions{
		// No timed flush: the first upload is the full batch of two.
		URL: svc.srv.URL + "/logs", BatchSize: 2, QueueSize: 3, FlushInterval: time.Hour,
	}})
	cancel := runWatch(t, f.p)
	f.p.Classify(failure("openai", 429, "", nil))
	f.p.Classify(failure("openai", 429, "", nil))
	waitFor(t, "a failed upload", func() bool { return f.p.Status().DecisionLog.Service.Failures > 0 })
	// The sink holds a full batch of 2 and takes no more; the queue holds 3;
	// the 4th decision is dropped.
	for range 4 {
		f.p.Classify(failure("openai", 429, "", nil))
	}
	st := f.p.Status().DecisionLog.Service
	if st.Dropped != 1 || st.Queued != 5 || !strings.Contains(st.LastError, "503") {
		t.Errorf("while down: %+v", st)
	}
	svc.mu.Lock()
	svc.fail = false
	svc.mu.Unlock()
	// Stopping the pipeline flushes what is left.
	cancel()
	waitFor(t, "5 events uploaded", func() bool { n, _ := svc.events(); return n == 5 })
}

func TestSensitiveHeaders(t *testing.T) {
	for _, name := range []string{"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie",
		"set-cookie", "www-authenticate", "x-auth-token", "x-session-id", "x-client-secret", "x-refresh_token", "x-signing-key"} {
		if !sensitiveHeader(name, "v") {
			t.Errorf("%s not masked", name)
		}
	}
	for _, name := range []string{"retry-after", "retry-after-ms", "x-ratelimit-remaining-tokens", "x-ratelimit-limit-requests",
		"anthropic-ratelimit-tokens-remaining", "x-request-id", "content-type", "x-ratelimit-reset-tokens"} {
		if sensitiveHeader(name, "12") {
			t.Errorf("%s masked", name)
		}
	}
	if !sensitiveHeader("x-debug", "Basic dXNlcjpwYXNz") {
		t.Error("a Basic credential in a value is not masked")
	}
}

// BenchmarkDecisionLog is the failure-path decision of
// BenchmarkRestateAndClassify (agentrouter 403 restated) without a
// decision log, with the ring buffer only, and with the file and the
// service sinks running.
func BenchmarkDecisionLog(b *testing.B) {
	in := failure("agentrouter", 403, agentQuotaBody, map[string]string{"content-type": "application/json", "x-request-id": "abc"})
	in.RequestID = "req-1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	for _, bc := range []struct {
		name string
		log  *DecisionLogOptions
	}{
		{"off", nil},
		{"ring", &DecisionLogOptions{}},
		{"ring+file", &DecisionLogOptions{File: filepath.Join(b.TempDir(), "d.jsonl")}},
		{"ring+service", &DecisionLogOptions{URL: srv.URL, FlushInterval: 100 * time.Millisecond}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := newFixture(b, Options{DecisionLog: bc.log}).p
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = p.Watch(ctx) }()
			defer func() { cancel(); <-done }()
			benchClassify(b, p, in)
			if st := p.Status().DecisionLog; st != nil {
				for _, s := range []*SinkStatus{st.File, st.Service} {
					if s != nil && s.Dropped > 0 {
						b.ReportMetric(float64(s.Dropped)/float64(b.N), "dropped/op")
					}
				}
			}
		})
	}
}
