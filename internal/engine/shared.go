package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// ErrStoreUnavailable is wrapped by the errors of a SharedStore that cannot
// reach its server (down, partitioned, timing out). The engine keeps
// routing on its local view then, and writes what changed meanwhile when
// the store is back (see Engine.Resync).
var ErrStoreUnavailable = errors.New("state store unavailable")

// SharedStore is a Store used by several gateway instances at once (the
// Redis store). New detects it and then shares the engine's state:
//
//   - every change that decides a transition (a failure, a success that
//     changed something) is applied atomically to the value in the store
//     with Swap, so N instances counting failures of one provider open its
//     breaker once, at the threshold one instance would;
//   - changes made by other instances reach this one through Watch, and
//     LoadKey or Resync install them in the local view that Check reads.
//
// Badger and memory stores are single-instance and do not implement it.
type SharedStore interface {
	Store
	// Swap is CompareAndSet that reports the current live value when it
	// does not swap: it sets key to value (nil deletes it) when the live
	// value equals old (nil: key absent) and returns swapped true;
	// otherwise it changes nothing and returns the live value (exists
	// false when absent). One round trip.
	Swap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (swapped bool, cur []byte, exists bool, err error)
	// Watch calls fn with every change other instances make to the store,
	// in order per key, and with ChangeResync whenever changes may have
	// been missed (at start, after a lost subscription, a gap found by the
	// periodic version check, or the store coming back); an error from fn
	// for either asks for another ChangeResync later. It returns when ctx
	// ends. fn is called from one goroutine at a time.
	Watch(ctx context.Context, fn func(Change) error) error
}

// ChangeKind says what a Change reports.
type ChangeKind uint8

// The kinds of Change.
const (
	// ChangeKey: another instance changed Change.Key; re-read it.
	ChangeKey ChangeKind = iota + 1
	// ChangeResync: changes may have been missed; reload every local view
	// from the store.
	ChangeResync
	// ChangeDown: the store became unreachable (Change.Err says why).
	ChangeDown
	// ChangeUp: the store is reachable again; a ChangeResync follows.
	ChangeUp
)

// Change is one event of SharedStore.Watch.
type Change struct {
	Kind ChangeKind
	// Key is the changed key (ChangeKey only).
	Key string
	// SentAt is when the other instance wrote the key, by its wall clock
	// (ChangeKey only; zero when unknown).
	SentAt time.Time
	// Err is why the store is unreachable (ChangeDown only). It never
	// contains credentials.
	Err error
}

// KeyGroup is the group of a store key: every key of one group is kept
// together (one Redis Cluster hash slot), so an atomic script may touch
// several keys of a group. The breaker, window gate, cooldowns and lockouts
// of one provider form one group ("provider:" and the escaped provider
// id); any other key's group is its first path segment ("lease",
// "affinity", "settings", ...), or the whole key when it has no "/".
func KeyGroup(key string) string {
	for _, p := range providerKeyPrefixes {
		if rest, ok := strings.CutPrefix(key, p); ok {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				rest = rest[:i]
			}
			return "provider:" + rest
		}
	}
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// PrefixGroup returns the group of every key that starts with prefix
// (see KeyGroup), when the prefix decides it: "cooldown/openai/" does,
// "cooldown/" does not (its keys belong to every provider's group).
func PrefixGroup(prefix string) (string, bool) {
	for _, p := range providerKeyPrefixes {
		if rest, ok := strings.CutPrefix(prefix, p); ok {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				return "provider:" + rest[:i], true
			}
			return "", false
		}
		if strings.HasPrefix(p, prefix) {
			return "", false
		}
	}
	if i := strings.IndexByte(prefix, '/'); i >= 0 {
		return prefix[:i], true
	}
	return "", false
}

// providerKeyPrefixes are the engine's per-provider key prefixes.
var providerKeyPrefixes = [...]string{keyBreaker, keyWindowGate, keyCooldown, keyLockout}

// Shared-state limits.
const (
	// sharedCallTimeout bounds one store call of the failure path and of
	// the background writes, so a slow store never holds a request long.
	sharedCallTimeout = time.Second
	// maxSwapAttempts bounds the compare-and-swap retries of one change;
	// each lost race means another instance committed meanwhile.
	maxSwapAttempts = 64
	// maxPendingWrites bounds the background writes waiting; beyond it a
	// change is kept locally and written by the next Resync.
	maxPendingWrites = 4096
)

