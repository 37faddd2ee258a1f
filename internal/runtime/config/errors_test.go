package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// locate returns the 1-based line and column of the nth (1-based)
// occurrence of marker in src.
func locate(t *testing.T, src, marker string, nth int) (int, int) {
	t.Helper()
	off := -1
	for range nth {
		i := strings.Index(src[off+1:], marker)
		if i < 0 {
			t.Fatalf("marker %q (#%d) not in source", marker, nth)
		}
		off += 1 + i
	}
	line := strings.Count(src[:off], "\n") + 1
	col := off - strings.LastIndex(src[:off], "\n")
	return line, col
}

// validProvider is appended where a case needs a provider but tests
// something else.
const validProvider = `
providers:
  - {id: p, kind: openai, base_url: "https://api.example.com", models: [m], connections: [{id: c}]}
`

func TestErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing-secret")
	cases := []struct {
		name string
		src  string
		env  map[string]string
		at   string // marker of the reported position in src; "" = no position
		nth  int    // occurrence of at (default 1)
		path string
		msg  string
	}{
		{
			name: "unknown key with hint",
			src:  "server:\n  lisen: 127.0.0.1:9000\n",
			at:   "lisen", path: "server", msg: `unknown field "lisen"; did you mean listen?`,
		},
		{
			name: "unknown key without hint",
			src:  "server:\n  zzzzzz: 1\n",
			at:   "zzzzzz", path: "server", msg: `unknown field "zzzzzz"`,
		},
		{
			name: "unknown top-level key",
			src:  "servers: {}\n",
			at:   "servers", path: "", msg: "did you mean server?",
		},
		{
			name: "duplicate yaml key",
			src:  "server:\n  listen: 127.0.0.1:1\n  listen: 127.0.0.1:2\n",
			at:   "listen", nth: 2, path: "server", msg: `duplicate key "listen" (first defined at line 2)`,
		},
		{
			name: "wrong type integer",
			src:  "server:\n  max_request_bytes: ten\n",
			at:   "ten", path: "server.max_request_bytes", msg: `expected an integer (got "ten")`,
		},
		{
			name: "wrong type quoted integer",
			src:  "resilience:\n  max_attempts_per_request: \"3\"\n",
			at:   `"3"`, path: "resilience.max_attempts_per_request", msg: "expected an integer",
		},
		{
			name: "wrong type boolean",
			src:  "resilience:\n  model_lockout:\n    enabled: sometimes\n",
			at:   "sometimes", path: "resilience.model_lockout.enabled", msg: "expected a boolean",
		},
		{
			name: "wrong type list",
			src:  "providers:\n  id: x\n",
			at:   "id: x", path: "providers", msg: "expected a list (got a mapping)",
		},
		{
			name: "wrong type mapping",
			src:  "server: 8080\n",
			at:   "8080", path: "server", msg: "expected a mapping",
		},
		{
			name: "integer overflow",
			src:  "resilience:\n  max_attempts_per_request: 99999999999999999999\n",
			at:   "9999", path: "resilience.max_attempts_per_request", msg: "expected an integer",
		},
		{
			name: "bad kind",
			src:  "providers:\n  - {id: p, kind: opneai, base_url: \"https://x.example\", models: [m], connections: [{id: c}]}\n",
			at:   "opneai", path: "providers[0].kind", msg: `must be one of openai, anthropic (got "opneai")`,
		},
		{
			name: "bad responses_api",
			src:  "providers:\n  - {id: p, kind: openai, responses_api: chat, base_url: \"https://x.example\", models: [m], connections: [{id: c}]}\n",
			at:   "chat", path: "providers[0].responses_api", msg: `must be "native" or "translate" (got "chat")`,
		},
		{
			name: "native responses_api on the anthropic kind",
			src:  "providers:\n  - {id: p, kind: anthropic, responses_api: native, base_url: \"https://x.example\", models: [m], connections: [{id: c}]}\n",
			at:   "native", path: "providers[0].responses_api", msg: "anthropic providers have no Responses API",
		},
		{
			name: "bad profile",
			src:  "providers:\n  - {id: p, kind: openai, profile: apikeys, base_url: \"https://x.example\", models: [m], connections: [{id: c}]}\n",
			at:   "apikeys", path: "providers[0].profile", msg: "must be one of apikey, oauth, local",
		},
		{
			name: "duplicate provider ids",
			src: "providers:\n" +
				"  - {id: dup, kind: openai, base_url: \"https://x.example\", models: [m], connections: [{id: c}]}\n" +
				"  - {id: dup, kind: openai, base_url: \"https://y.example\", models: [m], connections: [{id: c}]}\n",
			at: "dup", nth: 2, path: "providers[1].id", msg: `duplicate provider id "dup"`,
		},
		{
			name: "provider id with slash",
			src:  "providers:\n  - {id: a/b, kind: openai, base_url: \"https://x.example\", models: [m], connections: [{id: c}]}\n",
			at:   "a/b", path: "providers[0].id", msg: `must not contain "/"`,
		},
		{
			name: "duplicate connection ids",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", models: [m], connections: [{id: k1}, {id: k1}]}\n",
			at:   "k1", nth: 2, path: "providers[0].connections[1].id", msg: `duplicate connection id "k1"`,
		},
		{
			name: "no models",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", connections: [{id: c}]}\n",
			at:   "{id: p", path: "providers[0].models", msg: "at least one model is required",
		},
		{
			name: "no connections",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", models: [m], connections: []}\n",
			at:   "[]", path: "providers[0].connections", msg: "at least one connection is required",
		},
		{
			name: "bad base_url",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"ftp://x.example\", models: [m], connections: [{id: c}]}\n",
			at:   `"ftp`, path: "providers[0].base_url", msg: "must be an absolute http:// or https:// URL",
		},
		{
			name: "bad local_address",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", models: [m], connections: [{id: c, local_address: 10.0.0.300}]}\n",
			at:   "10.0.0.300", path: "providers[0].connections[0].local_address", msg: "must be an IP address",
		},
		{
			name: "bad proxy_url hides value",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", models: [m], connections: [{id: c, proxy_url: \"user:s3cret@nohost\"}]}\n",
			at:   `"user`, path: "providers[0].connections[0].proxy_url", msg: "(value not shown)",
		},
		{
			name: "model concurrency must be positive",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", models: [m], connections: [{id: c, rate_limit_overrides: {model_concurrency: {m: 0}}}]}\n",
			at:   "0}", path: "providers[0].connections[0].rate_limit_overrides.model_concurrency.m", msg: "must be a positive integer",
		},
		{
			name: "provider max_concurrent not negative",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", models: [m], max_concurrent: -2, connections: [{id: c}]}\n",
			at:   "-2", path: "providers[0].max_concurrent", msg: "between 0 and 1000000",
		},
		{
			name: "hard deadline not negative",
			src:  "resilience:\n  stream_recovery: {hard_deadline_ms: -1}\n",
			at:   "-1", path: "resilience.stream_recovery.hard_deadline_ms", msg: "between 0 and 86400000",
		},
		{
			name: "global concurrency not negative",
			src:  "resilience:\n  concurrency: {global: -3}\n",
			at:   "-3", path: "resilience.concurrency.global", msg: "between 0 and 1000000",
		},
		{
			name: "listen not host:port",
			src:  "server: {listen: localhost}\n",
			at:   "localhost", path: "server.listen", msg: "must be host:port",
		},
		{
			name: "non-loopback without keys",
			src:  "server:\n  listen: 0.0.0.0:8080\n",
			at:   "0.0.0.0", path: "server.listen", msg: `host "0.0.0.0" is not a loopback address and no client keys are configured`,
		},
		{
			name: "empty listen host counts as non-loopback",
			src:  "server:\n  listen: \":8080\"\n",
			at:   `":8080"`, path: "server.listen", msg: "(empty: all interfaces) is not a loopback address",
		},
		{
			name: "host name other than localhost is non-loopback",
			src:  "server:\n  listen: gateway.internal:8080\n",
			at:   "gateway", path: "server.listen", msg: "is not a loopback address",
		},
		{
			name: "env secret unset",
			src:  "server:\n  admin_token: env:NOT_SET_ANYWHERE\n",
			at:   "env:", path: "server.admin_token", msg: "environment variable NOT_SET_ANYWHERE is not set",
		},
		{
			name: "env secret empty",
			src:  "server:\n  admin_token: env:EMPTY\n",
			env:  map[string]string{"EMPTY": ""},
			at:   "env:", path: "server.admin_token", msg: "environment variable EMPTY is empty",
		},
		{
			name: "file secret unreadable",
			src:  fmt.Sprintf("keys:\n  - {id: k, key: \"file:%s\"}\n", missing),
			at:   `"file:`, path: "keys[0].key", msg: "cannot read secret file " + missing + ": no such file or directory",
		},
		{
			name: "secret of wrong type",
			src:  "server:\n  admin_token: [a, b]\n",
			at:   "[a", path: "server.admin_token", msg: "expected a string (got a list)",
		},
		{
			name: "backend unknown",
			src:  "state: {backend: postgres}\n",
			at:   "postgres", path: "state.backend", msg: "must be one of badger, memory, redis",
		},
		{
			name: "redis needs redis_url",
			src:  "state:\n  backend: redis\n",
			at:   "backend", path: "state.redis_url", msg: "is required with the redis backend",
		},
		{
			name: "redis sentinel needs addrs and master name",
			src:  "state:\n  backend: redis\n  redis_mode: sentinel\n",
			at:   "backend", path: "state.redis_addrs", msg: "is required with redis_mode sentinel (host:port of each Sentinel)",
		},
		{
			name: "redis cluster addr must be host:port",
			src:  "state:\n  backend: redis\n  redis_mode: cluster\n  redis_addrs: [\"10.0.0.1\"]\n",
			at:   `"10.0.0.1"`, path: "state.redis_addrs[0]", msg: `must be host:port (got "10.0.0.1")`,
		},
		{
			name: "redis cluster has one database",
			src:  "state:\n  backend: redis\n  redis_mode: cluster\n  redis_addrs: [\"10.0.0.1:6379\"]\n  redis_db: 2\n",
			at:   "2\n", path: "state.redis_db", msg: "must be 0 with redis_mode cluster (a Cluster has one database)",
		},
		{
			name: "redis mode typo",
			src:  "state:\n  backend: redis\n  redis_url: redis://h:1\n  redis_mode: clustr\n",
			at:   "clustr", path: "state.redis_mode", msg: `must be one of single, sentinel, cluster (got "clustr"); did you mean cluster?`,
		},
		{
			name: "redis url is for a single server",
			src:  "state:\n  backend: redis\n  redis_url: redis://h:1\n  redis_mode: cluster\n  redis_addrs: [\"h:1\"]\n",
			at:   "redis://", path: "state.redis_url", msg: "is for a single server; redis_mode cluster takes redis_addrs",
		},
		{
			name: "redis client certificate needs its key",
			src:  "state:\n  backend: redis\n  redis_url: rediss://h:1\n  redis_tls_cert_file: /c.pem\n",
			at:   "/c.pem", path: "state.redis_tls_cert_file", msg: "and redis_tls_key_file must be given together (a client certificate and its key)",
		},
		{
			name: "redis timeout range",
			src:  "state:\n  backend: redis\n  redis_url: redis://h:1\n  redis_timeout_ms: 5\n",
			at:   "5\n", path: "state.redis_timeout_ms", msg: "must be between 10 and 60000 (got 5)",
		},
		{
			name: "max_request_bytes must be positive",
			src:  "server: {max_request_bytes: -1}\n",
			at:   "-1", path: "server.max_request_bytes", msg: "must be greater than 0",
		},
		{
			name: "request_deadline_ms below a second",
			src:  "server: {request_deadline_ms: 500}\n",
			at:   "500", path: "server.request_deadline_ms", msg: "must be between 1000 and 86400000",
		},
		{
			name: "write_timeout_ms negative",
			src:  "server: {write_timeout_ms: -5}\n",
			at:   "-5", path: "server.write_timeout_ms", msg: "must be between 100 and 86400000",
		},
		{
			name: "in-flight body budget below one request",
			src:  "server: {max_request_bytes: 2048, max_inflight_body_bytes: 1024}\n",
			at:   "1024", path: "server.max_inflight_body_bytes", msg: "must be at least server.max_request_bytes (2048)",
		},
		{
			name: "duplicate combo names",
			src:  "combos:\n  - {name: c1, targets: [{model: a/b}]}\n  - {name: c1, targets: [{model: a/b}]}\n",
			at:   "c1", nth: 2, path: "combos[1].name", msg: `duplicate combo name "c1"`,
		},
		{
			name: "combo name with slash",
			src:  "combos:\n  - {name: x/y, targets: [{model: a/b}]}\n",
			at:   "x/y", path: "combos[0].name", msg: `must not contain "/"`,
		},
		{
			name: "combo target model empty",
			src:  "combos:\n  - {name: c, targets: [{model: \"\", weight: 1}]}\n",
			at:   `""`, path: "combos[0].targets[0].model", msg: "must not be empty",
		},
		{
			name: "combo unknown strategy",
			src:  "combos:\n  - {name: c, strategy: round-robbin, targets: [{model: a/b}]}\n",
			at:   "round-robbin", path: "combos[0].strategy", msg: "did you mean round-robin?",
		},
		{
			name: "circular combos",
			src:  "combos:\n  - {name: a, targets: [{model: b}]}\n  - {name: b, targets: [{model: a}]}\n",
			at:   "a}", path: "combos[1].targets[0].model", msg: "circular combo reference: a -> b -> a",
		},
		{
			name: "duplicate key ids",
			src:  "keys:\n  - {id: app, key: k1}\n  - {id: app, key: k2}\n",
			at:   "app", nth: 2, path: "keys[1].id", msg: `duplicate key id "app"`,
		},
		{
			name: "duplicate key values hide value",
			src:  "keys:\n  - {id: a, key: same-s3cret}\n  - {id: b, key: same-s3cret}\n",
			at:   "same-s3cret", nth: 2, path: "keys[1].key", msg: "same key value as keys[0]",
		},
		{
			name: "allowed connection unknown",
			src:  "keys:\n  - {id: a, key: k, allowed_connections: [p/zz]}\n" + validProvider,
			at:   "p/zz", path: "keys[0].allowed_connections[0]", msg: `unknown connection "p/zz"`,
		},
		{
			name: "max_attempts_per_request range",
			src:  "resilience:\n  max_attempts_per_request: 101\n",
			at:   "101", path: "resilience.max_attempts_per_request", msg: "must be between 1 and 100 (got 101)",
		},
		{
			name: "policy eval timeout over a minute",
			src:  "policies:\n  eval_timeout_ms: 60001\n",
			at:   "60001", path: "policies.eval_timeout_ms", msg: "must be between 1 and 60000 (got 60001)",
		},
		{
			name: "negative policy eval timeout",
			src:  "policies:\n  eval_timeout_ms: -5\n",
			at:   "-5", path: "policies.eval_timeout_ms", msg: "must be between 1 and 60000 (got -5)",
		},
		{
			name: "lockout max below base",
			src:  "resilience:\n  model_lockout: {base_cooldown_ms: 600000, max_cooldown_ms: 300000}\n",
			at:   "300000", path: "resilience.model_lockout.max_cooldown_ms", msg: "must be at least base_cooldown_ms (600000)",
		},
		{
			name: "combo wait max_wait_ms over 30000",
			src:  "resilience:\n  combo_cooldown_wait: {max_wait_ms: 30001}\n",
			at:   "30001", path: "resilience.combo_cooldown_wait.max_wait_ms", msg: "must be between 1 and 30000",
		},
		{
			name: "combo wait max_attempts over 10",
			src:  "resilience:\n  combo_cooldown_wait: {max_attempts: 11}\n",
			at:   "11", path: "resilience.combo_cooldown_wait.max_attempts", msg: "must be between 1 and 10",
		},
		{
			name: "session affinity over 24h",
			src:  "resilience:\n  session_affinity_ttl_ms: 86400001\n",
			at:   "86400001", path: "resilience.session_affinity_ttl_ms", msg: "must be between 0 and 86400000",
		},
		{
			name: "queue depth over 100000",
			src:  "resilience:\n  request_queue: {max_queue_depth: 100001}\n",
			at:   "100001", path: "resilience.request_queue.max_queue_depth", msg: "must be between 0 and 100000",
		},
		{
			name: "breaker unknown profile",
			src:  "resilience:\n  circuit_breaker:\n    oauht: {failure_threshold: 3}\n",
			at:   "{failure", path: "resilience.circuit_breaker.oauht", msg: "did you mean oauth?",
		},
		{
			name: "breaker degradation above failure",
			src:  "resilience:\n  circuit_breaker:\n    oauth: {degradation_threshold: 9, failure_threshold: 8}\n",
			at:   "9,", path: "resilience.circuit_breaker.oauth.degradation_threshold", msg: "must be between 0 and failure_threshold (8)",
		},
		{
			name: "breaker kind cooldown below a second",
			src:  "resilience:\n  circuit_breaker:\n    apikey: {cooldown_by_kind: {timeout: 500}}\n",
			at:   "500", path: "resilience.circuit_breaker.apikey.cooldown_by_kind.timeout", msg: "must be between 1000 and 86400000 (got 500)",
		},
		{
			name: "breaker multiplier too large",
			src:  "resilience:\n  circuit_breaker:\n    oauth: {max_backoff_multiplier: 5000}\n",
			at:   "5000", path: "resilience.circuit_breaker.oauth.max_backoff_multiplier", msg: "must be between 1 and 1024 (got 5000)",
		},
		{
			name: "window gate threshold",
			src:  "resilience:\n  provider_cooldown:\n    local: {failure_threshold: 2000}\n",
			at:   "2000", path: "resilience.provider_cooldown.local.failure_threshold", msg: "must be between 1 and 1000 (got 2000)",
		},
		{
			name: "emergency target unknown model",
			src:  validProvider + "resilience:\n  emergency_fallback: {enabled: true, targets: [p/m, p/nope]}\n",
			at:   "p/nope", path: "resilience.emergency_fallback.targets[1]", msg: `provider "p" does not list model "nope"`,
		},
		{
			name: "emergency target not provider/model",
			src:  validProvider + "resilience:\n  emergency_fallback: {targets: [m]}\n",
			at:   "m]}", path: "resilience.emergency_fallback.targets[0]", msg: `must be provider/model (got "m")`,
		},
		{
			name: "watchdog window below 1000",
			src:  "resilience:\n  stream_recovery:\n    throughput_watchdog: {window_ms: 999}\n",
			at:   "999", path: "resilience.stream_recovery.throughput_watchdog.window_ms", msg: "must be between 1000",
		},
		{
			name: "redis_url bad scheme hides value",
			src:  "state: {backend: redis, redis_url: \"http://:s3cret@h\"}\n",
			at:   `"http`, path: "state.redis_url", msg: "must be a redis://, rediss:// or unix:// URL (value not shown)",
		},
		{
			name: "float wrong type",
			src:  "combos:\n  - {name: c, targets: [{model: a/b, weight: heavy}]}\n",
			at:   "heavy", path: "combos[0].targets[0].weight", msg: `expected a number (got "heavy")`,
		},
		{
			name: "duplicate model",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", models: [m, m], connections: [{id: c}]}\n",
			at:   "m]", path: "providers[0].models[1]", msg: `duplicate model "m"`,
		},
		{
			name: "bad quota family pattern",
			src:  "providers:\n  - {id: p, kind: openai, base_url: \"https://x.example\", models: [m], quota_families: {f: [\"gpt-[\"]}, connections: [{id: c}]}\n",
			at:   `"gpt-[`, path: "providers[0].quota_families.f[0]", msg: `invalid model pattern "gpt-["`,
		},
		{
			name: "plugin without path",
			src:  "plugins:\n  - {name: x, hooks: [classify]}\n",
			at:   "{name: x", path: "plugins[0].path", msg: "is required",
		},
		{
			name: "merge key of wrong kind",
			src:  "server:\n  <<: 5\n",
			at:   "5", path: "server", msg: "a merge key (<<) takes a mapping",
		},
		{
			name: "syntax error",
			src:  "server:\n  listen: [\n",
			at:   "", path: "", msg: "invalid YAML",
		},
		{
			name: "two documents",
			src:  "server: {}\n---\nstate: {}\n",
			at:   "---", path: "", msg: "more than one YAML document",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseString(t, tc.src, tc.env)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want *ValidationError", err)
			}
			var fe *FieldError
			for i := range ve.Errors {
				if strings.Contains(ve.Errors[i].Message, tc.msg) {
					fe = &ve.Errors[i]
					break
				}
			}
			if fe == nil {
				t.Fatalf("no error with %q in:\n%v", tc.msg, err)
			}
			if fe.Path != tc.path {
				t.Errorf("path = %q, want %q", fe.Path, tc.path)
			}
			if fe.File != "breakwater.yaml" {
				t.Errorf("file = %q", fe.File)
			}
			if tc.at != "" {
				nth := max(tc.nth, 1)
				line, col := locate(t, tc.src, tc.at, nth)
				if fe.Line != line || fe.Column != col {
					t.Errorf("position = %d:%d, want %d:%d (%q)", fe.Line, fe.Column, line, col, tc.at)
				}
			} else if tc.name == "syntax error" && fe.Line == 0 {
				t.Errorf("syntax error has no line: %+v", fe)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error reveals a secret: %v", err)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	src := "providers:\n  - {id: p, kind: opneai, base_url: \"https://x.example\", models: [m], connections: [{id: c}]}\n"
	_, err := parseString(t, src, nil)
	want := `breakwater.yaml:2:19: providers[0].kind: must be one of openai, anthropic (got "opneai"); did you mean openai?`
	if err == nil || err.Error() != want {
		t.Errorf("err =\n%v\nwant\n%s", err, want)
	}
}

func TestMultipleErrorsReportedTogether(t *testing.T) {
	src := `server:
  lisen: 127.0.0.1:1
  max_request_bytes: big
providers:
  - id: p
    kind: opneai
    base_url: https://x.example
    models: [m]
    connections:
      - {id: c, api_key: env:UNSET_KEY}
      - {id: c}
resilience:
  max_attempts_per_request: 0
`
	_, err := parseString(t, src, nil)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	want := []struct {
		line int
		path string
		msg  string
	}{
		{2, "server", `unknown field "lisen"`},
		{3, "server.max_request_bytes", "expected an integer"},
		{6, "providers[0].kind", "must be one of"},
		{10, "providers[0].connections[0].api_key", "UNSET_KEY is not set"},
		{11, "providers[0].connections[1].id", "duplicate connection id"},
	}
	// max_attempts_per_request: 0 means "default" (10), so it is not an error.
	if len(ve.Errors) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(ve.Errors), len(want), err)
	}
	for i, w := range want {
		fe := ve.Errors[i]
		if fe.Line != w.line || fe.Path != w.path || !strings.Contains(fe.Message, w.msg) {
			t.Errorf("error %d = %v, want line %d %s: %s", i, fe, w.line, w.path, w.msg)
		}
	}
	if lines := strings.Count(err.Error(), "\n") + 1; lines != len(want) {
		t.Errorf("Error() has %d lines, want one per error", lines)
	}
}

