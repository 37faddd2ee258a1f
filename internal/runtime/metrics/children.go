package metrics

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// maxChildren bounds each cache of resolved label children. The labels
// are bounded already (providers, connections and models from the
// configuration, codes and reasons from fixed vocabularies); this bounds
// the cache's own memory should a configuration be very large. Past it,
// lookups resolve through the vector as before.
const maxChildren = 8192

// children caches the children of a metric vector by their label values:
// the request path finds a request's counters with one lookup in a plain
// map instead of the vector's hashing and checking of every label value
// (UTF-8 validation, FNV hash, locked lookup) on each call. A vector's
// child for given values never changes (nothing deletes or resets them),
// so a cached child is the one WithLabelValues would return.
//
// Lookups read an immutable map without a lock. A child not in it is
// resolved under the mutex and kept in a pending map; the two are merged
// into a new immutable map once the locked lookups since the last merge
// number as many as the entries to copy, so merging costs O(1) per lookup
// over time.
type children[K comparable, V any] struct {
	resolve func(K) V
	max     int // entries kept at most
	read    atomic.Pointer[map[K]V]

	mu      sync.Mutex
	pending map[K]V
	misses  int
}

func newChildren[K comparable, V any](max int, resolve func(K) V) *children[K, V] {
	c := &children[K, V]{resolve: resolve, max: max}
	c.read.Store(&map[K]V{})
	return c
}

// get returns the child of k, resolving and caching it on first use.
func (c *children[K, V]) get(k K) V {
	if v, ok := (*c.read.Load())[k]; ok {
		return v
	}
	return c.miss(k)
}

func (c *children[K, V]) miss(k K) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	read := *c.read.Load()
	if v, ok := read[k]; ok {
		return v
	}
	v, ok := c.pending[k]
	if !ok {
		v = c.resolve(k)
		if len(read)+len(c.pending) >= c.max {
			return v
		}
		if c.pending == nil {
			c.pending = make(map[K]V)
		}
		c.pending[k] = v
	}
	if c.misses++; c.misses >= len(read)+len(c.pending) {
		next := make(map[K]V, len(read)+len(c.pending))
		maps.Copy(next, read)
		maps.Copy(next, c.pending)
		c.read.Store(&next)
		c.pending, c.misses = nil, 0
	}
	return v
}

// requestKey labels a client request: requests_total's labels (the
// status as its class).
type requestKey struct {
	endpoint, provider, model, class, code string
}

// requestChildren are the children a finished request updates: its
// requests_total counter and its provider's upstream latency histogram
// (nil without a provider).
type requestChildren struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// attemptKey labels one upstream attempt (attempts_total).
type attemptKey struct {
	provider, connection, model, reason string
}

// streamKey labels a stream event (stream_events_total).
type streamKey struct {
	event, reason string
}

// cacheChildren builds the caches of the vectors the request path
// updates on every request.
func (m *Metrics) cacheChildren() {
	m.requestChildren = newChildren(maxChildren, func(k requestKey) requestChildren {
		c := requestChildren{count: m.requests.WithLabelValues(k.endpoint, k.provider, k.model, k.class, k.code)}
		if k.provider != "" {
			c.latency = m.upstreamLatency.WithLabelValues(k.provider)
		}
		return c
	})
	m.attemptChildren = newChildren(maxChildren, func(k attemptKey) prometheus.Counter {
		return m.attempts.WithLabelValues(k.provider, k.connection, k.model, k.reason)
	})
	m.streamChildren = newChildren(maxChildren, func(k streamKey) prometheus.Counter {
		return m.streamEvents.WithLabelValues(k.event, k.reason)
	})
}
