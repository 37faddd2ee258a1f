package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// contractDefaults is the resilience block of docs/api.md, with the local
// breaker's derived degradation threshold written as 0.
const contractDefaults = `{
  "circuit_breaker": {
    "apikey": {"degradation_threshold": 7, "failure_threshold": 12, "reset_ms": 30000,
      "cooldown_by_kind": {"server_error": 0, "timeout": 0, "transport": 0, "rate_limit": 0},
      "degraded_exit_successes": 3, "max_backoff_multiplier": 16},
    "oauth":  {"degradation_threshold": 5, "failure_threshold": 8, "reset_ms": 60000,
      "cooldown_by_kind": {"server_error": 0, "timeout": 0, "transport": 0, "rate_limit": 0},
      "degraded_exit_successes": 3, "max_backoff_multiplier": 16},
    "local":  {"degradation_threshold": 0, "failure_threshold": 2, "reset_ms": 15000,
      "cooldown_by_kind": {"server_error": 0, "timeout": 0, "transport": 0, "rate_limit": 0},
      "degraded_exit_successes": 3, "max_backoff_multiplier": 16}
  },
  "provider_cooldown": {"enabled": false,
    "apikey": {"failure_threshold": 15, "failure_window_ms": 1800000, "cooldown_ms": 600000},
    "oauth":  {"failure_threshold": 10, "failure_window_ms": 900000, "cooldown_ms": 300000},
    "local":  {"failure_threshold": 2, "failure_window_ms": 300000, "cooldown_ms": 60000}},
  "connection_cooldown": {
    "apikey": {"base_ms": 3000, "max_backoff_level": 5},
    "oauth":  {"base_ms": 5000, "max_backoff_level": 8},
    "local":  {"base_ms": 2000, "max_backoff_level": 3}
  },
  "stream_stall_cooldown": {"enabled": false},
  "local_timeout_cooldown": {"enabled": false},
  "model_lockout": {"enabled": false, "error_codes": [403, 404, 429, 502, 503, 504],
    "base_cooldown_ms": 120000, "max_cooldown_ms": 1800000,
    "max_backoff_steps": 10, "use_exponential_backoff": true},
  "combo_cooldown_wait": {"enabled": true, "max_wait_ms": 5000, "max_attempts": 2, "budget_ms": 8000},
  "request_queue": {"max_wait_ms": 30000, "execution_max_wait_ms": 600000, "max_queue_depth": 0,
    "auto_enable_api_key_providers": true},
  "quota_share_concurrency_limit": {"enabled": true},
  "concurrency": {"global": 0},
  "stream_recovery": {
    "content_stall_timeout_ms": 0,
    "hard_deadline_ms": 0,
    "commit_point": "",
    "throughput_watchdog": {"enabled": false, "warmup_ms": 5000, "window_ms": 10000,
      "min_useful_bytes_per_second": 8, "min_useful_bytes": 64}
  },
  "session_affinity_ttl_ms": 0,
  "max_attempts_per_request": 10,
  "emergency_fallback": {"enabled": false, "targets": []},
  "connection_order": "headroom"
}`

func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

func TestDefaultSettingsMatchContract(t *testing.T) {
	var want any
	if err := json.Unmarshal([]byte(contractDefaults), &want); err != nil {
		t.Fatal(err)
	}
	if got, w := canonicalJSON(t, DefaultSettings()), canonicalJSON(t, want); got != w {
		t.Fatalf("DefaultSettings JSON:\n%s\nwant\n%s", got, w)
	}
	// The defaults are already normal and valid.
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(DefaultSettings().Normalize(), DefaultSettings()) {
		t.Fatal("Normalize changes the defaults")
	}
}

