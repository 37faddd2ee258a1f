package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// shareConfig: four client keys share one upstream account (SHARED_URL)
// whose real concurrency is 2 (max_concurrent, fail-open quota-share), and
// one oauth account capped by the composite gate instead
// (rate_limit_overrides).
const shareConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false, max_wait_ms: MAX_WAIT}
keys:
  - {id: k1, key: client-key-one}
  - {id: k2, key: client-key-two}
  - {id: k3, key: client-key-three}
  - {id: k4, key: client-key-four}
providers:
  - id: shared
    kind: openai
    base_url: SHARED_URL/v1
    models: [m]
    connections:
      - {id: acct, api_key: sk-shared, max_concurrent: 2}
  - id: gated
    kind: openai
    profile: oauth
    base_url: SHARED_URL/v1
    models: [m]
    connections:
      - {id: g1, api_key: sk-gated, rate_limit_overrides: {max_concurrent: 2, max_queue_depth: 4, max_wait_ms: 300}}
`

var clientKeys = []string{"client-key-one", "client-key-two", "client-key-three", "client-key-four"}

// shareUpstream is the upstream of the quota-share tests: the fault-injecting
// mock behind a handler that records, in arrival order, the client each
// call was made for (its message says "from kN") and can hold calls.
type shareUpstream struct {
	mock *mock.Server
	srv  *httptest.Server

	mu      sync.Mutex
	order   []string
	busy    int // calls in flight
	maxBusy int
	hold    int // hold this many more calls until release is closed
	release chan struct{}
	holding chan struct{}
}

func newShareUpstream(t *testing.T) *shareUpstream {
	r := &shareUpstream{mock: mock.New(nil, nil), release: make(chan struct{}), holding: make(chan struct{}, 64)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() { r.srv.Close(); _ = r.mock.Close() })
	return r
}

func (r *shareUpstream) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	if i := bytes.Index(body, []byte("from k")); i >= 0 {
		r.order = append(r.order, string(body[i+5:i+7]))
	}
	hold := r.hold > 0
	r.hold--
	r.busy++
	r.maxBusy = max(r.maxBusy, r.busy)
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.busy--; r.mu.Unlock() }()
	if hold {
		r.holding <- struct{}{}
		<-r.release
	}
	r.mock.Handler().ServeHTTP(w, req)
}

// maxConcurrent returns the most calls the upstream had in flight at
// once, and resets it.
func (r *shareUpstream) maxConcurrent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.maxBusy
	r.maxBusy = r.busy
	return m
}

func (r *shareUpstream) arrivals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...)
}

func startShared(t *testing.T, rec *shareUpstream, maxWait string) *harness {
	cfg := strings.ReplaceAll(strings.ReplaceAll(shareConfig, "SHARED_URL", rec.srv.URL), "MAX_WAIT", maxWait)
	return start(t, cfg)
}

// askFor sends a chat request for model as client key i (k1..k4).
func (h *harness) askFor(model string, i int) (int, string) {
	h.t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"from k%d"}]}`, model, i+1)
	resp := h.post("/v1/chat/completions", body, "Authorization", "Bearer "+clientKeys[i])
	b := readBody(h.t, resp)
	code := ""
	if resp.StatusCode != 200 {
		code = decodeBytes(h.t, b)["error"].(map[string]any)["code"].(string)
	}
	return resp.StatusCode, code
}

// admissionOf returns a connection's admission state from the health API.
func admissionOf(t *testing.T, h *harness, connection string) map[string]any {
	t.Helper()
	_, body := h.admin("GET", "/api/monitoring/health", "")
	for _, a := range body["admission"].([]any) {
		if a := a.(map[string]any); a["connection"] == connection {
			return a
		}
	}
	t.Fatalf("no admission state for %s", connection)
	return nil
}

