package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// envMap returns a LookupEnv over m.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// contractEnv sets the variables docs/api.md's example names.
var contractEnv = map[string]string{
	"BREAKWATER_ADMIN_TOKEN": "admin-s3cret",
	"OPENAI_KEY_A":           "sk-openai-s3cret",
	"APP1_KEY":               "app1-s3cret",
}

func parseString(t *testing.T, src string, env map[string]string) (*Config, error) {
	t.Helper()
	return ParseWithOptions([]byte(src), "breakwater.yaml", Options{LookupEnv: envMap(env)})
}

func mustParse(t *testing.T, src string, env map[string]string) *Config {
	t.Helper()
	c, err := parseString(t, src, env)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return c
}

func bp(b bool) *bool { return &b }

func TestContractExampleParses(t *testing.T) {
	c, err := LoadWithOptions("testdata/contract.yaml", Options{LookupEnv: envMap(contractEnv)})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	want := &Config{
		Server: Server{
			Listen:             "127.0.0.1:8080",
			AdminToken:         "admin-s3cret",
			MaxRequestBytes:    10485760,
			ConnectTimeoutMS:   10000,
			FirstByteTimeoutMS: 600000,
			IdleTimeoutMS:      60000,
			// Not in the contract's example: their defaults.
			RequestDeadlineMS:    900000,
			MaxInflightBodyBytes: 67108864,
			WriteTimeoutMS:       60000,
		},
		State: State{Backend: "badger", Path: "./data", RedisURL: "redis://127.0.0.1:6379/0"},
		Providers: []Provider{{
			ID:                    "openai",
			Kind:                  "openai",
			Profile:               "apikey",
			BaseURL:               "https://api.openai.com/v1",
			Models:                []string{"gpt-4o-mini", "gpt-4o"},
			QuotaFamilies:         map[string][]string{"codex": {"gpt-5*"}},
			UseUpstreamRetryHints: bp(true),
			Connections: []Connection{{
				ID:                  "key-a",
				APIKey:              "sk-openai-s3cret",
				MaxConcurrent:       2,
				RateLimitProtection: true,
				RateLimitOverrides: RateLimitOverrides{
					MaxConcurrent:      4,
					ModelConcurrency:   map[string]int{"gpt-4o": 1},
					MaxWaitMS:          30000,
					ExecutionMaxWaitMS: 600000,
				},
			}},
		}},
		Combos: []Combo{{
			Name:     "smart",
			Strategy: "priority",
			Targets: []Target{
				{Model: "openai/gpt-4o-mini"},
				{Model: "anthropic/claude-haiku-4", Weight: 2, Connection: "key-b", PriceIn: 0.8, PriceOut: 4},
			},
		}},
		Keys: []Key{{
			ID:                 "app1",
			Key:                "app1-s3cret",
			Scopes:             []string{"lease:exclusive"},
			AllowedConnections: []string{"openai/key-a"},
		}},
		Resilience: Resilience{
			CircuitBreaker: map[string]BreakerProfile{
				"apikey": breakerProfile(7, 12, 30000),
				"oauth":  breakerProfile(5, 8, 60000),
				"local":  breakerProfile(2, 2, 15000),
			},
			ProviderCooldown: ProviderCooldown{
				APIKey: GateProfile{FailureThreshold: 15, FailureWindowMS: 1800000, CooldownMS: 600000},
				OAuth:  GateProfile{FailureThreshold: 10, FailureWindowMS: 900000, CooldownMS: 300000},
				Local:  GateProfile{FailureThreshold: 2, FailureWindowMS: 300000, CooldownMS: 60000},
			},
			ConnectionCooldown: map[string]CooldownProfile{
				"apikey": {BaseMS: 3000, MaxBackoffLevel: 5},
				"oauth":  {BaseMS: 5000, MaxBackoffLevel: 8},
				"local":  {BaseMS: 2000, MaxBackoffLevel: 3},
			},
			StreamStallCooldown:  Toggle{Enabled: bp(false)},
			LocalTimeoutCooldown: Toggle{Enabled: bp(false)},
			ModelLockout: ModelLockout{
				ErrorCodes:            []int{403, 404, 429, 502, 503, 504},
				BaseCooldownMS:        120000,
				MaxCooldownMS:         1800000,
				MaxBackoffSteps:       10,
				UseExponentialBackoff: bp(true),
			},
			ComboCooldownWait:          ComboCooldownWait{Enabled: bp(true), MaxWaitMS: 5000, MaxAttempts: 2, BudgetMS: 8000},
			RequestQueue:               RequestQueue{MaxWaitMS: 30000, ExecutionMaxWaitMS: 600000, AutoEnableAPIKeyProviders: bp(true)},
			QuotaShareConcurrencyLimit: Toggle{Enabled: bp(true)},
			StreamRecovery: StreamRecovery{ThroughputWatchdog: ThroughputWatchdog{
				WarmupMS: 5000, WindowMS: 10000, MinUsefulBytesPerSecond: 8, MinUsefulBytes: 64,
			}},
			MaxAttemptsPerRequest: 10,
		},
		Policies: Policies{Dir: "./policies.d", EvalTimeoutMS: 50,
			Bundle:      PolicyBundle{PollIntervalMS: 30000, Algorithm: "RS256", SigningRequired: bp(false)},
			DecisionLog: DecisionLog{Buffer: 1000, FileMaxBytes: 104857600, BatchSize: 100, FlushIntervalMS: 5000, QueueSize: 10000},
		},
		Plugins: []Plugin{{Name: "my-rules", Path: "./plugins/my-rules.wasm", Hooks: []string{"classify"}}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("contract config mismatch:\n got %#v\nwant %#v", c, want)
		// %#v redacts secrets; compare them separately for a readable diff.
		if c.Server.AdminToken.Value() != want.Server.AdminToken.Value() {
			t.Errorf("admin token not resolved from env")
		}
	}
}

// The contract's resilience block is exactly the defaults: an empty file
// must yield the same resilience settings.
func TestContractResilienceEqualsDefaults(t *testing.T) {
	c, err := LoadWithOptions("testdata/contract.yaml", Options{LookupEnv: envMap(contractEnv)})
	if err != nil {
		t.Fatal(err)
	}
	if d := DefaultResilience(); !reflect.DeepEqual(c.Resilience, d) {
		t.Errorf("defaults differ from docs/api.md:\n got %+v\nwant %+v", d, c.Resilience)
	}
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, "", nil)
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.listen", c.Server.Listen, "127.0.0.1:8080"},
		{"server.max_request_bytes", c.Server.MaxRequestBytes, int64(10485760)},
		{"server.connect_timeout_ms", c.Server.ConnectTimeoutMS, int64(10000)},
		{"server.first_byte_timeout_ms", c.Server.FirstByteTimeoutMS, int64(600000)},
		{"server.idle_timeout_ms", c.Server.IdleTimeoutMS, int64(60000)},
		{"server.request_deadline_ms", c.Server.RequestDeadlineMS, int64(900000)},
		{"server.max_inflight_body_bytes", c.Server.MaxInflightBodyBytes, int64(67108864)},
		{"server.write_timeout_ms", c.Server.WriteTimeoutMS, int64(60000)},
		{"state.backend", c.State.Backend, "badger"},
		{"state.path", c.State.Path, "./data"},
		{"policies.dir", c.Policies.Dir, "./policies.d"},
		{"policies.eval_timeout_ms", c.Policies.EvalTimeoutMS, int64(50)},
		{"circuit_breaker.apikey", c.Resilience.CircuitBreaker["apikey"], breakerProfile(7, 12, 30000)},
		{"circuit_breaker.oauth", c.Resilience.CircuitBreaker["oauth"], breakerProfile(5, 8, 60000)},
		// local: degradation derived = ceil(60% of 2) = 2.
		{"circuit_breaker.local", c.Resilience.CircuitBreaker["local"], breakerProfile(2, 2, 15000)},
		{"connection_cooldown.apikey", c.Resilience.ConnectionCooldown["apikey"], CooldownProfile{3000, 5}},
		{"connection_cooldown.oauth", c.Resilience.ConnectionCooldown["oauth"], CooldownProfile{5000, 8}},
		{"connection_cooldown.local", c.Resilience.ConnectionCooldown["local"], CooldownProfile{2000, 3}},
		{"provider_cooldown.enabled", c.Resilience.ProviderCooldown.Enabled, false},
		{"stream_stall_cooldown.enabled", *c.Resilience.StreamStallCooldown.Enabled, false},
		{"local_timeout_cooldown.enabled", *c.Resilience.LocalTimeoutCooldown.Enabled, false},
		{"concurrency.global", c.Resilience.Concurrency.Global, 0},
		{"stream_recovery.hard_deadline_ms", c.Resilience.StreamRecovery.HardDeadlineMS, int64(0)},
		{"model_lockout.enabled", c.Resilience.ModelLockout.Enabled, false},
		{"model_lockout.error_codes", c.Resilience.ModelLockout.ErrorCodes, []int{403, 404, 429, 502, 503, 504}},
		{"model_lockout.base_cooldown_ms", c.Resilience.ModelLockout.BaseCooldownMS, int64(120000)},
		{"model_lockout.max_cooldown_ms", c.Resilience.ModelLockout.MaxCooldownMS, int64(1800000)},
		{"model_lockout.max_backoff_steps", c.Resilience.ModelLockout.MaxBackoffSteps, 10},
		{"model_lockout.use_exponential_backoff", *c.Resilience.ModelLockout.UseExponentialBackoff, true},
		{"combo_cooldown_wait", c.Resilience.ComboCooldownWait, ComboCooldownWait{bp(true), 5000, 2, 8000}},
		{"request_queue", c.Resilience.RequestQueue, RequestQueue{30000, 600000, 0, bp(true)}},
		{"quota_share_concurrency_limit.enabled", *c.Resilience.QuotaShareConcurrencyLimit.Enabled, true},
		{"stream_recovery.content_stall_timeout_ms", c.Resilience.StreamRecovery.ContentStallTimeoutMS, int64(0)},
		{"throughput_watchdog", c.Resilience.StreamRecovery.ThroughputWatchdog, ThroughputWatchdog{false, 5000, 10000, 8, 64}},
		{"session_affinity_ttl_ms", c.Resilience.SessionAffinityTTLMS, int64(0)},
		{"max_attempts_per_request", c.Resilience.MaxAttemptsPerRequest, 10},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %+v, want %+v", ch.name, ch.got, ch.want)
		}
	}
}

