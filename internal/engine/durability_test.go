package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

// syncingStore is the test's memStore with the UnsyncedWriter a Badger
// store has: it records which writes of each key went through the durable
// methods (Put, CompareAndSet, Delete) and which through the unsynced ones.
type syncingStore struct {
	*memStore
	mu       sync.Mutex
	synced   map[string]int
	unsynced map[string]int
}

func newSyncingStore(clock Clock) *syncingStore {
	return &syncingStore{memStore: newMemStore(clock), synced: map[string]int{}, unsynced: map[string]int{}}
}

func (s *syncingStore) count(m map[string]int, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m[key]++
}

func (s *syncingStore) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	s.count(s.synced, key)
	return s.memStore.Put(ctx, key, value, ttl)
}

func (s *syncingStore) CompareAndSet(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	s.count(s.synced, key)
	return s.memStore.CompareAndSet(ctx, key, old, value, ttl)
}

func (s *syncingStore) Delete(ctx context.Context, key string) error {
	s.count(s.synced, key)
	return s.memStore.Delete(ctx, key)
}

func (s *syncingStore) PutUnsynced(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	s.count(s.unsynced, key)
	return s.memStore.Put(ctx, key, value, ttl)
}

func (s *syncingStore) DeleteUnsynced(ctx context.Context, key string) error {
	s.count(s.unsynced, key)
	return s.memStore.Delete(ctx, key)
}

// writes returns and clears the synced and unsynced write counts of key.
func (s *syncingStore) writes(key string) (synced, unsynced int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	synced, unsynced = s.synced[key], s.unsynced[key]
	delete(s.synced, key)
	delete(s.unsynced, key)
	return synced, unsynced
}

var _ UnsyncedWriter = (*syncingStore)(nil)

// TestDurabilityOfStateWrites pins which state writes wait for stable
// storage (docs/architecture.md, "State store"): the request path's
// breaker, cooldown and lockout changes are self-healing and written
// unsynced; a terminal state, an operator's reset and a settings change
// are acknowledged state and written durably.
func TestDurabilityOfStateWrites(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(engEpoch)
	st := newSyncingStore(clock)
	e, err := New(ctx, Options{Clock: clock, Store: st, Settings: lockoutOn(), Providers: testProviders()})
	if err != nil {
		t.Fatal(err)
	}
	want := func(what, key string, wantSynced, wantUnsynced int) {
		t.Helper()
		synced, unsynced := st.writes(key)
		if synced != wantSynced || unsynced != wantUnsynced {
			t.Errorf("%s: %s written %d× synced, %d× unsynced; want %d× and %d×", what, key, synced, unsynced, wantSynced, wantUnsynced)
		}
	}
	cool := keyCooldown + "openai/key-a"
	lock := keyLockout + "openai/key-a/gpt-4o"
	breaker := keyBreaker + "openai"

	// A 429: cooldown and lockout, self-healing.
	if err := e.RecordFailure(ctx, http429("openai", "key-a", "gpt-4o")); err != nil {
		t.Fatal(err)
	}
	want("429", cool, 0, 1)
	want("429", lock, 0, 1)
	// A 503: the breaker counts it, self-healing.
	if err := e.RecordFailure(ctx, http503("openai", "key-a", "gpt-4o")); err != nil {
		t.Fatal(err)
	}
	want("503", breaker, 0, 1)
	// A success clears the cooldown's error fields and the breaker's
	// failure count: self-healing.
	clock.Advance(10 * time.Minute)
	e.RecordSuccess("openai", "key-a", "gpt-4o")
	want("success", cool, 0, 1)
	want("success", breaker, 0, 1)

	// A failure that enters a terminal state is written durably, and so is
	// every later write of the terminal record.
	terminal := keyCooldown + "claude/acct-1"
	credits := Outcome{Provider: "claude", Connection: "acct-1", Status: 402,
		Reason: ReasonCreditsExhausted, Scope: ScopeConnection, Permanent: true}
	if err := e.RecordFailure(ctx, credits); err != nil {
		t.Fatal(err)
	}
	want("402 credits_exhausted", terminal, 1, 0)
	credits.Status, credits.Reason, credits.Permanent = 401, ReasonBanned, true
	if err := e.RecordFailure(ctx, credits); err != nil {
		t.Fatal(err)
	}
	if synced, unsynced := st.writes(terminal); unsynced != 0 {
		t.Errorf("a later write of a terminal state: %d× synced, %d× unsynced; want no unsynced write", synced, unsynced)
	}

	// An operator's resets and a settings change are durable.
	if _, err := e.ResetConnections(ctx, "claude", "acct-1", ResetByOperator); err != nil {
		t.Fatal(err)
	}
	want("reset of a terminal connection", terminal, 1, 0)
	if _, err := e.ResetBreakers(ctx, "openai"); err != nil {
		t.Fatal(err)
	}
	want("breaker reset", breaker, 1, 0)
	if _, err := e.UpdateSettings(ctx, []byte(`{"model_lockout":{"enabled":false}}`)); err != nil {
		t.Fatal(err)
	}
	want("settings change", SettingsKey, 1, 0)
}
