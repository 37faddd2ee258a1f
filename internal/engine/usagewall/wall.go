package usagewall

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// The numbers of docs/resilience.md §2b, plus Breakwater's own fallbacks where
// the spec leaves a gap (marked "not in the spec").
const (
	// ResetGrace keeps the lane open after the announced window reset.
	ResetGrace = 60 * time.Second
	// DefaultWindow is the lane's window when the wall 429 announces no
	// future reset time (not in the spec: one 5-hour session window).
	DefaultWindow = 5 * time.Hour

	// DefaultRetryAfter is the slot_busy / 529 wait without a retry-after header.
	DefaultRetryAfter = 20 * time.Second
	// MinRetryAfter and MaxRetryAfter clamp the slot_busy / 529 wait.
	MinRetryAfter = 5 * time.Second
	MaxRetryAfter = 600 * time.Second
	// Jitter is the ± fraction applied to the clamped wait.
	Jitter = 0.30

	// DefaultMaxWait bounds the total slot wait without a max-wait header.
	DefaultMaxWait = 20 * time.Minute
	// MinMaxWait and MaxMaxWait clamp the max-wait header.
	MinMaxWait = time.Minute
	MaxMaxWait = 6 * time.Hour
	// StartTimeoutMargin is kept free of the request's remaining
	// upstream-start timeout: a wait must end this long before it.
	StartTimeoutMargin = 5 * time.Second

	// CoolOff blocks re-accepting the lane after it ended with max_wait.
	CoolOff = 10 * time.Minute
	// MaxBudgetMemory bounds how long budget_exhausted is remembered.
	MaxBudgetMemory = 8 * 24 * time.Hour

	// ResetBackoff is the pause of the reset flow after any failure.
	ResetBackoff = 15 * time.Minute
	// DefaultNextAvailable is remembered after already_used / not_offered
	// when no future next_available_at is given.
	DefaultNextAvailable = 7 * 24 * time.Hour
	// ResetFlightTimeout is how long a started reset flow blocks a second
	// one on the same connection when OnResetResult never comes (not in
	// the spec: a guard against an abandoned flow).
	ResetFlightTimeout = time.Minute
)

// End reasons. The first seven end a lane through a Decision (ActionEnded);
// the last three only appear in Snapshot.LastEndReason.
const (
	EndMaxWait         = "max_wait"
	EndWeeklyLimit     = "weekly_limit"
	EndBudgetExhausted = "budget_exhausted"
	EndOff             = "off"
	EndIneligible      = "ineligible"
	EndNewWindow       = "new_window"
	EndExtraUsage      = "extra_usage"

	// EndExpired: the window reset plus ResetGrace passed.
	EndExpired = "expired"
	// EndDisabled: low_priority_mode was turned off while the lane was active.
	EndDisabled = "disabled"
	// EndLimitReset: a session-limit reset made the lane unnecessary.
	EndLimitReset = "limit_reset"
)

// Reset results (the `result` of the reset endpoint) and ResetFailed, the
// Snapshot.LastResetResult of a failed flow.
const (
	ResultReset       = "reset"
	ResultNotLimited  = "not_limited"
	ResultAlreadyUsed = "already_used"
	ResultNotOffered  = "not_offered"
	ResetFailed       = "failed"
)

// Config is the per-connection opt-in of §2b (provider_specific of a
// Claude subscription connection). Both switches default to off.
type Config struct {
	// LowPriorityMode accepts the lower-priority lane (low_priority_mode).
	LowPriorityMode bool
	// AutoLimitReset tries the session-limit reset (auto_limit_reset).
	AutoLimitReset bool
	// OrgUUID is the organization of the reset endpoint
	// (organization_uuid); empty, the flow takes the one the usage probe
	// names (Usage.ResetOrg).
	OrgUUID string
}

// Action tells the caller what to do with an upstream response.
type Action int

const (
	// ActionNone: not a wall matter; the response takes the normal path
	// (success, or classification and cooldown).
	ActionNone Action = iota
	// ActionRetry: retry the request at once on the same connection with
	// RequestHeaders (the slow header when the lane was accepted or joined,
	// none after a session-limit reset). The response never reaches the
	// cooldown path: the connection is neither cooled nor rotated.
	ActionRetry
	// ActionWaitAndRetry: a lane slot is busy; wait Decision.Wait, then
	// retry as for ActionRetry. The response never reaches the cooldown path.
	ActionWaitAndRetry
	// ActionTryReset: run the session-limit reset flow, then call
	// OnResetResult with the same Response. Hold the response until then.
	ActionTryReset
	// ActionEnded: the lane ended (Decision.EndReason); the response takes
	// the normal path.
	ActionEnded
)

