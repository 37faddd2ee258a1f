package engine

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"
)

// familyKeyPrefix marks a lockout key that names a quota family rather than
// one model.
const familyKeyPrefix = "family:"

// lockKey names one model lockout: provider + connection + model key, where
// the model key is a model id or familyKeyPrefix + a quota family name.
type lockKey struct {
	provider, connection, model string
}

// lockEntry is one model lockout, as persisted. An entry whose Until has
// passed no longer excludes anything but keeps Count for escalation until
// the escalation window has passed too.
type lockEntry struct {
	Provider   string `json:"provider"`
	Connection string `json:"connection"`
	// Key is the locked model key: the model id, or "family:<name>".
	Key string `json:"key"`
	// Model is the model whose failure last set the lock.
	Model string `json:"model"`
	// Family is the quota family name when Key is a family.
	Family string `json:"family,omitempty"`
	Reason string `json:"reason"`
	Status int    `json:"status,omitempty"`
	// Count is the failure count behind the lock duration.
	Count         int       `json:"count"`
	Until         time.Time `json:"until"`
	LastFailureAt time.Time `json:"last_failure_at"`
}

// lockoutPolicy is the model lockout timing of the current settings.
type lockoutPolicy struct {
	base, max   time.Duration
	steps       int
	exponential bool
}

// newLockoutPolicy derives the timing from normalised settings.
func newLockoutPolicy(s ModelLockoutSettings) lockoutPolicy {
	return lockoutPolicy{
		base:        time.Duration(s.BaseCooldownMS) * time.Millisecond,
		max:         time.Duration(s.MaxCooldownMS) * time.Millisecond,
		steps:       s.MaxBackoffSteps,
		exponential: s.UseExponentialBackoff,
	}
}

// window is the escalation window: a failure within it after the previous
// lock ended escalates the count; a later one restarts the count at 1. It
// is the maximum cooldown, so that a lock at the ceiling is followed by
// another at the ceiling rather than falling back to the base.
func (p lockoutPolicy) window() time.Duration { return p.max }

// duration is the lock duration of the count-th failure: a rule's
// CooldownHint exactly; an upstream RetryHint longer than the base exactly;
// otherwise base × 2^(count−1) with at most steps doublings (base alone
// without exponential backoff). Always capped at max.
func (p lockoutPolicy) duration(count int, o Outcome) time.Duration {
	switch {
	case o.CooldownHint > 0:
		return min(o.CooldownHint, p.max)
	case o.RetryHint > p.base:
		return min(o.RetryHint, p.max)
	}
	d := p.base
	if p.exponential {
		for i := 1; i < count && i <= p.steps && d < p.max; i++ {
			d *= 2
		}
	}
	return min(d, p.max)
}

// quotaFamily is one compiled quota family of a provider.
type quotaFamily struct {
	name, key string
	patterns  []string
}

// quotaFamilies are a provider's quota families, sorted by name so that a
// model matching two families always resolves to the same one.
type quotaFamilies []quotaFamily

// compileFamilies checks and sorts a provider's quota family globs
// (path.Match syntax).
func compileFamilies(m map[string][]string) (quotaFamilies, error) {
	fams := make(quotaFamilies, 0, len(m))
	for name, pats := range m {
		for _, p := range pats {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("quota family %q: pattern %q: %w", name, p, err)
			}
		}
		fams = append(fams, quotaFamily{name: name, key: familyKeyPrefix + name, patterns: slices.Clone(pats)})
	}
	slices.SortFunc(fams, func(a, b quotaFamily) int { return cmp.Compare(a.name, b.name) })
	return fams, nil
}

// of returns the family model belongs to. It allocates nothing.
func (f quotaFamilies) of(model string) (quotaFamily, bool) {
	for _, fam := range f {
		for _, p := range fam.patterns {
			if ok, _ := path.Match(p, model); ok {
				return fam, true
			}
		}
	}
	return quotaFamily{}, false
}

// byName returns the family called name.
func (f quotaFamilies) byName(name string) (quotaFamily, bool) {
	for _, fam := range f {
		if fam.name == name {
			return fam, true
		}
	}
	return quotaFamily{}, false
}

// explicitScope reports whether o's scope was chosen by a rule rather than
// by the default classification.
func explicitScope(o Outcome) bool {
	return o.Scope != ScopeNone && o.RuleSource != "" && o.RuleSource != "default"
}

// MaxModelQuotaLockout caps the lockout of a model-scoped quota
// (docs/resilience.md §2/§3/§7, amendments).
const MaxModelQuotaLockout = 24 * time.Hour

