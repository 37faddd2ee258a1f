package engine

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// TestStatus is a connection's health as the connection cooldown layer sees
// it (docs/resilience.md §2).
type TestStatus string

// Connection test states. Banned, Expired and CreditsExhausted are terminal:
// they persist until credentials change or an operator resets them, and no
// transient cooldown overwrites them.
const (
	TestStatusActive           TestStatus = "active"
	testStatusUnavailable      TestStatus = "unavailable"
	TestStatusBanned           TestStatus = "banned"
	TestStatusExpired          TestStatus = "expired"
	TestStatusCreditsExhausted TestStatus = "credits_exhausted"
)

// Terminal reports whether s is a terminal state.
func (s TestStatus) Terminal() bool {
	switch s {
	case TestStatusBanned, TestStatusExpired, TestStatusCreditsExhausted:
		return true
	}
	return false
}

// Fixed connection cooldown rules of docs/resilience.md §2.
const (
	// MaxUpstreamHint caps an upstream retry hint or a rule's cooldown.
	MaxUpstreamHint = 30 * 24 * time.Hour
	// concurrencyLimitedCooldown is the flat cooldown of a concurrency-limited 429.
	concurrencyLimitedCooldown = time.Second
	// rejectionWindow is how far back consecutive request rejections count.
	rejectionWindow = 24 * time.Hour
	// rejectionsToBan is the consecutive rejection that bans a connection.
	rejectionsToBan = 3
	// expiredRetryMax is how many auth-expired failures cool (each one a
	// retry with exponential backoff) before the next marks the
	// connection expired.
	expiredRetryMax = 3
	// cooldownIdleTTL is how long a non-terminal cooldown record outlives
	// its deadline in the store, so that an idle connection's record is
	// eventually garbage-collected.
	cooldownIdleTTL = 24 * time.Hour
)

// connKey names one connection of one provider.
type connKey struct {
	provider, connection string
}

// connState is the cooldown state of one connection, as persisted. An
// absent record is a clean, active connection.
type connState struct {
	Provider         string     `json:"provider"`
	Connection       string     `json:"connection"`
	RateLimitedUntil time.Time  `json:"rate_limited_until,omitzero"`
	TestStatus       TestStatus `json:"test_status"`
	LastError        string     `json:"last_error,omitempty"`
	LastErrorType    string     `json:"last_error_type,omitempty"`
	ErrorCode        int        `json:"error_code,omitempty"`
	BackoffLevel     int        `json:"backoff_level"`
	// Rejections holds the times of the current streak of request
	// rejections (no success in between), pruned to rejectionWindow.
	Rejections []time.Time `json:"rejections,omitempty"`
	// ExpiredRetries counts auth-expired failures since the last success.
	ExpiredRetries int `json:"expired_retries,omitempty"`
	// TerminalAt, TerminalReason and TerminalRule say when a terminal
	// state was entered, for which reason and by which rule (LastError
	// keeps the upstream's message).
	TerminalAt     time.Time `json:"terminal_at,omitzero"`
	TerminalReason string    `json:"terminal_reason,omitempty"`
	TerminalRule   string    `json:"terminal_rule,omitempty"`
}

// equal reports whether a and b hold the same state.
func (s *connState) equal(o *connState) bool {
	return s.Provider == o.Provider && s.Connection == o.Connection &&
		s.RateLimitedUntil.Equal(o.RateLimitedUntil) && s.TestStatus == o.TestStatus &&
		s.LastError == o.LastError && s.LastErrorType == o.LastErrorType &&
		s.ErrorCode == o.ErrorCode && s.BackoffLevel == o.BackoffLevel &&
		slices.EqualFunc(s.Rejections, o.Rejections, time.Time.Equal) &&
		s.ExpiredRetries == o.ExpiredRetries && s.TerminalAt.Equal(o.TerminalAt) &&
		s.TerminalReason == o.TerminalReason && s.TerminalRule == o.TerminalRule
}

// clone returns a deep copy of s.
func (s *connState) clone() connState {
	c := *s
	c.Rejections = slices.Clone(s.Rejections)
	return c
}

// status is the lazily recovered test status at now: a passed deadline
// reads as active.
func (s *connState) status(now time.Time) TestStatus {
	if s.TestStatus.Terminal() {
		return s.TestStatus
	}
	if s.RateLimitedUntil.After(now) {
		return testStatusUnavailable
	}
	return TestStatusActive
}

