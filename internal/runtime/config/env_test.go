package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestEnvOverrides(t *testing.T) {
	file := `
server:
  listen: 127.0.0.1:9000
  max_request_bytes: 1000
resilience:
  max_attempts_per_request: 4
  circuit_breaker:
    oauth: {failure_threshold: 20}
`
	cases := []struct {
		name  string
		env   map[string]string
		check func(c *Config) any
		want  any
	}{
		{"no override keeps the file", nil,
			func(c *Config) any { return c.Server.Listen }, "127.0.0.1:9000"},
		{"server listen", map[string]string{"BREAKWATER_SERVER_LISTEN": "[::1]:7000"},
			func(c *Config) any { return c.Server.Listen }, "[::1]:7000"},
		{"int over file", map[string]string{"BREAKWATER_SERVER_MAX_REQUEST_BYTES": "2048"},
			func(c *Config) any { return c.Server.MaxRequestBytes }, int64(2048)},
		{"empty value is ignored", map[string]string{"BREAKWATER_SERVER_MAX_REQUEST_BYTES": ""},
			func(c *Config) any { return c.Server.MaxRequestBytes }, int64(1000)},
		{"secret literal", map[string]string{"BREAKWATER_SERVER_ADMIN_TOKEN": "tok"},
			func(c *Config) any { return c.Server.AdminToken.Value() }, "tok"},
		{"secret reference", map[string]string{"BREAKWATER_SERVER_ADMIN_TOKEN": "env:OTHER", "OTHER": "tok2"},
			func(c *Config) any { return c.Server.AdminToken.Value() }, "tok2"},
		{"state backend", map[string]string{"BREAKWATER_STATE_BACKEND": "memory"},
			func(c *Config) any { return c.State.Backend }, "memory"},
		{"policies dir", map[string]string{"BREAKWATER_POLICIES_DIR": "/etc/bw/rules"},
			func(c *Config) any { return c.Policies.Dir }, "/etc/bw/rules"},
		{"policy eval timeout", map[string]string{"BREAKWATER_POLICIES_EVAL_TIMEOUT_MS": "200"},
			func(c *Config) any { return c.Policies.EvalTimeoutMS }, int64(200)},
		{"max attempts", map[string]string{"BREAKWATER_RESILIENCE_MAX_ATTEMPTS_PER_REQUEST": "7"},
			func(c *Config) any { return c.Resilience.MaxAttemptsPerRequest }, 7},
		{"nested bool", map[string]string{"BREAKWATER_RESILIENCE_MODEL_LOCKOUT_ENABLED": "true"},
			func(c *Config) any { return c.Resilience.ModelLockout.Enabled }, true},
		{"pointer bool off", map[string]string{"BREAKWATER_RESILIENCE_COMBO_COOLDOWN_WAIT_ENABLED": "off"},
			func(c *Config) any { return *c.Resilience.ComboCooldownWait.Enabled }, false},
		{"deeply nested", map[string]string{"BREAKWATER_RESILIENCE_STREAM_RECOVERY_THROUGHPUT_WATCHDOG_WINDOW_MS": "2000"},
			func(c *Config) any { return c.Resilience.StreamRecovery.ThroughputWatchdog.WindowMS }, int64(2000)},
		{"int list", map[string]string{"BREAKWATER_RESILIENCE_MODEL_LOCKOUT_ERROR_CODES": "429, 503"},
			func(c *Config) any { return c.Resilience.ModelLockout.ErrorCodes }, []int{429, 503}},
		{"per-profile map", map[string]string{"BREAKWATER_RESILIENCE_CONNECTION_COOLDOWN_LOCAL_BASE_MS": "750"},
			func(c *Config) any { return c.Resilience.ConnectionCooldown["local"] }, CooldownProfile{750, 3}},
		{"spec breaker name", map[string]string{"BREAKWATER_CIRCUIT_BREAKER_APIKEY_FAILURE_THRESHOLD": "30"},
			func(c *Config) any { return c.Resilience.CircuitBreaker["apikey"] }, breakerProfile(7, 30, 30000)},
		{"spec breaker reset over file profile", map[string]string{"BREAKWATER_CIRCUIT_BREAKER_OAUTH_RESET_MS": "5000"},
			func(c *Config) any { return c.Resilience.CircuitBreaker["oauth"] }, breakerProfile(5, 20, 5000)},
		{"spec breaker degradation", map[string]string{"BREAKWATER_CIRCUIT_BREAKER_LOCAL_DEGRADATION_THRESHOLD": "1"},
			func(c *Config) any { return c.Resilience.CircuitBreaker["local"] }, breakerProfile(1, 2, 15000)},
		{"breaker kind cooldown", map[string]string{"BREAKWATER_CIRCUIT_BREAKER_APIKEY_COOLDOWN_BY_KIND_TIMEOUT": "90000"},
			func(c *Config) any { return c.Resilience.CircuitBreaker["apikey"].CooldownByKind.TimeoutMS }, int64(90000)},
		{"breaker exit run", map[string]string{"BREAKWATER_CIRCUIT_BREAKER_OAUTH_DEGRADED_EXIT_SUCCESSES": "5"},
			func(c *Config) any { return c.Resilience.CircuitBreaker["oauth"].DegradedExitSuccesses }, 5},
		{"window gate spec name", map[string]string{"BREAKWATER_PROVIDER_COOLDOWN_APIKEY_FAILURE_THRESHOLD": "20"},
			func(c *Config) any { return c.Resilience.ProviderCooldown.APIKey }, GateProfile{20, 1800000, 600000}},
		{"window gate switch", map[string]string{"BREAKWATER_PROVIDER_COOLDOWN_ENABLED": "on"},
			func(c *Config) any { return c.Resilience.ProviderCooldown.Enabled }, true},
		{"window gate resilience spelling", map[string]string{"BREAKWATER_RESILIENCE_PROVIDER_COOLDOWN_OAUTH_COOLDOWN_MS": "60000"},
			func(c *Config) any { return c.Resilience.ProviderCooldown.OAuth.CooldownMS }, int64(60000)},
		{"emergency fallback default", map[string]string{"BREAKWATER_EMERGENCY_FALLBACK": "true"},
			func(c *Config) any { return c.Resilience.EmergencyFallback.Enabled }, true},
		{"spec name wins over resilience spelling", map[string]string{
			"BREAKWATER_RESILIENCE_CIRCUIT_BREAKER_OAUTH_FAILURE_THRESHOLD": "40",
			"BREAKWATER_CIRCUIT_BREAKER_OAUTH_FAILURE_THRESHOLD":            "50",
		}, func(c *Config) any { return c.Resilience.CircuitBreaker["oauth"].FailureThreshold }, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, file, tc.env)
			if got := tc.check(c); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEnvOverrideErrors(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		path string
		msg  string
	}{
		{"malformed int", map[string]string{"BREAKWATER_RESILIENCE_MAX_ATTEMPTS_PER_REQUEST": "ten"},
			"resilience.max_attempts_per_request",
			`environment variable BREAKWATER_RESILIENCE_MAX_ATTEMPTS_PER_REQUEST: expected an integer (got "ten")`},
		{"malformed bool", map[string]string{"BREAKWATER_RESILIENCE_MODEL_LOCKOUT_ENABLED": "maybe"},
			"resilience.model_lockout.enabled",
			"environment variable BREAKWATER_RESILIENCE_MODEL_LOCKOUT_ENABLED: expected a boolean"},
		{"malformed spec breaker", map[string]string{"BREAKWATER_CIRCUIT_BREAKER_OAUTH_RESET_MS": "1m"},
			"resilience.circuit_breaker.oauth.reset_ms",
			"environment variable BREAKWATER_CIRCUIT_BREAKER_OAUTH_RESET_MS: expected an integer"},
		{"malformed int list", map[string]string{"BREAKWATER_RESILIENCE_MODEL_LOCKOUT_ERROR_CODES": "429;503"},
			"resilience.model_lockout.error_codes",
			"BREAKWATER_RESILIENCE_MODEL_LOCKOUT_ERROR_CODES: expected comma-separated integers"},
		{"unset secret reference", map[string]string{"BREAKWATER_SERVER_ADMIN_TOKEN": "env:NOPE"},
			"server.admin_token",
			"environment variable BREAKWATER_SERVER_ADMIN_TOKEN: environment variable NOPE is not set"},
		{"value invalid after override", map[string]string{"BREAKWATER_SERVER_LISTEN": "0.0.0.0:8080"},
			"server.listen",
			"is not a loopback address and no client keys are configured: the gateway would accept unauthenticated requests from the network; listen on 127.0.0.1/::1/localhost or add client keys (set by environment variable BREAKWATER_SERVER_LISTEN)"},
		{"junk queue budget", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "30s"},
			"resilience.request_queue.max_wait_ms",
			`environment variable RATE_LIMIT_MAX_WAIT_MS: expected an integer of milliseconds between 0 and 86400000 (got "30s")`},
		{"negative execution budget", map[string]string{"RATE_LIMIT_EXECUTION_MAX_WAIT_MS": "-1"},
			"resilience.request_queue.execution_max_wait_ms",
			`environment variable RATE_LIMIT_EXECUTION_MAX_WAIT_MS: expected an integer of milliseconds`},
		{"queue depth over the clamp", map[string]string{"RATE_LIMIT_MAX_QUEUE_DEPTH": "100001"},
			"resilience.request_queue.max_queue_depth",
			`environment variable RATE_LIMIT_MAX_QUEUE_DEPTH: expected an integer between 0 and 100000 (got "100001")`},
		{"junk auto-enable", map[string]string{"RATE_LIMIT_AUTO_ENABLE": "sometimes"},
			"resilience.request_queue.auto_enable_api_key_providers",
			`environment variable RATE_LIMIT_AUTO_ENABLE: expected a boolean`},
		{"junk throughput switch", map[string]string{"STREAM_THROUGHPUT_WATCHDOG_ENABLED": "yes please"},
			"resilience.stream_recovery.throughput_watchdog.enabled",
			`environment variable STREAM_THROUGHPUT_WATCHDOG_ENABLED: expected a boolean`},
		{"range after override", map[string]string{"BREAKWATER_CIRCUIT_BREAKER_APIKEY_FAILURE_THRESHOLD": "1001"},
			"resilience.circuit_breaker.apikey.failure_threshold",
			"must be between 1 and 1000 (got 1001) (set by environment variable BREAKWATER_CIRCUIT_BREAKER_APIKEY_FAILURE_THRESHOLD)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseString(t, "server: {}\n", tc.env)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want *ValidationError", err)
			}
			for _, fe := range ve.Errors {
				if strings.Contains(fe.Message, tc.msg) {
					if fe.Path != tc.path {
						t.Errorf("path = %q, want %q", fe.Path, tc.path)
					}
					if fe.Line != 0 || fe.File != "" {
						t.Errorf("an env error must not point into the file: %+v", fe)
					}
					return
				}
			}
			t.Errorf("no error containing %q in:\n%v", tc.msg, err)
		})
	}
}

