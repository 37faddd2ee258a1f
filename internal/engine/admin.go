package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrInvalidRequest is wrapped by admin errors that are the caller's fault
// (an HTTP 400).
var ErrInvalidRequest = errors.New("invalid request")

// Health is the engine part of GET /api/monitoring/health.
type Health struct {
	// Providers holds each provider's breaker, keyed by provider id.
	Providers map[string]ProviderHealth `json:"providers"`
	// CoolingConnections counts connections with an active cooldown.
	CoolingConnections int `json:"cooling_connections"`
	// UnavailableConnections counts connections in a terminal state.
	UnavailableConnections int `json:"unavailable_connections"`
	// Lockouts counts active model lockouts, LockoutsByReason by reason.
	Lockouts         int            `json:"lockouts"`
	LockoutsByReason map[string]int `json:"lockouts_by_reason"`
}

// ProviderHealth is one provider's breaker and window gate.
type ProviderHealth struct {
	State        string              `json:"state"`
	FailureCount int                 `json:"failure_count"`
	RetryAfterMS int64               `json:"retry_after_ms"`
	Transitions  []BreakerTransition `json:"transitions"`
	// CoolingUntil is set while the provider cooldown window gate cools it.
	CoolingUntil time.Time `json:"cooling_until,omitzero"`
	// TerminalConnections lists the provider's connections in a terminal
	// state, with when and why they entered it.
	TerminalConnections []TerminalConnection `json:"terminal_connections,omitempty"`
}

// ConnectionStatus is one connection in the cooldown manager view (§4). It
// never holds credentials.
type ConnectionStatus struct {
	Provider         string     `json:"provider"`
	Connection       string     `json:"connection"`
	TestStatus       TestStatus `json:"test_status"`
	RateLimitedUntil time.Time  `json:"rate_limited_until,omitzero"`
	RemainingMS      int64      `json:"remaining_ms"`
	// Paced says that rate_limited_until is a pacing mark: the upstream
	// reported no requests or tokens left until then on an answer (not an
	// error; the test status stays as it was).
	Paced         bool   `json:"paced,omitempty"`
	BackoffLevel  int    `json:"backoff_level"`
	LastError     string `json:"last_error,omitempty"`
	LastErrorType string `json:"last_error_type,omitempty"`
	ErrorCode     int    `json:"error_code,omitempty"`
	// TerminalAt, TerminalReason and TerminalRule say when and why a
	// terminal state was entered (absent otherwise).
	TerminalAt     time.Time     `json:"terminal_at,omitzero"`
	TerminalReason string        `json:"terminal_reason,omitempty"`
	TerminalRule   string        `json:"terminal_rule,omitempty"`
	Lockouts       []LockoutInfo `json:"lockouts"`
}

// LockoutInfo is one active model lockout.
type LockoutInfo struct {
	Provider   string `json:"provider"`
	Connection string `json:"connection"`
	// Model is the model whose failure set the lock.
	Model string `json:"model"`
	// Family is the quota family the lock covers, "" for one model.
	Family       string    `json:"family,omitempty"`
	Reason       string    `json:"reason"`
	Status       int       `json:"status,omitempty"`
	FailureCount int       `json:"failure_count"`
	ExpiresAt    time.Time `json:"expires_at"`
	RemainingMS  int64     `json:"remaining_ms"`
}

// ClearRequest is the body of POST /api/resilience/cooldowns: either
// ConnectionIDs ("provider/connection") or All, optionally narrowed to
// Provider.
type ClearRequest struct {
	ConnectionIDs []string `json:"connection_ids"`
	All           bool     `json:"all"`
	Provider      string   `json:"provider"`
}

// ClearResult counts what ClearCooldowns did, per connection: Cleared had
// cooldown state removed, Unchanged had none, SkippedTerminal is in a
// terminal state (shown, not cleared); LockoutsCleared counts the active
// model lockouts removed.
type ClearResult struct {
	Cleared         int `json:"cleared"`
	Unchanged       int `json:"unchanged"`
	SkippedTerminal int `json:"skipped_terminal"`
	LockoutsCleared int `json:"lockouts_cleared"`
}

// Health returns every provider's breaker (configured providers and any
// other with a breaker) and the counts of cooling and terminal connections
// and active lockouts.
func (e *Engine) Health() Health {
	now := e.clock.Now()
	h := Health{Providers: make(map[string]ProviderHealth), LockoutsByReason: make(map[string]int)}
	names := e.breakers.Providers()
	for _, ps := range e.allProviders() {
		names = append(names, ps.id)
	}
	gate := e.settings.Load().ProviderCooldown.Enabled
	terminal := e.terminalConnections()
	for _, p := range names {
		if _, done := h.Providers[p]; done {
			continue
		}
		snap := e.breakers.Peek(p)
		ph := ProviderHealth{
			State:        string(snap.State),
			FailureCount: snap.FailureCount,
			RetryAfterMS: snap.RetryAfter(now).Milliseconds(),
			Transitions:  snap.Transitions,
		}
		if ph.Transitions == nil {
			ph.Transitions = []BreakerTransition{}
		}
		if gate {
			if cooling, until := e.gate.Cooling(p); cooling {
				ph.CoolingUntil = until
			}
		}
		ph.TerminalConnections = terminal[p]
		h.Providers[p] = ph
	}
	for _, st := range e.cooldowns.list("") {
		switch st.status(now) {
		case testStatusUnavailable:
			h.CoolingConnections++
		case TestStatusBanned, TestStatusExpired, TestStatusCreditsExhausted:
			h.UnavailableConnections++
		}
	}
	for _, le := range e.lockouts.active(now) {
		h.Lockouts++
		h.LockoutsByReason[le.Reason]++
	}
	return h
}

