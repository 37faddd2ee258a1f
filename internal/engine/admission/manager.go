package admission

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// connKey names one provider+connection.
type connKey struct{ provider, connection string }

// connConfig is the immutable derived configuration of one connection,
// swapped atomically on every configuration change so Acquire reads it
// without a lock.
type connConfig struct {
	protected bool
	limiter   LimiterConfig
	budgets   Resolved
	gates     gateSet                 // global, provider and account levels
	models    map[string]*gateCounter // model level, positive caps only
	qs        bool                    // the quota-share semaphore is on
	qsWait    time.Duration
	semLimit  int
	// maxConcurrent is the connection's max_concurrent (≤ 0 = unlimited).
	maxConcurrent int
}

// conn is the state of one provider+connection.
type conn struct {
	provider, id string
	cfg          atomic.Pointer[connConfig]

	// spec, protection and models (the map) are guarded by Manager.mu.
	spec       ConnSpec
	protection bool
	models     map[string]*gateCounter // every model counter ever made
	account    gateCounter             // guarded by Manager.gates.mu

	// mu guards lim, the limiter queue and queued.
	mu           sync.Mutex
	lim          limiter
	qhead, qtail *queueWaiter
	queued       int

	share shareSem // the quota-share semaphore

	inflight atomic.Int64
	stats    connCounters
}

// connCounters are the cumulative counters of ConnStats.
type connCounters struct {
	waits, waitNanos              atomic.Int64
	queueFull, queueTimeout       atomic.Int64
	semTimeout, semFull, canceled atomic.Int64
	quotaShareFailOpen            atomic.Int64
}

// queueWaiter is one request queued in a connection's limiter.
type queueWaiter struct {
	ready      chan struct{}
	prev, next *queueWaiter
}

// Manager is the admission control of every connection. Configuration
// changes (UpdateSettings, UpdateConnection, SetProtection,
// RemoveConnection) are serialised; Acquire, Release, Pace, Precheck and
// Snapshot run concurrently with each other and with them. All methods are
// goroutine-safe. A Manager starts no goroutine.
type Manager struct {
	clock Clock
	obs   atomic.Pointer[Observer]
	conns atomic.Pointer[map[connKey]*conn] // copy-on-write

	// mu serialises configuration changes and guards settings and
	// providers (the map; the counters are guarded by gates.mu).
	mu        sync.Mutex
	settings  Settings
	providers map[string]*gateCounter

	gates  semGroup    // the composite gate of every connection
	global gateCounter // guarded by gates.mu

	poolMu sync.Mutex
	pools  map[string]*QuotaSharePool

	// quotaShared counts the connections whose quota-share semaphore is
	// on (shared.go).
	quotaShared atomic.Int64
}

