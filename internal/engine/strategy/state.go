package strategy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"sync"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// StateKeyPrefix prefixes every key StateStore writes: the position of
// combo c lives at StateKeyPrefix + url.PathEscape(c).
const StateKeyPrefix = "strategy/"

// Position is the persisted routing position of one combo.
type Position struct {
	// Strategy is the strategy that wrote the position; a strategy ignores
	// a position written by another one (the combo changed strategy).
	Strategy string `json:"strategy"`
	// Key is the target the strategy is on: round-robin's next or current
	// target, the sticky target of weighted, fill-first's current target,
	// lkgp's last known good target. "" = none.
	Key string `json:"key,omitempty"`
	// Count is the number of successes in the current sticky batch.
	Count int `json:"count,omitempty"`
}

// StateStore keeps every combo's Position in memory and persists it
// write-behind: a change only marks the combo dirty, and Flush writes the
// dirty positions to the engine.Store. Writing the store on every request
// would cost an fsync each, so the server calls Flush from a ticker (at
// most once per second) and at shutdown, and Load once at start. The
// package starts no goroutine. A StateStore is goroutine-safe; positions
// changed after the last Flush are lost by a crash, which only costs a
// round-robin or sticky position.
type StateStore struct {
	store engine.Store

	mu    sync.Mutex
	pos   map[string]Position
	dirty map[string]struct{}
}

// NewStateStore returns a StateStore persisting to store; a nil store keeps
// positions in memory only (Load and Flush do nothing).
func NewStateStore(store engine.Store) *StateStore {
	return &StateStore{store: store, pos: map[string]Position{}, dirty: map[string]struct{}{}}
}

// get returns combo's position if it was written by strategy.
func (s *StateStore) get(combo, strategy string) Position {
	s.mu.Lock()
	p, ok := s.pos[combo]
	s.mu.Unlock()
	if !ok || p.Strategy != strategy {
		return Position{Strategy: strategy}
	}
	return p
}

// set stores combo's position and marks it dirty when it changed.
func (s *StateStore) set(combo string, p Position) {
	s.mu.Lock()
	if old, ok := s.pos[combo]; !ok || old != p {
		s.pos[combo] = p
		s.dirty[combo] = struct{}{}
	}
	s.mu.Unlock()
}

// Position returns the current position of combo, for the explain view.
func (s *StateStore) Position(combo string) (Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pos[combo]
	return p, ok
}

// Load reads every persisted position. A position already changed in
// memory since start is kept (memory is newer). Malformed entries are
// skipped and reported in the returned error after the others are loaded.
func (s *StateStore) Load(ctx context.Context) error {
	if s.store == nil {
		return nil
	}
	kvs, err := s.store.Scan(ctx, StateKeyPrefix)
	if err != nil {
		return fmt.Errorf("strategy state: scan %q: %w", StateKeyPrefix, err)
	}
	var errs []error
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, kv := range kvs {
		combo, err := url.PathUnescape(kv.Key[len(StateKeyPrefix):])
		if err != nil {
			errs = append(errs, fmt.Errorf("strategy state: key %q: %w", kv.Key, err))
			continue
		}
		var p Position
		if err := json.Unmarshal(kv.Value, &p); err != nil {
			errs = append(errs, fmt.Errorf("strategy state: value of %q: %w", kv.Key, err))
			continue
		}
		if _, ok := s.pos[combo]; !ok {
			s.pos[combo] = p
		}
	}
	return errors.Join(errs...)
}

// Flush writes every dirty position to the store, in combo order. A
// position that fails to write stays dirty for the next Flush; the first
// error is returned wrapped with its key.
func (s *StateStore) Flush(ctx context.Context) error {
	if s.store == nil {
		return nil
	}
	s.mu.Lock()
	if len(s.dirty) == 0 {
		s.mu.Unlock()
		return nil
	}
	combos := make([]string, 0, len(s.dirty))
	vals := make(map[string]Position, len(s.dirty))
	for c := range s.dirty {
		combos = append(combos, c)
		vals[c] = s.pos[c]
	}
	clear(s.dirty)
	s.mu.Unlock()
	sort.Strings(combos)

	for n, c := range combos {
		key := StateKeyPrefix + url.PathEscape(c)
		b, err := json.Marshal(vals[c])
		if err == nil {
			err = s.store.Put(ctx, key, b, 0)
		}
		if err != nil {
			s.mu.Lock()
			for _, c := range combos[n:] {
				s.dirty[c] = struct{}{}
			}
			s.mu.Unlock()
			return fmt.Errorf("strategy state: write %q: %w", key, err)
		}
	}
	return nil
}
