package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
	"github.com/breakwater-dev/breakwater/bench/internal/proc"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
)

// Several instances on one Redis (docs/deployment.md).
const (
	// clusterInstances is how many gateways share the Redis.
	clusterInstances = 3
	// budgetPropagationP99MS is the most a change may take, at p99, to
	// reach every other instance.
	budgetPropagationP99MS = 100
	// clusterAdminToken guards the instances' admin API.
	clusterAdminToken = "bench-cluster-admin-token"
	// propagationPoll is how often the other instances are read while a
	// change propagates.
	propagationPoll = 500 * time.Microsecond
)

// ClusterResult is the multi-instance scenario: three gateways on one
// redis-server.
type ClusterResult struct {
	Instances int    `json:"instances"`
	Redis     string `json:"redis"`
	// Propagation runs from the answer to a settings change on the first
	// instance to both others showing it (polled every 0.5 ms).
	Propagation Latency `json:"propagation"`
	// Badger and RedisMode are the same closed-loop run through the
	// benchmark's Badger gateway and through the first Redis instance.
	Badger    Run `json:"badger"`
	RedisMode Run `json:"redis_mode"`
	// Ratio is Redis-mode throughput over Badger's; Added* are Redis
	// minus Badger latency.
	Ratio      float64 `json:"ratio"`
	AddedP50MS float64 `json:"added_p50_ms"`
	AddedP99MS float64 `json:"added_p99_ms"`
	// RoundTripsPerRequest is the Redis round trips the Redis-mode
	// instance made during its run per request answered (its change
	// watch included).
	RoundTripsPerRequest float64 `json:"round_trips_per_request"`
}

// cluster is the multi-instance scenario: Redis started, three gateways
// on it, -cluster-changes settings changes propagated, then the
// success-path cost of Redis mode against Badger mode.
func (b *bench) cluster(ctx context.Context) error {
	if err := redisproc.Available(); err != nil {
		b.rep.Notes = append(b.rep.Notes, "several instances: skipped, "+err.Error())
		return nil
	}
	srv, err := redisproc.Start(filepath.Join(b.dir, "redis"))
	if err != nil {
		return err
	}
	defer srv.Kill()
	version := "Redis"
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				version = "Redis " + v
			}
		}
	}
	res := &ClusterResult{Instances: clusterInstances, Redis: version + ", one server on loopback"}
	gws := make([]*proc.Child, clusterInstances)
	errs := make([]error, clusterInstances)
	var wg sync.WaitGroup
	for i := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gws[i], errs[i] = b.startGateway(ctx, fmt.Sprintf("redis-gateway-%d", i), func(listen string) []byte {
				return proc.GatewayConfig(proc.Shape{Listen: listen, MockAddr: b.mock.Addr, Providers: 1,
					AdminToken: clusterAdminToken, RedisURL: srv.URL(), RedisPrefix: "bench:"})
			})
		}()
	}
	wg.Wait()
	for _, g := range gws {
		if g != nil {
			defer g.Stop()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	delays, err := b.propagate(ctx, gws)
	if err != nil {
		return err
	}
	res.Propagation = latencyOf(delays)
	fmt.Fprintf(os.Stderr, "bench:   propagation of %d changes to %d instances: p50 %.3f ms, p99 %.3f ms\n",
		len(delays), clusterInstances-1, res.Propagation.P50MS, res.Propagation.P99MS)

	drive := func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
		return load.ClosedLoop(ctx, c, req, b.o.conns, d)
	}
	body := chatBody(gatewayModel, false)
	for i, side := range []struct {
		tgt target
		out *Run
	}{
		{target{"badger", load.Request{URL: "http://" + b.gw.Addr + "/v1/chat/completions", Body: body}, b.gw}, &res.Badger},
		{target{"redis", load.Request{URL: "http://" + gws[0].Addr + "/v1/chat/completions", Body: body}, gws[0]}, &res.RedisMode},
	} {
		trips0, _ := b.roundTrips(ctx, gws[0])
		m := measurement{tgt: side.tgt, conns: b.o.conns, dur: b.o.clusterDuration,
			warm: func(ctx context.Context, c *http.Client) error {
				_, err := drive(ctx, c, side.tgt.req, b.o.warmup)
				return err
			},
			run: func(ctx context.Context, c *http.Client) (*load.Result, error) {
				return drive(ctx, c, side.tgt.req, b.o.clusterDuration)
			}}
		run, err := b.measure(ctx, m)
		if err != nil {
			return err
		}
		*side.out = run
		if i == 1 && run.OK > 0 {
			if trips1, err := b.roundTrips(ctx, gws[0]); err == nil {
				res.RoundTripsPerRequest = float64(trips1-trips0) / float64(run.OK)
			}
		}
	}
	if res.Badger.RPS > 0 {
		res.Ratio = res.RedisMode.RPS / res.Badger.RPS
	}
	res.AddedP50MS = res.RedisMode.Latency.P50MS - res.Badger.Latency.P50MS
	res.AddedP99MS = res.RedisMode.Latency.P99MS - res.Badger.Latency.P99MS
	b.rep.Cluster = res
	for _, g := range gws {
		if _, other, tail := g.LogSummary(8); other > 0 {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("%s wrote %d warnings or errors; the last ones:\n%s", g.Name, other, tail))
		}
	}
	return nil
}

