package proxy

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
// header names and allocates nothing.
func (p *Proxy) observeRateLimit(x *state, cd topology.Candidate, h http.Header) {
	if !hasRateLimitHeaders(h) {
		return
	}
	lh := lowerHeaders(h)
	now := p.clock.Now()
	if q, ok := strategy.ParseQuotaHeaders(lh, now); ok {
		p.headroom.observe(cd.Connection.Ref, q)
		if cd.Combo != nil {
			p.signals.ObserveQuota(x.rt.routes[cd.Combo].targets[cd.Target].Key, q)
		}
	}
	p.eng.ObserveRateLimit(cd.Provider.ID, cd.Connection.ID, lh)
}

// hasRateLimitHeaders reports whether h has a rate-limit remaining header
// (x-ratelimit-remaining*, anthropic-ratelimit-*-remaining), the only
// headers pacing and the quota readers use.
func hasRateLimitHeaders(h http.Header) bool {
	for name := range h {
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

// headroomBook holds, per connection (by ref), the quota its upstream last
// reported, on this instance. The zero value is empty and ready; an empty
// book is read with one atomic load.
type headroomBook struct {
	n  atomic.Int32 // len(m)
	mu sync.RWMutex
	m  map[string]strategy.Quota
}

func (b *headroomBook) observe(ref string, q strategy.Quota) {
	b.mu.Lock()
	if b.m == nil {
		b.m = make(map[string]strategy.Quota)
	}
	b.m[ref] = q
	b.n.Store(int32(len(b.m)))
	b.mu.Unlock()
}

// headroom is the share of its quota the connection has left at now (see
// strategy.Quota.Headroom); 1 for a connection that reported nothing.
func (b *headroomBook) headroom(ref string, now time.Time) float64 {
	b.mu.RLock()
	q, ok := b.m[ref]
	b.mu.RUnlock()
	if !ok {
		return 1
	}
	return q.Headroom(now)
}

// headroomOrder spreads each target's load over its connections (setting
// connection_order "headroom", the default): within each run of
// candidates that is one target over several connections, the
// connection whose upstream reported the most quota left goes first; one
// that reported nothing counts as full, and ties keep the configured
// order, so connections whose upstream sends no rate-limit headers keep
// it. Runs under quota-share (§5, shareOrder) keep their order. cands is
// not modified; a reordered copy is returned when anything moved.
func (p *Proxy) headroomOrder(cands []topology.Candidate) []topology.Candidate {
	if p.headroom.n.Load() == 0 || len(cands) < 2 || p.eng.CurrentSettings().ConnectionOrder != engine.ConnectionOrderHeadroom {
		return cands
	}
	now := p.clock.Now()
	return reorderRuns(cands, func(run []topology.Candidate) []int {
		if p.anyShared(run) {
			return nil
		}
		room := make([]float64, len(run))
		sorted := true
		for k := range room {
			room[k] = p.headroom.headroom(run[k].Connection.Ref, now)
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