func TestSettingsNormalize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Settings)
		check func(Settings) bool
	}{
		{"degraded ≤ open−1", func(s *Settings) { s.CircuitBreaker.APIKey.DegradationThreshold = 20 },
			func(s Settings) bool { return s.CircuitBreaker.APIKey.DegradationThreshold == 11 }},
		{"open ≥ 1", func(s *Settings) { s.CircuitBreaker.OAuth.FailureThreshold = 0 },
			func(s Settings) bool {
				return s.CircuitBreaker.OAuth.FailureThreshold == 1 && s.CircuitBreaker.OAuth.DegradationThreshold == 0
			}},
		{"open ≤ 1000", func(s *Settings) { s.CircuitBreaker.Local.FailureThreshold = 5000 },
			func(s Settings) bool { return s.CircuitBreaker.Local.FailureThreshold == 1000 }},
		{"reset ≥ 1 s", func(s *Settings) { s.CircuitBreaker.APIKey.ResetMS = 10 },
			func(s Settings) bool { return s.CircuitBreaker.APIKey.ResetMS == 1000 }},
		{"reset ≤ 24 h", func(s *Settings) { s.CircuitBreaker.APIKey.ResetMS = 48 * 3600_000 },
			func(s Settings) bool { return s.CircuitBreaker.APIKey.ResetMS == 24*3600_000 }},
		{"combo max_wait_ms ≤ 30000", func(s *Settings) { s.ComboCooldownWait.MaxWaitMS = 60000 },
			func(s Settings) bool { return s.ComboCooldownWait.MaxWaitMS == 30000 }},
		{"combo max_attempts ≤ 10", func(s *Settings) { s.ComboCooldownWait.MaxAttempts = 50 },
			func(s Settings) bool { return s.ComboCooldownWait.MaxAttempts == 10 }},
		{"queue budgets ≥ 1 ms", func(s *Settings) { s.RequestQueue.MaxWaitMS, s.RequestQueue.ExecutionMaxWaitMS = 0, 0 },
			func(s Settings) bool { return s.RequestQueue.MaxWaitMS == 1 && s.RequestQueue.ExecutionMaxWaitMS == 1 }},
		{"queue budgets ≤ 24 h", func(s *Settings) {
			s.RequestQueue.MaxWaitMS, s.RequestQueue.ExecutionMaxWaitMS = 90_000_000, 90_000_000
		},
			func(s Settings) bool {
				return s.RequestQueue.MaxWaitMS == 86_400_000 && s.RequestQueue.ExecutionMaxWaitMS == 86_400_000
			}},
		{"max_queue_depth ≤ 100000", func(s *Settings) { s.RequestQueue.MaxQueueDepth = 200000 },
			func(s Settings) bool { return s.RequestQueue.MaxQueueDepth == 100000 }},
		{"throughput {-1,10,0,0} → {0,1000,1,1}", func(s *Settings) {
			s.StreamRecovery.ThroughputWatchdog = ThroughputWatchdogSettings{WarmupMS: -1, WindowMS: 10}
		}, func(s Settings) bool {
			return s.StreamRecovery.ThroughputWatchdog == ThroughputWatchdogSettings{WarmupMS: 0, WindowMS: 1000, MinUsefulBytesPerSecond: 1, MinUsefulBytes: 1}
		}},
		{"session affinity ≤ 24 h", func(s *Settings) { s.SessionAffinityTTLMS = 90_000_000 },
			func(s Settings) bool { return s.SessionAffinityTTLMS == 86_400_000 }},
		{"lockout max ≥ base", func(s *Settings) { s.ModelLockout.MaxCooldownMS = 1000 },
			func(s Settings) bool { return s.ModelLockout.MaxCooldownMS == 120000 }},
		{"error codes sorted, deduplicated", func(s *Settings) { s.ModelLockout.ErrorCodes = []int{503, 429, 503} },
			func(s Settings) bool { return reflect.DeepEqual(s.ModelLockout.ErrorCodes, []int{429, 503}) }},
		{"negative content stall ignored", func(s *Settings) { s.StreamRecovery.ContentStallTimeoutMS = -5 },
			func(s Settings) bool { return s.StreamRecovery.ContentStallTimeoutMS == 0 }},
		{"max backoff level ≤ 20", func(s *Settings) { s.ConnectionCooldown.APIKey.MaxBackoffLevel = 64 },
			func(s Settings) bool { return s.ConnectionCooldown.APIKey.MaxBackoffLevel == 20 }},
		{"max attempts per request ≥ 1", func(s *Settings) { s.MaxAttemptsPerRequest = 0 },
			func(s Settings) bool { return s.MaxAttemptsPerRequest == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSettings()
			tc.edit(&s)
			if n := s.Normalize(); !tc.check(n) {
				t.Fatalf("Normalize gave %s", canonicalJSON(t, n))
			}
		})
	}
}

func TestSettingsNormalizeDoesNotAlias(t *testing.T) {
	s := DefaultSettings()
	s.ModelLockout.ErrorCodes = []int{503, 429}
	s.Normalize()
	if s.ModelLockout.ErrorCodes[0] != 503 {
		t.Fatal("Normalize sorted the caller's error codes in place")
	}
}

func TestSettingsValidate(t *testing.T) {
	s := DefaultSettings()
	s.ModelLockout.BaseCooldownMS = -1
	s.CircuitBreaker.OAuth.ResetMS = -1
	s.ModelLockout.ErrorCodes = []int{429, 42}
	s.StreamRecovery.ThroughputWatchdog.WarmupMS = -1 // clamped, not rejected
	err := s.Validate()
	if !errors.Is(err, ErrInvalidSettings) {
		t.Fatalf("Validate = %v, want ErrInvalidSettings", err)
	}
	var fe FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("Validate error %T is not a FieldErrors", err)
	}
	var paths []string
	for _, f := range fe {
		paths = append(paths, f.Path)
	}
	want := []string{"circuit_breaker.oauth.reset_ms", "model_lockout.error_codes[1]", "model_lockout.base_cooldown_ms"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("invalid paths %v, want %v", paths, want)
	}
	if !strings.Contains(err.Error(), "model_lockout.base_cooldown_ms: must be ≥ 0") {
		t.Fatalf("message %q", err)
	}
}