// cooldownPolicy is what one connection's cooldown depends on besides the
// outcome: its profile and the profile's backoff, its provider's hint
// switch, its own disable_cooling flag and the stream_stall_cooldown
// setting.
type cooldownPolicy struct {
	profile        Profile
	base           time.Duration
	maxLevel       int
	useHints       bool
	disableCooling bool
	stallCooldown  bool
	// localTimeoutCooldown is local_timeout_cooldown.enabled.
	localTimeoutCooldown bool
}

// cooldownEffect is what one failure did to a connection.
type cooldownEffect struct {
	// cooled is the cooldown armed or extended by this failure, 0 if none.
	cooled time.Duration
	// terminal is the terminal state the connection entered, "" if none.
	terminal TestStatus
}

// affectsConnection reports whether outcome o concerns the connection
// cooldown layer at all. Successes, client aborts and local errors never
// do. A stream stall and a local timeout are always recorded on their
// connection (§2, §7), whether or not they cool it. Otherwise
// the scope decides: a model-scoped outcome is the lockout layer's, a
// provider-scoped one the breaker's, a connection-scoped one is ours; an
// unscoped outcome is ours when its reason is account-level (not a
// transient, server or network error, a 404, a 400, an empty answer or a
// tool-count refusal).
func affectsConnection(o Outcome) bool {
	if o.Success {
		return false
	}
	switch o.Reason {
	case ReasonNone, ReasonClientAbort, ReasonLocalError:
		return false
	case ReasonStreamStall, ReasonLocalTimeout:
		return true
	}
	switch o.Scope {
	case ScopeModel, ScopeProvider:
		return false
	case ScopeConnection:
		return true
	}
	switch o.Reason {
	case ReasonTransient, ReasonServerError, ReasonNetworkError, ReasonNotFound, ReasonBadRequest,
		ReasonEmptyResponse, ReasonToolLimit:
		return false
	}
	return true
}

// isExpiringAuthFailure reports whether o, on a connection of profile p,
// is an auth failure that may mean an expired credential and so heals
// through expiredRetryMax retries or ends expired: a 401 auth error of an
// oauth connection (its token may have lapsed while a refresh is pending).
// An apikey or local 401, and any 403, is a plain auth error that only
// backs off: an API key does not expire on its own, and a key that was
// revoked says so in its body (reason expired, which is terminal at once).
func isExpiringAuthFailure(o Outcome, p Profile) bool {
	return p == ProfileOAuth && o.Reason == ReasonAuthError && o.Status == 401
}

