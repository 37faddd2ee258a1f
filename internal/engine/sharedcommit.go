package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Shared mode (a SharedStore, see shared.go): how each change reaches the
// store, and how changes of other instances reach the local view.
//
// A change is an operation on one key's state (a breaker failure, a
// cooldown, a lockout decay...). It is applied to a shadow copy of the
// state built from the value this instance believes stored, and the
// result is swapped in with SharedStore.Swap, expecting that value: one
// round trip when the belief is right. When another instance committed
// first, Swap returns the current value, which is installed locally, and
// the operation is applied again to it (one more round trip per lost
// race). The operation itself is the same code that runs in memory in
// single-instance mode, so the rules of docs/resilience.md hold across
// instances: N instances failing at once count every failure once, open a
// breaker once at its threshold, and extend a connection cooldown once per
// burst. A change that leaves the state as it is writes nothing.
//
// While the store is unavailable the operation is applied to the local
// view only, the key is remembered as dirty, and Resync writes it when the
// store is back (unless another instance changed the key meanwhile: the
// acknowledged value in the store wins).

// swapStep computes, from the value believed stored (nil: absent), the
// value to store (nil: delete) and its TTL, or changed false when the
// operation leaves the state as it is.
type swapStep func(cur []byte) (next []byte, ttl time.Duration, changed bool)

// commit applies step to key atomically in the shared store under the
// key's write lock and installs the stored result with install.
func (e *Engine) commit(ctx context.Context, key string, step swapStep, install func(raw []byte)) error {
	mu := &e.writeLocks[stripe(key)]
	mu.Lock()
	defer mu.Unlock()
	cur, _ := e.shared.expected(key)
	for range maxSwapAttempts {
		next, ttl, changed := step(cur)
		if !changed {
			return nil
		}
		cctx, cancel := boundedCtx(ctx)
		swapped, now, exists, err := e.shared.store.Swap(cctx, key, cur, next, ttl)
		cancel()
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		if swapped {
			e.shared.observe(key, next)
			install(next)
			return nil
		}
		if !exists {
			now = nil
		}
		e.shared.observe(key, now)
		install(now)
		cur = now
	}
	return fmt.Errorf("write %s: %d compare-and-swap races lost in a row", key, maxSwapAttempts)
}

