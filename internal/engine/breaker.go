package engine

import (
	"slices"
	"sync"
	"time"
)

// BreakerState is the state of one provider circuit breaker.
type BreakerState string

// The four breaker states of docs/resilience.md §1.
const (
	// StateClosed is normal operation.
	StateClosed BreakerState = "CLOSED"
	// StateDegraded lets traffic flow while rising failures are watched.
	StateDegraded BreakerState = "DEGRADED"
	// StateOpen skips the provider until its reset timeout passes.
	StateOpen BreakerState = "OPEN"
	// StateHalfOpen allows one probe request through.
	StateHalfOpen BreakerState = "HALF_OPEN"
)

// Transition reasons recorded in BreakerTransition.Reason.
const (
	TransitionDegradationThreshold = "degradation_threshold"
	TransitionFailureThreshold     = "failure_threshold"
	TransitionRecovered            = "recovered"
	TransitionQuietPeriod          = "quiet_period"
	TransitionResetTimeout         = "reset_timeout_elapsed"
	TransitionProbeSucceeded       = "probe_succeeded"
	TransitionProbeFailed          = "probe_failed"
	TransitionManualReset          = "manual_reset"
	TransitionConnectionTest       = "connection_test_passed"
)

// FailureKind is the kind of a failure that trips a breaker; each kind has
// its own OPEN cooldown (docs/resilience.md §1, amendments).
type FailureKind string

// The breaker failure kinds.
const (
	// KindNone marks an outcome that does not trip a breaker.
	KindNone FailureKind = ""
	// KindServerError is an upstream 500, 502, 503 or 504, or a status a
	// provider rule declared provider-wide other than 408 and 429.
	KindServerError FailureKind = "server_error"
	// KindTimeout is an upstream 408.
	KindTimeout FailureKind = "timeout"
	// KindTransport is a failure below HTTP: connect, reset, TLS, DNS.
	KindTransport FailureKind = "transport"
	// KindRateLimit is a 429 a provider rule declared provider-wide (a
	// 429 storm of the whole provider, scope "provider").
	KindRateLimit FailureKind = "rate_limit"
)

// Breaker limits applied by breakerConfig.Normalize.
const (
	MinBreakerFailureThreshold = 1
	MaxBreakerFailureThreshold = 1000
	MinBreakerReset            = time.Second
	MaxBreakerReset            = 24 * time.Hour
	// MaxBreakerTransitions is how many transitions a breaker remembers.
	MaxBreakerTransitions = 20
	// DefaultMaxBackoffMultiplier caps the reset timeout growth of
	// repeated OPEN→probe→OPEN cycles (max_backoff_multiplier).
	DefaultMaxBackoffMultiplier = 16
	// DefaultDegradedExitSuccesses is how many consecutive successes end
	// DEGRADED (degraded_exit_successes).
	DefaultDegradedExitSuccesses = 3
	// maxBreakerMultiplier bounds max_backoff_multiplier.
	maxBreakerMultiplier = 1024
	// maxDegradedExitSuccesses bounds degraded_exit_successes.
	maxDegradedExitSuccesses = 1000
)

// breakerConfig holds the thresholds of one provider's breaker. It is a
// plain value.
type breakerConfig struct {
	// DegradationThreshold is the failure count that enters DEGRADED; 0
	// disables the DEGRADED state.
	DegradationThreshold int
	// FailureThreshold is the failure count that opens the breaker.
	FailureThreshold int
	// Reset is the base OPEN cooldown before a probe is allowed, of every
	// failure kind without its own cooldown in CooldownByKind.
	Reset time.Duration
	// CooldownByKind is the base OPEN cooldown per failure kind; a zero
	// entry is Reset.
	CooldownByKind KindCooldowns
	// DegradedExitSuccesses is how many consecutive successes end
	// DEGRADED; 0 means DefaultDegradedExitSuccesses.
	DegradedExitSuccesses int
	// MaxBackoffMultiplier caps the growth of the OPEN cooldown over
	// repeated OPEN→probe→OPEN cycles; 0 means
	// DefaultMaxBackoffMultiplier.
	MaxBackoffMultiplier int
}