// ResetBreakers closes provider's breaker and clears its window gate ("" =
// every provider), persists them and returns the providers reset.
func (e *Engine) ResetBreakers(ctx context.Context, provider string) ([]string, error) {
	names := e.breakers.Reset(provider)
	gated := e.gate.Reset(provider)
	var errs []error
	for _, p := range names {
		errs = append(errs, e.persistBreaker(ctx, e.providerFor(p, ""), durable))
	}
	for _, p := range gated {
		errs = append(errs, e.persistGate(ctx, e.providerFor(p, ""), durable))
	}
	if err := errors.Join(errs...); err != nil {
		return names, fmt.Errorf("reset breakers: %w", err)
	}
	return names, nil
}

// ConnectionTestPassed records that a connection test of provider's
// connection passed (the admin or test path calls it after a successful
// test request): a DEGRADED breaker returns to CLOSED (a CLOSED failure
// count is cleared; OPEN and HALF_OPEN keep their probe rule), and the
// connection's non-terminal cooldown state is cleared as a success would.
// A terminal state stays (ResetConnections clears it). Changes are
// persisted.
func (e *Engine) ConnectionTestPassed(ctx context.Context, provider, connection string) error {
	ps := e.providerFor(provider, "")
	var errs []error
	if e.breakers.ConnectionTestPassed(provider) {
		errs = append(errs, e.persistBreaker(ctx, ps, durable))
	}
	if connection != "" && e.cooldowns.recordSuccess(provider, connection) {
		errs = append(errs, e.persistConn(ctx, provider, connection, durable))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("connection test: %w", err)
	}
	return nil
}

// Cooldowns lists the connections (of provider, or all when "") that hold
// cooldown state, a terminal state or an active model lockout, sorted, with
// their remaining cooldown and lockouts.
func (e *Engine) Cooldowns(provider string) []ConnectionStatus {
	now := e.clock.Now()
	var out []ConnectionStatus
	index := make(map[connKey]int)
	for _, st := range e.cooldowns.list(provider) {
		index[connKey{st.Provider, st.Connection}] = len(out)
		out = append(out, ConnectionStatus{
			Provider:         st.Provider,
			Connection:       st.Connection,
			TestStatus:       st.status(now),
			RateLimitedUntil: st.RateLimitedUntil,
			RemainingMS:      max(st.RateLimitedUntil.Sub(now), 0).Milliseconds(),
			BackoffLevel:     st.BackoffLevel,
			LastError:        e.redact.String(st.LastError),
			LastErrorType:    st.LastErrorType,
			ErrorCode:        st.ErrorCode,
			TerminalAt:       st.TerminalAt,
			TerminalReason:   st.TerminalReason,
			TerminalRule:     st.TerminalRule,
			Lockouts:         []LockoutInfo{},
		})
	}
	entry := func(k connKey) *ConnectionStatus {
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, ConnectionStatus{Provider: k.provider, Connection: k.connection, TestStatus: TestStatusActive, Lockouts: []LockoutInfo{}})
		}
		return &out[i]
	}
	for _, pc := range e.pacer.list(provider, now) {
		cs := entry(pc.key)
		if cs.TestStatus.Terminal() || !pc.until.After(cs.RateLimitedUntil) {
			continue
		}
		cs.RateLimitedUntil, cs.RemainingMS, cs.Paced = pc.until, pc.until.Sub(now).Milliseconds(), true
	}
	for _, le := range e.lockouts.active(now) {
		if provider != "" && le.Provider != provider {
			continue
		}
		cs := entry(connKey{le.Provider, le.Connection})
		cs.Lockouts = append(cs.Lockouts, lockoutInfo(le, now))
	}
	slices.SortFunc(out, func(a, b ConnectionStatus) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Connection, b.Connection))
	})
	return out
}

// ClearCooldowns clears the cooldown state and model lockouts of the
// requested connections and persists the result. Terminal states are
// counted as skipped and kept (ResetConnection clears them). A request
// with neither ids nor all, or a malformed id, is an error wrapping
// ErrInvalidRequest.
func (e *Engine) ClearCooldowns(ctx context.Context, req ClearRequest) (ClearResult, error) {
	var res ClearResult
	targets, err := e.clearTargets(req)
	if err != nil {
		return res, err
	}
	now := e.clock.Now()
	var errs []error
	for _, k := range targets {
		cleared, blocked := e.cooldowns.clear(k.provider, k.connection, false)
		if e.pacer.clear(k, now) && !blocked {
			cleared = true
		}
		switch {
		case blocked:
			res.SkippedTerminal++
		case cleared:
			res.Cleared++
			errs = append(errs, e.persistConn(ctx, k.provider, k.connection, durable))
		default:
			res.Unchanged++
		}
		n, err := e.removeLocks(ctx, e.lockouts.keysOf(k.provider, k.connection), now)
		res.LockoutsCleared += n
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("clear cooldowns: %w", err)
	}
	return res, nil
}

