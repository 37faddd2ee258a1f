package proxy

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
)

// observeRateLimit reads the rate-limit headers of every upstream answer
// (a success, an error or a stream at header time, of any provider kind):
// a connection that says it has no requests or tokens left until a reset
// is paced until then (engine.ObserveRateLimit, docs/resilience.md §2
// "Pacing"); the connection's remaining quota is kept for the headroom
// order (headroomOrder), and a combo candidate's feeds the quota-aware
// strategies. An answer without rate-limit headers costs a scan of its
// header names and allocates nothing; one with them, a map of those
// headers alone.
func (p *Proxy) observeRateLimit(x *state, cd topology.Candidate, h http.Header) {
	p.observeAnswerRateLimit(x, cd, answerHeader{h: h})
}

// observeAnswerRateLimit is observeRateLimit for an answer's headers
// wherever they lie.
func (p *Proxy) observeAnswerRateLimit(x *state, cd topology.Candidate, h answerHeader) {
	if !hasRateLimitHeaders(h) {
		return
	}
	lh := rateLimitHeaders(h)
	now := p.clock.Now()
	if q, ok := strategy.ParseQuotaHeaders(lh, now); ok {
		cd.Connection.Reported.Store(&q)
		if !p.reported.Load() {
			p.reported.Store(true)
		}
		if cd.Combo != nil {
			p.signals.ObserveQuota(x.rt.routes[cd.Combo].targets[cd.Target].Key, q)
		}
	}
	p.eng.ObserveRateLimit(cd.Provider.ID, cd.Connection.ID, lh)
}

// hasRateLimitHeaders reports whether h has a rate-limit remaining header
// (x-ratelimit-remaining*, anthropic-ratelimit-*-remaining), the only
// headers pacing and the quota readers use.
func hasRateLimitHeaders(h answerHeader) bool {
	for name := range h.all {
		if len(name) < len("X-Ratelimit-Remaining") {
			continue
		}
		switch name[0] | 0x20 { // ASCII lower case
		case 'x':
			if hasPrefixFold(name, "x-ratelimit-remaining") {
				return true
			}
		case 'a':
			if hasPrefixFold(name, "anthropic-ratelimit-") && hasSuffixFold(name, "-remaining") {
				return true
			}
		}
	}
	return false
}

// rateLimitHeaders returns h's x-ratelimit-* and anthropic-ratelimit-*
// headers (the only ones engine.PaceHint and strategy.ParseQuotaHeaders
// read), names lower-cased, first values.
func rateLimitHeaders(h answerHeader) map[string]string {
	m := make(map[string]string, 8)
	for k, v := range h.all {
		if hasPrefixFold(k, "x-ratelimit-") || hasPrefixFold(k, "anthropic-ratelimit-") {
			lk := strings.ToLower(k)
			if _, seen := m[lk]; !seen {
				m[lk] = v
			}
		}
	}
	return m
}

// hasPrefixFold reports whether s starts with the lower-case prefix,
// ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// hasSuffixFold reports whether s ends with the lower-case suffix,
// ignoring ASCII case.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// fullHeadroomSort is the largest run of connections headroomOrder sorts
// whole; in a larger run only the connection with the most quota left
// moves first, so that the order costs one pass however many connections
// a provider has.
const fullHeadroomSort = 32

// headroomOrder spreads each target's load over its connections (setting
// connection_order "headroom", the default): within each run of
// candidates that is one target over several connections, the
// connection whose upstream reported the most quota left goes first; one
// that reported nothing counts as full, and ties keep the configured
// order, so connections whose upstream sends no rate-limit headers keep
// it. In a run of up to fullHeadroomSort connections the others follow
// by headroom too, in a larger one in configured order. Runs under
// quota-share (§5, shareOrder) keep their order. cands is not modified; a
// reordered copy is returned when anything moved.
func (p *Proxy) headroomOrder(cands []topology.Candidate) []topology.Candidate {
	if !p.reported.Load() || len(cands) < 2 || p.eng.CurrentSettings().ConnectionOrder != engine.ConnectionOrderHeadroom {
		return cands
	}
	now := p.clock.Now()
	roomOf := func(cd topology.Candidate) float64 {
		if q := cd.Connection.Reported.Load(); q != nil {
			return q.Headroom(now)
		}
		return 1 // nothing reported: full
	}
	return reorderRuns(cands, func(run []topology.Candidate) []int {
		if p.anyShared(run) {
			return nil
		}
		if len(run) > fullHeadroomSort {
			return bestFirst(run, roomOf)
		}
		room := make([]float64, len(run))
		sorted := true
		for k := range room {
			room[k] = roomOf(run[k])
			sorted = sorted && (k == 0 || room[k] <= room[k-1])
		}
		if sorted {
			return nil
		}
		idx := make([]int, len(run))
		for k := range idx {
			idx[k] = k
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(room[b], room[a]) })
		return idx
	})
}

// bestFirst returns the order of run that moves its first connection of
// the most room first and keeps the others in their order, or nil when
// that is the first already.
func bestFirst(run []topology.Candidate, room func(topology.Candidate) float64) []int {
	best, most := 0, room(run[0])
	for k := 1; k < len(run); k++ {
		if r := room(run[k]); r > most {
			best, most = k, r
		}
	}
	if best == 0 {
		return nil
	}
	idx := make([]int, 0, len(run))
	idx = append(idx, best)
	for k := range run {
		if k != best {
			idx = append(idx, k)
		}
	}
	return idx
}