// KindCooldowns is the OPEN cooldown of each failure kind; a zero entry
// means the breaker's Reset.
type KindCooldowns struct {
	ServerError, Timeout, Transport, RateLimit time.Duration
}

// cooldown is the base OPEN cooldown of kind k (Reset when the kind has
// none, or for KindNone).
func (c breakerConfig) cooldown(k FailureKind) time.Duration {
	var d time.Duration
	switch k {
	case KindServerError:
		d = c.CooldownByKind.ServerError
	case KindTimeout:
		d = c.CooldownByKind.Timeout
	case KindTransport:
		d = c.CooldownByKind.Transport
	case KindRateLimit:
		d = c.CooldownByKind.RateLimit
	}
	if d <= 0 {
		return c.Reset
	}
	return d
}

// defaultBreakerConfig returns the normalised §1 defaults of a profile:
// oauth 5/8/60 s, apikey 7/12/30 s, local open at 2 with the derived
// degradation threshold clamped to 1, 15 s; every kind cools for the reset,
// 3 consecutive successes end DEGRADED, the cycle multiplier stops at ×16.
// An unknown profile gets the apikey defaults.
func defaultBreakerConfig(p Profile) breakerConfig {
	return breakerConfigFor(DefaultSettings().CircuitBreaker.For(p)).Normalize()
}

// DerivedDegradationThreshold is ceil(60% of failureThreshold), the
// degradation threshold of a profile that does not set one. The result may
// equal failureThreshold; Normalize then clamps it to failureThreshold-1.
func DerivedDegradationThreshold(failureThreshold int) int {
	if failureThreshold <= 0 {
		return 0
	}
	return (3*failureThreshold + 4) / 5
}

// Normalize clamps c to the §1 limits: FailureThreshold in 1..1000,
// DegradationThreshold in 0..FailureThreshold-1, Reset and every non-zero
// kind cooldown in 1 s..24 h, DegradedExitSuccesses in 1..1000 and
// MaxBackoffMultiplier in 1..1024 (0 takes the defaults, 3 and 16).
func (c breakerConfig) Normalize() breakerConfig {
	c.FailureThreshold = min(max(c.FailureThreshold, MinBreakerFailureThreshold), MaxBreakerFailureThreshold)
	c.DegradationThreshold = min(max(c.DegradationThreshold, 0), c.FailureThreshold-1)
	c.Reset = min(max(c.Reset, MinBreakerReset), MaxBreakerReset)
	k := &c.CooldownByKind
	for _, d := range []*time.Duration{&k.ServerError, &k.Timeout, &k.Transport, &k.RateLimit} {
		if *d > 0 {
			*d = min(max(*d, MinBreakerReset), MaxBreakerReset)
		} else {
			*d = 0
		}
	}
	if c.DegradedExitSuccesses == 0 {
		c.DegradedExitSuccesses = DefaultDegradedExitSuccesses
	}
	c.DegradedExitSuccesses = min(max(c.DegradedExitSuccesses, 1), maxDegradedExitSuccesses)
	if c.MaxBackoffMultiplier == 0 {
		c.MaxBackoffMultiplier = DefaultMaxBackoffMultiplier
	}
	c.MaxBackoffMultiplier = min(max(c.MaxBackoffMultiplier, 1), maxBreakerMultiplier)
	return c
}

// BreakerTransition is one recorded state change of a breaker.
type BreakerTransition struct {
	From   BreakerState `json:"from"`
	To     BreakerState `json:"to"`
	At     time.Time    `json:"at"`
	Reason string       `json:"reason"`
}

