// Package reqlog keeps the console's list of recent requests: a bounded
// ring of Records, each the summary of one finished client request with
// the attempts it made and the candidates it skipped (its decision trail).
//
// A Record never holds a request or response body, a header, a client key
// or an upstream credential: only configured names (provider, connection,
// model, combo), the client's model name, outcome reasons, statuses and
// timings.
package reqlog

import (
	"slices"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/internal/ring"
)

// DefaultCapacity is the number of requests the console keeps.
const DefaultCapacity = 500

// Clock tells the time; engine.Clock satisfies it.
type Clock interface{ Now() time.Time }

// Attempt is one upstream attempt of a request.
type Attempt struct {
	Provider   string `json:"provider"`
	Connection string `json:"connection"`
	Model      string `json:"model"`
	// Outcome is "success" or the classified failure reason
	// (rate_limit, server_error, transport, local_timeout, ...).
	Outcome string `json:"outcome"`
	// Status is the upstream HTTP status after restatement; 0 for a
	// transport error.
	Status int `json:"status,omitempty"`
	// StartMS is when the attempt started, from the request's start;
	// DurationMS how long it took.
	StartMS    int64 `json:"start_ms"`
	DurationMS int64 `json:"duration_ms"`
	// Rule is the policy rule that classified a failure, if any.
	Rule string `json:"rule,omitempty"`
	// Detail is a short free text (the scope, a cooldown armed, ...).
	Detail string `json:"detail,omitempty"`
}

// Skip is a candidate the request did not try, and why.
type Skip struct {
	Provider   string `json:"provider"`
	Connection string `json:"connection,omitempty"`
	Model      string `json:"model"`
	// Reason is an exclusion reason: circuit_open, provider_cooldown,
	// connection_cooldown, model_lockout, unavailable, lease_held, ...
	Reason      string  `json:"reason"`
	SecondsLeft float64 `json:"seconds_left,omitempty"`
	Detail      string  `json:"detail,omitempty"`
}

// Record is one finished client request.
type Record struct {
	// Seq numbers the records of one gateway run from 1; the console
	// addresses a record by it.
	Seq uint64 `json:"seq"`
	// ID is the request id the client saw in X-Request-Id, when known.
	ID string `json:"id,omitempty"`
	// At is when the request finished.
	At       time.Time `json:"at"`
	Endpoint string    `json:"endpoint"`
	// Model is the model the client asked for (a combo, an alias or
	// provider/model); Route how it was routed ("combo smart (priority)").
	Model  string `json:"model"`
	Route  string `json:"route,omitempty"`
	Stream bool   `json:"stream"`
	// Provider, Connection and Served name the attempt that answered
	// (or the last one tried).
	Provider   string `json:"provider,omitempty"`
	Connection string `json:"connection,omitempty"`
	Served     string `json:"served_model,omitempty"`
	Status     int    `json:"status"`
	Code       string `json:"code,omitempty"`
	// Attempts counts upstream attempts; Trail lists them when the
	// attempt loop reported them, Skipped the candidates it passed over.
	Attempts int       `json:"attempts"`
	Trail    []Attempt `json:"trail,omitempty"`
	Skipped  []Skip    `json:"skipped,omitempty"`
	// Fallback is "emergency" when the emergency fallback served it.
	Fallback string `json:"fallback,omitempty"`
	// RoutePlugin, RouteRule and RouteFallback tell what a routing plugin
	// (a combo whose strategy is "plugin:<name>") did: the plugin, the
	// rule id of its decision, and why the configured order was used
	// instead ("" when the plugin's order was applied).
	RoutePlugin   string `json:"route_plugin,omitempty"`
	RouteRule     string `json:"route_rule,omitempty"`
	RouteFallback string `json:"route_fallback,omitempty"`
	// Durations in milliseconds: total, waiting on upstream calls, the
	// gateway's own share, and the time to the first streamed byte (0 =
	// not a stream or unknown).
	DurationMS int64 `json:"duration_ms"`
	UpstreamMS int64 `json:"upstream_ms"`
	OverheadMS int64 `json:"overhead_ms"`
	TTFBMS     int64 `json:"ttfb_ms,omitempty"`
}

// Log is a ring of the last Capacity records. It is goroutine-safe.
type Log struct {
	clock Clock

	mu  sync.Mutex
	buf *ring.Ring[Record]
	seq uint64 // the newest record's number
}

// New returns a Log keeping the last capacity records (DefaultCapacity
// when capacity ≤ 0), stamping records with clock.
func New(capacity int, clock Clock) *Log {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Log{clock: clock, buf: ring.New[Record](capacity)}
}

// Add stores a copy of *r, numbering it and stamping At when it is zero,
// and returns its sequence number. The oldest record is dropped when the
// log is full; the new record is written in its place and its trail and
// skip lists are reused for the new record's copies, so a full log stores
// a record without allocating. The caller keeps r and its slices.
func (l *Log) Add(r *Record) uint64 {
	at := r.At
	if at.IsZero() {
		at = l.clock.Now()
	}
	l.mu.Lock()
	slot := l.buf.Next()
	trail, skipped := slot.Trail[:0], slot.Skipped[:0]
	*slot = *r
	slot.At = at
	slot.Trail, slot.Skipped = nil, nil
	if len(r.Trail) > 0 {
		slot.Trail = append(trail, r.Trail...)
	}
	if len(r.Skipped) > 0 {
		slot.Skipped = append(skipped, r.Skipped...)
	}
	l.seq++
	slot.Seq = l.seq
	seq := l.seq
	l.mu.Unlock()
	return seq
}

// clone returns r with its own copies of its slices: a kept record's
// slices are reused once it is dropped.
func clone(r Record) Record {
	r.Trail = slices.Clone(r.Trail)
	r.Skipped = slices.Clone(r.Skipped)
	return r
}

// List returns up to limit records, newest first (limit ≤ 0 = all).
func (l *Log) List(limit int) []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.buf.Len()
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Record, 0, limit)
	for i := n - 1; i >= n-limit; i-- {
		out = append(out, clone(l.buf.At(i)))
	}
	return out
}

// Get returns the record numbered seq while it is still kept.
func (l *Log) Get(seq uint64) (Record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	oldest := l.seq - uint64(l.buf.Len()) + 1
	if l.buf.Len() == 0 || seq < oldest || seq > l.seq {
		return Record{}, false
	}
	return clone(l.buf.At(int(seq - oldest))), true
}

// Since returns the kept records numbered after seq, oldest first, and the
// newest sequence number.
func (l *Log) Since(seq uint64) ([]Record, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	oldest := l.seq - uint64(l.buf.Len()) + 1
	var out []Record
	for s := max(seq+1, oldest); s <= l.seq; s++ {
		out = append(out, clone(l.buf.At(int(s-oldest))))
	}
	return out, l.seq
}

// Last returns the newest sequence number (0 before the first Add).
func (l *Log) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}
