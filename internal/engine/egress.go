package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// egressWindow is how far back a recorded egress address counts when the
// siblings of a failing connection are looked up (docs/resilience.md §12).
const egressWindow = 24 * time.Hour

// Egress-bucketed locks (docs/resilience.md §12). Some upstreams bucket their
// free-tier quota per egress IP rather than per account: when one
// connection of such a provider (ProviderSpec.EgressBucketed) hits the
// quota, every other connection leaving through the same address will
// fail too. For those providers:
//
//   - a 429 that a rule scoped to the model is locked per connection
//     instead (egressScope), and a 429 never arms a model lockout
//     (egressLocksConnection), even with a single connection;
//   - a 429 classified quota_exhausted or rate_limit cools every sibling
//     connection of the provider whose last egress address, recorded
//     within egressWindow, equals the failing connection's, until the
//     failing connection's own cooldown deadline (coolEgressSiblings).
//     Best effort: no record means only the failing connection cools.
//     Siblings are never made terminal; disable_cooling siblings are
//     skipped; a terminal sibling or one cooling longer is left alone.

// egressRecord is the last egress address of one connection.
type egressRecord struct {
	addr string
	at   time.Time
}

// egressBook remembers the last egress address of every connection, in
// memory only (a restart forgets it: the records are best-effort evidence,
// refreshed by every request). The zero value is ready to use; it is
// goroutine-safe.
type egressBook struct {
	mu sync.RWMutex
	m  map[connKey]egressRecord
}

// record notes that connection k last left through addr at time at.
func (b *egressBook) record(k connKey, addr string, at time.Time) {
	b.mu.Lock()
	if b.m == nil {
		b.m = make(map[connKey]egressRecord)
	}
	b.m[k] = egressRecord{addr: addr, at: at}
	b.mu.Unlock()
}

// lookup returns connection k's egress address when it was recorded
// within egressWindow before now.
func (b *egressBook) lookup(k connKey, now time.Time) (string, bool) {
	b.mu.RLock()
	r, ok := b.m[k]
	b.mu.RUnlock()
	if !ok || !recentEgress(r, now) {
		return "", false
	}
	return r.addr, true
}

// siblings returns the other connections of provider whose egress address,
// recorded within egressWindow before now, is addr, sorted. Stale records
// are dropped on the way.
func (b *egressBook) siblings(provider, connection, addr string, now time.Time) []string {
	var out []string
	b.mu.Lock()
	for k, r := range b.m {
		switch {
		case !recentEgress(r, now):
			delete(b.m, k)
		case k.provider == provider && k.connection != connection && r.addr == addr:
			out = append(out, k.connection)
		}
	}
	b.mu.Unlock()
	slices.Sort(out)
	return out
}

// recentEgress reports whether r was recorded within egressWindow of now.
func recentEgress(r egressRecord, now time.Time) bool {
	return now.Sub(r.at) <= egressWindow
}

// RecordEgress notes that connection of provider last sent a request out
// through egress address addr (an IP, or a proxy's name), now. Only the
// latest address of each connection is kept, in memory; empty arguments are
// ignored. It is goroutine-safe, does no I/O and allocates nothing for a
// connection already recorded.
func (e *Engine) RecordEgress(provider, connection, addr string) {
	if provider == "" || connection == "" || addr == "" {
		return
	}
	e.egress.record(connKey{provider, connection}, addr, e.clock.Now())
}

// egressScope widens a model-scoped 429 of an egress-bucketed provider to
// its connection: the quota belongs to the egress, not to one model.
func egressScope(ps *providerState, o Outcome) Outcome {
	if ps.egressBucketed && o.Status == 429 && o.Scope == ScopeModel {
		o.Scope = ScopeConnection
	}
	return o
}

// egressLocksConnection reports whether failure o of provider ps is locked
// per connection only, never by a model lockout: any 429 of an
// egress-bucketed provider.
func egressLocksConnection(ps *providerState, o Outcome) bool {
	return ps.egressBucketed && o.Status == 429
}

// coolEgressSiblings applies the §12 sibling cooldown after failure o of
// provider ps was recorded on its connection at now: when o is a 429
// quota_exhausted or rate_limit of an egress-bucketed provider and the
// failing connection is cooling, every sibling sharing its recent egress
// address cools until the same deadline. It returns the joined store write
// errors.
func (e *Engine) coolEgressSiblings(ctx context.Context, ps *providerState, o Outcome, now time.Time) error {
	if !ps.egressBucketed || o.Status != 429 ||
		(o.Reason != ReasonQuotaExhausted && o.Reason != ReasonRateLimit) {
		return nil
	}
	addr, ok := e.egress.lookup(connKey{o.Provider, o.Connection}, now)
	if !ok {
		return nil
	}
	st, ok := e.cooldowns.get(o.Provider, o.Connection)
	if !ok || st.TestStatus.Terminal() || !st.RateLimitedUntil.After(now) {
		return nil
	}
	ob := e.obs()
	var errs []error
	for _, sib := range e.egress.siblings(o.Provider, o.Connection, addr, now) {
		if ps.disableCooling[sib] {
			continue
		}
		var d time.Duration
		errs = append(errs, e.updateConn(ctx, o.Provider, sib, func(c *cooldowns) bool {
			var changed bool
			d, changed = c.coolUntil(o, sib, st.RateLimitedUntil, now)
			return changed
		}, false))
		if d > 0 && ob.OnCooldown != nil {
			ob.OnCooldown(o.Provider, sib, string(o.Reason), d)
		}
	}
	return errors.Join(errs...)
}

// coolUntil cools connection sibling of failure o's provider until until,
// for a failure of o.Connection it shares an egress with. A terminal
// sibling, or one already cooling until then or later, is left alone; the
// backoff level is kept. It reports the cooldown armed and whether the
// state changed.
func (c *cooldowns) coolUntil(o Outcome, sibling string, until, now time.Time) (time.Duration, bool) {
	k := connKey{o.Provider, sibling}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := connState{Provider: o.Provider, Connection: sibling, TestStatus: TestStatusActive}
	if cur, ok := c.m[k]; ok {
		if cur.TestStatus.Terminal() || !until.After(cur.RateLimitedUntil) {
			return 0, false
		}
		next = cur.clone()
	}
	next.RateLimitedUntil, next.TestStatus = until, testStatusUnavailable
	next.LastError = "egress shared with " + o.Connection + ": " + o.Message
	next.LastErrorType, next.ErrorCode = string(o.Reason), o.Status
	c.m[k] = &next
	return until.Sub(now), true
}