// nextConnState applies one failure at now to the connection state st and
// returns the new state and what it did. It is pure; the caller guarantees
// affectsConnection(o). The rules:
//
//   - a terminal state is never changed;
//   - the error fields record every failure; a disable_cooling connection
//     records only;
//   - banned → banned; credits exhausted → credits_exhausted, unless a rule
//     gave it a cooldown (a self-healing window such as OpenRouter's 402);
//     expired (the body said the credential was revoked or expired) →
//     expired; each records when and why (TerminalAt, TerminalReason,
//     TerminalRule);
//   - a request rejection cools; the rejectionsToBan-th consecutive one
//     within rejectionWindow bans;
//   - an oauth 401 cools with backoff expiredRetryMax times; the next one
//     marks the connection expired (isExpiringAuthFailure); any other auth
//     error, an apikey 401 included, only backs off;
//   - concurrency_limited cools for a flat concurrencyLimitedCooldown (or
//     the upstream hint), backoff level unchanged;
//   - a stream stall cools only with stream_stall_cooldown enabled;
//   - a local timeout (the gateway's own timer cut the attempt) cools only
//     with local_timeout_cooldown enabled;
//   - everything else (including connection-scope quota_exhausted, which is
//     never terminal) takes the backoff of backoffState.
//
// Anti-thundering-herd: a failure that arrives while the connection is
// already cooling is one of the burst that armed it: it does not escalate
// the backoff, count another rejection or expired retry, or re-arm; only an
// explicit, longer hint may extend the deadline.
func nextConnState(st connState, o Outcome, pol cooldownPolicy, now time.Time) (connState, cooldownEffect) {
	if st.TestStatus.Terminal() {
		return st, cooldownEffect{}
	}
	st.LastError, st.LastErrorType, st.ErrorCode = o.Message, string(o.Reason), o.Status
	if pol.disableCooling {
		return st, cooldownEffect{}
	}
	cooling := st.RateLimitedUntil.After(now)
	switch {
	case o.Reason == ReasonBanned:
		return st.terminate(TestStatusBanned, o, now)
	case o.Reason == ReasonCreditsExhausted && o.CooldownHint <= 0:
		return st.terminate(TestStatusCreditsExhausted, o, now)
	case o.Reason == ReasonExpired:
		return st.terminate(TestStatusExpired, o, now)
	case o.Reason == ReasonStreamStall && !pol.stallCooldown:
		return st, cooldownEffect{}
	case o.Reason == ReasonLocalTimeout && !pol.localTimeoutCooldown:
		return st, cooldownEffect{}
	case o.Reason == ReasonRequestRejected && !cooling:
		cut := now.Add(-rejectionWindow)
		streak := slices.DeleteFunc(slices.Clone(st.Rejections), func(t time.Time) bool { return !t.After(cut) })
		st.Rejections = append(streak, now)
		if len(st.Rejections) >= rejectionsToBan {
			return st.terminate(TestStatusBanned, o, now)
		}
	case isExpiringAuthFailure(o, pol.profile) && !cooling:
		if st.ExpiredRetries >= expiredRetryMax {
			return st.terminate(TestStatusExpired, o, now)
		}
		st.ExpiredRetries++
	case o.Reason == ReasonConcurrencyLimited:
		d := concurrencyLimitedCooldown
		if pol.useHints && o.RetryHint > 0 {
			d = min(o.RetryHint, MaxUpstreamHint)
		}
		return st.arm(now, d, st.BackoffLevel)
	}
	return st.backoff(o, pol, now, cooling)
}

// backoff arms the recoverable-failure cooldown: a rule's CooldownHint is
// used exactly (level unchanged); an honoured upstream RetryHint wins and
// resets the level to 0; otherwise base × 2^level with the level capped at
// maxLevel, and the level grows by one. A failure while cooling only
// extends the deadline with a hint.
func (st connState) backoff(o Outcome, pol cooldownPolicy, now time.Time, cooling bool) (connState, cooldownEffect) {
	switch {
	case o.CooldownHint > 0:
		return st.arm(now, min(o.CooldownHint, MaxUpstreamHint), st.BackoffLevel)
	case pol.useHints && o.RetryHint > 0:
		return st.arm(now, min(o.RetryHint, MaxUpstreamHint), 0)
	case cooling:
		return st, cooldownEffect{}
	}
	level := min(st.BackoffLevel, pol.maxLevel)
	return st.arm(now, backoffDuration(pol.base, level), min(level+1, pol.maxLevel))
}

// arm sets the deadline to now+d and the backoff level, unless that would
// shorten the existing deadline: then nothing changes but the error fields.
func (st connState) arm(now time.Time, d time.Duration, level int) (connState, cooldownEffect) {
	until := now.Add(d)
	if d <= 0 || !until.After(st.RateLimitedUntil) {
		return st, cooldownEffect{}
	}
	st.RateLimitedUntil, st.BackoffLevel, st.TestStatus = until, level, testStatusUnavailable
	return st, cooldownEffect{cooled: d}
}

// terminate moves the connection to terminal state ts at now, because of
// failure o.
func (st connState) terminate(ts TestStatus, o Outcome, now time.Time) (connState, cooldownEffect) {
	st.TestStatus = ts
	st.RateLimitedUntil = time.Time{}
	st.TerminalAt, st.TerminalReason, st.TerminalRule = now, string(o.Reason), o.RuleID
	return st, cooldownEffect{terminal: ts}
}

// backoffDuration is base × 2^level, capped at MaxUpstreamHint.
func backoffDuration(base time.Duration, level int) time.Duration {
	d := base
	for range level {
		if d >= MaxUpstreamHint/2 {
			return MaxUpstreamHint
		}
		d *= 2
	}
	return min(d, MaxUpstreamHint)
}

// cooldowns holds the cooldown state of every connection that has any; an
// absent connection is clean. It is goroutine-safe.
type cooldowns struct {
	mu sync.RWMutex
	m  map[connKey]*connState
}

func newCooldowns() *cooldowns {
	return &cooldowns{m: make(map[connKey]*connState)}
}

