package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// soakConfig serves "m" over two OpenAI connections and "c" over an
// Anthropic one, so the load crosses both wire formats both ways.
const soakConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: openai
    kind: openai
    base_url: MOCK_URL/v1
    models: [m]
    connections:
      - {id: o1, api_key: sk-soak-o1}
      - {id: o2, api_key: sk-soak-o2}
  - id: anth
    kind: anthropic
    base_url: MOCK_URL/v1
    models: [c]
    connections:
      - {id: a1, api_key: sk-soak-a1}
`

// soakScript gives every upstream call a realistic shape: 10 ms to the
// first byte, streams of 6 frames 5 ms apart.
const soakScript = `rules: [{responses: [{latency_ms: 10, chunks: 6, chunk_interval_ms: 5}]}]`

// Soak thresholds: the anchor's (docs/resilience.md §15) for latency and
// errors, and the for memory.
const (
	soakP95Limit      = 500 * time.Millisecond
	soakMaxErrorRatio = 0.01
	soakMaxRSSGrowth  = 0.10
	// soakThink is each chat client's pause between two requests (twice
	// that for the health pollers): a sustained load, not a saturation
	// test, so the latencies measure the gateway rather than the CPU
	// queue of a 2-core machine running other test packages.
	soakThink = 10 * time.Millisecond
)

// soakDuration is 20 s, or SOAK_SECONDS when set (a positive integer).
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("SOAK_SECONDS")
	if v == "" {
		if testing.Short() {
			return 8 * time.Second
		}
		return 20 * time.Second
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("SOAK_SECONDS=%q: want a positive number of seconds", v)
	}
	return time.Duration(n) * time.Second
}

// processRSS is the resident set size of this process (VmRSS of
// /proc/self/status), in bytes.
func processRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status: %v", sc.Err())
}

// healthCheck is one GET /api/monitoring/health of the soak load.
func healthCheck(cli *http.Client, base string) error {
	req, err := http.NewRequest(http.MethodGet, base+"/api/monitoring/health", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer test-admin-token-0123456789")
	resp, err := cli.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	var h struct {
		Status    string         `json:"status"`
		Providers map[string]any `json:"providers"`
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("health: reading body: %w", err)
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &h) != nil || h.Status != "ok" || len(h.Providers) != 2 {
		return fmt.Errorf("health: status %d: %.200s", resp.StatusCode, b)
	}
	return nil
}

// latencyHist is a fixed-size latency histogram with 1 ms buckets up to
// 10 s (and one overflow bucket), so that recording a long soak allocates
// nothing and the test's own bookkeeping cannot pass for a leak. Not
// goroutine-safe.
type latencyHist struct {
	n       int
	buckets [10_001]int
	max     time.Duration
}

func (h *latencyHist) add(d time.Duration) {
	h.n++
	h.buckets[min(int(d/time.Millisecond), len(h.buckets)-1)]++
	h.max = max(h.max, d)
}

// percentile is the upper bound of the bucket holding the p-th (0..1)
// percentile, nearest rank: the true value is at most 1 ms less.
func (h *latencyHist) percentile(p float64) time.Duration {
	rank := max(1, int(float64(h.n)*p+0.999999))
	seen := 0
	for i, c := range h.buckets {
		seen += c
		if seen >= rank {
			if i == len(h.buckets)-1 {
				return h.max
			}
			return time.Duration(i+1) * time.Millisecond
		}
	}
	return 0
}

// TestSoakMixedLoadLatencyErrorsAndRSS is the soak test of docs/resilience.md
// §15, at least as strict as the anchor's: for SOAK_SECONDS (default 20 s,
// 8 s with -short) 8 clients (3 in a -race build) send OpenAI and
// Anthropic, streaming and non-streaming chat requests across both
// provider formats, 10 ms apart, and 2 clients poll GET
// /api/monitoring/health every 20 ms. After a warm-up (the first quarter,
// at most 10 s), the p95 latency of all requests (streams timed to their
// last byte) and of the health checks alone must stay under 500 ms, and
// fewer than 1 % of all requests may fail. Memory: the test process's RSS (gateway, mock and clients
// together: they share the process) is sampled every 250 ms after the
// warm-up; the mean of the last quarter of the samples may exceed the mean
// of the first quarter by at most 10 %.
func TestSoakMixedLoadLatencyErrorsAndRSS(t *testing.T) {
	dur := soakDuration(t)
	warm := min(dur/4, 10*time.Second)
	h := startQuiet(t, soakConfig)
	h.setScript(soakScript)
	cli := loadClient()
	defer cli.CloseIdleConnections()
	mix := loadMix("m", "c")

	var (
		mu            sync.Mutex
		all, hc       latencyHist // after warm-up: every request, health checks
		total, failed int         // whole run
		chats, checks int         // after warm-up
		errs          []string
		rss           = make([]int64, 0, 4*int(dur/time.Second)+8)
		// heapWarm is the post-GC heap at the end of the warm-up (set by
		// the RSS sampler, read after wg.Wait).
		heapWarm uint64
	)
	begin := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	record := func(t0 time.Time, err error, health bool) {
		lat := time.Since(t0)
		mu.Lock()
		defer mu.Unlock()
		total++
		if err != nil {
			failed++
			if len(errs) < 10 {
				errs = append(errs, err.Error())
			}
		}
		if t0.Sub(begin) < warm {
			return
		}
		all.add(lat)
		if health {
			checks++
			hc.add(lat)
		} else {
			chats++
		}
	}
	chatClients := 8
	if raceEnabled() {
		// The race detector makes every request 5-10× as expensive; fewer
		// clients keep the load sustained instead of CPU-bound.
		chatClients = 3
	}
	for w := 0; w < chatClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				res := mix[i%len(mix)].do(cli, h.url, i)
				record(t0, res.err, false)
				time.Sleep(soakThink)
			}
		}()
	}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * soakThink):
				}
				t0 := time.Now()
				err := healthCheck(cli, h.url)
				record(t0, err, true)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if time.Since(begin) < warm {
				continue
			}
			if heapWarm == 0 {
				heapWarm = postGCHeap()
			}
			if v, err := processRSS(); err == nil {
				mu.Lock()
				rss = append(rss, v)
				mu.Unlock()
			}
		}
	}()
	time.Sleep(dur)
	close(stop)
	wg.Wait()
	heapEnd := postGCHeap()

	p50, p95, p99 := all.percentile(0.50), all.percentile(0.95), all.percentile(0.99)
	errRatio := float64(failed) / float64(max(total, 1))
	t.Logf("soak %s (warm-up %s): %d requests (%.0f/s), after warm-up %d chat + %d health; latency p50 %s p95 %s p99 %s max %s (1 ms buckets); errors %d (%.3f %%)",
		dur, warm, total, float64(total)/dur.Seconds(), chats, checks, p50, p95, p99, all.max, failed, 100*errRatio)
	t.Logf("health endpoint alone: p95 %s", hc.percentile(0.95))
	if total < 100 || chats == 0 || checks == 0 {
		t.Fatalf("too little load to judge: %d requests (%d chat, %d health after warm-up)", total, chats, checks)
	}
	if p95 >= soakP95Limit {
		t.Errorf("p95 latency %s, limit %s", p95, soakP95Limit)
	}
	if hp95 := hc.percentile(0.95); hp95 >= soakP95Limit {
		t.Errorf("health endpoint p95 latency %s, limit %s", hp95, soakP95Limit)
	}
	if errRatio >= soakMaxErrorRatio {
		t.Errorf("error rate %.3f %% (limit 1 %%); first errors:\n%s", 100*errRatio, strings.Join(errs, "\n"))
	}

	if len(rss) < 8 {
		t.Fatalf("only %d RSS samples after the warm-up", len(rss))
	}
	q := len(rss) / 4
	mean := func(v []int64) float64 {
		var s float64
		for _, x := range v {
			s += float64(x)
		}
		return s / float64(len(v))
	}
	first, last := mean(rss[:q]), mean(rss[len(rss)-q:])
	growth := last/first - 1
	t.Logf("RSS after warm-up (%d samples): first quarter %.1f MiB, last quarter %.1f MiB (%+.1f %%), min %.1f MiB, max %.1f MiB",
		len(rss), first/(1<<20), last/(1<<20), 100*growth, float64(slices.Min(rss))/(1<<20), float64(slices.Max(rss))/(1<<20))
	t.Logf("post-GC heap (for diagnosis): %d bytes after warm-up, %d at the end", heapWarm, heapEnd)
	if growth > soakMaxRSSGrowth {
		t.Errorf("RSS grew by %.1f %% after warm-up (limit 10 %%)", 100*growth)
	}
}
