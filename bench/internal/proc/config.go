package proc

import (
	"fmt"
	"strings"
)

// BenchProvider is the provider every benchmark request is routed to,
// BenchModel its model and BenchCombo the combo that targets it.
const (
	BenchProvider = "bench"
	BenchModel    = "bench-model"
	BenchCombo    = "bench-combo"
)

// Shape is what a benchmark gateway configuration varies: how many
// providers, connections of the benchmark provider and combos it holds,
// and whether it has an admin token (for /metrics and the admin API).
type Shape struct {
	// Listen is the gateway's address; DataDir its Badger directory;
	// MockAddr the mock's host:port.
	Listen, DataDir, MockAddr string
	// Providers is the number of providers (at least 1): BenchProvider
	// and Providers−1 others, each with two connections and a model of its
	// own, all in front of the mock.
	Providers int
	// Connections is the number of connections of BenchProvider (default
	// 2), each with its own API key.
	Connections int
	// Combos is the number of combos: BenchCombo, targeting
	// BenchProvider/BenchModel, and Combos−1 others (0: none).
	Combos int
	// AdminToken, when set, is the admin token (a loopback test value).
	AdminToken string
	// Source, when set, is the local_address of every connection (the
	// source address of the gateway's upstream connections).
	Source string
	// RedisURL, when set, keeps the state in that Redis (keys under
	// RedisPrefix) instead of Badger, so several gateways share it.
	RedisURL, RedisPrefix string
}

// configChanges are the settings every benchmark configuration sets beyond
// providers, combos, listen address, state path and admin token: the
// gateway otherwise runs with its defaults.
var configChanges = []string{
	"`resilience.request_queue.auto_enable_api_key_providers: false` (when on, its default limiter of 100 requests a " +
		"minute per connection would cap every figure at a few requests a second: a test of that limit, not of the gateway)",
}

// GatewayConfigChanges describes, for the report, what the benchmark
// configurations change from the gateway's defaults.
func GatewayConfigChanges() []string {
	return append([]string(nil), configChanges...)
}

// GatewayConfig returns the configuration (docs/api.md format) of a
// benchmark gateway of shape s: Badger state under s.DataDir (or Redis), no client
// keys (open on loopback), and the settings of GatewayConfigChanges.
func GatewayConfig(s Shape) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  listen: %q\n", s.Listen)
	if s.AdminToken != "" {
		fmt.Fprintf(&b, "  admin_token: %q\n", s.AdminToken)
	}
	if s.RedisURL != "" {
		fmt.Fprintf(&b, "state:\n  backend: redis\n  redis_url: %q\n  redis_key_prefix: %q\nproviders:\n", s.RedisURL, s.RedisPrefix)
	} else {
		fmt.Fprintf(&b, "state:\n  backend: badger\n  path: %q\nproviders:\n", s.DataDir)
	}
	base := "http://" + s.MockAddr + "/v1"
	conns := s.Connections
	if conns < 1 {
		conns = 2
	}
	provider := func(id, model, keyPrefix string, n int) {
		fmt.Fprintf(&b, "  - id: %s\n    kind: openai\n    base_url: %q\n    models: [%s]\n    connections:\n", id, base, model)
		for i := range n {
			fmt.Fprintf(&b, "      - id: conn-%d\n        api_key: %q\n", i+1, fmt.Sprintf("%s%d", keyPrefix, i+1))
			if s.Source != "" {
				fmt.Fprintf(&b, "        local_address: %q\n", s.Source)
			}
		}
	}
	provider(BenchProvider, BenchModel, "bench-upstream-key-", conns)
	for i := 2; i <= s.Providers; i++ {
		provider(fmt.Sprintf("other-%d", i), fmt.Sprintf("other-model-%d", i), fmt.Sprintf("other-%d-key-", i), 2)
	}
	if s.Combos > 0 {
		b.WriteString("combos:\n")
		fmt.Fprintf(&b, "  - name: %s\n    strategy: priority\n    targets:\n      - {model: %s/%s}\n", BenchCombo, BenchProvider, BenchModel)
		for i := 2; i <= s.Combos; i++ {
			target := BenchProvider + "/" + BenchModel
			if i <= s.Providers {
				target = fmt.Sprintf("other-%d/other-model-%d", i, i)
			}
			fmt.Fprintf(&b, "  - name: combo-%d\n    strategy: priority\n    targets:\n      - {model: %s}\n      - {model: %s/%s}\n",
				i, target, BenchProvider, BenchModel)
		}
	}
	b.WriteString("resilience:\n  request_queue: {auto_enable_api_key_providers: false}\n")
	return []byte(b.String())
}