// unavailable reports whether err means the store could not be reached
// (the change is then kept locally until Resync).
func unavailable(err error) bool {
	return errors.Is(err, ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// settle finishes a shared change: on an unavailable store it applies the
// operation to the local view (unless applied, as the success path did
// already) and marks key dirty; other errors are returned.
func (e *Engine) settle(key string, err error, applied bool, local func()) error {
	if err == nil {
		return nil
	}
	if !unavailable(err) {
		return err
	}
	if !applied {
		local()
	}
	e.shared.markDirty(key)
	return nil
}

// updateBreaker applies op to provider ps's breaker and writes the result:
// in memory then to the store in single-instance mode, atomically in the
// store then in memory in shared mode (applied: op already ran on the
// local view, as the success path does).
func (e *Engine) updateBreaker(ctx context.Context, ps *providerState, op func(*breakers), applied bool) error {
	if e.shared == nil {
		op(e.breakers)
		return e.persistBreaker(ctx, ps, selfHealing)
	}
	key := keyBreaker + url.PathEscape(ps.id)
	cfg := e.breakers.config(ps.id)
	var trans []BreakerTransition
	step := func(cur []byte) ([]byte, time.Duration, bool) {
		trans = trans[:0]
		b := newBreakers(e.clock)
		b.Configure(ps.id, cfg)
		var snap BreakerSnapshot
		if cur != nil && json.Unmarshal(cur, &snap) == nil {
			b.Restore(ps.id, snap)
		}
		var last *BreakerSnapshot
		b.OnChange(func(_ string, s BreakerSnapshot, t *BreakerTransition) {
			last = &s
			if t != nil {
				trans = append(trans, *t)
			}
		})
		op(b)
		if last == nil {
			return nil, 0, false
		}
		return mustJSON(sharedBreakerSnapshot(*last)), 0, true
	}
	err := e.commit(ctx, key, step, func(raw []byte) { e.installBreaker(ps.id, raw) })
	if err == nil && len(trans) > 0 {
		if fn := e.obs().OnBreakerTransition; fn != nil {
			for _, t := range trans {
				fn(ps.id, string(t.From), string(t.To))
			}
		}
	}
	return e.settle(key, err, applied, func() { op(e.breakers) })
}

// updateGate is updateBreaker for provider ps's window gate.
func (e *Engine) updateGate(ctx context.Context, ps *providerState, op func(*windowGate), applied bool) error {
	if e.shared == nil {
		op(e.gate)
		return e.persistGate(ctx, ps, selfHealing)
	}
	key := keyWindowGate + url.PathEscape(ps.id)
	cfg := e.gate.config(ps.id)
	step := func(cur []byte) ([]byte, time.Duration, bool) {
		g := newWindowGate(e.clock)
		g.Configure(ps.id, cfg)
		var snap windowGateSnapshot
		if cur != nil && json.Unmarshal(cur, &snap) == nil {
			g.Restore(ps.id, snap)
		}
		changed := false
		g.OnChange(func(string, windowGateSnapshot) { changed = true })
		op(g)
		if !changed {
			return nil, 0, false
		}
		v, _, ok := gateValue(g.Snapshot(ps.id))
		return v, 0, ok || cur != nil
	}
	err := e.commit(ctx, key, step, func(raw []byte) { e.installGate(ps.id, raw) })
	return e.settle(key, err, applied, func() { op(e.gate) })
}

// updateConn applies op to one connection's cooldown state; op reports
// whether it changed the state (results it computes are captured by the
// caller: the last call of op is the one that counted).
func (e *Engine) updateConn(ctx context.Context, provider, connection string, op func(*cooldowns) bool, applied bool) error {
	key := connStoreKey(provider, connection)
	if e.shared == nil {
		if !op(e.cooldowns) {
			return nil
		}
		return e.persistConn(ctx, provider, connection, selfHealing)
	}
	step := func(cur []byte) ([]byte, time.Duration, bool) {
		c := newCooldowns()
		var st connState
		if cur != nil && json.Unmarshal(cur, &st) == nil && st.Provider != "" && st.Connection != "" {
			c.restore(st)
		}
		if !op(c) {
			return nil, 0, false
		}
		v, ttl, ok := e.connValue(c, provider, connection)
		return v, ttl, ok || cur != nil
	}
	err := e.commit(ctx, key, step, func(raw []byte) { e.installConn(provider, connection, raw) })
	return e.settle(key, err, applied, func() { op(e.cooldowns) })
}

// updateLock is updateConn for one model lockout entry.
func (e *Engine) updateLock(ctx context.Context, k lockKey, op func(*lockouts) bool, applied bool) error {
	key := lockStoreKey(k)
	if e.shared == nil {
		if !op(e.lockouts) {
			return nil
		}
		return e.persistLock(ctx, k, selfHealing)
	}
	step := func(cur []byte) ([]byte, time.Duration, bool) {
		l := newLockouts()
		var le lockEntry
		if cur != nil && json.Unmarshal(cur, &le) == nil && le.Provider != "" && le.Key != "" {
			l.restore(le)
		}
		if !op(l) {
			return nil, 0, false
		}
		v, ttl, ok := e.lockValue(l, k)
		return v, ttl, ok || cur != nil
	}
	err := e.commit(ctx, key, step, func(raw []byte) { e.installLock(k, raw) })
	return e.settle(key, err, applied, func() { op(e.lockouts) })
}

// shareSuccess is RecordSuccess in shared mode, after the breaker and the
// window gate counted the success locally: every piece of state the
// success changed in the local view is queued for a background atomic
// write, so the success path itself never waits for the store. A clean
// target queues nothing and allocates nothing (the closures are built in
// the helpers below, only for state that changed).
func (e *Engine) shareSuccess(ps *providerState, provider, connection, model string) {
	// Load before Swap: the clean path only reads the flags, so
	// concurrent successes do not bounce their cache line between cores.
	if ps != nil && ps.breakerDirty.Load() && ps.breakerDirty.Swap(false) {
		e.breakerSuccessLater(ps)
	}
	if ps != nil && ps.gateDirty.Load() && ps.gateDirty.Swap(false) {
		e.gateSuccessLater(ps)
	}
	if e.cooldowns.recordSuccess(provider, connection) {
		e.connSuccessLater(provider, connection)
	}
	var fams quotaFamilies
	if ps != nil {
		fams = ps.families
	}
	for _, k := range e.lockouts.recordSuccess(provider, connection, model, fams, e.clock) {
		e.lockSuccessLater(k, model, fams)
	}
}

func (e *Engine) breakerSuccessLater(ps *providerState) {
	e.writeLater(keyBreaker+url.PathEscape(ps.id), func() error {
		return e.updateBreaker(context.Background(), ps, func(b *breakers) { b.RecordSuccess(ps.id) }, true)
	})
}

func (e *Engine) gateSuccessLater(ps *providerState) {
	e.writeLater(keyWindowGate+url.PathEscape(ps.id), func() error {
		return e.updateGate(context.Background(), ps, func(g *windowGate) { g.RecordSuccess(ps.id) }, true)
	})
}

func (e *Engine) connSuccessLater(provider, connection string) {
	e.writeLater(connStoreKey(provider, connection), func() error {
		return e.updateConn(context.Background(), provider, connection,
			func(c *cooldowns) bool { return c.recordSuccess(provider, connection) }, true)
	})
}

func (e *Engine) lockSuccessLater(k lockKey, model string, fams quotaFamilies) {
	e.writeLater(lockStoreKey(k), func() error {
		return e.updateLock(context.Background(), k, func(l *lockouts) bool {
			return len(l.recordSuccess(k.provider, k.connection, model, fams, e.clock)) > 0
		}, true)
	})
}

// writeLater queues a background write of key; when the queue is full the
// key is left for the next Resync.
func (e *Engine) writeLater(key string, write func() error) {
	queued := e.shared.later(func(context.Context) error { return write() }, func(err error) {
		e.log.Error("writing shared state after a success failed", "key", key, "error", err)
	})
	if !queued {
		e.shared.markDirty(key)
	}
}

// Flush waits until the background writes of shared mode (the state
// changes of successes) have reached the store. It does nothing in
// single-instance mode.
func (e *Engine) Flush() {
	if e.shared != nil {
		e.shared.flush()
	}
}

// Shared reports whether the engine shares its state with other gateway
// instances through a SharedStore.
func (e *Engine) Shared() bool { return e.shared != nil }

// LoadKey re-reads key from the store and installs it in the local view:
// the receiving end of a change another instance made. It reports whether
// key is one of the engine's (a breaker, window gate, cooldown, lockout,
// learned tool limit or the settings patch); other keys are left to their
// owners.
func (e *Engine) LoadKey(ctx context.Context, key string) (bool, error) {
	if key == SettingsKey {
		return true, e.ReloadSettings(ctx)
	}
	if strings.HasPrefix(key, keyToolLimit) {
		return true, e.loadToolLimit(ctx, key)
	}
	if !isStateKey(key) {
		return false, nil
	}
	mu := &e.writeLocks[stripe(key)]
	mu.Lock()
	defer mu.Unlock()
	raw, ok, err := e.store.Get(ctx, key)
	if err != nil {
		return true, fmt.Errorf("engine: load %s: %w", key, err)
	}
	if !ok {
		raw = nil
	}
	if e.shared != nil {
		e.shared.observe(key, raw)
	}
	e.installKey(key, raw)
	return true, nil
}

// ReloadSettings re-reads the persisted settings patch, applies it to the
// base settings and reconfigures the breakers and window gates: the
// receiving end of PATCH /api/resilience on another instance.
func (e *Engine) ReloadSettings(ctx context.Context) error {
	e.settingsMu.Lock()
	defer e.settingsMu.Unlock()
	prev := e.patch
	e.patch = nil
	s, err := e.loadSettings(ctx)
	if err != nil {
		e.patch = prev
		return err
	}
	e.settings.Store(&s)
	for _, ps := range e.allProviders() {
		e.configureProvider(ps, &s)
	}
	return nil
}

// Resync brings the local view in line with the store after changes may
// have been missed (the store was unreachable, the change notices were
// interrupted): it first writes the keys that changed here while the
// store was unavailable — each only if the store still holds what this
// instance last saw there, else the store's value wins — then reloads the
// settings, the learned tool limits and every breaker, window gate,
// cooldown and lockout, dropping what the store no longer holds. In
// single-instance mode it does nothing.
func (e *Engine) Resync(ctx context.Context) error {
	if e.shared == nil {
		return nil
	}
	if err := e.flushDirty(ctx); err != nil {
		return err
	}
	if err := e.ReloadSettings(ctx); err != nil {
		return err
	}
	if err := e.reloadToolLimits(ctx); err != nil {
		return err
	}
	for _, prefix := range providerKeyPrefixes {
		present, seq := e.shared.knownKeys(prefix)
		kvs, err := e.store.Scan(ctx, prefix)
		if err != nil {
			return fmt.Errorf("engine: resync %s*: %w", prefix, err)
		}
		seen := make(map[string]bool, len(kvs))
		for _, kv := range kvs {
			seen[kv.Key] = true
			e.resyncKey(kv.Key, kv.Value, seq)
		}
		for _, k := range present {
			if !seen[k] {
				e.resyncKey(k, nil, seq)
			}
		}
	}
	return nil
}

// resyncKey installs raw for key unless a newer observation (a commit or a
// notice) came in since the scan started at seq.
func (e *Engine) resyncKey(key string, raw []byte, seq uint64) {
	mu := &e.writeLocks[stripe(key)]
	mu.Lock()
	defer mu.Unlock()
	if cur, _ := e.shared.expected(key); raw != nil && string(cur) == string(raw) {
		return
	}
	if e.shared.observeIfNotNewer(key, raw, seq) {
		e.installKey(key, raw)
	}
}

// flushDirty writes the keys changed locally while the store was
// unavailable, each expecting the value last seen in the store.
func (e *Engine) flushDirty(ctx context.Context) error {
	keys := e.shared.takeDirty()
	for i, key := range keys {
		if err := e.flushKey(ctx, key); err != nil {
			for _, k := range keys[i:] {
				e.shared.markDirty(k)
			}
			return fmt.Errorf("engine: resync %s: %w", key, err)
		}
	}
	return nil
}

func (e *Engine) flushKey(ctx context.Context, key string) error {
	mu := &e.writeLocks[stripe(key)]
	mu.Lock()
	defer mu.Unlock()
	v, ttl, ok, err := e.localValue(key)
	if err != nil {
		return err
	}
	if !ok {
		v = nil
	}
	exp, _ := e.shared.expected(key)
	cctx, cancel := boundedCtx(ctx)
	swapped, cur, exists, err := e.shared.store.Swap(cctx, key, exp, v, ttl)
	cancel()
	switch {
	case err != nil:
		return err
	case swapped:
		e.shared.observe(key, v)
	default:
		if !exists {
			cur = nil
		}
		e.log.Info("a change made while the state store was unreachable lost to a newer one in the store", "key", key)
		e.shared.observe(key, cur)
		e.installKey(key, cur)
	}
	return nil
}

// isStateKey reports whether key holds a breaker, window gate, cooldown or
// lockout.
func isStateKey(key string) bool {
	for _, p := range providerKeyPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// splitStateKey splits a breaker, window gate, cooldown or lockout key into
// its prefix and unescaped parts.
func splitStateKey(key string) (prefix string, parts []string, ok bool) {
	for _, p := range providerKeyPrefixes {
		rest, found := strings.CutPrefix(key, p)
		if !found {
			continue
		}
		want := map[string]int{keyBreaker: 1, keyWindowGate: 1, keyCooldown: 2, keyLockout: 3}[p]
		raw := strings.Split(rest, "/")
		if len(raw) != want {
			return "", nil, false
		}
		for _, r := range raw {
			s, err := url.PathUnescape(r)
			if err != nil || s == "" {
				return "", nil, false
			}
			parts = append(parts, s)
		}
		return p, parts, true
	}
	return "", nil, false
}

// installKey installs the stored value raw (nil: absent) of a state key in
// the local view. Must hold the key's write lock.
func (e *Engine) installKey(key string, raw []byte) {
	prefix, parts, ok := splitStateKey(key)
	if !ok {
		e.log.Warn("ignoring a state key of unknown shape", "key", key)
		return
	}
	switch prefix {
	case keyBreaker:
		e.installBreaker(parts[0], raw)
	case keyWindowGate:
		e.installGate(parts[0], raw)
	case keyCooldown:
		e.installConn(parts[0], parts[1], raw)
	case keyLockout:
		e.installLock(lockKey{parts[0], parts[1], parts[2]}, raw)
	}
}

// installBreaker replaces provider's local breaker with the stored
// snapshot raw (nil: a clean CLOSED breaker), keeping a HALF_OPEN probe
// this instance has in flight.
func (e *Engine) installBreaker(provider string, raw []byte) {
	snap := BreakerSnapshot{State: StateClosed}
	if raw != nil {
		if err := json.Unmarshal(raw, &snap); err != nil {
			e.log.Warn("skipping unreadable state entry", "provider", provider, "error", err)
			return
		}
	}
	e.providerFor(provider, "")
	e.breakers.restoreKeepProbe(provider, snap)
}

// installGate replaces provider's local window gate with raw (nil: empty).
func (e *Engine) installGate(provider string, raw []byte) {
	var snap windowGateSnapshot
	if raw != nil {
		if err := json.Unmarshal(raw, &snap); err != nil {
			e.log.Warn("skipping unreadable state entry", "provider", provider, "error", err)
			return
		}
	}
	e.providerFor(provider, "")
	e.gate.Restore(provider, snap)
}

// installConn replaces a connection's local cooldown state with raw (nil:
// clean).
func (e *Engine) installConn(provider, connection string, raw []byte) {
	if raw == nil {
		e.cooldowns.clear(provider, connection, true)
		return
	}
	var st connState
	if err := json.Unmarshal(raw, &st); err != nil || st.Provider != provider || st.Connection != connection {
		e.log.Warn("skipping unreadable state entry", "provider", provider, "connection", connection, "error", err)
		return
	}
	e.cooldowns.restore(st)
}

// installLock replaces a local lockout entry with raw (nil: none).
func (e *Engine) installLock(k lockKey, raw []byte) {
	if raw == nil {
		e.lockouts.remove([]lockKey{k}, e.clock.Now())
		return
	}
	var le lockEntry
	if err := json.Unmarshal(raw, &le); err != nil || le.Provider != k.provider || le.Connection != k.connection || le.Key != k.model {
		e.log.Warn("skipping unreadable state entry", "provider", k.provider, "connection", k.connection, "model", k.model, "error", err)
		return
	}
	e.lockouts.restore(le)
}

// localValue encodes the local state of key as it is persisted; ok false
// means the key should be absent.
func (e *Engine) localValue(key string) (v []byte, ttl time.Duration, ok bool, err error) {
	prefix, parts, ok := splitStateKey(key)
	if !ok {
		return nil, 0, false, fmt.Errorf("unknown state key %q", key)
	}
	switch prefix {
	case keyBreaker:
		v, err := json.Marshal(sharedBreakerSnapshot(e.breakers.Peek(parts[0])))
		return v, 0, true, err
	case keyWindowGate:
		v, ttl, ok := gateValue(e.gate.Snapshot(parts[0]))
		return v, ttl, ok, nil
	case keyCooldown:
		v, ttl, ok := e.connValue(e.cooldowns, parts[0], parts[1])
		return v, ttl, ok, nil
	default:
		v, ttl, ok := e.lockValue(e.lockouts, lockKey{parts[0], parts[1], parts[2]})
		return v, ttl, ok, nil
	}
}

// sharedBreakerSnapshot is the stored form of a breaker in shared mode:
// a HALF_OPEN probe claim belongs to the instance that made it and is not
// stored.
func sharedBreakerSnapshot(s BreakerSnapshot) BreakerSnapshot {
	s.ProbeAt = time.Time{}
	return s
}

// gateValue encodes a window gate snapshot; ok false when it is empty (the
// key is deleted).
func gateValue(snap windowGateSnapshot) ([]byte, time.Duration, bool) {
	if snap.CoolingUntil.IsZero() && len(snap.Failures) == 0 && len(snap.Last) == 0 {
		return nil, 0, false
	}
	return mustJSON(snap), 0, true
}

// connValue encodes a connection's state in c and its store TTL; ok false
// when it has none.
func (e *Engine) connValue(c *cooldowns, provider, connection string) ([]byte, time.Duration, bool) {
	st, ok := c.get(provider, connection)
	if !ok {
		return nil, 0, false
	}
	return mustJSON(st), st.storeTTL(e.clock.Now()), true
}

// lockValue encodes lockout entry k of l and its store TTL; ok false when
// there is none.
func (e *Engine) lockValue(l *lockouts, k lockKey) ([]byte, time.Duration, bool) {
	le, ok := l.get(k)
	if !ok {
		return nil, 0, false
	}
	pol := newLockoutPolicy(e.settings.Load().ModelLockout)
	return mustJSON(le), le.storeTTL(e.clock.Now(), pol), true
}

// connStoreKey is the store key of a connection's cooldown state.
func connStoreKey(provider, connection string) string {
	return keyCooldown + url.PathEscape(provider) + "/" + url.PathEscape(connection)
}

// lockStoreKey is the store key of a lockout entry.
func lockStoreKey(k lockKey) string {
	return keyLockout + url.PathEscape(k.provider) + "/" + url.PathEscape(k.connection) + "/" + url.PathEscape(k.model)
}

// mustJSON encodes a state value; the engine's state types always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("engine: encoding state: " + err.Error())
	}
	return b
}

// config returns provider's breaker configuration.
func (b *breakers) config(provider string) breakerConfig {
	br, _ := b.ensure(provider)
	br.mu.Lock()
	defer br.mu.Unlock()
	return br.cfg
}

// restoreKeepProbe is Restore that keeps a HALF_OPEN probe claimed by this
// instance while the restored state is HALF_OPEN too.
func (b *breakers) restoreKeepProbe(provider string, s BreakerSnapshot) {
	br, _ := b.ensure(provider)
	br.mu.Lock()
	probe := br.probeAt
	if br.state != StateHalfOpen {
		probe = time.Time{}
	}
	br.mu.Unlock()
	b.Restore(provider, s)
	if !probe.IsZero() {
		br.mu.Lock()
		if br.state == StateHalfOpen && br.probeAt.IsZero() {
			br.probeAt = probe
		}
		br.mu.Unlock()
	}
}

// loadToolLimit installs the stored tool limit of key (absent: none). A
// learned limit is a hint, written whole (the last writer wins).
func (e *Engine) loadToolLimit(ctx context.Context, key string) error {
	p, m, ok := strings.Cut(strings.TrimPrefix(key, keyToolLimit), "/")
	provider, err1 := url.PathUnescape(p)
	model, err2 := url.PathUnescape(m)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("engine: tool limit key %q of unknown shape", key)
	}
	raw, found, err := e.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("engine: load %s: %w", key, err)
	}
	var l ToolLimitInfo
	if found {
		if err := json.Unmarshal(raw, &l); err != nil || l.Provider != provider || l.Model != model {
			e.log.Warn("skipping unreadable state entry", "key", key, "error", err)
			return nil
		}
	}
	k := modelKey{provider, model}
	e.tools.mu.Lock()
	if found {
		e.tools.limits[k] = &l
	} else {
		delete(e.tools.limits, k)
	}
	e.tools.mu.Unlock()
	return nil
}

// reloadToolLimits replaces the learned tool limits with the stored ones,
// read into a fresh set (loadToolLimits fills its set unlocked) and
// swapped in under the lock.
func (e *Engine) reloadToolLimits(ctx context.Context) error {
	fresh := &Engine{store: e.store, log: e.log, tools: newToolLimits()}
	if err := fresh.loadToolLimits(ctx); err != nil {
		return err
	}
	e.tools.mu.Lock()
	e.tools.limits = fresh.tools.limits
	e.tools.mu.Unlock()
	return nil
}
