package engine

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DetailPaced is the Exclusion detail of a paced connection: an upstream
// answer said it has no requests or tokens left until its reset
// (x-ratelimit-remaining-*: 0), so routing skips it until then.
const DetailPaced = "paced"

// pacer holds the pacing marks of this gateway instance: the connections
// an upstream answer reported as empty (a remaining count of 0 with a
// reset ahead), each until its reset. A mark is not a failure: it has no
// backoff level, error fields or store record, and the breaker, the
// window gate and the lockouts never hear of it. It is goroutine-safe; an
// instance with no live mark answers check with one atomic load.
type pacer struct {
	n  atomic.Int32 // len(m), read without the lock
	mu sync.RWMutex
	m  map[connKey]time.Time
}

func newPacer() *pacer { return &pacer{m: make(map[connKey]time.Time)} }

// pace marks k paced until until; a later mark already set is kept. It
// reports whether the mark changed.
func (p *pacer) pace(k connKey, until time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.m[k]; ok && !until.After(cur) {
		return false
	}
	p.m[k] = until
	p.n.Store(int32(len(p.m)))
	return true
}

// check reports until when k is paced at now. An expired mark is dropped.
func (p *pacer) check(k connKey, now time.Time) (time.Time, bool) {
	if p.n.Load() == 0 {
		return time.Time{}, false
	}
	p.mu.RLock()
	until, ok := p.m[k]
	p.mu.RUnlock()
	if !ok {
		return time.Time{}, false
	}
	if until.After(now) {
		return until, true
	}
	p.mu.Lock()
	if cur, ok := p.m[k]; ok && !cur.After(now) {
		delete(p.m, k)
		p.n.Store(int32(len(p.m)))
	}
	p.mu.Unlock()
	return time.Time{}, false
}

// clear removes k's mark and reports whether there was a live one at now.
func (p *pacer) clear(k connKey, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.m[k]
	delete(p.m, k)
	p.n.Store(int32(len(p.m)))
	return ok && until.After(now)
}

// pacedConn is one live pacing mark.
type pacedConn struct {
	key   connKey
	until time.Time
}

// list returns the live marks at now (of provider only when it is not
// ""), sorted by provider and connection.
func (p *pacer) list(provider string, now time.Time) []pacedConn {
	if p.n.Load() == 0 {
		return nil
	}
	p.mu.RLock()
	var out []pacedConn
	for k, until := range p.m {
		if until.After(now) && (provider == "" || k.provider == provider) {
			out = append(out, pacedConn{k, until})
		}
	}
	p.mu.RUnlock()
	slices.SortFunc(out, func(a, b pacedConn) int {
		return cmp.Or(cmp.Compare(a.key.provider, b.key.provider), cmp.Compare(a.key.connection, b.key.connection))
	})
	return out
}

// ObserveRateLimit reads the rate-limit headers of an upstream answer on
// a connection (any status, a success included; names lower-cased, see
// PaceHint): when a remaining count is 0 with a reset ahead, the
// connection is paced until that reset — Check excludes it as a
// connection_cooldown with detail "paced" — and the pace is returned. A
// provider whose upstream hints are off (use_upstream_retry_hints) and a
// connection with disable_cooling are never paced. Pacing records no
// failure; the marks are this instance's own (docs/resilience.md §2,
// "Pacing"). It does no I/O.
func (e *Engine) ObserveRateLimit(provider, connection string, headers map[string]string) (time.Duration, bool) {
	ps := e.providerFor(provider, "")
	if !ps.useHints || ps.disableCooling[connection] {
		return 0, false
	}
	now := e.clock.Now()
	d, ok := PaceHint(headers, now)
	if !ok {
		return 0, false
	}
	if e.pacer.pace(connKey{provider, connection}, now.Add(d)) {
		e.log.Debug("connection paced: upstream reports no requests or tokens left", "provider", provider, "connection", connection, "for", d)
	}
	return d, true
}

// PacedUntil reports until when a connection is paced, for diagnostics.
func (e *Engine) PacedUntil(provider, connection string) (time.Time, bool) {
	return e.pacer.check(connKey{provider, connection}, e.clock.Now())
}
