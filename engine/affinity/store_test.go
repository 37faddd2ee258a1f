package affinity

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/engine"
)

// memStore is a minimal in-memory engine.Store for these tests: TTLs judged
// against clock, writes counted, the last TTL of each key recorded, and
// reads failing on demand.
type memStore struct {
	clock    engine.Clock
	mu       sync.Mutex
	data     map[string]memItem
	writes   int
	ttls     map[string]time.Duration
	reads    int
	failRead atomic.Bool
}

type memItem struct {
	value   []byte
	expires time.Time
}

var (
	_            engine.Store = (*memStore)(nil)
	errStoreDown              = errors.New("store down")
)

func newMemStore(clock engine.Clock) *memStore {
	return &memStore{clock: clock, data: map[string]memItem{}, ttls: map[string]time.Duration{}}
}

func (m *memStore) live(key string) (memItem, bool) {
	it, ok := m.data[key]
	if ok && !it.expires.IsZero() && !m.clock.Now().Before(it.expires) {
		delete(m.data, key)
		return memItem{}, false
	}
	return it, ok
}

func (m *memStore) set(key string, value []byte, ttl time.Duration) {
	it := memItem{value: bytes.Clone(value)}
	if ttl > 0 {
		it.expires = m.clock.Now().Add(ttl)
	}
	m.data[key] = it
	m.ttls[key] = ttl
	m.writes++
}

func (m *memStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	if m.failRead.Load() {
		return nil, false, errStoreDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	it, ok := m.live(key)
	return bytes.Clone(it.value), ok, nil
}

func (m *memStore) Put(_ context.Context, key string, value []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set(key, value, ttl)
	return nil
}

func (m *memStore) CompareAndSet(_ context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.live(key)
	if (old == nil && ok) || (old != nil && (!ok || !bytes.Equal(old, it.value))) {
		return false, nil
	}
	if value == nil {
		delete(m.data, key)
		m.writes++
	} else {
		m.set(key, value, ttl)
	}
	return true, nil
}

func (m *memStore) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, key)
	m.writes++
	return nil
}

func (m *memStore) Scan(_ context.Context, prefix string) ([]engine.KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []engine.KV
	for k := range m.data {
		if it, ok := m.live(k); ok && strings.HasPrefix(k, prefix) {
			out = append(out, engine.KV{Key: k, Value: bytes.Clone(it.value)})
		}
	}
	slices.SortFunc(out, func(a, b engine.KV) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (m *memStore) Close() error { return nil }

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