// The plain variables are read once with the file into Config.Env; junk in
// STREAM_CONTENT_STALL_TIMEOUT_MS is ignored (docs/resilience.md §9) and
// reported for the log, not refused.
func TestPlainEnvironmentVariables(t *testing.T) {
	c := mustParse(t, "server: {}\n", map[string]string{
		"RATE_LIMIT_MAX_WAIT_MS":             "5000",
		"RATE_LIMIT_EXECUTION_MAX_WAIT_MS":   " 900000 ",
		"RATE_LIMIT_MAX_QUEUE_DEPTH":         "0",
		"RATE_LIMIT_AUTO_ENABLE":             "off",
		"STREAM_CONTENT_STALL_TIMEOUT_MS":    "0",
		"STREAM_THROUGHPUT_WATCHDOG_ENABLED": "true",
	})
	e := c.Env
	if *e.RateLimitMaxWaitMS != 5000 || *e.RateLimitExecutionMaxWaitMS != 900000 || *e.RateLimitMaxQueueDepth != 0 ||
		*e.RateLimitAutoEnable || *e.StreamContentStallTimeoutMS != 0 || !*e.StreamThroughputWatchdog || len(e.Ignored) != 0 {
		t.Fatalf("env = %+v", e)
	}
	c = mustParse(t, "server: {}\n", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": ""})
	if c.Env.RateLimitMaxWaitMS != nil || c.Env.RateLimitAutoEnable != nil || c.Env.StreamContentStallTimeoutMS != nil {
		t.Fatalf("unset or empty variables must stay nil: %+v", c.Env)
	}
	for _, junk := range []string{"soon", "-5"} {
		c = mustParse(t, "server: {}\n", map[string]string{"STREAM_CONTENT_STALL_TIMEOUT_MS": junk})
		if c.Env.StreamContentStallTimeoutMS != nil || len(c.Env.Ignored) != 1 || !strings.Contains(c.Env.Ignored[0], "STREAM_CONTENT_STALL_TIMEOUT_MS") {
			t.Errorf("%q: env %+v", junk, c.Env)
		}
	}
}

func TestEnvVarsDerivedFromTags(t *testing.T) {
	names := EnvVars()
	for _, want := range []string{
		"BREAKWATER_SERVER_LISTEN",
		"BREAKWATER_SERVER_ADMIN_TOKEN",
		"BREAKWATER_SERVER_IDLE_TIMEOUT_MS",
		"BREAKWATER_STATE_BACKEND",
		"BREAKWATER_STATE_REDIS_URL",
		"BREAKWATER_STATE_REDIS_MODE",
		"BREAKWATER_STATE_REDIS_ADDRS",
		"BREAKWATER_STATE_REDIS_PASSWORD",
		"BREAKWATER_POLICIES_DIR",
		"BREAKWATER_POLICIES_BUNDLE_URL",
		"BREAKWATER_POLICIES_BUNDLE_PUBLIC_KEY",
		"BREAKWATER_POLICIES_BUNDLE_SIGNING_REQUIRED",
		"BREAKWATER_POLICIES_DECISION_LOG_FILE",
		"BREAKWATER_POLICIES_DECISION_LOG_URL",
		"BREAKWATER_RESILIENCE_MAX_ATTEMPTS_PER_REQUEST",
		"BREAKWATER_RESILIENCE_MODEL_LOCKOUT_ENABLED",
		"BREAKWATER_RESILIENCE_PROVIDER_COOLDOWN_ENABLED",
		"BREAKWATER_RESILIENCE_REQUEST_QUEUE_AUTO_ENABLE_API_KEY_PROVIDERS",
		"BREAKWATER_RESILIENCE_STREAM_RECOVERY_COMMIT_POINT",
		"BREAKWATER_RESILIENCE_STREAM_RECOVERY_HARD_DEADLINE_MS",
		"BREAKWATER_RESILIENCE_LOCAL_TIMEOUT_COOLDOWN_ENABLED",
		"BREAKWATER_RESILIENCE_CONCURRENCY_GLOBAL",
		"BREAKWATER_RESILIENCE_SESSION_AFFINITY_TTL_MS",
		"BREAKWATER_CIRCUIT_BREAKER_OAUTH_FAILURE_THRESHOLD",
		"BREAKWATER_CIRCUIT_BREAKER_APIKEY_DEGRADATION_THRESHOLD",
		"BREAKWATER_CIRCUIT_BREAKER_LOCAL_RESET_MS",
		"BREAKWATER_CIRCUIT_BREAKER_OAUTH_DEGRADED_EXIT_SUCCESSES",
		"BREAKWATER_CIRCUIT_BREAKER_APIKEY_MAX_BACKOFF_MULTIPLIER",
		"BREAKWATER_CIRCUIT_BREAKER_LOCAL_COOLDOWN_BY_KIND_RATE_LIMIT",
		"BREAKWATER_PROVIDER_COOLDOWN_APIKEY_FAILURE_THRESHOLD",
		"BREAKWATER_PROVIDER_COOLDOWN_OAUTH_FAILURE_WINDOW_MS",
		"BREAKWATER_PROVIDER_COOLDOWN_LOCAL_COOLDOWN_MS",
		"BREAKWATER_RESILIENCE_PROVIDER_COOLDOWN_APIKEY_COOLDOWN_MS",
		"BREAKWATER_EMERGENCY_FALLBACK",
		"BREAKWATER_RESILIENCE_EMERGENCY_FALLBACK_TARGETS",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("EnvVars() lacks %s", want)
		}
	}
	// Sections outside server/state/policies/resilience have no overrides.
	for _, n := range names {
		if strings.HasPrefix(n, "BREAKWATER_PROVIDERS") || strings.HasPrefix(n, "BREAKWATER_KEYS") {
			t.Errorf("unexpected override %s", n)
		}
	}
	// Every scalar leaf of the four sections: server 9, state 18, policies
	// 2 + 6 bundle + 7 decision log,
	// resilience: 3 profiles x (9 breaker + 2 cooldown) + 1 + 3 x 3
	// provider_cooldown + 1 stream_stall + 1 local_timeout + 6
	// model_lockout + 4 combo wait + 4 queue + 1 quota share + 1
	// concurrency + 3 stream recovery + 5 watchdog + 2 + 2
	// emergency_fallback + 1 connection_order; plus the aliases: 27 spec
	// breaker names, 10 provider cooldown names and
	// BREAKWATER_EMERGENCY_FALLBACK.
	if want := 9 + 18 + 2 + 6 + 7 + 33 + 10 + 1 + 1 + 6 + 4 + 4 + 1 + 1 + 3 + 5 + 2 + 2 + 1 + 27 + 10 + 1; len(names) != want {
		t.Errorf("EnvVars() has %d names, want %d", len(names), want)
	}
}

// breakerProfile is a BreakerProfile with the common defaults filled in (3 successes
// end DEGRADED, cycle growth capped at ×16, every kind cools for reset_ms).
func breakerProfile(degraded, open int, resetMS int64) BreakerProfile {
	return BreakerProfile{DegradationThreshold: degraded, FailureThreshold: open, ResetMS: resetMS,
		DegradedExitSuccesses: 3, MaxBackoffMultiplier: 16}
}