func TestApplyPatch(t *testing.T) {
	cur := DefaultSettings()
	cur.ComboCooldownWait.MaxWaitMS = 4000

	got, err := ApplyPatch(cur, []byte(`{"model_lockout":{"enabled":true,"error_codes":[429]},"stream_stall_cooldown":{"enabled":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := cur.Clone()
	want.ModelLockout.Enabled = true
	want.ModelLockout.ErrorCodes = []int{429}
	want.StreamStallCooldown.Enabled = true
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ApplyPatch merged to %s", canonicalJSON(t, got))
	}

	// null resets a member to its default.
	got, err = ApplyPatch(cur, []byte(`{"combo_cooldown_wait":{"max_wait_ms":null}}`))
	if err != nil || got.ComboCooldownWait.MaxWaitMS != 5000 {
		t.Fatalf("null member: %v, max_wait_ms %d", err, got.ComboCooldownWait.MaxWaitMS)
	}
	// Normalisation runs after the merge.
	got, err = ApplyPatch(cur, []byte(`{"combo_cooldown_wait":{"max_wait_ms":99999},"stream_recovery":{"throughput_watchdog":{"warmup_ms":-1,"window_ms":10,"min_useful_bytes_per_second":0,"min_useful_bytes":0}}}`))
	if err != nil || got.ComboCooldownWait.MaxWaitMS != 30000 ||
		got.StreamRecovery.ThroughputWatchdog != (ThroughputWatchdogSettings{WindowMS: 1000, MinUsefulBytesPerSecond: 1, MinUsefulBytes: 1}) {
		t.Fatalf("clamped patch: %v %s", err, canonicalJSON(t, got))
	}
	// An empty patch changes nothing.
	if got, err := ApplyPatch(cur, []byte(`{}`)); err != nil || !reflect.DeepEqual(got, cur) {
		t.Fatalf("empty patch: %v", err)
	}
}

func TestApplyPatchErrors(t *testing.T) {
	cur := DefaultSettings()
	for _, tc := range []struct{ patch, want string }{
		{`{"nope":1}`, "nope: unknown field"},
		{`{"request_queue":{"max_wait":1}}`, "request_queue.max_wait: unknown field"},
		{`{"circuit_breaker":{"apikey":{"reset_ms":"30s"}}}`, "circuit_breaker.apikey.reset_ms: must be a number"},
		{`{"model_lockout":{"enabled":"yes"}}`, "model_lockout.enabled: must be a boolean"},
		{`{"model_lockout":{"error_codes":429}}`, "model_lockout.error_codes: must be an array"},
		{`{"model_lockout":{"error_codes":[429,"x"]}}`, "model_lockout.error_codes"},
		{`{"model_lockout":{"error_codes":[99]}}`, "model_lockout.error_codes[0]: must be an HTTP status"},
		{`{"model_lockout":true}`, "model_lockout: must be an object"},
		{`{"stream_recovery":{"commit_point":5}}`, "stream_recovery.commit_point: must be a string"},
		{`{"max_attempts_per_request":1.5}`, "max_attempts_per_request: must be an integer"},
		{`{"session_affinity_ttl_ms":1e40}`, "session_affinity_ttl_ms: must be an integer"},
		{`{"model_lockout":{"base_cooldown_ms":-1}}`, "model_lockout.base_cooldown_ms: must be ≥ 0"},
		{`not json`, "not valid JSON"},
		{`"str"`, "must be a JSON object"},
		{`{} {}`, "trailing data"},
	} {
		t.Run(tc.patch, func(t *testing.T) {
			got, err := ApplyPatch(cur, []byte(tc.patch))
			if !errors.Is(err, ErrInvalidSettings) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidSettings containing %q", err, tc.want)
			}
			if !reflect.DeepEqual(got, cur) {
				t.Fatal("a failed patch changed the settings")
			}
		})
	}
}

func TestMergePatchRFC7386(t *testing.T) {
	var target, patch map[string]any
	_ = json.Unmarshal([]byte(`{"a":{"b":1,"c":2},"d":[1,2],"e":3}`), &target)
	_ = json.Unmarshal([]byte(`{"a":{"b":null,"f":4},"d":[3],"e":null,"g":{"h":5}}`), &patch)
	got, _ := json.Marshal(mergePatch(target, patch))
	want := `{"a":{"c":2,"f":4},"d":[3],"g":{"h":5}}`
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("mergePatch = %s, want %s", got, want)
	}
	if _, still := target["e"]; !still {
		t.Fatal("mergePatch modified its target")
	}
}