// modelQuotaWait reports whether o is a quota or rate limit that a rule
// scoped to one model (a Gemini QuotaFailure naming the model, a
// per-model rate-limit header, a provider rule) and the wait it states:
// the rule's cooldown, else the upstream retry hint, else the body's typed
// google.rpc.RetryInfo delay (Outcome.BodyRetryHint; a prose hint in the
// body does not count). It is a pure function; Engine.ModelQuotaLockout
// applies the connection's pacing bound to the wait.
func modelQuotaWait(o Outcome) (time.Duration, bool) {
	if o.Success || o.Model == "" || o.Scope != ScopeModel || !explicitScope(o) {
		return 0, false
	}
	switch o.Reason {
	case ReasonQuotaExhausted, ReasonRateLimit:
	default:
		return 0, false
	}
	w := o.CooldownHint
	if w <= 0 {
		w = o.RetryHint
	}
	if w <= 0 && o.BodyRetryHintTyped {
		w = o.BodyRetryHint
	}
	return w, w > 0
}

// modelQuotaKey is the model key a model-scoped quota locks: the model's
// quota family when the provider declares one (the quota is shared), else
// the model.
func modelQuotaKey(o Outcome, fams quotaFamilies) (key, family string) {
	if fam, ok := fams.of(o.Model); ok {
		return fam.key, fam.name
	}
	return o.Model, ""
}

// lockoutApplies reports whether failure o creates or extends a model
// lockout under settings s: lockout enabled, a model known, and either a
// rule scoped the failure to the model or its status is one of
// error_codes; an empty answer always counts (it is a model failure on a
// 2xx). A rule's connection or provider scope wins over the status; a
// concurrency-limited 429 (a busy account), a ban (the whole connection is
// dead) and a tool-count refusal (only requests with that many tools fail:
// see Engine.ToolLimit) never lock a model, nor do client aborts and local
// errors.
func lockoutApplies(o Outcome, s *ModelLockoutSettings) bool {
	if !s.Enabled || o.Success || o.Model == "" {
		return false
	}
	switch o.Reason {
	case ReasonNone, ReasonClientAbort, ReasonLocalError, ReasonConcurrencyLimited, ReasonBanned, ReasonToolLimit,
		ReasonLocalTimeout:
		return false
	case ReasonEmptyResponse:
		return true
	}
	if explicitScope(o) {
		return o.Scope == ScopeModel
	}
	return slices.Contains(s.ErrorCodes, o.Status)
}

// lockoutKeyFor picks the model key failure o locks: a rule's model scope
// locks the exact model; 429, 403 and 402 (quota or entitlement) lock the
// model's quota family when it has one; anything else the exact model.
func lockoutKeyFor(o Outcome, fams quotaFamilies) (key, family string) {
	if explicitScope(o) {
		return o.Model, ""
	}
	switch o.Status {
	case 429, 403, 402:
		if fam, ok := fams.of(o.Model); ok {
			return fam.key, fam.name
		}
	}
	return o.Model, ""
}

// nextLockEntry applies failure o at now to the lock e (exists false: none)
// and returns the new entry and the lock duration it armed, 0 when the
// deadline did not move. A failure while the lock is active is one of the
// burst that set it: it neither escalates nor re-arms, and only a longer
// hint extends it (never shortens). Otherwise the count escalates when the
// previous lock ended within the escalation window, else restarts at 1.
func nextLockEntry(e lockEntry, exists bool, o Outcome, p lockoutPolicy, now time.Time) (lockEntry, time.Duration) {
	if exists && e.Until.After(now) {
		if o.CooldownHint <= 0 && o.RetryHint <= p.base {
			return e, 0
		}
		d := p.duration(e.Count, o)
		if until := now.Add(d); until.After(e.Until) {
			e.Until, e.Reason, e.Status, e.Model, e.LastFailureAt = until, string(o.Reason), o.Status, o.Model, now
			return e, d
		}
		return e, 0
	}
	count := 1
	if exists && now.Sub(e.Until) <= p.window() {
		count = e.Count + 1
	}
	d := p.duration(count, o)
	e.Count, e.Until, e.LastFailureAt = count, now.Add(d), now
	e.Reason, e.Status, e.Model = string(o.Reason), o.Status, o.Model
	return e, d
}

// lockouts holds every model lockout entry. It is goroutine-safe.
type lockouts struct {
	mu sync.RWMutex
	m  map[lockKey]*lockEntry
}

func newLockouts() *lockouts {
	return &lockouts{m: make(map[lockKey]*lockEntry)}
}

// recordFailure locks key (see nextLockEntry) and returns the entry, the
// duration armed (0 if the deadline did not move) and whether the entry
// changed.
func (l *lockouts) recordFailure(o Outcome, key, family string, p lockoutPolicy, now time.Time) (lockEntry, time.Duration, bool) {
	k := lockKey{o.Provider, o.Connection, key}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.m[k]
	base := lockEntry{Provider: o.Provider, Connection: o.Connection, Key: key, Family: family}
	if ok {
		base = *cur
	}
	next, d := nextLockEntry(base, ok, o, p, now)
	if ok && next == *cur {
		return next, 0, false
	}
	l.m[k] = &next
	return next, d, true
}

