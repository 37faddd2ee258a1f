package admission

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// retryInfoType is the type URL of Google's typed retry hint.
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// Hint is a retry wait an upstream stated in a 429 body.
type Hint struct {
	// Wait is the stated wait.
	Wait time.Duration
	// Typed marks a typed google.rpc.RetryInfo retryDelay, as opposed to
	// prose ("retry after 12s") or any other untyped delay.
	Typed bool
}

// PaceDecision is what Pace did with a hint. At most one of Paced and
// Paused is set; neither means the hint changed nothing.
type PaceDecision struct {
	// Paced: the wait fit max_wait_ms; the limiter's reservoir is drained
	// until Until and queued requests dispatch when it refills.
	Paced bool
	// Paused: the wait exceeded max_wait_ms and is kept as a limiter pause
	// until Until; queued and new requests whose queue budget ends before
	// Until are rejected at once with RATE_LIMIT_QUEUE_TIMEOUT.
	Paused bool
	// Until is when the pace or pause ends.
	Until time.Time
}

// Pace applies an upstream body retry hint for model on provider/connection
// (docs/resilience.md §7, pacing versus pausing): a wait within the
// connection's max_wait_ms paces the limiter (Paced), a longer one pauses
// it (Paused). A long wait scoped to one model is not paced at all: it is
// a model lockout, which the engine decides and records
// (engine.Engine.ModelQuotaLockout); the caller asks it first and calls
// Pace only when it says no.
//
// Pacing and pausing act on the connection's limiter, so they happen only
// for a Protected connection; for others Pace does nothing. A pause never
// shortens a longer one. Pace never records anything in the engine.
func (m *Manager) Pace(provider, connection, model string, hint Hint) PaceDecision {
	if hint.Wait <= 0 {
		return PaceDecision{}
	}
	c := m.lookup(provider, connection)
	if c == nil {
		return PaceDecision{}
	}
	cfg := c.cfg.Load()
	if !cfg.protected {
		return PaceDecision{}
	}
	paced := hint.Wait <= cfg.budgets.MaxWait
	c.mu.Lock()
	until := m.clock.Now().Add(hint.Wait)
	c.lim.pause(until, &cfg.limiter)
	until = c.lim.pausedUntil
	c.wakeAllLocked()
	c.mu.Unlock()
	if o := m.obs.Load(); o != nil && o.OnPaused != nil {
		o.OnPaused(provider, connection, until)
	}
	return PaceDecision{Paced: paced, Paused: !paced, Until: until}
}

// ParseBodyRetryHint finds the retry wait in a 429 body. A Google
// google.rpc.RetryInfo detail ({"@type":
// "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "86399s"},
// anywhere in the JSON) gives a Typed hint; otherwise prose such as "retry
// after 12s" or "try again in 1.5s" (engine.ParseResetText) gives an
// untyped one. Waits are capped at engine.MaxRetryHint. It is a pure
// function.
func ParseBodyRetryHint(body string) (Hint, bool) {
	if d, ok := typedRetryDelay(body); ok {
		return Hint{Wait: d, Typed: true}, true
	}
	if d, ok := engine.ParseResetText(body); ok {
		return Hint{Wait: d}, true
	}
	return Hint{}, false
}

// typedRetryDelay finds a RetryInfo retryDelay in a JSON body.
func typedRetryDelay(body string) (time.Duration, bool) {
	if !strings.Contains(body, "RetryInfo") {
		return 0, false
	}
	var v any
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &v); err != nil {
		return 0, false
	}
	return findRetryInfo(v, 0)
}

// findRetryInfo walks decoded JSON for a RetryInfo object.
func findRetryInfo(v any, depth int) (time.Duration, bool) {
	const maxDepth = 16
	if depth > maxDepth {
		return 0, false
	}
	switch x := v.(type) {
	case map[string]any:
		if t, _ := x["@type"].(string); t == retryInfoType {
			if s, ok := x["retryDelay"].(string); ok {
				if d, ok := parseProtoDuration(s); ok {
					return d, true
				}
			}
		}
		for _, e := range x {
			if d, ok := findRetryInfo(e, depth+1); ok {
				return d, true
			}
		}
	case []any:
		for _, e := range x {
			if d, ok := findRetryInfo(e, depth+1); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// parseProtoDuration reads the JSON form of google.protobuf.Duration:
// decimal seconds with an "s" suffix ("86399s", "1.5s").
func parseProtoDuration(s string) (time.Duration, bool) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "s")
	if !ok {
		return 0, false
	}
	secs, err := strconv.ParseFloat(num, 64)
	if err != nil || secs < 0 || secs != secs {
		return 0, false
	}
	if secs >= engine.MaxRetryHint.Seconds() {
		return engine.MaxRetryHint, true
	}
	return time.Duration(secs * float64(time.Second)), true
}
