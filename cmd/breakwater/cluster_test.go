package main

// Several `breakwater serve` processes sharing one Redis: changes made
// through one instance reach the others within 100 ms, failures counted
// on all of them open a breaker once at the single-instance threshold,
// a kill -9 loses no acknowledged state, and a Redis outage loses no
// request a healthy target can serve.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
)

const clusterAdmin = "cluster-admin-token-0123456789"

// clusterConfig: alpha/a1 serves m1; broke/x1 answers 402 (credits
// exhausted: a terminal state); beta/b1 answers 429 (a cooldown); gamma
// answers 404 for m404 (a model lockout); windy's two connections answer
// 503 (the window gate, when provider_cooldown is on: local profile, 2
// failures of distinct connections); dead answers 503 after DEADMS ms
// (the breaker, profile PROFILE). EXTRA is more top-level YAML.
const clusterConfig = `
server:
  listen: LISTEN
  admin_token: ` + clusterAdmin + `
state:
  backend: redis
REDIS
  redis_key_prefix: "PREFIX"
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  model_lockout: {enabled: true, error_codes: [404]}
  combo_cooldown_wait: {enabled: false}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-cl-a1}
  - id: broke
    kind: openai
    base_url: MOCK/v1
    models: [m1]
    connections:
      - {id: x1, api_key: sk-cl-x1}
  - id: beta
    kind: openai
    base_url: MOCK/v1
    models: [m1]
    connections:
      - {id: b1, api_key: sk-cl-b1}
  - id: gamma
    kind: openai
    base_url: MOCK/v1
    models: [m404]
    connections:
      - {id: g1, api_key: sk-cl-g1}
  - id: windy
    kind: openai
    profile: local
    base_url: MOCK/v1
    models: [m1]
    connections:
      - {id: w1, api_key: sk-cl-w1}
      - {id: w2, api_key: sk-cl-w2}
  - id: dead
    kind: openai
    profile: PROFILE
    base_url: MOCK/v1
    models: [m1]
    connections:
      - {id: d1, api_key: sk-cl-dead}
keys:
  - {id: k1, key: key-cl-one, scopes: ["lease:exclusive"], allowed_connections: [alpha/a1]}
  - {id: plain, key: key-cl-plain}
EXTRA
`

const clusterMockScript = `
rules:
  - key: sk-cl-x1
    responses: [{status: 402, body: '{"error":{"message":"Your credit balance is too low","type":"billing_error"}}'}]
  - key: sk-cl-b1
    responses: [{status: 429, body: '{"error":{"message":"slow down","type":"rate_limit_error"}}'}]
  - key: sk-cl-g1
    responses: [{status: 404, body: '{"error":{"message":"model not found","type":"invalid_request_error"}}'}]
  - key: sk-cl-dead
    responses: [{status: 503, latency_ms: DEADMS}]
  - key: sk-cl-w1
    responses: [{status: 503}]
  - key: sk-cl-w2
    responses: [{status: 503}]
  - responses: [{latency_ms: 2}]
`

// redisTopology is where the test's instances keep their state.
type redisTopology struct {
	name   string
	yaml   string            // the state.redis_* lines
	server *redisproc.Server // the single server, nil for a Cluster
}