// String returns the action's name for logs.
func (a Action) String() string {
	switch a {
	case ActionNone:
		return "none"
	case ActionRetry:
		return "retry"
	case ActionWaitAndRetry:
		return "wait_and_retry"
	case ActionTryReset:
		return "try_reset"
	case ActionEnded:
		return "ended"
	}
	return "unknown"
}

// Decision is what the caller does next.
type Decision struct {
	// Action is the step to execute.
	Action Action
	// Wait is the jittered wait of ActionWaitAndRetry.
	Wait time.Duration
	// EndReason is set with ActionEnded: one of EndMaxWait, EndWeeklyLimit,
	// EndBudgetExhausted, EndOff, EndIneligible, EndNewWindow, EndExtraUsage.
	EndReason string
}

// Response is the part of an upstream response the wall reads.
type Response struct {
	// Status is the HTTP status.
	Status int
	// Header holds the response headers with lower-cased names.
	Header map[string]string
	// Slow reports that the request carried anthropic-usage-limit: slow
	// (RequestHeaders returned the header for it).
	Slow bool
	// RemainingStart is what is left of the request's own upstream-start
	// timeout; 0 means the request has none, a negative value that it ran
	// out.
	RemainingStart time.Duration
}

// Snapshot is the wall state of one connection, for the admin view. Zero
// times mean "not set".
type Snapshot struct {
	// LaneActive reports that requests carry the slow header.
	LaneActive bool
	// WindowReset is the announced reset of the window the lane serves.
	WindowReset time.Time
	// LaneUntil is WindowReset + ResetGrace: the lane's end.
	LaneUntil time.Time
	// BusySince is the start of the current slot_busy / 529 streak.
	BusySince time.Time
	// CoolOffUntil blocks re-accepting the lane (after max_wait).
	CoolOffUntil time.Time
	// BudgetExhaustedUntil blocks re-accepting the lane (budget_exhausted).
	BudgetExhaustedUntil time.Time
	// LastEndReason and LastEndAt describe the last lane end.
	LastEndReason string
	LastEndAt     time.Time

	// ResetBackoffUntil pauses the reset flow after a failure.
	ResetBackoffUntil time.Time
	// ResetNextAvailableAt is the remembered next_available_at.
	ResetNextAvailableAt time.Time
	// ResetInFlightSince is when a running reset flow started.
	ResetInFlightSince time.Time
	// LastResetResult and LastResetAt describe the last reset flow
	// (a Result* constant or ResetFailed).
	LastResetResult string
	LastResetAt     time.Time
}

// connState is one connection's state. Guarded by Wall.mu.
type connState struct {
	Snapshot
	// windowKnown is false when WindowReset is the DefaultWindow fallback.
	windowKnown bool
	// resetDisarmed is set after a reset / not_limited: the next wall on
	// this connection goes to the lane instead of claiming again, until a
	// response that is not a wall re-arms the flow (loop guard, not in the
	// spec).
	resetDisarmed bool
}

// Wall holds the §2b state of every connection, keyed by connection ref,
// in memory. It is goroutine-safe; rnd is called under its lock.
type Wall struct {
	clock engine.Clock
	rnd   func() float64

	mu    sync.Mutex
	conns map[string]*connState
}

// New returns an empty Wall. rnd is the jitter source returning values in
// [0, 1) (tests pass a seeded one); nil means math/rand/v2.Float64.
func New(clock engine.Clock, rnd func() float64) *Wall {
	if rnd == nil {
		rnd = rand.Float64
	}
	return &Wall{clock: clock, rnd: rnd, conns: make(map[string]*connState)}
}

// RequestHeaders returns the headers to add to a request on conn:
// {"anthropic-usage-limit": "slow"} while the lane is active, else nil.
// It ends a lane whose window passed (EndExpired) or whose connection no
// longer has low_priority_mode (EndDisabled). The map is the caller's.
func (w *Wall) RequestHeaders(conn string, cfg Config) map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.conns[conn]
	if st == nil {
		return nil
	}
	w.expire(st, cfg, w.clock.Now())
	if !st.LaneActive {
		return nil
	}
	return map[string]string{HeaderUsageLimit: UsageLimitSlow}
}

// OnResponse judges an upstream response of conn and returns what to do.
// Only a 429 with anthropic-ratelimit-unified-status: rejected is a wall;
// anything else before the first wall is ActionNone.
func (w *Wall) OnResponse(conn string, cfg Config, resp Response) Decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	st := w.state(conn)
	w.expire(st, cfg, now)
	wall := isWall(resp)
	if !wall {
		st.resetDisarmed = false
	}
	if st.LaneActive {
		if d, done := w.laneResponse(st, resp, now); done {
			return d
		}
	}
	if !wall {
		return Decision{}
	}
	if w.canTryReset(st, cfg, now) {
		st.ResetInFlightSince = now
		return Decision{Action: ActionTryReset}
	}
	return w.lane(st, cfg, resp, now)
}