// recordSuccess decays the locks of model on a connection (its exact key
// and its quota family's): the count halves (floor), the lock is lifted,
// and an entry reaching 0 is deleted. It returns the changed keys; with no
// lock at all it takes a read lock and allocates nothing.
func (l *lockouts) recordSuccess(provider, connection, model string, fams quotaFamilies, clock Clock) []lockKey {
	l.mu.RLock()
	if len(l.m) == 0 {
		l.mu.RUnlock()
		return nil
	}
	exact := lockKey{provider, connection, model}
	_, hasExact := l.m[exact]
	fam, inFam := fams.of(model)
	famKey := lockKey{provider, connection, fam.key}
	hasFam := false
	if inFam {
		_, hasFam = l.m[famKey]
	}
	l.mu.RUnlock()
	if !hasExact && !hasFam {
		return nil
	}
	var changed []lockKey
	now := clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range [2]lockKey{exact, famKey} {
		e, ok := l.m[k]
		if !ok || (k == famKey && !inFam) {
			continue
		}
		e.Count /= 2
		if e.Count == 0 {
			delete(l.m, k)
		} else if e.Until.After(now) {
			e.Until = now
		}
		changed = append(changed, k)
	}
	return changed
}

// check reports the active lock of model on a connection at now, exact key
// first, then its quota family. It takes a read lock and allocates nothing.
func (l *lockouts) check(provider, connection, model string, fams quotaFamilies, now time.Time) (Exclusion, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.m) == 0 {
		return Exclusion{}, false
	}
	if e, ok := l.m[lockKey{provider, connection, model}]; ok && e.Until.After(now) {
		return Exclusion{Reason: ExclusionModelLockout, Until: e.Until, Detail: e.Reason}, true
	}
	if fam, ok := fams.of(model); ok {
		if e, ok := l.m[lockKey{provider, connection, fam.key}]; ok && e.Until.After(now) {
			return Exclusion{Reason: ExclusionModelLockout, Until: e.Until, Detail: e.Reason}, true
		}
	}
	return Exclusion{}, false
}

// get returns a copy of the entry of k.
func (l *lockouts) get(k lockKey) (lockEntry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.m[k]
	if !ok {
		return lockEntry{}, false
	}
	return *e, true
}

// restore installs a persisted entry.
func (l *lockouts) restore(e lockEntry) {
	l.mu.Lock()
	l.m[lockKey{e.Provider, e.Connection, e.Key}] = &e
	l.mu.Unlock()
}

// remove deletes the entries of keys and reports which existed and whether
// each was active at now.
func (l *lockouts) remove(keys []lockKey, now time.Time) (removed []lockKey, active int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		e, ok := l.m[k]
		if !ok {
			continue
		}
		if e.Until.After(now) {
			active++
		}
		delete(l.m, k)
		removed = append(removed, k)
	}
	return removed, active
}

// keysOf returns the keys of every entry of a connection, sorted; ""
// matches every provider or connection.
func (l *lockouts) keysOf(provider, connection string) []lockKey {
	l.mu.RLock()
	var keys []lockKey
	for k := range l.m {
		if (provider == "" || k.provider == provider) && (connection == "" || k.connection == connection) {
			keys = append(keys, k)
		}
	}
	l.mu.RUnlock()
	slices.SortFunc(keys, compareLockKeys)
	return keys
}

// active returns a copy of every entry still locking at now, sorted by
// provider, connection and key.
func (l *lockouts) active(now time.Time) []lockEntry {
	l.mu.RLock()
	var out []lockEntry
	for _, e := range l.m {
		if e.Until.After(now) {
			out = append(out, *e)
		}
	}
	l.mu.RUnlock()
	slices.SortFunc(out, func(a, b lockEntry) int {
		return compareLockKeys(lockKey{a.Provider, a.Connection, a.Key}, lockKey{b.Provider, b.Connection, b.Key})
	})
	return out
}

func compareLockKeys(a, b lockKey) int {
	return cmp.Or(cmp.Compare(a.provider, b.provider), cmp.Compare(a.connection, b.connection), cmp.Compare(a.model, b.model))
}

// storeTTL is how long the persisted entry should live at now: until the
// escalation window after its lock ends, when it would count as absent.
func (e *lockEntry) storeTTL(now time.Time, p lockoutPolicy) time.Duration {
	return max(e.Until.Sub(now), 0) + p.window() + time.Second
}