// A value that failed to decode is reported once, not again by validation.
func TestUndecodableValueNotRevalidated(t *testing.T) {
	_, err := parseString(t, "keys:\n  - {id: a, key: env:NOPE}\n", nil)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 {
		t.Fatalf("want exactly one error, got %v", err)
	}
}

func TestListenSecurity(t *testing.T) {
	const withKey = "keys:\n  - {id: a, key: k}\n"
	cases := []struct {
		listen string
		keys   bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"127.10.20.30:8080", false, true}, // all of 127.0.0.0/8
		{"[::1]:8080", false, true},
		{"localhost:8080", false, true},
		{"LOCALHOST:0", false, true},
		{"0.0.0.0:8080", false, false},
		{"[::]:8080", false, false},
		{":8080", false, false},
		{"192.168.1.10:8080", false, false},
		{"128.0.0.1:8080", false, false},
		{"0.0.0.0:8080", true, true},
		{":8080", true, true},
		{"127.0.0.1:65536", false, false}, // bad port, not a security issue
	}
	for _, tc := range cases {
		src := fmt.Sprintf("server: {listen: %q}\n", tc.listen)
		if tc.keys {
			src += withKey
		}
		_, err := parseString(t, src, nil)
		if (err == nil) != tc.ok {
			t.Errorf("listen %q keys=%v: err = %v, want ok=%v", tc.listen, tc.keys, err, tc.ok)
		}
	}
}