// ResetOutcome is the result of a reset flow, reported to OnResetResult.
type ResetOutcome struct {
	// Result is one of ResultReset, ResultNotLimited, ResultAlreadyUsed,
	// ResultNotOffered.
	Result string
	// NextAvailableAt is when the reset is offered again (already_used /
	// not_offered); zero when not announced.
	NextAvailableAt time.Time
	// Err is set when the flow failed (transport error, non-2xx, bad body,
	// unknown result).
	Err error
}

// OnResetResult records the outcome of the reset flow that OnResponse asked
// for and decides about resp, the wall response that started it:
// reset / not_limited → ActionRetry at full speed (an active lane ends);
// already_used / not_offered → remember next_available_at (DefaultNextAvailable
// when absent or past), then the lane decision; a failure or an unknown
// result → ResetBackoff, then the lane decision.
func (w *Wall) OnResetResult(conn string, cfg Config, resp Response, out ResetOutcome) Decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	st := w.state(conn)
	st.ResetInFlightSince = time.Time{}
	st.LastResetAt = now
	w.expire(st, cfg, now)
	switch {
	case out.Err == nil && (out.Result == ResultReset || out.Result == ResultNotLimited):
		st.LastResetResult = out.Result
		st.resetDisarmed = true
		if st.LaneActive {
			w.end(st, EndLimitReset, now)
		}
		return Decision{Action: ActionRetry}
	case out.Err == nil && (out.Result == ResultAlreadyUsed || out.Result == ResultNotOffered):
		st.LastResetResult = out.Result
		next := out.NextAvailableAt
		if !next.After(now) {
			next = now.Add(DefaultNextAvailable)
		}
		st.ResetNextAvailableAt = next
	default:
		st.LastResetResult = ResetFailed
		st.ResetBackoffUntil = now.Add(ResetBackoff)
	}
	return w.lane(st, cfg, resp, now)
}

// CanTryReset reports whether a wall on conn would start the reset flow
// now: auto_limit_reset on, not backing off, past the
// remembered next_available_at, no flow running (for ResetFlightTimeout)
// and not just reset.
func (w *Wall) CanTryReset(conn string, cfg Config) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.conns[conn]
	if st == nil {
		return cfg.AutoLimitReset
	}
	return w.canTryReset(st, cfg, w.clock.Now())
}

// State returns conn's wall state (the zero Snapshot for an unknown
// connection), with a passed lane window already ended. It does not know
// the connection's Config, so a lane of a connection whose
// low_priority_mode was turned off shows until the next request on it.
func (w *Wall) State(conn string) Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.conns[conn]
	if st == nil {
		return Snapshot{}
	}
	w.expire(st, Config{LowPriorityMode: true}, w.clock.Now())
	return st.Snapshot
}

// Forget drops conn's state (connection deleted or credentials replaced).
func (w *Wall) Forget(conn string) {
	w.mu.Lock()
	delete(w.conns, conn)
	w.mu.Unlock()
}

func (w *Wall) state(conn string) *connState {
	st := w.conns[conn]
	if st == nil {
		st = &connState{}
		w.conns[conn] = st
	}
	return st
}

// isWall reports a 429 with anthropic-ratelimit-unified-status: rejected.
func isWall(resp Response) bool {
	return resp.Status == http.StatusTooManyRequests && headerIs(resp.Header, HeaderStatus, StatusRejected)
}

// expire ends an active lane whose window passed or whose connection
// turned low_priority_mode off.
func (w *Wall) expire(st *connState, cfg Config, now time.Time) {
	if !st.LaneActive {
		return
	}
	switch {
	case !cfg.LowPriorityMode:
		w.end(st, EndDisabled, now)
	case !now.Before(st.LaneUntil):
		w.end(st, EndExpired, now)
	}
}

func (w *Wall) end(st *connState, reason string, now time.Time) {
	st.LaneActive = false
	st.BusySince = time.Time{}
	st.LastEndReason = reason
	st.LastEndAt = now
}

func (w *Wall) ended(st *connState, reason string, now time.Time) Decision {
	w.end(st, reason, now)
	return Decision{Action: ActionEnded, EndReason: reason}
}

