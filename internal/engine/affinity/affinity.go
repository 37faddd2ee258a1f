// Package affinity implements session affinity (docs/resilience.md §2c): a
// client session is pinned to one connection, for any provider, for
// session_affinity_ttl_ms. It is a soft preference: the gateway unpins a
// pinned connection that fails, cools down or times out, and the session
// re-pins to a healthy one. Pins are persisted in the engine.Store; an
// in-memory cache in front of it keeps the lookup on the request path cheap.
package affinity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// Headers are the session headers, in precedence order. They are never
// forwarded upstream: the gateway strips every one of them.
var Headers = []string{"X-Session-Id", "x-codex-session-id", "x-breakwater-session"}

// MaxTTL caps session_affinity_ttl_ms (24 h).
const MaxTTL = 24 * time.Hour

// MaxSessionIDLen is the longest session id kept verbatim; a longer one is
// replaced by its hash.
const MaxSessionIDLen = 256

// keyPrefix prefixes the store key of a pin: affinity/<sha256 hex of the
// session id>.
const keyPrefix = "affinity/"

// maxCached bounds the in-memory cache; the store stays the truth.
const maxCached = 1 << 16

// SessionID returns the client session id of a request: the first
// non-empty (after trimming) of the Headers, read through get. An id longer
// than MaxSessionIDLen bytes is replaced by "sha256:" and its hex digest.
// It returns "" when the request names no session.
func SessionID(get func(header string) string) string {
	for _, h := range Headers {
		v := strings.TrimSpace(get(h))
		if v == "" {
			continue
		}
		if len(v) > MaxSessionIDLen {
			sum := sha256.Sum256([]byte(v))
			return "sha256:" + hex.EncodeToString(sum[:])
		}
		return v
	}
	return ""
}

