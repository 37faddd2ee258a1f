// Package lease implements exclusive session leases (docs/resilience.md §2d):
// durable, exclusive ownership of one connection by one managed client
// session, a hard routing fence unlike session affinity.
//
// All state lives in the engine.Store, so leases survive a restart and two
// gateway instances sharing one store see the same leases. Every mutation is
// a CompareAndSet on the exact bytes read, retried on conflict, so the
// active owner and the owner of each connection stay globally unique.
//
// Two records are kept:
//
//   - lease/owner/<sha256 hex of the owner value>: the lease itself (API key
//     id, generation, model, bound connection, expiry, ACTIVE|RELEASED). The
//     owner value is never stored.
//   - lease/conn/<connection ref>: which owner (hash) and generation claim
//     the connection. A claim counts only while that owner's record is
//     ACTIVE, unexpired and at the same generation, so a claim left behind
//     by a crash, a release or an expiry frees itself.
//
// Generations: a new owner starts at 1. Acquire by the same owner and key
// while its lease is active keeps the generation (and extends the lease);
// acquire after a release or an expiry continues with the next generation,
// so a request still carrying the old generation is fenced out. A released
// or expired owner record is kept for Options.Retention so the generation
// keeps growing; after that the owner starts again at 1.
package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// Defaults of Options.
const (
	DefaultTTL       = 5 * time.Minute
	DefaultRetention = 24 * time.Hour
)

// OwnerPrefix starts every owner value; OwnerLen is the full length of one:
// the prefix and 43 base64url characters (256 bits, no padding).
const (
	OwnerPrefix = "vlo_"
	OwnerLen    = len(OwnerPrefix) + 43
)

// Store key prefixes.
const (
	keyOwner = "lease/owner/" // lease/owner/<owner sha256 hex>
	keyConn  = "lease/conn/"  // lease/conn/<provider/connection>
)

// maxCASAttempts bounds the retries of one mutation that keeps losing its
// CompareAndSet; each loss means another writer committed.
const maxCASAttempts = 1000

// errContention is returned when a mutation loses maxCASAttempts races.
var errContention = errors.New("lease: too much contention on the state store")

// Options configures a Manager. Zero values mean the defaults.
type Options struct {
	// TTL is how long an acquire or renew keeps the lease (DefaultTTL).
	TTL time.Duration
	// Retention is how long a released or expired owner record is kept so
	// a re-acquire continues its generation (DefaultRetention).
	Retention time.Duration
}

// Lease is an owner's lease as the gateway sees it. It never carries the
// owner value, only (unexported) its hash, which Bind uses.
type Lease struct {
	// Generation is the fencing token; requests must present it exactly.
	Generation int64
	// ExpiresAt is when the lease ends unless renewed.
	ExpiresAt time.Time
	// Connection is the bound connection ref ("provider/connection"), ""
	// before the first Bind.
	Connection string
	// Model is the model given at acquire, informational: the lease owns a
	// connection, not a model.
	Model string
	// KeyID is the API key id that owns the lease.
	KeyID string

	ownerSHA string
}

// OwnerHash returns the SHA-256 (hex) of the lease's owner value, as
// Holder reports it, so a router can tell its own holds from others'.
func (l Lease) OwnerHash() string { return l.ownerSHA }

// ownerRecord is the persisted lease of one owner.
type ownerRecord struct {
	KeyID      string    `json:"key_id"`
	Generation int64     `json:"generation"`
	Model      string    `json:"model,omitempty"`
	Connection string    `json:"connection,omitempty"`
	ExpiresAt  time.Time `json:"expires_at"`
	State      string    `json:"state"`
}

// live reports whether the lease is active at now.
func (r *ownerRecord) live(now time.Time) bool {
	return r.State == StateActive && now.Before(r.ExpiresAt)
}