// laneResponse judges a response while the lane is active. done is false
// when the response is not the lane's business and the wall rules apply.
func (w *Wall) laneResponse(st *connState, resp Response, now time.Time) (d Decision, done bool) {
	h := resp.Header
	if reset, ok := parseTime(h[HeaderReset]); ok {
		switch {
		case !st.windowKnown:
			st.WindowReset, st.LaneUntil, st.windowKnown = reset, reset.Add(ResetGrace), true
			if !now.Before(st.LaneUntil) {
				return w.ended(st, EndNewWindow, now), true
			}
		case reset.After(st.WindowReset):
			return w.ended(st, EndNewWindow, now), true
		}
	}
	switch slow := headerValue(h, HeaderSlowStatus); {
	case slow == SlowWeeklyLimit:
		return w.ended(st, EndWeeklyLimit, now), true
	case slow == SlowBudgetExhausted:
		until := now.Add(MaxBudgetMemory)
		if t, ok := parseTime(h[HeaderSlowBudgetReset]); ok && t.After(now) && t.Before(until) {
			until = t
		}
		st.BudgetExhaustedUntil = until
		return w.ended(st, EndBudgetExhausted, now), true
	case slow == SlowOff:
		return w.ended(st, EndOff, now), true
	case slow == SlowIneligible:
		if headerIs(h, HeaderOverageInUse, "true") {
			return w.ended(st, EndExtraUsage, now), true
		}
		return w.ended(st, EndIneligible, now), true
	case !resp.Slow:
		// A request sent before the lane opened: a wall joins the lane.
		return Decision{}, false
	case resp.Status == 529 || (resp.Status == http.StatusTooManyRequests && slow == SlowSlotBusy):
		return w.busy(st, resp, now), true
	case slow == SlowActive || slow == SlowNotNeeded || (resp.Status >= 200 && resp.Status < 300):
		st.BusySince = time.Time{}
	}
	// Any other answer to a lane request (also a wall without a lane
	// status) takes the normal path and keeps the lane: never an
	// immediate retry loop.
	return Decision{}, true
}

// busy decides a slot_busy 429 or a 529 of a lane request.
func (w *Wall) busy(st *connState, resp Response, now time.Time) Decision {
	base := secondsOr(resp.Header, HeaderSlowRetryAfter, DefaultRetryAfter, MinRetryAfter, MaxRetryAfter)
	wait := jitter(base, w.rnd())
	maxWait := secondsOr(resp.Header, HeaderSlowMaxWait, DefaultMaxWait, MinMaxWait, MaxMaxWait)
	if st.BusySince.IsZero() {
		st.BusySince = now
	}
	waited := now.Sub(st.BusySince)
	overStart := resp.RemainingStart != 0 && wait > resp.RemainingStart-StartTimeoutMargin
	if waited+wait > maxWait || overStart {
		st.CoolOffUntil = now.Add(CoolOff)
		return w.ended(st, EndMaxWait, now)
	}
	return Decision{Action: ActionWaitAndRetry, Wait: wait}
}

// jitter spreads base by ±Jitter; r is in [0, 1) and 0.5 gives base.
func jitter(base time.Duration, r float64) time.Duration {
	r = min(max(r, 0), 1)
	return base + time.Duration(float64(base)*Jitter*(2*r-1))
}

// lane decides a wall response after the reset flow was skipped or did not
// help: join an active lane, accept an offered one, or the normal path.
func (w *Wall) lane(st *connState, cfg Config, resp Response, now time.Time) Decision {
	if !cfg.LowPriorityMode {
		return Decision{}
	}
	if st.LaneActive {
		return Decision{Action: ActionRetry}
	}
	if now.Before(st.CoolOffUntil) || now.Before(st.BudgetExhaustedUntil) {
		return Decision{}
	}
	if !headerIs(resp.Header, HeaderSlowOffer, OfferTreatment) {
		return Decision{}
	}
	reset, ok := parseTime(resp.Header[HeaderReset])
	st.windowKnown = ok && reset.Add(ResetGrace).After(now)
	if !st.windowKnown {
		reset = now.Add(DefaultWindow)
	}
	st.LaneActive = true
	st.WindowReset = reset
	st.LaneUntil = reset.Add(ResetGrace)
	st.BusySince = time.Time{}
	return Decision{Action: ActionRetry}
}

func (w *Wall) canTryReset(st *connState, cfg Config, now time.Time) bool {
	if !cfg.AutoLimitReset || st.resetDisarmed {
		return false
	}
	if !st.ResetInFlightSince.IsZero() && now.Before(st.ResetInFlightSince.Add(ResetFlightTimeout)) {
		return false
	}
	return !now.Before(st.ResetBackoffUntil) && !now.Before(st.ResetNextAvailableAt)
}