// NewManager returns a Manager using clock (nil = SystemClock()) with
// settings s and the connections conns (a repeated provider+connection is
// applied like UpdateConnection).
func NewManager(clock Clock, s Settings, conns []ConnSpec) *Manager {
	if clock == nil {
		clock = SystemClock()
	}
	m := &Manager{clock: clock, providers: map[string]*gateCounter{}, pools: map[string]*QuotaSharePool{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settings = cloneSettings(s)
	// Built in place before it is published: registering the connections
	// one by one through updateConnectionLocked would copy the map once per
	// connection (quadratic in the configuration's size).
	all := make(map[connKey]*conn, len(conns))
	for _, spec := range conns {
		if c := all[connKey{spec.Provider, spec.Connection}]; c != nil {
			m.respecLocked(c, spec)
			continue
		}
		c := m.newConnLocked(spec)
		all[connKey{c.provider, c.id}] = c
	}
	m.conns.Store(&all)
	return m
}

func cloneSettings(s Settings) Settings {
	s.ProviderConcurrency = maps.Clone(s.ProviderConcurrency)
	if s.AutoEnableEnv != nil {
		s.AutoEnableEnv = new(*s.AutoEnableEnv)
	}
	return s
}

func (m *Manager) lookup(provider, connection string) *conn {
	return (*m.conns.Load())[connKey{provider, connection}]
}

// Settings returns a copy of the current settings.
func (m *Manager) Settings() Settings {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneSettings(m.settings)
}

// UpdateSettings replaces the settings and re-derives every connection.
// Requests already running keep their permits; queued requests re-evaluate
// against the new limits at once.
func (m *Manager) UpdateSettings(s Settings) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settings = cloneSettings(s)
	for _, c := range *m.conns.Load() {
		m.rebuildLocked(c)
	}
}

// UpdateConnection registers spec's connection or updates it. For a
// connection already registered, spec.RateLimitProtection is ignored:
// updating a connection's other fields never changes its protection flag,
// which only SetProtection changes afterwards (docs/resilience.md §7). Running
// requests keep their permits.
func (m *Manager) UpdateConnection(spec ConnSpec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.updateConnectionLocked(spec)
}

func (m *Manager) updateConnectionLocked(spec ConnSpec) {
	key := connKey{spec.Provider, spec.Connection}
	if c := (*m.conns.Load())[key]; c != nil {
		m.respecLocked(c, spec)
		return
	}
	next := maps.Clone(*m.conns.Load())
	next[key] = m.newConnLocked(spec)
	m.conns.Store(&next)
}

// newConnLocked builds the state of a connection not registered yet; the
// caller publishes it.
func (m *Manager) newConnLocked(spec ConnSpec) *conn {
	spec.ModelConcurrency = maps.Clone(spec.ModelConcurrency)
	c := &conn{provider: spec.Provider, id: spec.Connection, protection: spec.RateLimitProtection, models: map[string]*gateCounter{}}
	c.spec = spec
	m.rebuildLocked(c)
	return c
}

// respecLocked gives a registered connection a new spec (its protection
// flag kept).
func (m *Manager) respecLocked(c *conn, spec ConnSpec) {
	spec.ModelConcurrency = maps.Clone(spec.ModelConcurrency)
	c.spec = spec
	m.rebuildLocked(c)
}

// RemoveConnection forgets a connection. Its running requests release
// normally and its queued requests finish their wait; a later
// UpdateConnection registers it afresh.
func (m *Manager) RemoveConnection(provider, connection string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := connKey{provider, connection}
	c, ok := (*m.conns.Load())[key]
	if !ok {
		return
	}
	m.countQuotaShare(c.cfg.Load(), nil)
	next := maps.Clone(*m.conns.Load())
	delete(next, key)
	m.conns.Store(&next)
}

// Protected reports whether the connection's requests go through its
// limiter queue: the auto-enable safety net covers every active apikey
// connection (RATE_LIMIT_AUTO_ENABLE, when set, wins over the saved
// setting), and rate_limit_protection: true (or SetProtection) covers any
// connection. There is no per-connection opt-out while auto-enable is on.
// An unknown connection is not protected.
func (m *Manager) Protected(provider, connection string) bool {
	c := m.lookup(provider, connection)
	return c != nil && c.cfg.Load().protected
}

// SetProtection sets the connection's rate_limit_protection flag (POST
// /api/rate-limits). It returns an error wrapping ErrUnknownConnection for a
// connection never registered. The flag survives UpdateConnection; the
// caller persists it.
func (m *Manager) SetProtection(provider, connection string, enabled bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.lookup(provider, connection)
	if c == nil {
		return fmt.Errorf("set rate limit protection of %s/%s: %w", provider, connection, ErrUnknownConnection)
	}
	c.protection = enabled
	m.rebuildLocked(c)
	return nil
}

// SetProtectionByID is SetProtection for the connection_id of POST
// /api/rate-limits: connectionID is a bare connection id that must name
// exactly one registered connection, or "provider/connection".
func (m *Manager) SetProtectionByID(connectionID string, enabled bool) error {
	var found []connKey
	for k := range *m.conns.Load() {
		if k.connection == connectionID || k.provider+"/"+k.connection == connectionID {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return fmt.Errorf("set rate limit protection of %q: %w", connectionID, ErrUnknownConnection)
	case 1:
		return m.SetProtection(found[0].provider, found[0].connection, enabled)
	default:
		return fmt.Errorf("set rate limit protection of %q: %d providers have this connection id, name it as provider/connection", connectionID, len(found))
	}
}

// rebuildLocked re-derives c's configuration and gate caps and wakes its
// waiters to re-evaluate. Called with m.mu held.
func (m *Manager) rebuildLocked(c *conn) {
	s := &m.settings
	spec := &c.spec
	cfg := &connConfig{
		protected: c.protection || (s.autoEnable() && spec.Profile == engine.ProfileAPIKey && !spec.Disabled),
		limiter:   s.limiter(spec.Overrides),
		budgets:   s.budgets(spec.Overrides),
		semLimit:  s.SemaphoreQueueLimit,
		qsWait:    s.QuotaShareWait,

		maxConcurrent: spec.MaxConcurrent,
	}
	if cfg.semLimit <= 0 {
		cfg.semLimit = DefaultSemaphoreQueueLimit
	}
	if d := cfg.budgets.MaxQueueDepth; d > 0 {
		// max_queue_depth bounds the connection's waiters at every stage.
		cfg.semLimit = min(cfg.semLimit, d)
	}
	pc := m.providers[c.provider]
	if pc == nil {
		pc = &gateCounter{}
		m.providers[c.provider] = pc
	}
	for model, limit := range spec.ModelConcurrency {
		if limit <= 0 {
			continue
		}
		n := c.models[model]
		if n == nil {
			n = &gateCounter{}
			c.models[model] = n
		}
		if cfg.models == nil {
			cfg.models = map[string]*gateCounter{}
		}
		cfg.models[model] = n
	}
	m.gates.update(func() {
		m.global.cap = max(s.GlobalConcurrency, 0)
		pc.cap = max(s.ProviderConcurrency[c.provider], 0)
		c.account.cap = max(spec.Overrides.MaxConcurrent, 0)
		for model, n := range c.models {
			n.cap = max(spec.ModelConcurrency[model], 0)
		}
	})
	if m.global.cap > 0 {
		cfg.gates[levelGlobal] = &m.global
	}
	if pc.cap > 0 {
		cfg.gates[levelProvider] = pc
	}
	if c.account.cap > 0 {
		cfg.gates[levelAccount] = &c.account
	}
	qsCap := 0
	if s.QuotaShareEnabled && spec.MaxConcurrent > 0 {
		qsCap = spec.MaxConcurrent
		cfg.qs = true
	}
	c.share.setCap(qsCap)
	m.countQuotaShare(c.cfg.Load(), cfg)
	c.cfg.Store(cfg)
	c.mu.Lock()
	c.wakeAllLocked()
	c.mu.Unlock()
}

// Precheck is the fast admission check to run before any translation or
// compression work: for a protected connection whose queue already holds
// max_queue_depth requests it returns the 429 RATE_LIMIT_QUEUE_FULL *Error
// (and counts the rejection), otherwise nil. Acquire checks again. An
// unknown connection gives an error wrapping ErrUnknownConnection.
func (m *Manager) Precheck(provider, connection string) error {
	c := m.lookup(provider, connection)
	if c == nil {
		return fmt.Errorf("admission of %s/%s: %w", provider, connection, ErrUnknownConnection)
	}
	cfg := c.cfg.Load()
	if !cfg.protected || cfg.budgets.MaxQueueDepth <= 0 {
		return nil
	}
	c.mu.Lock()
	e := m.queueFullLocked(c, cfg, m.clock.Now())
	c.mu.Unlock()
	if e != nil {
		return m.reject(c, e)
	}
	return nil
}

// queueFullLocked applies CheckQueueDepth to c's queue. Called with c.mu
// held.
func (m *Manager) queueFullLocked(c *conn, cfg *connConfig, now time.Time) *Error {
	depth := cfg.budgets.MaxQueueDepth
	if depth <= 0 || c.queued < depth {
		return nil
	}
	e := queueFullError(c.queued, depth, c.id)
	e.Provider = c.provider
	e.RetryAfter = max(c.lim.readyAt(now, &cfg.limiter).Sub(now), minRetryAfter)
	return e
}

// Acquire is AcquireFor with no client key.
func (m *Manager) Acquire(ctx context.Context, provider, connection, model string) (*Ticket, error) {
	return m.AcquireFor(ctx, provider, connection, model, "")
}

// AcquireFor admits one request of client key client for model on
// provider/connection. It takes, in order: the connection's limiter queue
// when the connection is Protected (max_queue_depth → 429
// RATE_LIMIT_QUEUE_FULL at once; max_wait_ms → 429
// RATE_LIMIT_QUEUE_TIMEOUT; a limiter pause ending after the request's
// queue budget → RATE_LIMIT_QUEUE_TIMEOUT at once), then the composite
// gate global → provider → account → model all-or-nothing (503
// SEMAPHORE_TIMEOUT when the queue-wait budget runs out, 429
// SEMAPHORE_QUEUE_FULL when a full gate already has SemaphoreQueueLimit
// waiters), then the quota-share semaphore of a connection with a
// max_concurrent, which fails open: the request waits for a slot up to
// its queue budget (QuotaShareWait), slots going to the waiting client
// keys in turn, and then proceeds without one (counted in
// ConnStats.QuotaShareFailOpen). The queue-wait budget max_wait_ms covers
// the three waits together and ends when AcquireFor returns: no timer
// outlives it.
//
// On success the caller must call Ticket.Release exactly once when the
// request ends. On error nothing is held: every error is an *Error, a
// wrapped ctx.Err() when ctx ends first, or a wrapped ErrUnknownConnection.
// None of them is upstream health.
func (m *Manager) AcquireFor(ctx context.Context, provider, connection, model, client string) (*Ticket, error) {
	t := new(Ticket)
	if err := m.AcquireInto(ctx, t, provider, connection, model, client); err != nil {
		return nil, err
	}
	return t, nil
}

// AcquireInto is AcquireFor with the caller's Ticket: on success t holds
// the admission (whatever it held before is overwritten: t must not hold
// an admission not yet released, nor be released again by an earlier
// holder); on error t holds nothing. A caller that admits one request
// after another into a Ticket it keeps allocates none.
func (m *Manager) AcquireInto(ctx context.Context, t *Ticket, provider, connection, model, client string) error {
	*t = Ticket{}
	t.released.Store(true) // holds nothing until admitted
	c := m.lookup(provider, connection)
	if c == nil {
		return fmt.Errorf("admission of %s/%s: %w", provider, connection, ErrUnknownConnection)
	}
	if err := ctx.Err(); err != nil {
		return m.reject(c, err)
	}
	cfg := c.cfg.Load()
	need := cfg.gates
	if model != "" {
		need[levelModel] = cfg.models[model]
	}
	// A connection with no limiter, gate or quota share admits at once:
	// the clock is read only for a wait.
	var start, deadline time.Time
	if cfg.protected || !need.empty() || cfg.qs {
		start = m.clock.Now()
		deadline = start.Add(cfg.budgets.MaxWait)
	}
	*t = Ticket{m: m, c: c, execMaxWait: cfg.budgets.ExecutionMaxWait}
	waited := false
	if cfg.protected {
		held, w, err := m.enterLimiter(ctx, c, cfg, start, deadline)
		if err != nil {
			t.released.Store(true)
			return m.reject(c, err)
		}
		t.limiter, waited = held, w
	}
	if !need.empty() {
		now := start
		if waited {
			now = m.clock.Now()
		}
		held, w, err := m.gates.acquire(ctx, m.clock, now, deadline, need, cfg.semLimit, c)
		if err != nil {
			t.leaveLimiter()
			t.released.Store(true)
			switch err {
			case errGateFull:
				return m.reject(c, semaphoreQueueFullError(c, cfg.semLimit))
			case errGateTimeout:
				return m.reject(c, semaphoreTimeoutError(c, cfg.budgets.MaxWait))
			}
			return m.reject(c, err)
		}
		t.gates, waited = held, waited || w
	}
	if cfg.qs {
		if err := m.enterQuotaShare(ctx, t, cfg, start, deadline, waited, client); err != nil {
			t.leaveGates()
			t.leaveLimiter()
			t.released.Store(true)
			return m.reject(c, err)
		}
	}
	c.inflight.Add(1)
	if waited {
		t.queueWait = m.clock.Now().Sub(start)
		c.stats.waits.Add(1)
		c.stats.waitNanos.Add(int64(t.queueWait))
	}
	if o := m.obs.Load(); o != nil && o.OnStarted != nil {
		o.OnStarted(provider, connection, t.queueWait)
	}
	return nil
}

// enterQuotaShare takes a slot of the connection's quota-share semaphore
// for a request of client, or fails open: on saturation (a full wait list)
// or when its wait ends (QuotaShareWait, at most the queue budget) the
// request proceeds without a slot. Only ctx ending is an error.
func (m *Manager) enterQuotaShare(ctx context.Context, t *Ticket, cfg *connConfig, start, deadline time.Time, waited bool, client string) error {
	c := t.c
	now := start
	if waited {
		now = m.clock.Now()
	}
	qsDeadline := deadline
	switch {
	case cfg.qsWait < 0:
		qsDeadline = now
	case cfg.qsWait > 0 && now.Add(cfg.qsWait).Before(deadline):
		qsDeadline = now.Add(cfg.qsWait)
	}
	held, err := c.share.acquire(ctx, m.clock, now, qsDeadline, client, cfg.semLimit)
	switch err {
	case nil:
		t.qs = held
		return nil
	case errGateFull, errGateTimeout:
		c.stats.quotaShareFailOpen.Add(1)
		if o := m.obs.Load(); o != nil && o.OnQuotaShareFailOpen != nil {
			o.OnQuotaShareFailOpen(c.provider, c.id)
		}
		return nil
	}
	return err
}

// enterLimiter queues the request in c's limiter and returns when it is
// dispatched (held reports whether it holds a limiter slot: false when the
// connection stopped being protected while it waited).
func (m *Manager) enterLimiter(ctx context.Context, c *conn, cfg *connConfig, now, deadline time.Time) (held, waited bool, err error) {
	lc := &cfg.limiter
	c.mu.Lock()
	if e := m.queueFullLocked(c, cfg, now); e != nil {
		c.mu.Unlock()
		return false, false, e
	}
	if c.qhead == nil && c.lim.canRun(lc) && !c.lim.readyAt(now, lc).After(now) {
		c.lim.take(now, lc)
		c.mu.Unlock()
		return true, false, nil
	}
	if c.lim.pausedUntil.After(deadline) {
		retry := c.lim.pausedUntil.Sub(now)
		c.mu.Unlock()
		return false, false, queueTimeoutError(c, cfg.budgets.MaxWait, retry, true)
	}
	w := &queueWaiter{ready: make(chan struct{}, 1)}
	c.pushLocked(w)
	queued := c.queued
	c.mu.Unlock()
	if o := m.obs.Load(); o != nil && o.OnQueued != nil {
		o.OnQueued(c.provider, c.id, queued)
	}
	return m.waitLimiter(ctx, c, w, cfg.budgets.MaxWait, deadline)
}

// waitLimiter is the queued request's loop: the head of the queue
// dispatches itself as soon as the limiter allows and sleeps on a Clock
// timer until then; every waiter sleeps at most until its deadline.
func (m *Manager) waitLimiter(ctx context.Context, c *conn, w *queueWaiter, maxWait time.Duration, deadline time.Time) (held, waited bool, err error) {
	for {
		c.mu.Lock()
		cfg := c.cfg.Load()
		lc := &cfg.limiter
		now := m.clock.Now()
		if !cfg.protected {
			c.removeLocked(w)
			c.mu.Unlock()
			return false, true, nil
		}
		var wake time.Time
		if c.qhead == w && c.lim.canRun(lc) {
			at := c.lim.readyAt(now, lc)
			if !at.After(now) {
				c.removeLocked(w)
				c.lim.take(now, lc)
				c.mu.Unlock()
				return true, true, nil
			}
			wake = at
		}
		if !now.Before(deadline) {
			c.removeLocked(w)
			c.mu.Unlock()
			return false, true, queueTimeoutError(c, maxWait, minRetryAfter, false)
		}
		if c.lim.pausedUntil.After(deadline) {
			retry := c.lim.pausedUntil.Sub(now)
			c.removeLocked(w)
			c.mu.Unlock()
			return false, true, queueTimeoutError(c, maxWait, retry, true)
		}
		c.mu.Unlock()
		d := deadline.Sub(now)
		if !wake.IsZero() {
			d = min(d, wake.Sub(now))
		}
		tm := m.clock.NewTimer(d)
		select {
		case <-w.ready:
		case <-tm.C():
		case <-ctx.Done():
			tm.Stop()
			c.mu.Lock()
			c.removeLocked(w)
			c.mu.Unlock()
			return false, true, ctx.Err()
		}
		tm.Stop()
	}
}

// pushLocked appends w to c's limiter queue.
func (c *conn) pushLocked(w *queueWaiter) {
	w.prev = c.qtail
	if c.qtail != nil {
		c.qtail.next = w
	} else {
		c.qhead = w
	}
	c.qtail = w
	c.queued++
}

// removeLocked unlinks w from c's limiter queue and wakes the head, which
// may be a new one that must start its own timer.
func (c *conn) removeLocked(w *queueWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		c.qhead = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		c.qtail = w.prev
	}
	w.prev, w.next = nil, nil
	c.queued--
	c.wakeHeadLocked()
}

// wakeHeadLocked wakes the head of c's limiter queue.
func (c *conn) wakeHeadLocked() {
	if c.qhead != nil {
		wake(c.qhead.ready)
	}
}

// wakeAllLocked wakes every request queued in c's limiter.
func (c *conn) wakeAllLocked() {
	for w := c.qhead; w != nil; w = w.next {
		wake(w.ready)
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// reject counts err in c's statistics, notifies the observer and returns
// it; a context error is wrapped with the connection.
func (m *Manager) reject(c *conn, err error) error {
	code := CodeCanceled
	if e, ok := err.(*Error); ok {
		code = e.Code
		switch code {
		case CodeQueueFull:
			c.stats.queueFull.Add(1)
		case CodeQueueTimeout:
			c.stats.queueTimeout.Add(1)
		case CodeSemaphoreTimeout:
			c.stats.semTimeout.Add(1)
		case CodeSemaphoreQueueFull:
			c.stats.semFull.Add(1)
		}
	} else {
		c.stats.canceled.Add(1)
		err = fmt.Errorf("admission of %s/%s: %w", c.provider, c.id, err)
	}
	if o := m.obs.Load(); o != nil && o.OnRejected != nil {
		o.OnRejected(c.provider, c.id, code)
	}
	return err
}

// quotaSharePool returns provider's quota-share pool.
func (m *Manager) quotaSharePool(provider string) *QuotaSharePool {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	p := m.pools[provider]
	if p == nil {
		p = NewQuotaSharePool(nil)
		m.pools[provider] = p
	}
	return p
}

// PickQuotaShare picks one of connections (ids of provider) for the next
// request of a quota-share pool with PickQuotaShare's rule, using the live
// in-flight counts and max_concurrent of each. Unknown connections count as
// idle and unlimited. It returns "" when connections is empty.
func (m *Manager) PickQuotaShare(provider string, connections []string) string {
	if len(connections) == 0 {
		return ""
	}
	cands, _ := m.shareCandidates(provider, connections)
	return connections[m.quotaSharePool(provider).Pick(cands)]
}

// OrderQuotaShare is the quota-share target selection of
// docs/resilience.md §5 for the connections (ids of provider) one target
// may use: it returns the order to try them in — first the connection
// PickQuotaShare picks (deficit round robin over the pool, power of two
// choices on free slots), then the others with free slots by load, then
// the full ones, de-prioritised but never dropped — or nil (keep the
// configured order) when quota-share is off, there are fewer than two
// connections, or none of them has a max_concurrent.
func (m *Manager) OrderQuotaShare(provider string, connections []string) []int {
	if len(connections) < 2 {
		return nil
	}
	cands, shared := m.shareCandidates(provider, connections)
	if !shared {
		return nil
	}
	first := m.quotaSharePool(provider).Pick(cands)
	order := make([]int, 0, len(cands))
	order = append(order, first)
	for i := range cands {
		if i != first {
			order = append(order, i)
		}
	}
	rest := order[1:]
	slices.SortStableFunc(rest, func(a, b int) int {
		ca, cb := cands[a], cands[b]
		if fa, fb := ca.Full(), cb.Full(); fa != fb {
			if fa {
				return 1
			}
			return -1
		}
		return cmp.Compare(ca.load(), cb.load())
	})
	return order
}

// QuotaShared reports whether provider/connection has a quota-share
// semaphore (quota-share on and a max_concurrent). It is cheap: no lock,
// no allocation.
func (m *Manager) QuotaShared(provider, connection string) bool {
	c := m.lookup(provider, connection)
	return c != nil && c.cfg.Load().qs
}

// shareCandidates describes connections for the quota-share selection:
// in-flight requests and quota-share slots of each (unknown connections
// count as idle and unlimited). shared reports that at least one has
// quota-share slots.
func (m *Manager) shareCandidates(provider string, connections []string) (cands []QuotaShareCandidate, shared bool) {
	cands = make([]QuotaShareCandidate, len(connections))
	for i, id := range connections {
		cands[i] = QuotaShareCandidate{Connection: id}
		if c := m.lookup(provider, id); c != nil {
			cfg := c.cfg.Load()
			cands[i].InFlight = int(c.inflight.Load())
			cands[i].MaxConcurrent = cfg.maxConcurrent
			shared = shared || cfg.qs
		}
	}
	return cands, shared
}