// connRecord is the persisted claim of one connection. ExpiresAt is the
// owner's expiry when the claim was last written, informational only: the
// owner record decides whether the claim is live.
type connRecord struct {
	OwnerSHA   string    `json:"owner_sha"`
	Generation int64     `json:"generation"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Manager acquires, renews, releases, fences and binds leases. Beyond its
// store it keeps only a cache of Holder's answers; it is goroutine-safe.
type Manager struct {
	store engine.Store
	clock engine.Clock
	opts  Options
	view  holderView
}

// New returns a Manager on store, judging expiry with clock.
func New(store engine.Store, clock engine.Clock, o Options) *Manager {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	return &Manager{store: store, clock: clock, opts: o}
}

// OwnerHash validates an owner value (OwnerPrefix + 43 base64url
// characters) and returns its SHA-256 in hex. An empty owner is
// ErrContextRequired, a malformed one ErrContextInvalid.
func OwnerHash(owner string) (string, error) {
	if owner == "" {
		return "", ErrContextRequired
	}
	if len(owner) != OwnerLen || !strings.HasPrefix(owner, OwnerPrefix) {
		return "", ErrContextInvalid
	}
	for i := len(OwnerPrefix); i < len(owner); i++ {
		c := owner[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "", ErrContextInvalid
		}
	}
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:]), nil
}

// Acquire starts or refreshes the lease of owner for API key keyID. A new
// owner gets generation 1; an active lease of the same owner and key keeps
// its generation and binding and is extended by TTL (model, when given,
// replaces the recorded one); a released or expired one continues at the
// next generation with no binding. An owner whose record belongs to
// another key is ErrOwnerMismatch.
func (m *Manager) Acquire(ctx context.Context, keyID, owner, model string) (Lease, error) {
	sha, err := checkCaller(keyID, owner)
	if err != nil {
		return Lease{}, err
	}
	for range maxCASAttempts {
		now := m.clock.Now()
		rec, raw, err := m.loadOwner(ctx, sha)
		if err != nil {
			return Lease{}, err
		}
		var next ownerRecord
		switch {
		case rec == nil:
			next = ownerRecord{KeyID: keyID, Generation: 1, Model: model}
		case rec.KeyID != keyID:
			return Lease{}, ErrOwnerMismatch
		case rec.live(now):
			next = *rec
			if model != "" {
				next.Model = model
			}
		default:
			next = ownerRecord{KeyID: keyID, Generation: rec.Generation + 1, Model: model}
		}
		next.State = StateActive
		next.ExpiresAt = now.Add(m.opts.TTL)
		if l, ok, err := m.commitActive(ctx, sha, raw, &next, now); err != nil || ok {
			return l, err
		}
	}
	return Lease{}, fmt.Errorf("acquire lease: %w", errContention)
}

// Renew extends owner's active lease by TTL. generation, when non-zero,
// must be the lease's generation (else ErrFenceStale). A lease of another
// key is ErrOwnerMismatch; a released, expired or unknown one ErrNotActive
// (with state RELEASED or EXPIRED when known).
func (m *Manager) Renew(ctx context.Context, keyID, owner string, generation int64) (Lease, error) {
	sha, err := checkCaller(keyID, owner)
	if err != nil {
		return Lease{}, err
	}
	for range maxCASAttempts {
		now := m.clock.Now()
		rec, raw, err := m.loadOwner(ctx, sha)
		if err != nil {
			return Lease{}, err
		}
		switch {
		case rec == nil:
			return Lease{}, ErrNotActive
		case rec.KeyID != keyID:
			return Lease{}, ErrOwnerMismatch
		case rec.State == StateReleased:
			return Lease{}, ErrNotActive.with("the lease was released: acquire it again", StateReleased)
		case !rec.live(now):
			return Lease{}, ErrNotActive.with("the lease expired: acquire it again", StateExpired)
		case generation != 0 && generation != rec.Generation:
			return Lease{}, ErrFenceStale
		}
		next := *rec
		next.ExpiresAt = now.Add(m.opts.TTL)
		if l, ok, err := m.commitActive(ctx, sha, raw, &next, now); err != nil || ok {
			return l, err
		}
	}
	return Lease{}, fmt.Errorf("renew lease: %w", errContention)
}

// Release ends owner's lease and frees its connection. It is idempotent:
// releasing a released, expired or unknown lease succeeds. generation,
// when non-zero, must be the lease's generation (else ErrFenceStale), so a
// late release cannot end a newer lease. A lease of another key is
// ErrOwnerMismatch.
func (m *Manager) Release(ctx context.Context, keyID, owner string, generation int64) error {
	sha, err := checkCaller(keyID, owner)
	if err != nil {
		return err
	}
	for range maxCASAttempts {
		now := m.clock.Now()
		rec, raw, err := m.loadOwner(ctx, sha)
		if err != nil {
			return err
		}
		switch {
		case rec == nil:
			return nil
		case rec.KeyID != keyID:
			return ErrOwnerMismatch
		case rec.State == StateReleased:
			return nil
		case generation != 0 && generation != rec.Generation:
			return ErrFenceStale
		}
		next := *rec
		next.State = StateReleased
		next.Connection = ""
		if now.Before(next.ExpiresAt) {
			next.ExpiresAt = now
		}
		ok, err := m.casOwner(ctx, sha, raw, &next, now)
		if err != nil {
			return err
		}
		if ok {
			if rec.Connection != "" {
				if err := m.unclaim(ctx, rec.Connection, sha, rec.Generation); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return fmt.Errorf("release lease: %w", errContention)
}

// Fence is the check before every dispatch of an inference request: the
// owner must hold an ACTIVE, unexpired lease of API key keyID at exactly
// generation. Otherwise it returns ErrOwnerMismatch (another key's owner),
// ErrContextInvalid (generation < 1) or ErrFenceStale (no live lease at
// that generation). The returned Lease is what Bind needs.
func (m *Manager) Fence(ctx context.Context, keyID, owner string, generation int64) (Lease, error) {
	sha, err := checkCaller(keyID, owner)
	if err != nil {
		return Lease{}, err
	}
	if generation < 1 {
		return Lease{}, ErrContextInvalid.with("header X-Breakwater-Lease-Generation must be a positive integer", "")
	}
	rec, _, err := m.loadOwner(ctx, sha)
	if err != nil {
		return Lease{}, err
	}
	if err := fenceCheck(rec, keyID, generation, m.clock.Now()); err != nil {
		return Lease{}, err
	}
	return toLease(rec, sha), nil
}

// fenceCheck is the fence rule on a loaded owner record.
func fenceCheck(rec *ownerRecord, keyID string, generation int64, now time.Time) error {
	switch {
	case rec == nil:
		return ErrFenceStale.with("no active lease for this owner: acquire it", "")
	case rec.KeyID != keyID:
		return ErrOwnerMismatch
	case rec.State == StateReleased:
		return ErrFenceStale.with("the lease was released: acquire it again", StateReleased)
	case !rec.live(now):
		return ErrFenceStale.with("the lease expired: acquire it again", StateExpired)
	case rec.Generation != generation:
		return ErrFenceStale
	}
	return nil
}

// Bind is the final dispatch fence: it re-checks l (key, ACTIVE, unexpired,
// exact generation) and claims connRef for it. When another owner's live
// lease holds connRef it returns *HeldError. Binding the same generation to
// another connection moves the lease and frees the previous connection.
// Concurrent Binds of different leases to one connection: exactly one wins.
func (m *Manager) Bind(ctx context.Context, l Lease, connRef string) error {
	if l.ownerSHA == "" {
		return errors.New("lease: Bind needs a Lease returned by the Manager")
	}
	if connRef == "" {
		return errors.New("lease: Bind needs a connection ref")
	}
	sha := l.ownerSHA
	claimed := false
	for range maxCASAttempts {
		now := m.clock.Now()
		rec, raw, err := m.loadOwner(ctx, sha)
		if err != nil {
			return m.abandon(ctx, claimed, connRef, l, err)
		}
		if err := fenceCheck(rec, l.KeyID, l.Generation, now); err != nil {
			return m.abandon(ctx, claimed, connRef, l, err)
		}
		if err := m.claim(ctx, connRef, sha, rec); err != nil {
			return m.abandon(ctx, claimed, connRef, l, err)
		}
		claimed = true
		if rec.Connection == connRef {
			return nil
		}
		next := *rec
		next.Connection = connRef
		ok, err := m.casOwner(ctx, sha, raw, &next, now)
		if err != nil {
			return m.abandon(ctx, claimed, connRef, l, err)
		}
		if ok {
			if rec.Connection != "" {
				if err := m.unclaim(ctx, rec.Connection, sha, rec.Generation); err != nil {
					return fmt.Errorf("free previous connection: %w", err)
				}
			}
			return nil
		}
	}
	return m.abandon(ctx, claimed, connRef, l, fmt.Errorf("bind lease: %w", errContention))
}

// abandon undoes a claim made by a Bind that then failed, best effort
// (a leftover claim frees itself when the lease ends), and returns err.
func (m *Manager) abandon(ctx context.Context, claimed bool, connRef string, l Lease, err error) error {
	if claimed {
		rec, _, lerr := m.loadOwner(ctx, l.ownerSHA)
		if lerr == nil && (rec == nil || rec.Connection != connRef) {
			_ = m.unclaim(ctx, connRef, l.ownerSHA, l.Generation)
		}
	}
	return err
}

// Holder reports who holds connRef: the owner hash and expiry of the live
// lease claiming it. Routing excludes a connection held by another owner.
// The answer is cached (see holderView), so routing reads the store once
// per connection and change. A store error reads as not held; Bind, the
// final fence, reports it.
func (m *Manager) Holder(ctx context.Context, connRef string) (ownerSHA string, until time.Time, held bool) {
	e, version, ok := m.view.get(connRef)
	if !ok {
		c, _, err := m.loadConn(ctx, connRef)
		if err != nil {
			return "", time.Time{}, false
		}
		if c != nil {
			until, live, err := m.claimLive(ctx, c)
			if err != nil {
				return "", time.Time{}, false
			}
			e = holderEntry{owner: c.OwnerSHA, until: until, held: live}
		}
		m.view.put(connRef, e, version)
	}
	if !e.held || !m.clock.Now().Before(e.until) {
		return "", time.Time{}, false
	}
	return e.owner, e.until, true
}

// claimLive reports whether claim c is backed by its owner's live lease at
// the same generation, and until when.
func (m *Manager) claimLive(ctx context.Context, c *connRecord) (time.Time, bool, error) {
	rec, _, err := m.loadOwner(ctx, c.OwnerSHA)
	if err != nil {
		return time.Time{}, false, err
	}
	if rec == nil || rec.Generation != c.Generation || !rec.live(m.clock.Now()) {
		return time.Time{}, false, nil
	}
	return rec.ExpiresAt, true, nil
}

// claim makes connRef's claim point at owner sha and rec's generation,
// unless another owner's live lease holds it (*HeldError).
func (m *Manager) claim(ctx context.Context, connRef, sha string, rec *ownerRecord) error {
	for range maxCASAttempts {
		c, raw, err := m.loadConn(ctx, connRef)
		if err != nil {
			return err
		}
		if c != nil && c.OwnerSHA == sha && c.Generation == rec.Generation && c.ExpiresAt.Equal(rec.ExpiresAt) {
			return nil
		}
		if c != nil && (c.OwnerSHA != sha || c.Generation != rec.Generation) {
			until, live, err := m.claimLive(ctx, c)
			if err != nil {
				return err
			}
			if live {
				return &HeldError{Until: until}
			}
		}
		ok, err := m.casConn(ctx, connRef, raw, &connRecord{OwnerSHA: sha, Generation: rec.Generation, ExpiresAt: rec.ExpiresAt})
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("claim connection: %w", errContention)
}

// commitActive writes the active record next over raw (compare and swap)
// and, when it won, refreshes its connection claim and returns the lease.
// ok is false when another writer got there first: the caller retries.
func (m *Manager) commitActive(ctx context.Context, sha string, raw []byte, next *ownerRecord, now time.Time) (Lease, bool, error) {
	ok, err := m.casOwner(ctx, sha, raw, next, now)
	if err != nil || !ok {
		return Lease{}, false, err
	}
	if err := m.refreshClaim(ctx, sha, next); err != nil {
		return Lease{}, false, err
	}
	return toLease(next, sha), true, nil
}

// refreshClaim moves the expiry of rec's connection claim to rec's, if
// the claim is still this owner's at this generation.
func (m *Manager) refreshClaim(ctx context.Context, sha string, rec *ownerRecord) error {
	if rec.Connection == "" {
		return nil
	}
	for range maxCASAttempts {
		c, raw, err := m.loadConn(ctx, rec.Connection)
		if err != nil {
			return err
		}
		if c == nil || c.OwnerSHA != sha || c.Generation != rec.Generation || c.ExpiresAt.Equal(rec.ExpiresAt) {
			return nil
		}
		next := *c
		next.ExpiresAt = rec.ExpiresAt
		ok, err := m.casConn(ctx, rec.Connection, raw, &next)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("refresh connection claim: %w", errContention)
}

// unclaim deletes connRef's claim if it is owner sha's at generation.
func (m *Manager) unclaim(ctx context.Context, connRef, sha string, generation int64) error {
	for range maxCASAttempts {
		c, raw, err := m.loadConn(ctx, connRef)
		if err != nil {
			return err
		}
		if c == nil || c.OwnerSHA != sha || c.Generation != generation {
			return nil
		}
		ok, err := m.store.CompareAndSet(ctx, keyConn+connRef, raw, nil, 0)
		if err != nil {
			return fmt.Errorf("free connection claim: %w", err)
		}
		if ok {
			m.view.dropRef(connRef)
			return nil
		}
	}
	return fmt.Errorf("free connection claim: %w", errContention)
}

// loadOwner reads owner sha's record and its raw bytes (nil when absent).
func (m *Manager) loadOwner(ctx context.Context, sha string) (*ownerRecord, []byte, error) {
	raw, ok, err := m.store.Get(ctx, keyOwner+sha)
	if err != nil {
		return nil, nil, fmt.Errorf("read lease: %w", err)
	}
	if !ok {
		return nil, nil, nil
	}
	var rec ownerRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, nil, fmt.Errorf("decode lease record: %w", err)
	}
	return &rec, raw, nil
}

// casOwner swaps owner sha's record from old to rec. An active record is
// kept until Retention past its expiry, a released one for Retention.
func (m *Manager) casOwner(ctx context.Context, sha string, old []byte, rec *ownerRecord, now time.Time) (bool, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("encode lease record: %w", err)
	}
	ttl := m.opts.Retention + max(rec.ExpiresAt.Sub(now), 0)
	ok, err := m.store.CompareAndSet(ctx, keyOwner+sha, old, b, ttl)
	if err != nil {
		return false, fmt.Errorf("write lease: %w", err)
	}
	if ok {
		m.view.dropOwner(sha)
	}
	return ok, nil
}

// loadConn reads connRef's claim and its raw bytes (nil when absent).
func (m *Manager) loadConn(ctx context.Context, connRef string) (*connRecord, []byte, error) {
	raw, ok, err := m.store.Get(ctx, keyConn+connRef)
	if err != nil {
		return nil, nil, fmt.Errorf("read connection claim: %w", err)
	}
	if !ok {
		return nil, nil, nil
	}
	var c connRecord
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("decode connection claim: %w", err)
	}
	return &c, raw, nil
}

// casConn swaps connRef's claim from old to c. The claim is kept one TTL
// past the owner's expiry, so a renew that could not refresh it (a crash
// in between) still finds it.
func (m *Manager) casConn(ctx context.Context, connRef string, old []byte, c *connRecord) (bool, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return false, fmt.Errorf("encode connection claim: %w", err)
	}
	ttl := m.opts.TTL + max(c.ExpiresAt.Sub(m.clock.Now()), 0)
	ok, err := m.store.CompareAndSet(ctx, keyConn+connRef, old, b, ttl)
	if err != nil {
		return false, fmt.Errorf("write connection claim: %w", err)
	}
	if ok {
		m.view.dropRef(connRef)
	}
	return ok, nil
}

// checkCaller validates the key id and owner and returns the owner hash.
func checkCaller(keyID, owner string) (string, error) {
	if keyID == "" {
		return "", ErrUnauthenticated
	}
	return OwnerHash(owner)
}

// toLease is the gateway's view of rec.
func toLease(rec *ownerRecord, sha string) Lease {
	return Lease{Generation: rec.Generation, ExpiresAt: rec.ExpiresAt, Connection: rec.Connection,
		Model: rec.Model, KeyID: rec.KeyID, ownerSHA: sha}
}