// known is what the engine last saw stored under one key.
type known struct {
	raw []byte
	// seq orders the observations, so a Resync never installs a value it
	// scanned before a newer one was committed.
	seq uint64
}

// sharedState is the engine's bookkeeping for a SharedStore. Its fields
// are guarded by mu; the background writes by pendMu.
type sharedState struct {
	store SharedStore

	mu    sync.Mutex
	known map[string]known // absent: believed absent from the store
	seq   uint64
	dirty map[string]struct{} // changed locally while the store was unavailable

	pendMu   sync.Mutex
	pending  []func(context.Context) error
	draining bool
	idle     *sync.Cond // signalled when the queue drains
}

func newSharedState(s SharedStore) *sharedState {
	sh := &sharedState{store: s, known: make(map[string]known), dirty: make(map[string]struct{})}
	sh.idle = sync.NewCond(&sh.pendMu)
	return sh
}

// expected returns the value key is believed to hold (nil: absent) and the
// observation's sequence number.
func (sh *sharedState) expected(key string) ([]byte, uint64) {
	sh.mu.Lock()
	k := sh.known[key]
	sh.mu.Unlock()
	return k.raw, k.seq
}

// observe records that key holds raw (nil: absent) in the store.
func (sh *sharedState) observe(key string, raw []byte) {
	sh.mu.Lock()
	sh.seq++
	if raw == nil {
		delete(sh.known, key)
	} else {
		sh.known[key] = known{raw: raw, seq: sh.seq}
	}
	delete(sh.dirty, key)
	sh.mu.Unlock()
}

// observeIfNotNewer records raw for key only when no observation newer
// than seq was made since (Resync's scan against concurrent commits), and
// reports whether it did.
func (sh *sharedState) observeIfNotNewer(key string, raw []byte, seq uint64) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if k, ok := sh.known[key]; ok && k.seq > seq {
		return false
	}
	if _, ok := sh.dirty[key]; ok {
		return false
	}
	sh.seq++
	if raw == nil {
		delete(sh.known, key)
	} else {
		sh.known[key] = known{raw: raw, seq: sh.seq}
	}
	return true
}

// markDirty notes that key changed locally without reaching the store.
func (sh *sharedState) markDirty(key string) {
	sh.mu.Lock()
	sh.dirty[key] = struct{}{}
	sh.mu.Unlock()
}

// takeDirty returns and forgets the dirty keys.
func (sh *sharedState) takeDirty() []string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := make([]string, 0, len(sh.dirty))
	for k := range sh.dirty {
		out = append(out, k)
	}
	clear(sh.dirty)
	return out
}

// knownKeys returns the keys with prefix believed present, and the current
// sequence number.
func (sh *sharedState) knownKeys(prefix string) ([]string, uint64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var out []string
	for k := range sh.known {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out, sh.seq
}

// later queues a background write; it reports false when the queue is
// full (the caller keeps the change for the next Resync).
func (sh *sharedState) later(fn func(context.Context) error, onErr func(error)) bool {
	sh.pendMu.Lock()
	defer sh.pendMu.Unlock()
	if len(sh.pending) >= maxPendingWrites {
		return false
	}
	sh.pending = append(sh.pending, func(ctx context.Context) error {
		if err := fn(ctx); err != nil {
			onErr(err)
		}
		return nil
	})
	if !sh.draining {
		sh.draining = true
		go sh.drain()
	}
	return true
}

// drain runs the queued writes in order until the queue is empty.
func (sh *sharedState) drain() {
	for {
		sh.pendMu.Lock()
		batch := sh.pending
		sh.pending = nil
		if len(batch) == 0 {
			sh.draining = false
			sh.idle.Broadcast()
			sh.pendMu.Unlock()
			return
		}
		sh.pendMu.Unlock()
		for _, fn := range batch {
			_ = fn(context.Background())
		}
	}
}

// flush waits until every queued write has run.
func (sh *sharedState) flush() {
	sh.pendMu.Lock()
	for sh.draining {
		sh.idle.Wait()
	}
	sh.pendMu.Unlock()
}

// boundedCtx bounds one store call of the shared path.
func boundedCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, sharedCallTimeout)
}
