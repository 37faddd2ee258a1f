package proxy

import (
	"net/http"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

// observeRateLimit reads the rate-limit headers of every upstream answer
// (a success, an error or a stream at header time, of any provider kind):
// a connection that says it has no requests or tokens left until a reset
// is paced until then (engine.ObserveRateLimit, docs/resilience.md §2
// "Pacing"), and a combo candidate's remaining quota feeds the
// quota-aware strategies. An answer without a remaining count of 0 costs a
// scan of its header names and allocates nothing outside combos.
func (p *Proxy) observeRateLimit(x *state, cd topology.Candidate, h http.Header) {
	if cd.Combo == nil && !reportsEmpty(h) {
		return
	}
	lh := lowerHeaders(h)
	if cd.Combo != nil {
		p.observeQuota(x, cd, lh)
	}
	p.eng.ObserveRateLimit(cd.Provider.ID, cd.Connection.ID, lh)
}

// reportsEmpty reports whether h has a rate-limit remaining header
// (x-ratelimit-remaining*, anthropic-ratelimit-*-remaining) whose value
// is 0, the only answers that can pace a connection.
func reportsEmpty(h http.Header) bool {
	for name, v := range h {
		if len(v) == 0 || !zeroCount(v[0]) || len(name) < len("X-Ratelimit-Remaining") {
			continue
		}
		switch {
		case hasPrefixFold(name, "x-ratelimit-remaining"):
			return true
		case hasPrefixFold(name, "anthropic-ratelimit-") && strings.HasSuffix(strings.ToLower(name), "-remaining"):
			return true
		}
	}
	return false
}

// zeroCount reports whether v reads as the number 0 ("0", "0.0", " 0").
func zeroCount(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return false
	}
	dot := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '0':
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return v[0] != '.' || len(v) > 1
}

// hasPrefixFold reports whether s starts with the lower-case prefix,
// ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