// record is a persisted pin, and also the cached one.
type record struct {
	Connection string    `json:"connection"`
	TTLMS      int64     `json:"ttl_ms"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// ttl is the pin's TTL.
func (r record) ttl() time.Duration { return time.Duration(r.TTLMS) * time.Millisecond }

// Pins maps sessions to pinned connections. Pins are persisted; Get reads
// an in-memory cache and loads from the store on a miss. When several
// gateway instances share the store, each drops a cached pin another
// instance changed when it is told (Forget, ForgetAll); until then it may
// lag: affinity is a preference, not a fence. Likewise two concurrent Pins of one session to
// different connections leave the last store write in the store and may
// leave the other in this instance's cache until the next Pin or Unpin.
// Pins is goroutine-safe.
type Pins struct {
	store engine.Store
	clock engine.Clock

	mu    sync.Mutex
	cache map[string]record // by session hash
	// version counts mutations; a load from the store is cached only if
	// no mutation happened meanwhile, so it cannot resurrect a stale pin.
	version uint64
}

// New returns Pins persisted in store, judging TTLs with clock.
func New(store engine.Store, clock engine.Clock) *Pins {
	return &Pins{store: store, clock: clock, cache: make(map[string]record)}
}

// Get returns the connection ref session is pinned to. A store error reads
// as no pin (the preference is simply lost for this request).
func (p *Pins) Get(ctx context.Context, session string) (connRef string, ok bool) {
	if session == "" {
		return "", false
	}
	h := hashSession(session)
	now := p.clock.Now()
	p.mu.Lock()
	if r, hit := p.cache[h]; hit {
		if now.Before(r.ExpiresAt) {
			p.mu.Unlock()
			return r.Connection, true
		}
		delete(p.cache, h)
	}
	v := p.version
	p.mu.Unlock()

	raw, found, err := p.store.Get(ctx, keyPrefix+h)
	if err != nil || !found {
		return "", false
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil || r.Connection == "" || !now.Before(r.ExpiresAt) {
		return "", false
	}
	p.mu.Lock()
	if _, hit := p.cache[h]; !hit && p.version == v {
		p.insert(h, r, now)
	}
	p.mu.Unlock()
	return r.Connection, true
}

// Pin pins session to connRef for ttl, persisted under
// affinity/<session hash>. A ttl of 0 means affinity is off: nothing is
// done. A ttl over MaxTTL is clamped to it. Re-confirming the same pin
// with the same ttl within ttl/4 of its last write does not write the
// store: the pin's expiry slides in steps of at most ttl/4.
func (p *Pins) Pin(ctx context.Context, session, connRef string, ttl time.Duration) error {
	if ttl <= 0 || session == "" || connRef == "" {
		return nil
	}
	ttl = min(ttl, MaxTTL)
	h := hashSession(session)
	now := p.clock.Now()
	p.mu.Lock()
	if r, hit := p.cache[h]; hit && r.Connection == connRef && r.ttl() == ttl &&
		now.Before(r.ExpiresAt) && now.Sub(r.ExpiresAt.Add(-ttl)) < ttl/4 {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()

	r := record{Connection: connRef, TTLMS: ttl.Milliseconds(), ExpiresAt: now.Add(ttl)}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode session pin: %w", err)
	}
	if err := p.store.Put(ctx, keyPrefix+h, b, ttl); err != nil {
		return fmt.Errorf("persist session pin: %w", err)
	}
	p.mu.Lock()
	p.version++
	p.insert(h, r, now)
	p.mu.Unlock()
	return nil
}

// Unpin removes session's pin, whatever connection it names.
func (p *Pins) Unpin(ctx context.Context, session string) error {
	if session == "" {
		return nil
	}
	h := hashSession(session)
	p.forget(h)
	err := p.store.Delete(ctx, keyPrefix+h)
	p.forget(h)
	if err != nil {
		return fmt.Errorf("delete session pin: %w", err)
	}
	return nil
}

// UnpinIf removes session's pin only if it still names connRef: the soft
// unpin after connRef failed, cooled down or timed out, which must not
// drop a pin another request of the session already moved elsewhere.
func (p *Pins) UnpinIf(ctx context.Context, session, connRef string) error {
	if session == "" {
		return nil
	}
	h := hashSession(session)
	p.mu.Lock()
	if r, hit := p.cache[h]; hit && r.Connection == connRef {
		delete(p.cache, h)
	}
	p.version++
	p.mu.Unlock()

	key := keyPrefix + h
	raw, found, err := p.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read session pin: %w", err)
	}
	if !found {
		return nil
	}
	var r record
	if err := json.Unmarshal(raw, &r); err == nil && r.Connection != connRef {
		return nil
	}
	// A lost swap means the pin was just rewritten: leave the new one.
	if _, err := p.store.CompareAndSet(ctx, key, raw, nil, 0); err != nil {
		return fmt.Errorf("delete session pin: %w", err)
	}
	p.mu.Lock()
	if r, hit := p.cache[h]; hit && r.Connection == connRef {
		delete(p.cache, h)
	}
	p.version++
	p.mu.Unlock()
	return nil
}

// forget drops h from the cache and counts a mutation.
func (p *Pins) forget(h string) {
	p.mu.Lock()
	delete(p.cache, h)
	p.version++
	p.mu.Unlock()
}

// insert caches r under h, making room when the cache is full: expired
// entries go first, then arbitrary ones (they reload from the store).
// p.mu must be held.
func (p *Pins) insert(h string, r record, now time.Time) {
	if _, hit := p.cache[h]; !hit && len(p.cache) >= maxCached {
		for k, e := range p.cache {
			if !now.Before(e.ExpiresAt) {
				delete(p.cache, k)
			}
		}
		for k := range p.cache {
			if len(p.cache) < maxCached*7/8 {
				break
			}
			delete(p.cache, k)
		}
	}
	p.cache[h] = r
}

// hashSession is the store key component of a session id.
func hashSession(session string) string {
	sum := sha256.Sum256([]byte(session))
	return hex.EncodeToString(sum[:])
}

// KeyPrefix is the store key prefix of every pin.
const KeyPrefix = keyPrefix

// Forget drops the cached pin stored under store key key (KeyPrefix and
// the session hash), so the next Get reads the store: the receiving end
// of a pin another gateway instance changed. Other keys are ignored.
func (p *Pins) Forget(key string) {
	if h, ok := strings.CutPrefix(key, keyPrefix); ok {
		p.forget(h)
	}
}

// ForgetAll drops every cached pin (after changes may have been missed).
func (p *Pins) ForgetAll() {
	p.mu.Lock()
	clear(p.cache)
	p.version++
	p.mu.Unlock()
}
