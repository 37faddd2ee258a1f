package mock

import (
	"sync"
	"sync/atomic"
)

// AnonymousKey is the key under which calls without an API key are counted.
const AnonymousKey = "-"

// Stats is a snapshot of the mock's call counters since the last reset.
// Every call to a generation endpoint (chat completions, messages,
// responses) is counted once in Total and, when it ends, once in either
// Completed or Cancellations, so Total = Completed + Cancellations + InFlight.
type Stats struct {
	// Total is the number of calls.
	Total uint64 `json:"total"`
	// Completed counts calls whose scripted answer was delivered in full
	// (including scripted errors, resets and stalls that ran out stall_ms).
	Completed uint64 `json:"completed"`
	// Cancellations counts calls where the client went away (request
	// context done or a write failed) before the answer was finished; calls
	// cut short by Server.Close count here too.
	Cancellations uint64 `json:"cancellations"`
	// InFlight is the number of calls being answered now.
	InFlight int64 `json:"in_flight"`
	// MaxConcurrent is the highest InFlight seen.
	MaxConcurrent int64 `json:"max_concurrent"`
	// ByKey holds the same counters per API key (AnonymousKey for none).
	ByKey map[string]KeyStats `json:"by_key"`
	// ByKeyModel counts calls per "key|model".
	ByKeyModel map[string]uint64 `json:"by_key_model"`
	// UsageProbes counts GET /api/oauth/usage calls (not in Total).
	UsageProbes uint64 `json:"usage_probes,omitempty"`
	// ResetClaims counts valid POST .../reset_rate_limits calls (not in Total).
	ResetClaims uint64 `json:"reset_claims,omitempty"`
}

// KeyStats are the counters of one API key.
type KeyStats struct {
	// Calls is the number of calls made with this key.
	Calls uint64 `json:"calls"`
	// Completed counts calls answered in full.
	Completed uint64 `json:"completed"`
	// Cancellations counts calls the client abandoned.
	Cancellations uint64 `json:"cancellations"`
	// InFlight is the number of this key's calls being answered now.
	InFlight int64 `json:"in_flight"`
	// MaxConcurrent is the highest simultaneous InFlight seen for this key.
	MaxConcurrent int64 `json:"max_concurrent"`
}

type counters struct {
	calls, completed, cancelled atomic.Uint64
	inFlight, maxConc           atomic.Int64
}

func (c *counters) begin() {
	c.calls.Add(1)
	cur := c.inFlight.Add(1)
	for {
		m := c.maxConc.Load()
		if cur <= m || c.maxConc.CompareAndSwap(m, cur) {
			return
		}
	}
}

func (c *counters) end(cancelled bool) {
	c.inFlight.Add(-1)
	if cancelled {
		c.cancelled.Add(1)
	} else {
		c.completed.Add(1)
	}
}

type keyBook struct {
	counters
	mu     sync.RWMutex
	models map[string]*atomic.Uint64
}

// book is one generation of counters; ResetStats swaps in a fresh one, and
// calls begun in an old book end in it, so a reset never drives a gauge
// negative.
type book struct {
	all counters
	// usageProbes and resetClaims count the account endpoints.
	usageProbes, resetClaims atomic.Uint64
	mu                       sync.RWMutex
	keys                     map[string]*keyBook
}

func newBook() *book { return &book{keys: make(map[string]*keyBook)} }

// begin counts a call. It allocates only the first time a key or a
// key|model pair is seen.
func (b *book) begin(key, model string) *keyBook {
	b.mu.RLock()
	kb := b.keys[key]
	b.mu.RUnlock()
	if kb == nil {
		b.mu.Lock()
		if kb = b.keys[key]; kb == nil {
			kb = &keyBook{models: make(map[string]*atomic.Uint64)}
			b.keys[key] = kb
		}
		b.mu.Unlock()
	}
	kb.mu.RLock()
	mc := kb.models[model]
	kb.mu.RUnlock()
	if mc == nil {
		kb.mu.Lock()
		if mc = kb.models[model]; mc == nil {
			mc = new(atomic.Uint64)
			kb.models[model] = mc
		}
		kb.mu.Unlock()
	}
	mc.Add(1)
	b.all.begin()
	kb.begin()
	return kb
}

func (b *book) end(kb *keyBook, cancelled bool) {
	kb.end(cancelled)
	b.all.end(cancelled)
}

func (b *book) snapshot() Stats {
	s := Stats{
		Total:         b.all.calls.Load(),
		Completed:     b.all.completed.Load(),
		Cancellations: b.all.cancelled.Load(),
		InFlight:      b.all.inFlight.Load(),
		MaxConcurrent: b.all.maxConc.Load(),
		ByKey:         make(map[string]KeyStats),
		ByKeyModel:    make(map[string]uint64),
		UsageProbes:   b.usageProbes.Load(),
		ResetClaims:   b.resetClaims.Load(),
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for key, kb := range b.keys {
		s.ByKey[key] = KeyStats{
			Calls:         kb.calls.Load(),
			Completed:     kb.completed.Load(),
			Cancellations: kb.cancelled.Load(),
			InFlight:      kb.inFlight.Load(),
			MaxConcurrent: kb.maxConc.Load(),
		}
		kb.mu.RLock()
		for model, n := range kb.models {
			s.ByKeyModel[key+"|"+model] = n.Load()
		}
		kb.mu.RUnlock()
	}
	return s
}