// BreakerSnapshot is the observable and persisted form of one breaker. It is
// a plain value; Transitions is a copy owned by the receiver.
type BreakerSnapshot struct {
	State        BreakerState `json:"state"`
	FailureCount int          `json:"failure_count"`
	// OpenedAt is when the breaker last opened.
	OpenedAt time.Time `json:"opened_at,omitzero"`
	// RetryAt is when an OPEN breaker moves to HALF_OPEN.
	RetryAt       time.Time `json:"retry_at,omitzero"`
	LastFailureAt time.Time `json:"last_failure_at,omitzero"`
	// LastFailureKind is the kind of the last counted failure; it picks the
	// OPEN cooldown and the DEGRADED quiet period.
	LastFailureKind FailureKind `json:"last_failure_kind,omitempty"`
	// Successes counts consecutive successes in DEGRADED.
	Successes int `json:"successes,omitempty"`
	// Cycles counts openings since the breaker last closed; it grows the
	// reset timeout after the third.
	Cycles int `json:"cycles,omitempty"`
	// ProbeAt is when the current HALF_OPEN probe was claimed, zero when
	// the probe slot is free.
	ProbeAt time.Time `json:"probe_at,omitzero"`
	// Transitions holds the last MaxBreakerTransitions state changes,
	// oldest first.
	Transitions []BreakerTransition `json:"transitions,omitempty"`
}

// RetryAfter is the time left before an OPEN breaker allows a probe, zero
// in any other state or once the time has passed.
func (s BreakerSnapshot) RetryAfter(now time.Time) time.Duration {
	if s.State != StateOpen || !now.Before(s.RetryAt) {
		return 0
	}
	return s.RetryAt.Sub(now)
}

// TripsBreaker reports whether an outcome counts as a provider failure
// (BreakerKind is not KindNone).
func TripsBreaker(o Outcome) bool { return BreakerKind(o) != KindNone }

// BreakerKind is the failure kind of an outcome, KindNone when it does not
// trip the breaker. By default only a transport error (KindTransport) or a
// status of 408 (KindTimeout), 500, 502, 503 or 504 (KindServerError)
// trips, and only when the outcome was not classified as an account-level
// or local reason and not narrowed to a model or connection scope: 401,
// 403, 429, client aborts (499), local errors, concurrency-limited 429s,
// stream stalls, empty answers and cuts by the gateway's own timers
// (local_timeout) never trip. A provider rule widens that:
// a rule's explicit provider scope declares the failure provider-wide, so
// whatever its status it trips (a 429 as KindRateLimit, a 408 as
// KindTimeout, others as KindServerError), unless its reason is a local,
// per-request one (bad request, not found, stall, empty answer, local
// timeout).
func BreakerKind(o Outcome) FailureKind {
	if o.Success {
		return KindNone
	}
	if explicitScope(o) && o.Scope == ScopeProvider {
		switch o.Reason {
		case ReasonNone, ReasonClientAbort, ReasonLocalError, ReasonBadRequest, ReasonNotFound,
			ReasonStreamStall, ReasonEmptyResponse, ReasonToolLimit, ReasonLocalTimeout:
			return KindNone
		}
		switch {
		case o.Transport:
			return KindTransport
		case o.Status == 429:
			return KindRateLimit
		case o.Status == 408:
			return KindTimeout
		}
		return KindServerError
	}
	switch o.Reason {
	case ReasonNone, ReasonTransient, ReasonServerError, ReasonNetworkError:
	default:
		return KindNone
	}
	switch o.Scope {
	case ScopeNone, ScopeProvider:
	default:
		return KindNone
	}
	if o.Transport {
		return KindTransport
	}
	switch o.Status {
	case 408:
		return KindTimeout
	case 500, 502, 503, 504:
		return KindServerError
	}
	return KindNone
}

// breakerChange is one queued OnChange notification.
type breakerChange struct {
	provider string
	snap     BreakerSnapshot
	t        *BreakerTransition
}

// breaker is the state of one provider. Its fields are guarded by mu.
type breaker struct {
	mu            sync.Mutex
	cfg           breakerConfig
	state         BreakerState
	failures      int
	openedAt      time.Time
	retryAt       time.Time
	lastFailureAt time.Time
	lastKind      FailureKind
	successes     int // consecutive successes in DEGRADED
	probeAt       time.Time
	cycles        int
	transitions   []BreakerTransition
	queue         changeQueue[breakerChange]
}