func TestAliasExpansionBounded(t *testing.T) {
	// A few hundred bytes of aliases expanding to 20 x 16 x 16 values must
	// stop at the bound (lowered here from maxNodes to keep the test fast).
	var b strings.Builder
	b.WriteString("providers:\n  - &p\n    id: x\n    quota_families:\n      f0: &m [")
	b.WriteString(strings.Repeat("a, ", 15) + "a]\n")
	for i := 1; i < 16; i++ {
		fmt.Fprintf(&b, "      f%d: *m\n", i)
	}
	b.WriteString(strings.Repeat("  - *p\n", 19))
	d := newDecoder("breakwater.yaml", Options{LookupEnv: envMap(nil)})
	d.maxNodes = 1000
	d.decodeDocument([]byte(b.String()), &Config{})
	if !d.fatal || d.nodes != d.maxNodes {
		t.Fatalf("fatal=%v nodes=%d, want decoding stopped at %d", d.fatal, d.nodes, d.maxNodes)
	}
	if len(d.errs) != 1 || !strings.Contains(d.errs[0].Message, "expands to 1000 values or more") {
		t.Errorf("errs = %v", d.errs)
	}
	// The same document is fine under the real bound.
	if _, err := parseString(t, b.String(), nil); err == nil || strings.Contains(err.Error(), "expands to") {
		t.Errorf("err = %v, want only validation errors (duplicate ids)", firstLine(err))
	}
}