// issue 14 (§5): 20 concurrent requests from 4 client keys on one account
// with max_concurrent: 2. Every request succeeds, the upstream never sees
// more than 2 at once, nobody fails open, and the slots go to the keys in
// turn: k1 queued all five of its requests first, then k2, k3 and k4, yet
// no key falls more than a round behind (first come, first served would
// serve k1's five, then k2's five...).
func TestQuotaShareServesKeysInTurn(t *testing.T) {
	rec := newShareUpstream(t)
	h := startShared(t, rec, "10000")
	rec.hold = 2 // the first two calls hold both slots until all 18 others queue
	var wg sync.WaitGroup
	results := make(chan int, 20)
	n := 0
	for key := range 4 {
		for range 5 {
			wg.Go(func() {
				status, _ := h.askFor("shared/m", key)
				results <- status
			})
			n++
			if n == 2 {
				<-rec.holding
				<-rec.holding
			}
			if n > 2 {
				want := float64(n - 2)
				waitFor(t, fmt.Sprintf("%v queued", want), func() bool { return admissionOf(t, h, "acct")["queued"].(float64) == want })
			}
		}
	}
	close(rec.release)
	wg.Wait()
	close(results)
	for status := range results {
		if status != 200 {
			t.Fatalf("a request answered %d; quota-share never refuses", status)
		}
	}
	if m := rec.maxConcurrent(); m != 2 {
		t.Fatalf("the upstream saw %d at once, want 2", m)
	}
	if a := admissionOf(t, h, "acct"); a["quota_share_fail_open"].(float64) != 0 || a["quota_share_slots"].(float64) != 2 {
		t.Fatalf("admission %v", a)
	}
	// The two held calls were k1's. Of the 18 that waited (k1 3, the
	// others 5 each), after every L grants no key still waiting has
	// fallen a round (of four) behind, give or take one: two slots freed
	// together let two grants reach the upstream in either order.
	order := rec.arrivals()
	if len(order) != 20 || order[0] != "k1" || order[1] != "k1" {
		t.Fatalf("arrivals %v", order)
	}
	waiting := map[string]int{"k1": 3, "k2": 5, "k3": 5, "k4": 5}
	count := map[string]int{}
	for l, k := range order[2:] {
		count[k]++
		rounds := (l + 1) / 4
		for key, total := range waiting {
			if c := count[key]; c < min(total, rounds)-1 {
				t.Fatalf("after %d grants %s had %d, more than a round behind; arrivals %v", l+1, key, c, order)
			}
		}
	}
}

// §5: a request whose wait for a quota-share slot outlasts its queue
// budget proceeds without one (fail-open): it succeeds, and it is counted
// in the admission snapshot and breakwater_quota_share_fail_open_total.
func TestQuotaShareFailsOpenPastTheQueueBudget(t *testing.T) {
	rec := newShareUpstream(t)
	h := startShared(t, rec, "300")
	rec.hold = 2
	var wg sync.WaitGroup
	statuses := make([]int, 3)
	for i := range 2 {
		wg.Go(func() { statuses[i], _ = h.askFor("shared/m", i) })
	}
	<-rec.holding
	<-rec.holding
	t0 := time.Now()
	status, _ := h.askFor("shared/m", 2) // waits 300 ms, then goes without a slot
	if status != 200 || time.Since(t0) < 300*time.Millisecond {
		t.Fatalf("fail-open request: %d after %v", status, time.Since(t0))
	}
	close(rec.release)
	wg.Wait()
	if statuses[0] != 200 || statuses[1] != 200 {
		t.Fatalf("held requests: %v", statuses)
	}
	if a := admissionOf(t, h, "acct"); a["quota_share_fail_open"].(float64) != 1 || a["rejections"].(float64) != 0 {
		t.Fatalf("admission %v", a)
	}
	if got := sumMetric(t, h.metricsText(), `breakwater_quota_share_fail_open_total{connection="acct",provider="shared"}`); got != 1 {
		t.Fatalf("breakwater_quota_share_fail_open_total = %v", got)
	}
	if m := rec.maxConcurrent(); m != 3 {
		t.Fatalf("the upstream saw %d at once, want 3 (two slots and the fail-open request)", m)
	}
}

