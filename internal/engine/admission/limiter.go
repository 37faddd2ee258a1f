package admission

import "time"

// limiter is the request-queue limiter state of one connection: a token
// reservoir kept as a generic cell rate algorithm (a theoretical arrival
// time, so no float drift and nothing to refill in the background), the
// minimum spacing, a pause set by upstream retry hints and the running
// count. It is guarded by conn.mu.
type limiter struct {
	// tat is the theoretical arrival time: a dispatch at t conforms to the
	// reservoir when t ≥ tat − (RPM−1)·interval.
	tat         time.Time
	last        time.Time // last dispatch; zero before the first
	pausedUntil time.Time
	running     int
}

// interval is the reservoir's refill interval per token and tolerance the
// burst the reservoir allows beyond one token.
func interval(cfg *LimiterConfig) (interval, tolerance time.Duration) {
	if cfg.RequestsPerMinute <= 0 {
		return 0, 0
	}
	interval = time.Minute / time.Duration(cfg.RequestsPerMinute)
	return interval, interval * time.Duration(cfg.RequestsPerMinute-1)
}

// canRun reports whether the limiter's concurrency has room.
func (l *limiter) canRun(cfg *LimiterConfig) bool {
	return cfg.MaxConcurrent <= 0 || l.running < cfg.MaxConcurrent
}

// readyAt returns the earliest time ≥ now the next dispatch may happen,
// ignoring concurrency: after any pause, min spacing after the last
// dispatch, and when the reservoir holds a token.
func (l *limiter) readyAt(now time.Time, cfg *LimiterConfig) time.Time {
	t := now
	if l.pausedUntil.After(t) {
		t = l.pausedUntil
	}
	if cfg.MinSpacing > 0 && !l.last.IsZero() {
		if n := l.last.Add(cfg.MinSpacing); n.After(t) {
			t = n
		}
	}
	if iv, tol := interval(cfg); iv > 0 {
		if n := l.tat.Add(-tol); n.After(t) {
			t = n
		}
	}
	return t
}

// take dispatches one request at now: it spends a token, records the
// dispatch for the spacing and counts it running.
func (l *limiter) take(now time.Time, cfg *LimiterConfig) {
	if iv, _ := interval(cfg); iv > 0 {
		l.tat = later(l.tat, now).Add(iv)
	}
	l.last = now
	l.running++
}

// pause drains the reservoir and holds every dispatch until until: the
// first token is available at until and the reservoir refills at its
// normal rate from there. A pause never shortens a longer one.
func (l *limiter) pause(until time.Time, cfg *LimiterConfig) {
	l.pausedUntil = later(l.pausedUntil, until)
	if iv, tol := interval(cfg); iv > 0 {
		l.tat = later(l.tat, until.Add(tol))
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