func firstLine(err error) string {
	if err == nil {
		return "<nil>"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// mergeBomb is the probe of issue 19 item 9: way-way merge keys nested
// levels deep; 3 × 29 is about 1.1 KB of YAML and used to hang the decoder
// (3^29 merged entries: the fan-out was not counted).
func mergeBomb(way, levels int) string {
	var b strings.Builder
	b.WriteString("x0: &x0 {listen: \"127.0.0.1:1\"}\n")
	refs := func(i int) string { return strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*x%d, ", i), way), ", ") }
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "x%d: &x%d {<<: [%s]}\n", i, i, refs(i-1))
	}
	fmt.Fprintf(&b, "server: {<<: [%s]}\n", refs(levels-1))
	return b.String()
}

func TestMergeKeyFanOutBounded(t *testing.T) {
	for _, tc := range []struct {
		way, levels int
		msg         string
	}{
		{3, 29, "merge keys nested more than 20 deep"},
		{8, 12, "expands to 262144 values or more"},
	} {
		src := mergeBomb(tc.way, tc.levels)
		done := make(chan error, 1)
		start := time.Now()
		go func() { _, err := parseString(t, src, nil); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%d×%d: err = %v", tc.way, tc.levels, err)
			}
			t.Logf("%d×%d: %d-byte merge-key file refused in %v", tc.way, tc.levels, len(src), time.Since(start))
		case <-time.After(5 * time.Second):
			t.Fatalf("%d×%d: still decoding after 5 s", tc.way, tc.levels)
		}
	}
	// Ordinary merge keys still work.
	c, err := parseString(t, "server: &s {listen: \"127.0.0.1:9999\", max_request_bytes: 5}\nstate: {backend: memory}\n", nil)
	if err != nil || c.Server.MaxRequestBytes != 5 {
		t.Fatalf("plain config: %v", err)
	}
	src := "providers:\n  - &p {id: a, kind: openai, base_url: \"https://x.example\", models: [m], connections: [{id: c}]}\n  - {<<: *p, id: b}\n"
	if c, err = parseString(t, src, nil); err != nil || len(c.Providers) != 2 || c.Providers[1].ID != "b" || c.Providers[1].Kind != "openai" {
		t.Fatalf("merge: %v %+v", err, c)
	}
}

// TestSecretFilesBounded replays issue 19 item 9: file:/dev/zero as a
// secret ran the gateway out of memory and a FIFO blocked start-up. Both,
// and a file over MaxSecretBytes, fail at once with an error at the field.
func TestSecretFilesBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxSecretBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/dev/zero": "not a regular file (a character device)",
		fifo:        "not a regular file (a named pipe)",
		dir:         "not a regular file (a directory)",
		big:         "file too large: more than 64 KiB",
	} {
		src := fmt.Sprintf("keys:\n  - {id: k, key: \"file:%s\"}\n", path)
		done := make(chan error, 1)
		go func() { _, err := ParseWithOptions([]byte(src), "breakwater.yaml", Options{}); done <- err }()
		select {
		case err := <-done:
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Errors[0].Path != "keys[0].key" ||
				ve.Errors[0].Message != "cannot read secret file "+path+": "+want {
				t.Fatalf("%s: %v", path, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: still reading after 2 s", path)
		}
	}
	// The configuration file itself is bounded the same way.
	if _, err := Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Load(/dev/zero): %v", err)
	}
}
