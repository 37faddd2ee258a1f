// Package memstore is an in-memory engine.Store for tests and for
// `state.backend: memory`. Nothing survives a restart.
package memstore

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// errClosed is returned by every operation after Close.
var errClosed = errors.New("memstore: store is closed")

var _ engine.Store = (*Store)(nil)

type entry struct {
	value   []byte
	expires time.Time // zero: never
}

func (e entry) alive(now time.Time) bool {
	return e.expires.IsZero() || now.Before(e.expires)
}

// Store is an in-memory engine.Store. Expiry is judged against the clock
// given to New; expired keys are removed lazily when touched. Values are
// copied on the way in and out. Store is goroutine-safe.
type Store struct {
	clock engine.Clock

	mu     sync.RWMutex
	data   map[string]entry
	closed bool
}

// New returns an empty Store that judges expiry with clock.
func New(clock engine.Clock) *Store {
	return &Store{clock: clock, data: make(map[string]entry)}
}

// Get returns a copy of the value of key and whether it is live.
func (s *Store) Get(_ context.Context, key string) ([]byte, bool, error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, false, errClosed
	}
	e, ok := s.data[key]
	now := s.clock.Now()
	if ok && e.alive(now) {
		v := bytes.Clone(e.value)
		s.mu.RUnlock()
		return nonNil(v), true, nil
	}
	s.mu.RUnlock()
	if ok {
		s.dropExpired(key)
	}
	return nil, false, nil
}

// dropExpired deletes key if it is (still) expired.
func (s *Store) dropExpired(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.data[key]; ok && !e.alive(s.clock.Now()) {
		delete(s.data, key)
	}
}

// Put sets key to a copy of value, expiring after ttl when ttl > 0.
func (s *Store) Put(_ context.Context, key string, value []byte, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.set(key, value, ttl)
	return nil
}

func (s *Store) set(key string, value []byte, ttl time.Duration) {
	e := entry{value: nonNil(bytes.Clone(value))}
	if ttl > 0 {
		e.expires = s.clock.Now().Add(ttl)
	}
	s.data[key] = e
}

// CompareAndSet sets key to value only if its live value equals old; a nil
// old requires the key to be absent (or expired) and a nil value deletes it.
func (s *Store) CompareAndSet(_ context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, errClosed
	}
	e, ok := s.data[key]
	live := ok && e.alive(s.clock.Now())
	if old == nil {
		if live {
			return false, nil
		}
	} else if !live || !bytes.Equal(e.value, old) {
		return false, nil
	}
	if value == nil {
		delete(s.data, key)
	} else {
		s.set(key, value, ttl)
	}
	return true, nil
}

// Delete removes key; deleting an absent key is not an error.
func (s *Store) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	delete(s.data, key)
	return nil
}

// Scan returns copies of every live key with prefix, sorted by key. It
// removes the expired keys it meets.
func (s *Store) Scan(_ context.Context, prefix string) ([]engine.KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	now := s.clock.Now()
	var out []engine.KV
	for k, e := range s.data {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if !e.alive(now) {
			delete(s.data, k)
			continue
		}
		out = append(out, engine.KV{Key: k, Value: nonNil(bytes.Clone(e.value))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Close drops the data. Later operations fail. It is safe to call more than
// once.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.data = nil
	return nil
}

// nonNil turns a nil slice into an empty one, so a stored empty value reads
// back as non-nil and can be passed as a CompareAndSet old value.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