// propagate makes -cluster-changes settings changes on the first instance
// and returns, for each, the time until every other instance showed it.
func (b *bench) propagate(ctx context.Context, gws []*proc.Child) ([]time.Duration, error) {
	var delays []time.Duration
	for n := range b.o.clusterChanges {
		want := 2 + n%8
		if err := b.adminCall(ctx, gws[0], http.MethodPatch, "/api/resilience",
			fmt.Sprintf(`{"max_attempts_per_request": %d}`, want), nil); err != nil {
			return nil, err
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(gws))
		for i := 1; i < len(gws); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var got struct {
						MaxAttempts int `json:"max_attempts_per_request"`
					}
					if err := b.adminCall(ctx, gws[i], http.MethodGet, "/api/resilience", "", &got); err != nil {
						errs[i] = err
						return
					}
					if got.MaxAttempts == want {
						return
					}
					if time.Since(start) > 10*time.Second {
						errs[i] = fmt.Errorf("%s never showed change %d", gws[i].Name, n)
						return
					}
					time.Sleep(propagationPoll)
				}
			}()
		}
		wg.Wait()
		delays = append(delays, time.Since(start))
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	return delays, nil
}

// adminCall calls the admin API of gw and decodes a JSON answer into out
// (when not nil).
func (b *bench) adminCall(ctx context.Context, gw *proc.Child, method, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+gw.Addr+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+clusterAdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.ctrl.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, gw.Name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s on %s: %s: %.200s", method, path, gw.Name, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// roundTrips reads breakwater_store_round_trips_total from gw's metrics.
func (b *bench) roundTrips(ctx context.Context, gw *proc.Child) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gw.Addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+clusterAdminToken)
	resp, err := b.ctrl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "breakwater_store_round_trips_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return uint64(f), err
		}
	}
	return 0, errors.New("no breakwater_store_round_trips_total in the metrics")
}

// clusterBudgets checks the multi-instance budget.
func clusterBudgets(r *Report) []Budget {
	b := Budget{Name: "propagation to every other instance, p99", Limit: fmt.Sprintf("≤ %d ms", budgetPropagationP99MS),
		Status: statusNA, Figure: "not measured"}
	if c := r.Cluster; c != nil && c.Propagation.Count > 0 {
		b.Figure = fmt.Sprintf("%.3f ms (p50 %.3f ms, %d changes)", c.Propagation.P99MS, c.Propagation.P50MS, c.Propagation.Count)
		b.Status = passIf(c.Propagation.P99MS <= budgetPropagationP99MS)
	}
	return []Budget{b}
}

// clusterMarkdown renders the multi-instance section.
func (r *Report) clusterMarkdown(b *strings.Builder) {
	c := r.Cluster
	if c == nil {
		return
	}
	t := table{b}
	fmt.Fprintf(b, "## Several instances on one Redis\n\n"+
		"%d gateways share their state through %s. A settings change is made on the first (PATCH /api/resilience); "+
		"the delay runs from its answer to both others showing it in GET /api/resilience, read every %.1f ms. "+
		"Then the same closed-loop load as the max-throughput scenario (%d connections, %.0f s) through the Badger gateway and through the first "+
		"Redis instance: a success reads the local view only, so Redis mode should cost nothing on this path.\n\n",
		c.Instances, c.Redis, ms(propagationPoll), r.Settings.Connections, r.Settings.ClusterSeconds)
	t.head("propagation", "changes", "p50", "p90", "p99", "max")
	p := c.Propagation
	t.row("settings change, to every other instance", strconv.Itoa(p.Count), fms(p.P50MS), fms(p.P90MS), "**"+fms(p.P99MS)+"**", fms(p.MaxMS))
	b.WriteString("\n")
	t.head("", "Badger", "Redis", "Redis vs Badger")
	d, g := c.Badger, c.RedisMode
	t.row("success", successCell(d), successCell(g), "")
	t.row("throughput", fmt.Sprintf("%.0f req/s", d.RPS), fmt.Sprintf("%.0f req/s", g.RPS), "**"+ratio(g.RPS, d.RPS)+"**")
	t.row("p50", fms(d.Latency.P50MS), fms(g.Latency.P50MS), "**"+dms(c.AddedP50MS)+"**")
	t.row("p99", fms(d.Latency.P99MS), fms(g.Latency.P99MS), "**"+dms(c.AddedP99MS)+"**")
	t.row("gateway CPU per request", fmt.Sprintf("%.1f µs", cpuPerReq(d.ProxyCPUMS, d.OK)),
		fmt.Sprintf("%.1f µs", cpuPerReq(g.ProxyCPUMS, g.OK)), "")
	t.row("Redis round trips per request", "–", fmt.Sprintf("%.4f", c.RoundTripsPerRequest), "")
	t.row("errors", errorsCell(d.Errors), errorsCell(g.Errors), "")
	b.WriteString("\n")
	if len(r.ClusterBudgets) > 0 {
		t.head("budget", "limit", "measured", "result")
		for _, bu := range r.ClusterBudgets {
			t.row(bu.Name, bu.Limit, bu.Figure, "**"+bu.Status+"**")
		}
		b.WriteString("\n")
	}
}