func TestApplyDefaultsIdempotent(t *testing.T) {
	c := mustParse(t, "", nil)
	before := fmt.Sprintf("%+v", *c)
	ApplyDefaults(c)
	if after := fmt.Sprintf("%+v", *c); after != before {
		t.Errorf("second ApplyDefaults changed the config:\n%s\n%s", before, after)
	}
}

func TestPerProfileDefaultsMerge(t *testing.T) {
	c := mustParse(t, `
resilience:
  circuit_breaker:
    oauth: {failure_threshold: 20}
    apikey: {failure_threshold: 5}
    local: {failure_threshold: 10, reset_ms: 5000}
  connection_cooldown:
    oauth: {base_ms: 9000}
  model_lockout: {enabled: true, base_cooldown_ms: 60000}
  combo_cooldown_wait: {max_wait_ms: 1000}
`, nil)
	r := c.Resilience
	cases := []struct {
		name      string
		got, want any
	}{
		// Zero fields keep the profile default.
		{"oauth", r.CircuitBreaker["oauth"], breakerProfile(5, 20, 60000)},
		// The default degradation 7 would not be below an open threshold of
		// 5, so it is derived: ceil(60% of 5) = 3.
		{"apikey", r.CircuitBreaker["apikey"], breakerProfile(3, 5, 30000)},
		// local: ceil(60% of 10) = 6.
		{"local", r.CircuitBreaker["local"], breakerProfile(6, 10, 5000)},
		{"cooldown oauth", r.ConnectionCooldown["oauth"], CooldownProfile{9000, 8}},
		// Profiles not mentioned keep every default.
		{"cooldown apikey", r.ConnectionCooldown["apikey"], CooldownProfile{3000, 5}},
		{"lockout enabled", r.ModelLockout.Enabled, true},
		{"lockout base", r.ModelLockout.BaseCooldownMS, int64(60000)},
		{"lockout max", r.ModelLockout.MaxCooldownMS, int64(1800000)},
		{"combo wait", r.ComboCooldownWait, ComboCooldownWait{bp(true), 1000, 2, 8000}},
	}
	for _, tc := range cases {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}

func TestProviderDefaults(t *testing.T) {
	c := mustParse(t, `
providers:
  - {id: a, kind: openai, base_url: "https://a.example/v1", models: [m], connections: [{id: c}]}
  - {id: b, kind: anthropic, profile: oauth, base_url: "https://b.example", models: [m], connections: [{id: c}]}
  - {id: c, kind: openai, profile: local, base_url: "http://127.0.0.1:8000/v1", models: [m], connections: [{id: c}]}
  - {id: d, kind: openai, use_upstream_retry_hints: false, base_url: "https://d.example", models: [m], connections: [{id: c}]}
combos:
  - {name: x, targets: [{model: a/m}]}
`, nil)
	want := []struct {
		profile string
		hints   bool
	}{{"apikey", true}, {"oauth", false}, {"local", false}, {"apikey", false}}
	for i, w := range want {
		p := c.Providers[i]
		if p.Profile != w.profile || p.UseUpstreamRetryHints == nil || *p.UseUpstreamRetryHints != w.hints {
			t.Errorf("providers[%d]: profile %q hints %v, want %q %v", i, p.Profile, p.UseUpstreamRetryHints, w.profile, w.hints)
		}
	}
	if c.Combos[0].Strategy != "priority" {
		t.Errorf("combo strategy default = %q, want priority", c.Combos[0].Strategy)
	}
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "key")
	if err := os.WriteFile(secretFile, []byte("from-file-s3cret\r\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, fmt.Sprintf(`
server: {admin_token: "file:%s"}
providers:
  - id: p
    kind: openai
    base_url: https://api.example.com
    models: [m]
    connections:
      - {id: lit, api_key: literal-s3cret}
      - {id: env, api_key: env:KEY_ENV}
`, secretFile), map[string]string{"KEY_ENV": "env-s3cret"})
	if got := c.Server.AdminToken.Value(); got != "from-file-s3cret" {
		t.Errorf("file secret = %q, want trailing newlines trimmed", got)
	}
	if got := c.Providers[0].Connections[0].APIKey.Value(); got != "literal-s3cret" {
		t.Errorf("literal secret = %q", got)
	}
	if got := c.Providers[0].Connections[1].APIKey.Value(); got != "env-s3cret" {
		t.Errorf("env secret = %q", got)
	}
}

func TestPrintingNeverRevealsSecrets(t *testing.T) {
	env := map[string]string{
		"BREAKWATER_ADMIN_TOKEN": "admin-s3cret",
		"OPENAI_KEY_A":           "sk-openai-s3cret",
		"APP1_KEY":               "app1-s3cret",
	}
	c, err := LoadWithOptions("testdata/contract.yaml", Options{LookupEnv: envMap(env)})
	if err != nil {
		t.Fatal(err)
	}
	c.Providers[0].Connections[0].ProxyURL = "http://user:proxy-s3cret@proxy:3128"
	c.State.RedisURL = "redis://:redis-s3cret@host:6379/0"
	secrets := []string{"admin-s3cret", "sk-openai-s3cret", "app1-s3cret", "proxy-s3cret", "redis-s3cret"}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, val := range []any{c, *c, c.Server, c.Providers[0].Connections, c.Keys} {
			out := fmt.Sprintf(verb, val)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("%s of %T reveals %q", verb, val, s)
				}
			}
		}
	}
	if !strings.Contains(fmt.Sprintf("%v", c.Server), "[redacted]") {
		t.Errorf("%%v of Server should show [redacted] for the admin token")
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		t.Errorf("a missing file is not a validation error")
	}
}

func TestMergeKeysAndAnchors(t *testing.T) {
	c := mustParse(t, `
providers:
  - &base {id: a, kind: anthropic, base_url: "https://a.example", models: [m1], connections: [{id: c}]}
  - <<: *base
    id: b
    models: [m2]
`, nil)
	b := c.Providers[1]
	if b.ID != "b" || b.Kind != "anthropic" || b.BaseURL != "https://a.example" || !reflect.DeepEqual(b.Models, []string{"m2"}) {
		t.Errorf("merged provider = %+v", b)
	}
}

func TestValidateWithoutPositions(t *testing.T) {
	c := mustParse(t, "", nil)
	c.Resilience.MaxAttemptsPerRequest = 0
	err := c.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 {
		t.Fatalf("Validate() = %v, want one error", err)
	}
	fe := ve.Errors[0]
	if fe.Path != "resilience.max_attempts_per_request" || fe.Line != 0 || fe.File != "" {
		t.Errorf("error = %+v", fe)
	}
	if got := fe.Error(); got != "resilience.max_attempts_per_request: must be between 1 and 100 (got 0)" {
		t.Errorf("Error() = %q", got)
	}
}

func TestRedisTopologyAndSecrets(t *testing.T) {
	c := mustParse(t, "state:\n  backend: redis\n  redis_mode: sentinel\n  redis_master_name: mymaster\n"+
		"  redis_username: env:RU\n  redis_password: file:"+writeSecret(t, "pw-from-file\n")+"\n  redis_tls: true\n",
		map[string]string{"RU": "gateway", "BREAKWATER_STATE_REDIS_ADDRS": "10.0.0.1:26379, 10.0.0.2:26379"})
	s := c.State
	if s.RedisMode != "sentinel" || s.RedisMasterName != "mymaster" || !s.RedisTLS ||
		s.RedisUsername.Value() != "gateway" || s.RedisPassword.Value() != "pw-from-file" {
		t.Errorf("state = %#v", s)
	}
	if len(s.RedisAddrs) != 2 || s.RedisAddrs[0] != "10.0.0.1:26379" || s.RedisAddrs[1] != "10.0.0.2:26379" {
		t.Errorf("redis_addrs from the environment = %q", s.RedisAddrs)
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", s, s, s), "pw-from-file") {
		t.Error("the Redis password shows when the state is printed")
	}
	if got := strings.Join(c.Secrets(), " "); !strings.Contains(got, "pw-from-file") {
		t.Errorf("Secrets() lacks the Redis password: %q", got)
	}
}

func TestRedisBackend(t *testing.T) {
	c := mustParse(t, "state: {backend: redis, redis_url: env:REDIS_URL}\n",
		map[string]string{"REDIS_URL": "rediss://:pw@redis.internal:6380/1"})
	if c.State.Backend != "redis" || c.State.RedisURL.Value() != "rediss://:pw@redis.internal:6380/1" {
		t.Errorf("state = %+v", c.State)
	}
}

func TestSecretsListsEveryCredential(t *testing.T) {
	c := mustParse(t, `
server: {admin_token: admin-token-1}
state: {backend: redis, redis_url: "redis://:redis-pass-1@127.0.0.1:6379/0"}
providers:
  - {id: p, kind: openai, base_url: "https://api.example.com", models: [m],
     connections: [{id: a, api_key: key-a-123, proxy_url: "http://u:proxy-pass-1@127.0.0.1:3128"}, {id: b}]}
keys:
  - {id: k, key: client-key-1}
`, nil)
	got := strings.Join(c.Secrets(), " ")
	for _, want := range []string{"admin-token-1", "redis-pass-1", "key-a-123", "proxy-pass-1", "client-key-1", "http://u:proxy-pass-1@127.0.0.1:3128"} {
		if !strings.Contains(got, want) {
			t.Errorf("Secrets() lacks %q: %q", want, got)
		}
	}
}

// writeSecret writes a secret file and returns its path.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The in-flight body budget defaults to 64 MiB, or to max_request_bytes
// when that is larger: a larger body limit alone never fails validation.
func TestInflightBodyBudgetDefault(t *testing.T) {
	if c := mustParse(t, "server: {max_request_bytes: 104857600}\n", nil); c.Server.MaxInflightBodyBytes != 104857600 {
		t.Fatalf("budget %d with a 100 MiB body limit", c.Server.MaxInflightBodyBytes)
	}
	if c := mustParse(t, "", nil); c.Server.MaxInflightBodyBytes != 64<<20 {
		t.Fatalf("default budget %d", c.Server.MaxInflightBodyBytes)
	}
}