// §5: the composite gate from rate_limit_overrides.max_concurrent on an
// oauth (unprotected) connection: of 20 concurrent requests on a cap of 2
// with 4 waiting places and a 300 ms queue budget, the excess ones get the
// typed errors — 429 SEMAPHORE_QUEUE_FULL at once, 503 SEMAPHORE_TIMEOUT
// after the budget — every request gets an answer, the upstream never
// sees more than 2 and the refusals touch no health state.
func TestCompositeGateRefusesWithTypedErrors(t *testing.T) {
	rec := newShareUpstream(t)
	h := startShared(t, rec, "10000")
	rec.mock.SetScript(mustScript(t, `rules: [{key: sk-gated, responses: [{latency_ms: 200}]}]`))
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	for i := range 20 {
		wg.Go(func() {
			status, code := h.askFor("gated/m", i%4)
			mu.Lock()
			got[fmt.Sprintf("%d %s", status, code)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	ok, full, timeout := got["200 "], got["429 SEMAPHORE_QUEUE_FULL"], got["503 SEMAPHORE_TIMEOUT"]
	if ok+full+timeout != 20 || ok < 2 || full == 0 || timeout == 0 {
		t.Fatalf("answers %v: want every request answered 200, SEMAPHORE_QUEUE_FULL or SEMAPHORE_TIMEOUT, with both errors", got)
	}
	if m, calls := rec.maxConcurrent(), len(rec.arrivals()); m != 2 || calls != ok {
		t.Fatalf("upstream max %d at once, %d calls for %d successes", m, calls, ok)
	}
	if b := breakerOf(t, h, "gated"); b["failure_count"].(float64) != 0 {
		t.Fatalf("a saturated gate touched the breaker: %v", b)
	}
	_, health := h.admin("GET", "/api/monitoring/health", "")
	if health["cooling_connections"].(float64) != 0 || health["lockouts"].(float64) != 0 {
		t.Fatalf("a saturated gate cooled or locked: %v", health)
	}
}

// §5: the provider and global levels of the composite gate:
// providers[].max_concurrent and resilience.concurrency.global (set at run
// time by PATCH) cap the requests in flight over connections.
func TestProviderAndGlobalGates(t *testing.T) {
	rec := newShareUpstream(t)
	cfg := strings.Replace(strings.ReplaceAll(strings.ReplaceAll(shareConfig, "SHARED_URL", rec.srv.URL), "MAX_WAIT", "10000"),
		"  - id: gated\n", "  - id: gated\n    max_concurrent: 1\n", 1)
	cfg = strings.Replace(cfg, "      - {id: g1, api_key: sk-gated, rate_limit_overrides: {max_concurrent: 2, max_queue_depth: 4, max_wait_ms: 300}}",
		"      - {id: g1, api_key: sk-gated}\n      - {id: g2, api_key: sk-gated-2}", 1)
	h := start(t, cfg)
	rec.mock.SetScript(mustScript(t, `rules: [{responses: [{latency_ms: 50}]}]`))
	burst := func(model string) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				if status, code := h.askFor(model, i%4); status != 200 {
					t.Errorf("%s: %d %s", model, status, code)
				}
			})
		}
		wg.Wait()
	}
	burst("gated/m")
	if m := rec.maxConcurrent(); m != 1 {
		t.Fatalf("provider cap 1 over two connections: the upstream saw %d at once", m)
	}
	code, body := h.admin("PATCH", "/api/resilience", `{"concurrency":{"global":1}}`)
	if code != 200 || body["concurrency"].(map[string]any)["global"].(float64) != 1 {
		t.Fatalf("patch: %d %v", code, body)
	}
	burst("shared/m") // quota-share alone would let 2 through
	if m := rec.maxConcurrent(); m != 1 {
		t.Fatalf("global cap 1: the upstream saw %d at once", m)
	}
}

func decodeBytes(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, b)
	}
	return m
}

func mustScript(t *testing.T, s string) *mock.Script {
	t.Helper()
	sc, err := mock.ParseScript([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}
