package engine

import (
	"context"
	"errors"
	"time"
)

// ErrStoreLocked is returned (wrapped) when a store's data is held by another
// process and cannot be opened.
var ErrStoreLocked = errors.New("state store is locked by another process")

// KV is one key and its value, as returned by Store.Scan.
type KV struct {
	Key   string
	Value []byte
}

// Store is the durable key-value state behind the engine: breakers,
// cooldowns, lockouts, settings, pins and leases live here.
//
// Every operation is atomic on its key. A ttl of zero means "no expiry"; an
// expired key behaves exactly like an absent one, judged against the store's
// Clock. A successful Put, CompareAndSet or Delete is durable before it
// returns (see UnsyncedWriter for the writes that need not wait for it).
// Implementations are goroutine-safe.
type Store interface {
	// Get returns the value of key and whether it exists.
	Get(ctx context.Context, key string) ([]byte, bool, error)
	// Put sets key to value, expiring after ttl when ttl > 0.
	Put(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// CompareAndSet sets key to value only if its current value equals old.
	// A nil old means "key must be absent"; a nil value deletes the key.
	// It reports whether the swap happened.
	CompareAndSet(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error)
	// Delete removes key; deleting an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// Scan returns every live key with the given prefix, sorted by key.
	Scan(ctx context.Context, prefix string) ([]KV, error)
	// Close releases the store. It is safe to call more than once.
	Close() error
}

// UnsyncedWriter is implemented by a Store whose durable writes wait for
// stable storage (an fsync) and that can also acknowledge a write before
// it gets there. The engine writes self-healing state through it
// (breakers, window gates, cooldowns and model lockouts changed by the
// request path), never a lease, a setting or a terminal state: the store
// may queue an unsynced write and commit it shortly after (a crash of the
// process may then lose the last few milliseconds of them, a power loss
// the last few not synced). Reads see an unsynced write at once, and a
// later durable write makes every earlier write durable too.
type UnsyncedWriter interface {
	// PutUnsynced is Put, returning once the write is queued for or in
	// the store's log rather than on stable storage.
	PutUnsynced(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// DeleteUnsynced is Delete, returning as PutUnsynced does.
	DeleteUnsynced(ctx context.Context, key string) error
}