// breakers is the set of provider circuit breakers of docs/resilience.md §1.
// Every read path applies lazy recovery: an OPEN breaker whose reset timeout
// has passed is HALF_OPEN when read, with no background timer. breakers is
// goroutine-safe.
//
// Failure counting: a failure increments the count and remembers its kind
// (BreakerKind). The breaker enters DEGRADED when the count reaches
// DegradationThreshold and OPEN when it reaches FailureThreshold; an OPEN
// breaker refuses traffic for the cooldown of the last failure's kind
// (CooldownByKind, else Reset) times the cycle multiplier. A success in
// CLOSED or DEGRADED decrements the count. DEGRADED returns to CLOSED, with
// the count cleared, after DegradedExitSuccesses consecutive successes
// (apikey: 7 failures → DEGRADED, 3 successes in a row → CLOSED; a failure
// in between restarts the run), after a passed connection test
// (ConnectionTestPassed), or after a quiet period with no new failure equal
// to the OPEN cooldown of the last failure's kind times the current cycle
// multiplier (QuietPeriod); the same quiet period forgets a CLOSED count.
type breakers struct {
	clock    Clock
	mu       sync.RWMutex // guards byName and onChange
	byName   map[string]*breaker
	onChange func(provider string, s BreakerSnapshot, t *BreakerTransition)
}

// newBreakers returns an empty set of breakers reading time from clock.
func newBreakers(clock Clock) *breakers {
	return &breakers{clock: clock, byName: make(map[string]*breaker)}
}

// OnChange sets the function called after every change of a breaker's
// persisted snapshot (state, failure count, cycles), for persistence and
// metrics: once per state transition t, or once with a nil t when only the
// count changed; s is the snapshot after the whole operation. It is called
// outside every lock, in order per provider, possibly from another goroutine
// than the one that made the change (so it may have run or not when the
// changing call returns); it may call back into breakers. Set it before the
// breakers are used.
func (b *breakers) OnChange(fn func(provider string, s BreakerSnapshot, t *BreakerTransition)) {
	b.mu.Lock()
	b.onChange = fn
	b.mu.Unlock()
}

// lookup returns the breaker of provider, nil when it has none, and the
// change callback.
func (b *breakers) lookup(provider string) (*breaker, func(string, BreakerSnapshot, *BreakerTransition)) {
	b.mu.RLock()
	br, fn := b.byName[provider], b.onChange
	b.mu.RUnlock()
	return br, fn
}