// recordFailure applies outcome o at now (see nextConnState) and reports
// what it did and whether the stored state changed.
func (c *cooldowns) recordFailure(o Outcome, pol cooldownPolicy, now time.Time) (cooldownEffect, bool) {
	if !affectsConnection(o) {
		return cooldownEffect{}, false
	}
	k := connKey{o.Provider, o.Connection}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.m[k]
	if !ok {
		cur = &connState{Provider: o.Provider, Connection: o.Connection, TestStatus: TestStatusActive}
	}
	next, eff := nextConnState(cur.clone(), o, pol, now)
	if ok && next.equal(cur) {
		return eff, false
	}
	c.m[k] = &next
	return eff, true
}

// recordSuccess clears the connection's error fields, backoff level,
// deadline, rejection streak and expired retries. A terminal connection is
// left alone. It reports whether anything was cleared; a clean connection
// takes only a read lock and allocates nothing.
func (c *cooldowns) recordSuccess(provider, connection string) bool {
	k := connKey{provider, connection}
	c.mu.RLock()
	st, ok := c.m[k]
	dirty := ok && !st.TestStatus.Terminal()
	c.mu.RUnlock()
	if !dirty {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok = c.m[k]
	if !ok || st.TestStatus.Terminal() {
		return false
	}
	delete(c.m, k)
	return true
}

// check reports the connection's exclusion at now: "unavailable" for a
// terminal state, "connection_cooldown" while its deadline is ahead. It
// takes a read lock and allocates nothing.
func (c *cooldowns) check(provider, connection string, now time.Time) (Exclusion, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st, ok := c.m[connKey{provider, connection}]
	switch {
	case !ok:
		return Exclusion{}, false
	case st.TestStatus.Terminal():
		return Exclusion{Reason: ExclusionUnavailable, Detail: string(st.TestStatus)}, true
	case st.RateLimitedUntil.After(now):
		return Exclusion{Reason: ExclusionConnectionCooldown, Until: st.RateLimitedUntil, Detail: st.LastErrorType}, true
	}
	return Exclusion{}, false
}

// coolingFrom reports whether the connection is cooling at now from a
// failure with reason and status: the anti-herd burst of that failure. It
// takes a read lock and allocates nothing.
func (c *cooldowns) coolingFrom(provider, connection string, reason Reason, status int, now time.Time) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st, ok := c.m[connKey{provider, connection}]
	return ok && st.RateLimitedUntil.After(now) && st.LastErrorType == string(reason) && st.ErrorCode == status
}

// get returns a copy of the connection's state.
func (c *cooldowns) get(provider, connection string) (connState, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st, ok := c.m[connKey{provider, connection}]
	if !ok {
		return connState{}, false
	}
	return st.clone(), true
}

// restore installs a persisted state.
func (c *cooldowns) restore(st connState) {
	if st.TestStatus == "" {
		st.TestStatus = TestStatusActive
	}
	c.mu.Lock()
	c.m[connKey{st.Provider, st.Connection}] = &st
	c.mu.Unlock()
}

// clear removes the connection's state. A terminal state is kept unless
// terminal is true. It reports whether a state was removed and whether a
// terminal state blocked the clear.
func (c *cooldowns) clear(provider, connection string, terminal bool) (cleared, blocked bool) {
	k := connKey{provider, connection}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[k]
	switch {
	case !ok:
		return false, false
	case st.TestStatus.Terminal() && !terminal:
		return false, true
	}
	delete(c.m, k)
	return true, false
}

// list returns a copy of every state, of provider only when it is not "",
// sorted by provider and connection.
func (c *cooldowns) list(provider string) []connState {
	c.mu.RLock()
	out := make([]connState, 0, len(c.m))
	for k, st := range c.m {
		if provider == "" || k.provider == provider {
			out = append(out, st.clone())
		}
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b connState) int {
		if a.Provider != b.Provider {
			return cmp.Compare(a.Provider, b.Provider)
		}
		return cmp.Compare(a.Connection, b.Connection)
	})
	return out
}

// storeTTL is how long the persisted record of st should live at now:
// forever for a terminal state, else a day past its deadline.
func (st *connState) storeTTL(now time.Time) time.Duration {
	if st.TestStatus.Terminal() {
		return 0
	}
	return max(st.RateLimitedUntil.Sub(now), 0) + cooldownIdleTTL
}
