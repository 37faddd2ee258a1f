package proc

import (
	"fmt"
	"strings"
)

// Names of the under-fire gateway: two OpenAI-kind providers in front of
// the same mock, both serving FireModel, each with two connections whose
// API keys are the provider's key prefix followed by "1" and "2". The down
// provider is listed first, so a bare FireModel request tries it first.
const (
	// FireModel is the bare model both providers serve.
	FireModel = "bench-model"
	// FireDownProvider is the provider listed first, the one made hard down.
	FireDownProvider = "down"
	// FireUpProvider is the provider listed second, the flaky one.
	FireUpProvider = "up"
	// FireDownKeyPrefix and FireUpKeyPrefix start the connections' API keys.
	FireDownKeyPrefix = "bench-down-key-"
	FireUpKeyPrefix   = "bench-up-key-"
	// FireAdminToken is the admin API token of the under-fire gateway (a
	// loopback test value, not a secret).
	FireAdminToken = "bench-admin-token"
)

// FireConfig is what the under-fire gateway configuration varies.
type FireConfig struct {
	// Listen is the gateway's address; DataDir its Badger directory;
	// MockAddr the mock's host:port.
	Listen, DataDir, MockAddr string
	// BreakerResetMS is the apikey profile's breaker reset timeout.
	BreakerResetMS int64
	// CooldownWaitAttempts is combo_cooldown_wait.max_attempts: how many
	// times one request may wait out short rate-limit cooldowns.
	CooldownWaitAttempts int
	// ContentStallTimeoutMS is stream_recovery.content_stall_timeout_ms.
	ContentStallTimeoutMS int64
}

// FireKeys returns the two connection API keys of a key prefix.
func FireKeys(prefix string) []string { return []string{prefix + "1", prefix + "2"} }

// FireGatewayConfig returns the under-fire gateway configuration
// (docs/api.md format): providers "down" then "up" as described at
// FireModel, an admin token, the per-connection request queue not
// auto-enabled (its default limiter, 100 requests a minute per connection,
// would dominate the figures), the content-stall watchdog and the apikey
// breaker reset timeout from c. Breaker thresholds keep their defaults.
func FireGatewayConfig(c FireConfig) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  listen: %q\n  admin_token: %q\nstate:\n  backend: badger\n  path: %q\nproviders:\n",
		c.Listen, FireAdminToken, c.DataDir)
	for _, p := range []struct{ id, prefix string }{{FireDownProvider, FireDownKeyPrefix}, {FireUpProvider, FireUpKeyPrefix}} {
		fmt.Fprintf(&b, "  - id: %s\n    kind: openai\n    base_url: %q\n    models: [%s]\n    connections:\n",
			p.id, "http://"+c.MockAddr+"/v1", FireModel)
		for i, key := range FireKeys(p.prefix) {
			fmt.Fprintf(&b, "      - id: %s%d\n        api_key: %q\n", p.id, i+1, key)
		}
	}
	fmt.Fprintf(&b, `resilience:
  circuit_breaker:
    apikey: {reset_ms: %d}
  request_queue: {auto_enable_api_key_providers: false}
  stream_recovery: {content_stall_timeout_ms: %d}
  combo_cooldown_wait: {max_attempts: %d}
`, c.BreakerResetMS, c.ContentStallTimeoutMS, c.CooldownWaitAttempts)
	return []byte(b.String())
}