// singleRedis starts one redis-server with an fsync'ed append-only file,
// so a restart keeps every acknowledged write.
func singleRedis(t *testing.T) *redisTopology {
	t.Helper()
	redisproc.Require(t)
	srv, err := redisproc.Start(filepath.Join(t.TempDir(), "redis"), "--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return &redisTopology{name: "single", yaml: "  redis_url: " + srv.URL(), server: srv}
}

// clusterRedis starts a 3-node Redis Cluster.
func clusterRedis(t *testing.T) *redisTopology {
	t.Helper()
	redisproc.Require(t)
	c, err := redisproc.StartCluster(filepath.Join(t.TempDir(), "cluster"), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &redisTopology{name: "cluster", yaml: "  redis_mode: cluster\n  redis_addrs: [" + strings.Join(c.Addrs(), ", ") + "]"}
}

// fleet is a mock upstream and n gateway instances on one Redis.
type fleet struct {
	t    *testing.T
	mock *child
	gws  []*child
	cli  *http.Client
}

// startFleet starts the mock and n instances. deadMS is the latency of the
// dead provider's 503s; profile its breaker profile.
func startFleet(t *testing.T, topo *redisTopology, n int, profile string, deadMS int) *fleet {
	t.Helper()
	return startFleetWith(t, topo, n, profile, deadMS, "")
}

// startFleetWith is startFleet with extra top-level YAML in every
// instance's configuration.
func startFleetWith(t *testing.T, topo *redisTopology, n int, profile string, deadMS int, extra string) *fleet {
	t.Helper()
	f := &fleet{t: t, cli: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	f.mock = startChild(t, "mock upstream listening on ", "mock", "--listen", freePort(t))
	script := strings.ReplaceAll(clusterMockScript, "DEADMS", fmt.Sprint(deadMS))
	if code, _ := call(t, "POST", f.mock.url+"/_mock/script", script); code != 200 {
		t.Fatalf("mock script: %d", code)
	}
	prefix := fmt.Sprintf("bwcluster:%d:", time.Now().UnixNano())
	var wg sync.WaitGroup
	f.gws = make([]*child, n)
	for i := range n {
		cfg := strings.NewReplacer("LISTEN", freePort(t), "REDIS", topo.yaml, "PREFIX", prefix, "MOCK", f.mock.url,
			"PROFILE", profile, "EXTRA", extra).Replace(clusterConfig)
		path := filepath.Join(t.TempDir(), fmt.Sprintf("gw%d.yaml", i))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.gws[i] = startChild(t, "breakwater listening on ", "serve", "--config", path)
		}()
	}
	wg.Wait()
	return f
}

// do sends one request and returns the status and the decoded JSON body.
func (f *fleet) do(method, url, body string, hdr ...string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.cli.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, err
}

// admin calls the admin API of instance i and fails the test on a
// transport error.
func (f *fleet) admin(i int, method, path, body string) (int, map[string]any) {
	f.t.Helper()
	code, m, err := f.do(method, f.gws[i].url+path, body, "Authorization", "Bearer "+clusterAdmin)
	if err != nil {
		f.t.Fatalf("%s %s on instance %d: %v", method, path, i, err)
	}
	return code, m
}

// chat sends one chat request for model to instance i.
func (f *fleet) chat(i int, model string) (int, map[string]any, error) {
	return f.do("POST", f.gws[i].url+"/v1/chat/completions",
		`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "key-cl-plain")
}

// observe polls every other instance than from until seen holds on each,
// and returns the longest wait, or fails after within.
func (f *fleet) observe(from int, within time.Duration, what string, seen func(i int) bool) time.Duration {
	f.t.Helper()
	start := time.Now()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		worst time.Duration
		late  []int
	)
	for i := range f.gws {
		if i == from {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !seen(i) {
				if time.Since(start) > 5*within {
					mu.Lock()
					late = append(late, i)
					mu.Unlock()
					return
				}
				time.Sleep(500 * time.Microsecond)
			}
			d := time.Since(start)
			mu.Lock()
			worst = max(worst, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(late) > 0 {
		f.t.Fatalf("%s: instances %v never saw it (waited %v)", what, late, 5*within)
	}
	return worst
}

// background sends chat requests for model from workers goroutines, spread
// over the instances, until the returned stop (idempotent) is called;
// every answer goes to seen (instance, status, body, error).
func (f *fleet) background(workers int, model string, seen func(i, code int, m map[string]any, err error)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				code, m, err := f.chat(w%len(f.gws), model)
				seen(w%len(f.gws), code, m, err)
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// healthOf returns instance i's health answer.
func (f *fleet) healthOf(i int) map[string]any {
	_, m := f.admin(i, "GET", "/api/monitoring/health", "")
	return m
}

// breakerOf returns provider's breaker in instance i's health answer.
func (f *fleet) breakerOf(i int, provider string) map[string]any {
	p, _ := f.healthOf(i)["providers"].(map[string]any)
	b, _ := p[provider].(map[string]any)
	return b
}

// connOf returns connection conn of provider in instance i's cooldown
// view, nil when it holds no state.
func (f *fleet) connOf(i int, provider, conn string) map[string]any {
	_, m := f.admin(i, "GET", "/api/resilience/cooldowns?provider="+provider, "")
	list, _ := m["connections"].([]any)
	for _, c := range list {
		if c, _ := c.(map[string]any); c["connection"] == conn {
			return c
		}
	}
	return nil
}

// windowGateOf returns provider's window gate in instance i's console
// state.
func (f *fleet) windowGateOf(i int, provider string) map[string]any {
	_, m := f.admin(i, "GET", "/api/console/state", "")
	list, _ := m["providers"].([]any)
	for _, p := range list {
		if p, _ := p.(map[string]any); p["id"] == provider {
			g, _ := p["window_gate"].(map[string]any)
			return g
		}
	}
	return nil
}

// pluginLoadedAt returns when instance i last loaded plugin name, "" when
// it has no such plugin.
func (f *fleet) pluginLoadedAt(i int, name string) string {
	_, m := f.admin(i, "GET", "/api/plugins", "")
	list, _ := m["plugins"].([]any)
	for _, p := range list {
		if p, _ := p.(map[string]any); p["name"] == name {
			at, _ := p["loaded_at"].(string)
			return at
		}
	}
	return ""
}

// buildExamplePlugin builds examples/NAME for wasip1 into the test's
// temporary directory and returns the module's path.
func buildExamplePlugin(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", dst, ".")
	cmd.Dir = filepath.Join("..", "..", "examples", name)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building examples/%s: %v\n%s", name, err, out)
	}
	return dst
}

// writeRoundModule rewrites the module at path with a custom section
// holding round at its end (custom sections change no behaviour), so a
// reload finds a module no instance has compiled; the file is replaced in
// one rename.
func writeRoundModule(t *testing.T, path, round string) {
	t.Helper()
	orig, err := os.ReadFile(path + ".orig")
	if os.IsNotExist(err) {
		if orig, err = os.ReadFile(path); err == nil {
			err = os.WriteFile(path+".orig", orig, 0o600)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	name, payload := "breakwater-test-round", []byte(round)
	body := binary.AppendUvarint([]byte{}, uint64(len(name)))
	body = append(append(body, name...), payload...)
	mod := append(slices.Clone(orig), 0) // section id 0: custom
	mod = append(binary.AppendUvarint(mod, uint64(len(body))), body...)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, mod, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

const propagationBudget = 100 * time.Millisecond

// TestClusterPropagation: breaker, window gate, cooldown, lockout, lease,
// settings, operator-rule, combo, rate-limit-protection, model-cap and
// plugin-reload changes made through one
// instance are seen by the two others within 100 ms each, on a single
// Redis and on a 3-node Redis Cluster. The delay is measured from the
// moment the changing call answered on the first instance to the moment
// every other instance's admin API shows the change.
func TestClusterPropagation(t *testing.T) {
	wasm := buildExamplePlugin(t, "quota-header-plugin")
	plugins := fmt.Sprintf("plugins:\n  - {name: quota-header, path: %q, hooks: [classify]}", wasm)
	for _, topo := range []func(*testing.T) *redisTopology{singleRedis, clusterRedis} {
		tp := topo(t)
		t.Run(tp.name, func(t *testing.T) {
			f := startFleetWith(t, tp, 3, "local", 1, plugins)
			var (
				mu      sync.Mutex
				samples = map[string][]time.Duration{}
				reloads [][2]time.Duration // plugin reloads: the instance's own, then the others' after its answer
			)
			record := func(kind string, d time.Duration) {
				mu.Lock()
				samples[kind] = append(samples[kind], d)
				mu.Unlock()
				if d > propagationBudget {
					t.Errorf("%s took %v to reach every instance (budget %v)", kind, d, propagationBudget)
				}
			}
			rounds := 8
			if tp.name == "cluster" {
				rounds = 4
			}
			for r := range rounds {
				from := r % 3
				// Settings patch.
				v := 2 + r%7
				if code, m := f.admin(from, "PATCH", "/api/resilience", fmt.Sprintf(`{"max_attempts_per_request": %d}`, v)); code != 200 {
					t.Fatalf("patch: %d %v", code, m)
				}
				record("settings", f.observe(from, propagationBudget, "settings patch", func(i int) bool {
					_, m := f.admin(i, "GET", "/api/resilience", "")
					return m["max_attempts_per_request"] == float64(v)
				}))

				// Breaker: the local profile opens at 2 failures.
				for range 2 {
					if code, m, err := f.chat(from, "dead/m1"); err != nil || code != 503 {
						t.Fatalf("request to dead: %d %v %v", code, m, err)
					}
				}
				if b := f.breakerOf(from, "dead"); b["state"] != "OPEN" {
					t.Fatalf("instance %d after 2 failures: %v", from, b)
				}
				record("breaker open", f.observe(from, propagationBudget, "breaker open", func(i int) bool {
					return f.breakerOf(i, "dead")["state"] == "OPEN"
				}))
				if code, m := f.admin(from, "POST", "/api/resilience/reset", `{"provider":"dead"}`); code != 200 {
					t.Fatalf("reset: %d %v", code, m)
				}
				record("breaker reset", f.observe(from, propagationBudget, "breaker reset", func(i int) bool {
					return f.breakerOf(i, "dead")["state"] == "CLOSED"
				}))

				// Window gate: on, then tripped by windy's two connections
				// failing (local profile: 2 failures of distinct
				// connections), then cleared by the reset.
				if code, m := f.admin(from, "PATCH", "/api/resilience", `{"provider_cooldown": {"enabled": true}}`); code != 200 {
					t.Fatalf("window gate on: %d %v", code, m)
				}
				record("settings", f.observe(from, propagationBudget, "window gate on", func(i int) bool {
					return f.windowGateOf(i, "windy")["enabled"] == true
				}))
				for range 2 {
					if code, m, err := f.chat(from, "windy/m1"); err != nil || code != 503 {
						t.Fatalf("request to windy: %d %v %v", code, m, err)
					}
				}
				if g := f.windowGateOf(from, "windy"); g["cooling_until"] == nil {
					t.Fatalf("instance %d: windy's window gate did not trip after two connections failed: %v", from, g)
				}
				record("window gate trip", f.observe(from, propagationBudget, "window gate trip", func(i int) bool {
					return f.windowGateOf(i, "windy")["cooling_until"] != nil
				}))
				if code, m := f.admin(from, "POST", "/api/resilience/reset", `{"provider":"windy"}`); code != 200 {
					t.Fatalf("reset windy: %d %v", code, m)
				}
				record("window gate cleared", f.observe(from, propagationBudget, "window gate cleared", func(i int) bool {
					g := f.windowGateOf(i, "windy")
					return g["cooling_until"] == nil && g["failures_in_window"] == float64(0)
				}))
				if code, m := f.admin(from, "PATCH", "/api/resilience", `{"provider_cooldown": {"enabled": false}}`); code != 200 {
					t.Fatalf("window gate off: %d %v", code, m)
				}
				record("settings", f.observe(from, propagationBudget, "window gate off", func(i int) bool {
					return f.windowGateOf(i, "windy")["enabled"] == false
				}))

				// Plugin reload: the module changed on disk, one instance
				// reloads through the admin API, every other one reloads
				// its own plugin files once it hears of it (a new
				// loaded_at). Each instance compiles the new module itself
				// (seconds on this machine), so this is timed apart from
				// the 100 ms changes: the notice is one like the others,
				// the compile is the peers' own work. Two rounds only: each
				// reload compiles the module on every instance.
				if r < 2 {
					writeRoundModule(t, wasm, fmt.Sprintf("%s-%d", tp.name, r))
					before := make([]string, len(f.gws))
					for i := range f.gws {
						before[i] = f.pluginLoadedAt(i, "quota-header")
					}
					t0 := time.Now()
					if code, m := f.admin(from, "POST", "/api/plugins/reload", ""); code != 200 {
						t.Fatalf("plugin reload: %d %v", code, m)
					}
					own := time.Since(t0)
					peers := f.observe(from, 30*time.Second/5, "plugin reload", func(i int) bool {
						at := f.pluginLoadedAt(i, "quota-header")
						return at != "" && at != before[i]
					})
					mu.Lock()
					reloads = append(reloads, [2]time.Duration{own, peers})
					mu.Unlock()
				}

				// Connection cooldown (beta/b1 answers 429), then cleared.
				if code, _, err := f.chat(from, "beta/m1"); err != nil || code != 429 {
					t.Fatalf("request to beta: %d %v", code, err)
				}
				record("cooldown", f.observe(from, propagationBudget, "cooldown", func(i int) bool {
					c := f.connOf(i, "beta", "b1")
					return c != nil && c["test_status"] == "unavailable"
				}))
				if code, m := f.admin(from, "POST", "/api/resilience/cooldowns", `{"connection_ids":["beta/b1"]}`); code != 200 {
					t.Fatalf("clear cooldowns: %d %v", code, m)
				}
				record("cooldown cleared", f.observe(from, propagationBudget, "cooldown cleared", func(i int) bool {
					return f.connOf(i, "beta", "b1") == nil
				}))

				// Model lockout (gamma answers 404 for m404), then re-enabled.
				if code, _, err := f.chat(from, "gamma/m404"); err != nil || code != 404 {
					t.Fatalf("request to gamma: %d %v", code, err)
				}
				locked := func(i int) bool {
					_, m := f.admin(i, "GET", "/api/resilience/model-cooldowns", "")
					l, _ := m["lockouts"].([]any)
					return len(l) == 1
				}
				record("lockout", f.observe(from, propagationBudget, "lockout", locked))
				if code, m := f.admin(from, "DELETE", "/api/resilience/model-cooldowns", `{"provider":"gamma","connection":"g1","model":"m404"}`); code != 200 {
					t.Fatalf("clear lockout: %d %v", code, m)
				}
				record("lockout cleared", f.observe(from, propagationBudget, "lockout cleared", func(i int) bool { return !locked(i) }))

				// Operator rule.
				rule := fmt.Sprintf(`[{"provider":"beta","status":429,"match":"round %d","scope":"connection","reason":"rate_limit","cooldown_ms":5000}]`, r)
				if code, m := f.admin(from, "PUT", "/api/policies/operator-rules", rule); code != 200 {
					t.Fatalf("operator rules: %d %v", code, m)
				}
				record("operator rule", f.observe(from, propagationBudget, "operator rule", func(i int) bool {
					_, m := f.admin(i, "GET", "/api/policies", "")
					rules, _ := m["operator_rules"].([]any)
					return len(rules) == 1 && rules[0].(map[string]any)["match"] == fmt.Sprintf("round %d", r)
				}))

				// A combo defined through the admin API.
				name := fmt.Sprintf("combo%d", r)
				if code, m := f.admin(from, "PUT", "/api/combos/"+name, `{"strategy":"priority","targets":[{"model":"alpha/m1"}]}`); code != 200 {
					t.Fatalf("put combo: %d %v", code, m)
				}
				record("combo", f.observe(from, propagationBudget, "combo", func(i int) bool {
					_, m := f.admin(i, "GET", "/api/combos", "")
					list, _ := m["combos"].([]any)
					for _, c := range list {
						if c.(map[string]any)["name"] == name {
							return true
						}
					}
					return false
				}))

				// Rate-limit protection flag.
				on := r%2 == 0
				if code, m := f.admin(from, "POST", "/api/rate-limits", fmt.Sprintf(`{"connection_id":"alpha/a1","enabled":%v}`, on)); code != 200 {
					t.Fatalf("rate-limits: %d %v", code, m)
				}
				record("rate-limit protection", f.observe(from, propagationBudget, "rate-limit protection", func(i int) bool {
					adm, _ := f.healthOf(i)["admission"].([]any)
					for _, a := range adm {
						if a := a.(map[string]any); a["provider"] == "alpha" && a["connection"] == "a1" {
							return a["rate_limit_protection"] == on
						}
					}
					return false
				}))

				// A per-model concurrency cap set at run time.
				capV := r + 1
				if code, m := f.admin(from, "PUT", "/api/resilience/model-concurrency",
					fmt.Sprintf(`{"provider":"alpha","connection":"a1","model":"m1","cap":%d}`, capV)); code != 200 {
					t.Fatalf("model cap: %d %v", code, m)
				}
				record("model concurrency cap", f.observe(from, propagationBudget, "model concurrency cap", func(i int) bool {
					_, m := f.admin(i, "GET", "/api/resilience/model-concurrency", "")
					list, _ := m["connections"].([]any)
					for _, c := range list {
						if c := c.(map[string]any); c["provider"] == "alpha" && c["connection"] == "a1" {
							caps, _ := c["caps"].(map[string]any)
							return caps["m1"] == float64(capV)
						}
					}
					return false
				}))

				// Lease: acquired on one instance, renewed with its generation
				// on every other one (leases are read from the store).
				owner := leaseOwner(1000 + r)
				lease := []string{"x-api-key", "key-cl-one", "X-Breakwater-Lease-Owner", owner}
				code, m, err := f.do("POST", f.gws[from].url+"/api/v1/session-leases", `{"action":"acquire"}`, lease...)
				if err != nil || code != 200 {
					t.Fatalf("acquire: %d %v %v", code, m, err)
				}
				gen := m["generation"]
				record("lease", f.observe(from, propagationBudget, "lease", func(i int) bool {
					code, m, err := f.do("POST", f.gws[i].url+"/api/v1/session-leases", fmt.Sprintf(`{"action":"renew","generation":%v}`, gen), lease...)
					return err == nil && code == 200 && m["generation"] == gen
				}))
				if code, _, err := f.do("POST", f.gws[(from+1)%3].url+"/api/v1/session-leases", `{"action":"release"}`, lease...); err != nil || code != 200 {
					t.Fatalf("release on another instance: %d %v", code, err)
				}
			}
			var all []time.Duration
			kinds := make([]string, 0, len(samples))
			for k, ds := range samples {
				kinds = append(kinds, k)
				all = append(all, ds...)
			}
			slices.Sort(kinds)
			for _, k := range kinds {
				ds := samples[k]
				t.Logf("%-22s n=%2d p50=%6.2fms max=%6.2fms", k, len(ds), ms(percentile(ds, 50)), ms(percentile(ds, 100)))
			}
			var own, peers []time.Duration
			for _, r := range reloads {
				own, peers = append(own, r[0]), append(peers, r[1])
			}
			t.Logf("plugin reloads: n=%d, the reloading instance's own reload p50=%.0fms max=%.0fms; every other instance reloaded %.0fms (p50) / %.0fms (max) after its answer",
				len(reloads), ms(percentile(own, 50)), ms(percentile(own, 100)), ms(percentile(peers, 50)), ms(percentile(peers, 100)))
			t.Logf("PROPAGATION %s: %d changes, p50=%.2fms p99=%.2fms max=%.2fms (to both other instances, admin API polled every 0.5 ms)",
				tp.name, len(all), ms(percentile(all, 50)), ms(percentile(all, 99)), ms(percentile(all, 100)))
			if p99 := percentile(all, 99); p99 > propagationBudget {
				t.Errorf("p99 propagation %v over the %v budget", p99, propagationBudget)
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// deadCalls is how many requests the mock received for the dead provider.
func (f *fleet) deadCalls() int {
	f.t.Helper()
	code, m := call(f.t, "GET", f.mock.url+"/_mock/stats", "")
	if code != 200 {
		f.t.Fatalf("mock stats: %d", code)
	}
	byKey, _ := m["by_key"].(map[string]any)
	k, _ := byKey["sk-cl-dead"].(map[string]any)
	n, _ := k["calls"].(float64)
	return int(n)
}

// TestClusterBreakerOpensOnceAtTheThreshold: 200 requests spread over three
// instances against a provider that fails (apikey profile: DEGRADED at 7,
// OPEN at 12). All 200 at once: the breaker opens exactly once, at a
// failure count of 12, whatever instance counted them. Then, after a
// reset, 200 requests from 12 clients in flight at a time (4 per
// instance): the upstream sees at most threshold + 2·(12−1) = 34 calls —
// the 12 that open the breaker, the ≤ 11 others in flight then, and for
// each of those at most one more started before its instance learned of
// the opening — where three unshared breakers would need at least 3 × 12.
func TestClusterBreakerOpensOnceAtTheThreshold(t *testing.T) {
	const (
		threshold = 12
		total     = 200
		inFlight  = 12
	)
	f := startFleet(t, singleRedis(t), 3, "apikey", 30)
	check := func(phase string) {
		t.Helper()
		for i := range f.gws {
			b := f.breakerOf(i, "dead")
			trans, _ := b["transitions"].([]any)
			opens := 0 // since the last manual reset
			for _, tr := range trans {
				switch tr.(map[string]any)["to"] {
				case "OPEN":
					opens++
				case "CLOSED":
					opens = 0
				}
			}
			if b["state"] != "OPEN" || b["failure_count"] != float64(threshold) || opens != 1 {
				t.Fatalf("%s: instance %d shows %v with %v failures and %d openings (%v); want OPEN, %d, 1",
					phase, i, b["state"], b["failure_count"], opens, trans, threshold)
			}
		}
	}
	var wg sync.WaitGroup
	var codes sync.Map
	start := make(chan struct{})
	for n := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code, _, err := f.chat(n%3, "dead/m1")
			if err != nil {
				t.Error(err)
			}
			v, _ := codes.LoadOrStore(code, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}()
	}
	close(start)
	wg.Wait()
	codes.Range(func(k, v any) bool {
		if k.(int) != 503 {
			t.Errorf("%d requests answered %d, want 503 (upstream error or provider_circuit_open)", v.(*atomic.Int64).Load(), k)
		}
		return true
	})
	// Let every instance apply the last notices.
	time.Sleep(100 * time.Millisecond)
	check("200 at once")
	t.Logf("200 concurrent requests: %d reached the dead provider; the breaker opened once, at %d", f.deadCalls(), threshold)

	if code, m := f.admin(0, "POST", "/api/resilience/reset", `{"provider":"dead"}`); code != 200 {
		t.Fatalf("reset: %d %v", code, m)
	}
	f.observe(0, propagationBudget, "reset", func(i int) bool { return f.breakerOf(i, "dead")["state"] == "CLOSED" })
	if code, _ := call(t, "POST", f.mock.url+"/_mock/reset", ""); code != 200 {
		t.Fatal("mock reset")
	}
	var next atomic.Int64
	for w := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= total {
				if code, _, err := f.chat(w%3, "dead/m1"); err != nil || code != 503 {
					t.Errorf("paced request: %d %v", code, err)
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	calls := f.deadCalls()
	if bound := threshold + 2*(inFlight-1); calls < threshold || calls > bound {
		t.Fatalf("%d requests with %d in flight: the dead provider got %d calls, want %d..%d", total, inFlight, calls, threshold, bound)
	}
	check("paced")
	t.Logf("%d requests, %d in flight over 3 instances: %d upstream calls (bound %d; three unshared breakers: ≥ %d)",
		total, inFlight, calls, threshold+2*(inFlight-1), 3*threshold)
}

// TestClusterKill9KeepsAcknowledgedState: under load on three instances,
// leases acquired and a terminal state entered through one instance are
// acknowledged; that instance is killed with SIGKILL; the survivors still
// hold every lease at its generation and the terminal state.
func TestClusterKill9KeepsAcknowledgedState(t *testing.T) {
	f := startFleet(t, singleRedis(t), 3, "apikey", 5)
	var answered atomic.Int64
	stop := f.background(6, "alpha/m1", func(_, _ int, _ map[string]any, err error) {
		if err == nil {
			answered.Add(1)
		} else {
			time.Sleep(5 * time.Millisecond) // the killed instance
		}
	})
	defer stop()
	const victim, owners = 1, 30
	leaseHdr := func(n int) []string {
		return []string{"x-api-key", "key-cl-one", "X-Breakwater-Lease-Owner", leaseOwner(2000 + n)}
	}
	for n := range owners {
		code, m, err := f.do("POST", f.gws[victim].url+"/api/v1/session-leases", `{"action":"acquire"}`, leaseHdr(n)...)
		if err != nil || code != 200 || m["generation"] != float64(1) {
			t.Fatalf("lease %d: %d %v %v", n, code, m, err)
		}
	}
	// broke/x1 answers 402 through the victim: credits_exhausted, written
	// before the answer.
	if code, m, err := f.chat(victim, "broke/m1"); err != nil || code != 402 {
		t.Fatalf("request to broke: %d %v %v", code, m, err)
	}
	terminal := f.connOf(victim, "broke", "x1")
	if terminal == nil || terminal["test_status"] != "credits_exhausted" {
		t.Fatalf("broke/x1 on the victim: %v, want credits_exhausted", terminal)
	}
	if err := f.gws[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-f.gws[victim].exited
	stop()
	t.Logf("SIGKILL of instance %d after %d answered requests; acknowledged: %d leases, broke/x1 credits_exhausted", victim, answered.Load(), owners)
	for _, i := range []int{0, 2} {
		for n := range owners {
			code, m, err := f.do("POST", f.gws[i].url+"/api/v1/session-leases", `{"action":"renew","generation":1}`, leaseHdr(n)...)
			if err != nil || code != 200 || m["generation"] != float64(1) || m["state"] != "ACTIVE" {
				t.Errorf("lease %d on instance %d after the kill: %d %v %v", n, i, code, m, err)
			}
		}
		if c := f.connOf(i, "broke", "x1"); c == nil || c["test_status"] != "credits_exhausted" {
			t.Errorf("instance %d after the kill: broke/x1 = %v, want credits_exhausted", i, c)
		}
	}
}

// TestClusterRedisOutageLosesNoRequest: three instances under load on a
// healthy provider; Redis is killed for 5 s and restarted (its
// append-only file keeps what was acknowledged). Every request is
// answered 200; each instance shows the outage in its health answer and
// in breakwater_store_up, logs it once and its end once, keeps the state
// acknowledged before it, and propagates changes again after it.
func TestClusterRedisOutageLosesNoRequest(t *testing.T) {
	topo := singleRedis(t)
	f := startFleet(t, topo, 3, "apikey", 5)
	if code, _, err := f.chat(0, "broke/m1"); err != nil || code != 402 {
		t.Fatalf("request to broke: %d %v", code, err)
	}
	f.observe(0, propagationBudget, "terminal state", func(i int) bool { return f.connOf(i, "broke", "x1") != nil })

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := f.background(9, "alpha/m1", func(i, code int, m map[string]any, err error) {
		if err != nil || code != 200 {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprintf("instance %d: %d %v %v", i, code, m, err))
			return
		}
		ok.Add(1)
	})
	defer stop()
	time.Sleep(time.Second)
	before := ok.Load()
	topo.server.Kill()
	t0 := time.Now()
	time.Sleep(2500 * time.Millisecond)
	for i := range f.gws {
		st, _ := f.healthOf(i)["store"].(map[string]any)
		if st["up"] != false || st["backend"] != "redis" {
			t.Errorf("instance %d health during the outage: store %v, want up false", i, st)
		}
		if _, body := metricsOf(t, f, i); !strings.Contains(body, "breakwater_store_up 0") {
			t.Errorf("instance %d metrics during the outage lack breakwater_store_up 0", i)
		}
	}
	time.Sleep(5*time.Second - time.Since(t0))
	during := ok.Load() - before
	if err := topo.server.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Redis down for %v; %d requests answered meanwhile", time.Since(t0).Round(time.Millisecond), during)
	for i := range f.gws {
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, _ := f.healthOf(i)["store"].(map[string]any)
			if st["up"] == true {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %d: store still down 5 s after Redis returned: %v", i, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed during the Redis outage; first: %v", n, n+ok.Load(), firstErr.Load())
	}
	if during < 100 {
		t.Errorf("only %d requests answered during the outage: too little load to call it under load", during)
	}
	for i := range f.gws {
		if c := f.connOf(i, "broke", "x1"); c == nil || c["test_status"] != "credits_exhausted" {
			t.Errorf("instance %d after the outage: broke/x1 = %v, want the acknowledged credits_exhausted", i, c)
		}
		logs := f.gws[i].stderr.String()
		if n := strings.Count(logs, "Redis is unreachable"); n != 1 {
			t.Errorf("instance %d logged the outage %d times, want once", i, n)
		}
		if n := strings.Count(logs, "Redis is reachable again"); n != 1 {
			t.Errorf("instance %d logged the end of the outage %d times, want once", i, n)
		}
	}
	if code, m := f.admin(0, "PATCH", "/api/resilience", `{"max_attempts_per_request": 7}`); code != 200 {
		t.Fatalf("patch after the outage: %d %v", code, m)
	}
	d := f.observe(0, propagationBudget, "settings after the outage", func(i int) bool {
		_, m := f.admin(i, "GET", "/api/resilience", "")
		return m["max_attempts_per_request"] == float64(7)
	})
	if d > propagationBudget {
		t.Errorf("a change after the outage took %v to propagate", d)
	}
	t.Logf("%d requests, 0 failed; after the outage a change propagated in %v", ok.Load(), d.Round(time.Microsecond))
}

// metricsOf returns instance i's /metrics text.
func metricsOf(t *testing.T, f *fleet, i int) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.gws[i].url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+clusterAdmin)
	resp, err := f.cli.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
