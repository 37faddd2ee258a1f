package strategy

import (
	"sync"
	"time"
)

// Priority is the "priority" strategy and the fallback for unknown names:
// the eligible targets in configured order, so the first healthy target
// wins. It keeps no state and is goroutine-safe.
type Priority struct{}

var _ Strategy = (*Priority)(nil)

// Name returns "priority".
func (*Priority) Name() string { return NamePriority }

// Order returns the eligible targets in configured order.
func (*Priority) Order(_ Request, targets []Target, eligible func(int) bool) []int {
	return eligibleIndexes(len(targets), eligible)
}

// Report does nothing: priority keeps no state.
func (*Priority) Report(Request, []Target, int, bool) {}

// Fusion is the "fusion" strategy. The server executes it: it fans the
// request out in parallel to a panel and has a judge target synthesise one
// answer. Order returns the eligible targets in configured order; the
// server takes the panel and the judge from that order as its combo config
// says, and compares the result with the configured list to see which
// members are excluded. It keeps no state and is goroutine-safe.
type Fusion struct{}

var _ Strategy = (*Fusion)(nil)

// Name returns "fusion".
func (*Fusion) Name() string { return NameFusion }

// Order returns the eligible targets in configured order.
func (*Fusion) Order(_ Request, targets []Target, eligible func(int) bool) []int {
	return eligibleIndexes(len(targets), eligible)
}

// Report does nothing.
func (*Fusion) Report(Request, []Target, int, bool) {}

// Pipeline is the "pipeline" strategy. The server executes it as
// sequential steps, each step's output feeding the next. Order returns the
// eligible targets in configured order, which is the step order; an
// excluded step is missing from it, and the server decides whether the
// pipeline can run without it. It keeps no state and is goroutine-safe.
type Pipeline struct{}

var _ Strategy = (*Pipeline)(nil)

// Name returns "pipeline".
func (*Pipeline) Name() string { return NamePipeline }

// Order returns the eligible targets in configured (step) order.
func (*Pipeline) Order(_ Request, targets []Target, eligible func(int) bool) []int {
	return eligibleIndexes(len(targets), eligible)
}

// Report does nothing.
func (*Pipeline) Report(Request, []Target, int, bool) {}

// Relay bounds: a session not seen for relayTTL is forgotten, and at most
// relayMaxSessions sessions are remembered per strategy.
const (
	relayTTL         = time.Hour
	relayMaxSessions = 10000
)

// ContextRelay is the "context-relay" strategy: targets in priority order,
// plus a memory of the target each client session last succeeded on, so
// the server knows when a long session moves to another target and must
// hand the conversation context across (the summary itself is the
// server's job).
//
// Use: order with Order, and before dispatching targets[i] ask
// Moved(req, targets, i); when it reports moved, relay the context from
// the returned key. Report(success) records the session's new target.
// Requests without a Session never move. Sessions live in memory, bounded
// by count and idle time. It is goroutine-safe.
type ContextRelay struct {
	env *env

	mu       sync.Mutex
	sessions map[relayKey]relayEntry
}

type relayKey struct{ combo, session string }

type relayEntry struct {
	key  string
	seen time.Time
}

var _ Strategy = (*ContextRelay)(nil)

func newContextRelay(e *env) *ContextRelay {
	return &ContextRelay{env: e, sessions: map[relayKey]relayEntry{}}
}

// Name returns "context-relay".
func (*ContextRelay) Name() string { return NameContextRelay }

// Order returns the eligible targets in configured order.
func (*ContextRelay) Order(_ Request, targets []Target, eligible func(int) bool) []int {
	return eligibleIndexes(len(targets), eligible)
}

// Moved reports whether req's session last succeeded on another target
// than targets[i], and on which (its Key). A session's first request, a
// forgotten session or a request without Session never moved.
func (c *ContextRelay) Moved(req Request, targets []Target, i int) (from string, moved bool) {
	if req.Session == "" || i < 0 || i >= len(targets) {
		return "", false
	}
	now := c.env.now(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.sessions[relayKey{req.Combo, req.Session}]
	if !ok || now.Sub(e.seen) > relayTTL || e.key == targets[i].Key {
		return "", false
	}
	return e.key, true
}

// Report records a success as the session's current target.
func (c *ContextRelay) Report(req Request, targets []Target, i int, success bool) {
	if !success || req.Session == "" || i < 0 || i >= len(targets) {
		return
	}
	now := c.env.now(req)
	k := relayKey{req.Combo, req.Session}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sessions[k]; !ok && len(c.sessions) >= relayMaxSessions {
		c.evict(now)
	}
	c.sessions[k] = relayEntry{key: targets[i].Key, seen: now}
}

// evict drops idle sessions, or the least recently seen one when none is
// idle. Callers hold c.mu.
func (c *ContextRelay) evict(now time.Time) {
	var oldest relayKey
	var oldestSeen time.Time
	first := true
	for k, e := range c.sessions {
		if now.Sub(e.seen) > relayTTL {
			delete(c.sessions, k)
			continue
		}
		if first || e.seen.Before(oldestSeen) {
			oldest, oldestSeen, first = k, e.seen, false
		}
	}
	if len(c.sessions) >= relayMaxSessions {
		delete(c.sessions, oldest)
	}
}
