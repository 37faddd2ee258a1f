package affinity

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
)

// memStore wraps the gateway's in-memory store for these tests: writes and
// reads counted, the last TTL of each key recorded, reads failing on
// demand.
type memStore struct {
	engine.Store
	mu       sync.Mutex
	writes   int
	reads    int
	ttls     map[string]time.Duration
	failRead atomic.Bool
}

var errStoreDown = errors.New("store down")

func newMemStore(clock engine.Clock) *memStore {
	return &memStore{Store: memstore.New(clock), ttls: map[string]time.Duration{}}
}

func (m *memStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	m.mu.Lock()
	m.reads++
	m.mu.Unlock()
	if m.failRead.Load() {
		return nil, false, errStoreDown
	}
	return m.Store.Get(ctx, key)
}

func (m *memStore) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	m.mu.Lock()
	m.writes++
	m.ttls[key] = ttl
	m.mu.Unlock()
	return m.Store.Put(ctx, key, value, ttl)
}

func (m *memStore) CompareAndSet(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	ok, err := m.Store.CompareAndSet(ctx, key, old, value, ttl)
	if ok {
		m.mu.Lock()
		m.writes++
		m.ttls[key] = ttl
		m.mu.Unlock()
	}
	return ok, err
}

func (m *memStore) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	m.writes++
	m.mu.Unlock()
	return m.Store.Delete(ctx, key)
}

func (m *memStore) stats() (writes, reads int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes, m.reads
}

func (m *memStore) ttlOf(key string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ttls[key]
}