// clearTargets resolves a ClearRequest to connections, sorted.
func (e *Engine) clearTargets(req ClearRequest) ([]connKey, error) {
	set := make(map[connKey]bool)
	switch {
	case req.All:
		for _, k := range e.knownConnections() {
			if req.Provider == "" || k.provider == req.Provider {
				set[k] = true
			}
		}
	case len(req.ConnectionIDs) > 0:
		for _, id := range req.ConnectionIDs {
			p, c, ok := strings.Cut(id, "/")
			if !ok || p == "" || c == "" {
				return nil, fmt.Errorf("%w: connection_ids: %q is not \"provider/connection\"", ErrInvalidRequest, id)
			}
			set[connKey{p, c}] = true
		}
	default:
		return nil, fmt.Errorf("%w: give connection_ids or all", ErrInvalidRequest)
	}
	keys := make([]connKey, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b connKey) int {
		return cmp.Or(cmp.Compare(a.provider, b.provider), cmp.Compare(a.connection, b.connection))
	})
	return keys, nil
}

// knownConnections lists the configured connections and every connection
// holding cooldown or lockout state.
func (e *Engine) knownConnections() []connKey {
	var keys []connKey
	for _, ps := range e.allProviders() {
		for _, c := range ps.connections {
			keys = append(keys, connKey{ps.id, c})
		}
	}
	for _, st := range e.cooldowns.list("") {
		keys = append(keys, connKey{st.Provider, st.Connection})
	}
	for _, k := range e.lockouts.keysOf("", "") {
		keys = append(keys, connKey{k.provider, k.connection})
	}
	return keys
}

// ResetConnection clears every cooldown state of a connection, a terminal
// one included, and its model lockouts: for an operator reset or changed
// credentials. It reports whether anything was cleared.
func (e *Engine) ResetConnection(ctx context.Context, provider, connection string) (bool, error) {
	cleared, _ := e.cooldowns.clear(provider, connection, true)
	paced := e.pacer.clear(connKey{provider, connection}, e.clock.Now())
	var errs []error
	if cleared {
		errs = append(errs, e.persistConn(ctx, provider, connection, durable))
	}
	n, err := e.removeLocks(ctx, e.lockouts.keysOf(provider, connection), e.clock.Now())
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return cleared || paced || n > 0, fmt.Errorf("reset connection: %w", err)
	}
	return cleared || paced || n > 0, nil
}

// Lockouts lists every active model lockout, sorted by provider,
// connection and model key.
func (e *Engine) Lockouts() []LockoutInfo {
	now := e.clock.Now()
	active := e.lockouts.active(now)
	out := make([]LockoutInfo, 0, len(active))
	for _, le := range active {
		out = append(out, lockoutInfo(le, now))
	}
	return out
}

// ClearLockout re-enables model on a connection: it removes the lock of
// the model itself and of its quota family (model may also name a family,
// as "family:<name>" or the bare family name). It reports whether an
// active lock was removed.
func (e *Engine) ClearLockout(ctx context.Context, provider, connection, model string) (bool, error) {
	if provider == "" || connection == "" || model == "" {
		return false, fmt.Errorf("%w: provider, connection and model are required", ErrInvalidRequest)
	}
	keys := []lockKey{{provider, connection, model}}
	if ps := e.lookupProvider(provider); ps != nil {
		if fam, ok := ps.families.of(model); ok {
			keys = append(keys, lockKey{provider, connection, fam.key})
		}
		if fam, ok := ps.families.byName(strings.TrimPrefix(model, familyKeyPrefix)); ok {
			keys = append(keys, lockKey{provider, connection, fam.key})
		}
	}
	n, err := e.removeLocks(ctx, keys, e.clock.Now())
	if err != nil {
		return n > 0, fmt.Errorf("clear lockout: %w", err)
	}
	return n > 0, nil
}

// removeLocks deletes the lock entries of keys, persists the deletions and
// returns how many of them were active.
func (e *Engine) removeLocks(ctx context.Context, keys []lockKey, now time.Time) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	removed, active := e.lockouts.remove(keys, now)
	var errs []error
	for _, k := range removed {
		errs = append(errs, e.persistLock(ctx, k, durable))
	}
	return active, errors.Join(errs...)
}

func lockoutInfo(le lockEntry, now time.Time) LockoutInfo {
	return LockoutInfo{
		Provider:     le.Provider,
		Connection:   le.Connection,
		Model:        le.Model,
		Family:       le.Family,
		Reason:       le.Reason,
		Status:       le.Status,
		FailureCount: le.Count,
		ExpiresAt:    le.Until,
		RemainingMS:  max(le.Until.Sub(now), 0).Milliseconds(),
	}
}