// ensure returns the breaker of provider, creating it with the apikey
// defaults, and the change callback.
func (b *breakers) ensure(provider string) (*breaker, func(string, BreakerSnapshot, *BreakerTransition)) {
	if br, fn := b.lookup(provider); br != nil {
		return br, fn
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.byName[provider]
	if br == nil {
		br = &breaker{cfg: defaultBreakerConfig(ProfileAPIKey), state: StateClosed}
		b.byName[provider] = br
	}
	return br, b.onChange
}

// Configure sets the thresholds of provider's breaker, normalised. The
// current state is kept; the new thresholds apply from the next event.
// Providers never configured use the apikey defaults.
func (b *breakers) Configure(provider string, cfg breakerConfig) {
	br, _ := b.ensure(provider)
	br.mu.Lock()
	br.cfg = cfg.Normalize()
	br.mu.Unlock()
}

// Allow is the routing gate. CLOSED and DEGRADED allow. OPEN refuses with
// the time left. An OPEN breaker whose reset timeout has passed becomes
// HALF_OPEN and the first caller claims its single probe (ok true); other
// callers are refused until the probe is reported, or until Reset passes
// without a report, which frees the probe slot for the next caller. A
// provider without a breaker is allowed. The CLOSED path does not allocate.
func (b *breakers) Allow(provider string) (ok bool, retryAfter time.Duration) {
	br, fn := b.lookup(provider)
	if br == nil {
		return true, 0
	}
	br.mu.Lock()
	if br.state == StateClosed && br.failures == 0 {
		br.mu.Unlock()
		return true, 0
	}
	now := b.clock.Now()
	change := br.recover(now)
	switch br.state {
	case StateOpen:
		ok, retryAfter = false, br.retryAt.Sub(now)
	case StateHalfOpen:
		if br.probeAt.IsZero() {
			br.probeAt = now
			ok = true
		} else {
			retryAfter = br.probeAt.Add(br.cfg.Reset).Sub(now)
		}
	default:
		ok = true
	}
	br.finish(provider, change, fn)
	return ok, retryAfter
}

// ReleaseProbe frees a claimed HALF_OPEN probe slot whose request ended
// without an outcome that RecordSuccess or RecordFailure judges (a client
// abort, a 429), so the next caller may probe at once.
func (b *breakers) ReleaseProbe(provider string) {
	br, _ := b.lookup(provider)
	if br == nil {
		return
	}
	br.mu.Lock()
	if br.state == StateHalfOpen {
		br.probeAt = time.Time{}
	}
	br.mu.Unlock()
}

// Peek returns the lazily recovered snapshot of provider's breaker without
// claiming a probe. A provider without a breaker reads as CLOSED.
func (b *breakers) Peek(provider string) BreakerSnapshot {
	br, fn := b.lookup(provider)
	if br == nil {
		return BreakerSnapshot{State: StateClosed}
	}
	br.mu.Lock()
	change := br.recover(b.clock.Now())
	s := br.snapshot()
	br.finish(provider, change, fn)
	return s
}

// gate returns what routing reads of provider's breaker — its state, when
// an OPEN breaker moves to HALF_OPEN, when a HALF_OPEN probe was claimed —
// lazily recovered at now, without claiming a probe and without copying
// the transition history (Peek's snapshot does). A breaker with nothing to
// recover (CLOSED, no failure counted) reads as CLOSED without now: now
// is only called for one that has.
func (b *breakers) gate(provider string, now func() time.Time) (state BreakerState, retryAt, probeAt time.Time) {
	br, fn := b.lookup(provider)
	if br == nil {
		return StateClosed, time.Time{}, time.Time{}
	}
	br.mu.Lock()
	if br.state == StateClosed && br.failures == 0 {
		br.mu.Unlock()
		return StateClosed, time.Time{}, time.Time{}
	}
	change := br.recover(now())
	state, retryAt, probeAt = br.state, br.retryAt, br.probeAt
	br.finish(provider, change, fn)
	return state, retryAt, probeAt
}

// State returns the lazily recovered state of provider's breaker without
// claiming a probe; CLOSED when it has none. It allocates nothing when the
// state does not change.
func (b *breakers) State(provider string) BreakerState {
	br, fn := b.lookup(provider)
	if br == nil {
		return StateClosed
	}
	br.mu.Lock()
	change := br.recover(b.clock.Now())
	st := br.state
	br.finish(provider, change, fn)
	return st
}

// Snapshots returns the lazily recovered snapshot of every breaker, keyed by
// provider.
func (b *breakers) Snapshots() map[string]BreakerSnapshot {
	out := make(map[string]BreakerSnapshot)
	for _, p := range b.names() {
		out[p] = b.Peek(p)
	}
	return out
}

// Providers returns the providers that have a breaker, sorted. Like every
// read path it applies lazy recovery to each of them.
func (b *breakers) Providers() []string {
	names := b.names()
	for _, p := range names {
		b.Peek(p)
	}
	return names
}

func (b *breakers) names() []string {
	b.mu.RLock()
	names := make([]string, 0, len(b.byName))
	for p := range b.byName {
		names = append(names, p)
	}
	b.mu.RUnlock()
	slices.Sort(names)
	return names
}

// RecordSuccess records a successful attempt on provider. In CLOSED or
// DEGRADED it decrements the failure count (DEGRADED → CLOSED, count
// cleared, at the DegradedExitSuccesses-th consecutive success); in
// HALF_OPEN it closes the breaker and clears every counter; in OPEN it is
// ignored. It reports whether the state
// changed (a lazy recovery on the way counts). The CLOSED path with no
// failures does not allocate.
func (b *breakers) RecordSuccess(provider string) (changed bool) {
	br, fn := b.lookup(provider)
	if br == nil {
		return false
	}
	br.mu.Lock()
	if br.state == StateClosed && br.failures == 0 {
		br.mu.Unlock()
		return false
	}
	now := b.clock.Now()
	change := br.recover(now)
	switch br.state {
	case StateClosed, StateDegraded:
		if br.failures > 0 {
			br.failures--
			change.dirty = true
		}
		if br.state == StateDegraded {
			br.successes++
			change.dirty = true
			if br.successes >= br.cfg.DegradedExitSuccesses {
				br.failures, br.successes = 0, 0
				change.add(br.transition(StateClosed, TransitionRecovered, now))
			}
		}
	case StateHalfOpen:
		br.clear()
		change.add(br.transition(StateClosed, TransitionProbeSucceeded, now))
	}
	br.finish(provider, change, fn)
	return change.n > 0
}

// RecordFailure records a failed attempt on provider; outcomes whose
// BreakerKind is KindNone are ignored. In CLOSED or DEGRADED the count
// grows and a DEGRADED success run restarts (DEGRADED at the degradation
// threshold, OPEN at the failure threshold with RetryAt = now + the
// kind's cooldown); in HALF_OPEN the failed probe reopens the breaker, and
// from the fourth opening since the breaker last closed the cooldown
// doubles per cycle, capped at MaxBackoffMultiplier; in OPEN it is
// ignored, so further failures never extend the cooldown. It reports
// whether the state changed (a lazy recovery on the way counts).
func (b *breakers) RecordFailure(provider string, o Outcome) (changed bool) {
	kind := BreakerKind(o)
	if kind == KindNone {
		return false
	}
	br, fn := b.ensure(provider)
	br.mu.Lock()
	now := b.clock.Now()
	change := br.recover(now)
	switch br.state {
	case StateClosed, StateDegraded:
		br.failures++
		br.lastFailureAt, br.lastKind, br.successes = now, kind, 0
		change.dirty = true
		switch {
		case br.failures >= br.cfg.FailureThreshold:
			br.open(now)
			change.add(br.transition(StateOpen, TransitionFailureThreshold, now))
		case br.state == StateClosed && br.cfg.DegradationThreshold > 0 && br.failures >= br.cfg.DegradationThreshold:
			change.add(br.transition(StateDegraded, TransitionDegradationThreshold, now))
		}
	case StateHalfOpen:
		br.lastFailureAt, br.lastKind = now, kind
		br.open(now)
		change.add(br.transition(StateOpen, TransitionProbeFailed, now))
	}
	br.finish(provider, change, fn)
	return change.n > 0
}

// ConnectionTestPassed records a passed connection test of one of
// provider's connections: a DEGRADED breaker returns to CLOSED and a
// CLOSED failure count is cleared. OPEN and HALF_OPEN are left to the
// probe rule (a test is not a routed request). It reports whether the
// state changed.
func (b *breakers) ConnectionTestPassed(provider string) (changed bool) {
	br, fn := b.lookup(provider)
	if br == nil {
		return false
	}
	br.mu.Lock()
	now := b.clock.Now()
	change := br.recover(now)
	switch br.state {
	case StateDegraded:
		br.failures, br.successes = 0, 0
		change.add(br.transition(StateClosed, TransitionConnectionTest, now))
	case StateClosed:
		if br.failures > 0 {
			br.failures = 0
			change.dirty = true
		}
	}
	br.finish(provider, change, fn)
	return change.n > 0 || change.dirty
}

// Reset closes provider's breaker and clears its counters; "" resets every
// breaker. It returns the providers reset, sorted; a provider without a
// breaker is not listed.
func (b *breakers) Reset(provider string) []string {
	var names []string
	if provider == "" {
		names = b.names()
	} else if br, _ := b.lookup(provider); br != nil {
		names = []string{provider}
	}
	for _, p := range names {
		br, fn := b.lookup(p)
		br.mu.Lock()
		var change breakerUpdate
		change.dirty = br.failures != 0 || br.cycles != 0 || br.successes != 0 || !br.probeAt.IsZero() ||
			!br.lastFailureAt.IsZero() || !br.openedAt.IsZero() || !br.retryAt.IsZero()
		br.clear()
		if br.state != StateClosed {
			change.add(br.transition(StateClosed, TransitionManualReset, b.clock.Now()))
		}
		br.finish(p, change, fn)
	}
	return names
}

// Restore replaces provider's breaker state with a persisted snapshot,
// keeping its configuration. It does not call OnChange. A probe claim does
// not survive a restore (the probing request died with the process), and
// only the last MaxBreakerTransitions transitions are kept.
func (b *breakers) Restore(provider string, s BreakerSnapshot) {
	br, _ := b.ensure(provider)
	br.mu.Lock()
	defer br.mu.Unlock()
	switch s.State {
	case StateClosed, StateDegraded, StateOpen, StateHalfOpen:
		br.state = s.State
	default:
		br.state = StateClosed
	}
	br.failures = max(s.FailureCount, 0)
	br.openedAt, br.retryAt, br.lastFailureAt = s.OpenedAt, s.RetryAt, s.LastFailureAt
	br.lastKind, br.successes = s.LastFailureKind, max(s.Successes, 0)
	br.cycles = max(s.Cycles, 0)
	br.probeAt = time.Time{}
	tr := s.Transitions
	if len(tr) > MaxBreakerTransitions {
		tr = tr[len(tr)-MaxBreakerTransitions:]
	}
	br.transitions = slices.Clone(tr)
}

// breakerUpdate collects what one operation changed: at most two
// transitions (a lazy recovery and the event itself).
type breakerUpdate struct {
	dirty bool // the persisted snapshot changed
	ts    [2]*BreakerTransition
	n     int
}

// add records transition t.
func (u *breakerUpdate) add(t *BreakerTransition) {
	u.dirty = true
	if u.n < len(u.ts) {
		u.ts[u.n] = t
		u.n++
	}
}

// recover applies lazy recovery at now: an expired OPEN becomes HALF_OPEN,
// a quiet period (quietPeriod) forgets failures, and an unreported probe
// claim older than Reset is freed. Must hold br.mu.
func (br *breaker) recover(now time.Time) breakerUpdate {
	var u breakerUpdate
	quiet := !br.lastFailureAt.IsZero() && now.Sub(br.lastFailureAt) >= br.quietPeriod()
	switch br.state {
	case StateOpen:
		if !now.Before(br.retryAt) {
			br.probeAt = time.Time{}
			u.add(br.transition(StateHalfOpen, TransitionResetTimeout, now))
			u.dirty = true
		}
	case StateHalfOpen:
		if !br.probeAt.IsZero() && now.Sub(br.probeAt) >= br.cfg.Reset {
			br.probeAt = time.Time{}
		}
	case StateDegraded:
		if quiet {
			br.failures, br.successes = 0, 0
			u.add(br.transition(StateClosed, TransitionQuietPeriod, now))
			u.dirty = true
		}
	case StateClosed:
		if quiet && br.failures > 0 {
			br.failures = 0
			u.dirty = true
		}
	}
	return u
}

// open moves the breaker to OPEN at now (the caller records the
// transition): it stays OPEN for the cooldown of the last failure's kind
// times the multiplier of this cycle. Must hold br.mu.
func (br *breaker) open(now time.Time) {
	br.cycles++
	br.successes = 0
	br.openedAt = now
	br.retryAt = now.Add(br.cfg.cooldown(br.lastKind) * time.Duration(breakerBackoff(br.cycles, br.cfg.MaxBackoffMultiplier)))
	br.probeAt = time.Time{}
}

// quietPeriod is how long a breaker must see no failure for DEGRADED to
// end and a CLOSED count to be forgotten: the OPEN cooldown of the last
// failure's kind times the current cycle multiplier (×1 before the fourth
// opening). Must hold br.mu.
func (br *breaker) quietPeriod() time.Duration {
	return br.cfg.cooldown(br.lastKind) * time.Duration(breakerBackoff(br.cycles, br.cfg.MaxBackoffMultiplier))
}

// breakerBackoff is the cooldown multiplier of the n-th opening since the
// breaker last closed: ×1 for 0..3, then ×2 per cycle, capped at limit
// (max_backoff_multiplier, at least 1).
func breakerBackoff(cycles, limit int) int {
	limit = max(limit, 1)
	if cycles <= 3 {
		return 1
	}
	if cycles-3 >= 30 {
		return limit
	}
	return min(1<<(cycles-3), limit)
}

// clear resets every counter (not the state or the history). Must hold
// br.mu.
func (br *breaker) clear() {
	br.failures, br.cycles, br.successes, br.lastKind = 0, 0, 0, KindNone
	br.openedAt, br.retryAt, br.lastFailureAt, br.probeAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
}

// transition moves the breaker to state to and records it. Must hold br.mu.
func (br *breaker) transition(to BreakerState, reason string, now time.Time) *BreakerTransition {
	t := BreakerTransition{From: br.state, To: to, At: now, Reason: reason}
	br.state = to
	if len(br.transitions) >= MaxBreakerTransitions {
		n := copy(br.transitions, br.transitions[len(br.transitions)-MaxBreakerTransitions+1:])
		br.transitions = br.transitions[:n]
	}
	br.transitions = append(br.transitions, t)
	return &t
}

// snapshot copies the breaker's state. Must hold br.mu.
func (br *breaker) snapshot() BreakerSnapshot {
	return BreakerSnapshot{
		State:           br.state,
		FailureCount:    br.failures,
		OpenedAt:        br.openedAt,
		RetryAt:         br.retryAt,
		LastFailureAt:   br.lastFailureAt,
		LastFailureKind: br.lastKind,
		Successes:       br.successes,
		Cycles:          br.cycles,
		ProbeAt:         br.probeAt,
		Transitions:     slices.Clone(br.transitions),
	}
}

// finish queues the change notification, unlocks br.mu and delivers queued
// notifications when this goroutine is the deliverer. Must hold br.mu.
func (br *breaker) finish(provider string, u breakerUpdate, fn func(string, BreakerSnapshot, *BreakerTransition)) {
	if fn == nil || !u.dirty {
		br.mu.Unlock()
		return
	}
	snap := br.snapshot()
	deliver := false
	if u.n == 0 {
		deliver = br.queue.push(breakerChange{provider: provider, snap: snap})
	}
	for _, t := range u.ts[:u.n] {
		deliver = br.queue.push(breakerChange{provider: provider, snap: snap, t: t}) || deliver
	}
	br.mu.Unlock()
	if deliver {
		drain(&br.mu, &br.queue, func(c breakerChange) { fn(c.provider, c.snap, c.t) })
	}
}

// changeQueue orders change notifications of one owner so that they are
// delivered outside its lock yet in the order the changes happened. It is
// guarded by the owner's mutex.
type changeQueue[E any] struct {
	pending    []E
	delivering bool
}

// push queues e and reports whether the caller must deliver (no other
// goroutine is delivering). Must hold the owner's mutex.
func (q *changeQueue[E]) push(e E) bool {
	q.pending = append(q.pending, e)
	if q.delivering {
		return false
	}
	q.delivering = true
	return true
}

// drain delivers queued events with mu released until the queue is empty.
// If deliver panics the queue is reset so later changes are still
// delivered.
func drain[E any](mu *sync.Mutex, q *changeQueue[E], deliver func(E)) {
	done := false
	defer func() {
		if !done {
			mu.Lock()
			q.pending, q.delivering = nil, false
			mu.Unlock()
		}
	}()
	for {
		mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.delivering = false
			mu.Unlock()
			done = true
			return
		}
		mu.Unlock()
		for _, e := range batch {
			deliver(e)
		}
	}
}
