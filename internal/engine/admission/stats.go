package admission

import (
	"cmp"
	"slices"
	"time"
)

// ConnStats is one connection's admission state for GET
// /api/monitoring/health. Counters are cumulative since the connection was
// registered.
type ConnStats struct {
	Provider   string `json:"provider"`
	Connection string `json:"connection"`
	// Protected: requests go through the limiter queue.
	Protected bool `json:"protected"`
	// RateLimitProtection is the explicit per-connection flag (persist it).
	RateLimitProtection bool `json:"rate_limit_protection"`
	// Queued counts requests waiting in the limiter queue, the composite
	// gate or the quota-share semaphore.
	Queued int `json:"queued"`
	// Running counts admitted requests not yet released.
	Running int `json:"running"`
	// Waits counts admitted requests that had to wait; WaitMSTotal sums
	// their waits.
	Waits       int64 `json:"waits"`
	WaitMSTotal int64 `json:"wait_ms_total"`
	// Rejections counts refused requests; RejectionsByCode splits them by
	// error code (CodeCanceled for client cancellations).
	Rejections       int64            `json:"rejections"`
	RejectionsByCode map[string]int64 `json:"rejections_by_code,omitempty"`
	// QuotaShareSlots is the size of the quota-share semaphore
	// (max_concurrent with quota-share on; 0 = none) and QuotaShareHeld
	// the slots held now.
	QuotaShareSlots int `json:"quota_share_slots"`
	QuotaShareHeld  int `json:"quota_share_held"`
	// QuotaShareFailOpen counts requests that proceeded without a
	// quota-share slot.
	QuotaShareFailOpen int64 `json:"quota_share_fail_open"`
	// PausedUntil is the end of an active limiter pause, zero when none.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Effective budgets.
	MaxWaitMS          int64 `json:"max_wait_ms"`
	ExecutionMaxWaitMS int64 `json:"execution_max_wait_ms"`
	MaxQueueDepth      int   `json:"max_queue_depth"`
}

// Snapshot returns the state of every registered connection, sorted by
// provider then connection. It is consistent per connection, not across
// connections.
func (m *Manager) Snapshot() []ConnStats {
	conns := *m.conns.Load()
	m.mu.Lock()
	flags := make(map[*conn]bool, len(conns))
	for _, c := range conns {
		flags[c] = c.protection
	}
	m.mu.Unlock()
	gateWaiters := map[*conn]int{}
	m.gates.mu.Lock()
	for w := m.gates.head; w != nil; w = w.next {
		gateWaiters[w.owner]++
	}
	m.gates.mu.Unlock()

	now := m.clock.Now()
	out := make([]ConnStats, 0, len(conns))
	for _, c := range conns {
		cfg := c.cfg.Load()
		s := ConnStats{
			Provider:            c.provider,
			Connection:          c.id,
			Protected:           cfg.protected,
			RateLimitProtection: flags[c],
			Running:             int(c.inflight.Load()),
			Waits:               c.stats.waits.Load(),
			WaitMSTotal:         time.Duration(c.stats.waitNanos.Load()).Milliseconds(),
			QuotaShareFailOpen:  c.stats.quotaShareFailOpen.Load(),
			MaxWaitMS:           cfg.budgets.MaxWait.Milliseconds(),
			ExecutionMaxWaitMS:  cfg.budgets.ExecutionMaxWait.Milliseconds(),
			MaxQueueDepth:       cfg.budgets.MaxQueueDepth,
		}
		c.mu.Lock()
		s.Queued = c.queued + gateWaiters[c]
		if c.lim.pausedUntil.After(now) {
			s.PausedUntil = c.lim.pausedUntil
		}
		c.mu.Unlock()
		var qsWaiting int
		s.QuotaShareSlots, s.QuotaShareHeld, qsWaiting = c.share.counts()
		s.Queued += qsWaiting
		for code, n := range map[string]int64{
			CodeQueueFull:          c.stats.queueFull.Load(),
			CodeQueueTimeout:       c.stats.queueTimeout.Load(),
			CodeSemaphoreTimeout:   c.stats.semTimeout.Load(),
			CodeSemaphoreQueueFull: c.stats.semFull.Load(),
			CodeCanceled:           c.stats.canceled.Load(),
		} {
			if n > 0 {
				if s.RejectionsByCode == nil {
					s.RejectionsByCode = map[string]int64{}
				}
				s.RejectionsByCode[code] = n
				s.Rejections += n
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ConnStats) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Connection, b.Connection))
	})
	return out
}

// Observer receives admission events for metrics. Every field is optional.
// Callbacks run synchronously on the goroutine doing the operation, after
// the package's locks are released; they must be goroutine-safe, fast and
// must not block.
type Observer struct {
	// OnQueued: a request entered a connection's limiter queue, which now
	// holds queued requests.
	OnQueued func(provider, connection string, queued int)
	// OnStarted: a request was admitted after waiting waited (0 = at once).
	OnStarted func(provider, connection string, waited time.Duration)
	// OnRejected: a request was refused with code (an *Error code or
	// CodeCanceled).
	OnRejected func(provider, connection, code string)
	// OnReleased: a ticket was released; running requests remain.
	OnReleased func(provider, connection string, running int)
	// OnPaused: Pace paced or paused the connection's limiter until until.
	OnPaused func(provider, connection string, until time.Time)
	// OnQuotaShareFailOpen: a request proceeded without a quota-share slot.
	OnQuotaShareFailOpen func(provider, connection string)
}

// SetObserver installs o, replacing any previous observer; the zero
// Observer removes it.
func (m *Manager) SetObserver(o Observer) {
	if o.OnQueued == nil && o.OnStarted == nil && o.OnRejected == nil && o.OnReleased == nil &&
		o.OnPaused == nil && o.OnQuotaShareFailOpen == nil {
		m.obs.Store(nil)
		return
	}
	m.obs.Store(&o)
}
