package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

var engEpoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// memStore is a minimal in-memory Store for the engine tests: TTLs are
// judged against clock, and every write is counted per key.
type memStore struct {
	clock   Clock
	mu      sync.Mutex
	data    map[string]memItem
	writes  map[string]int
	failPut atomic.Bool
}

type memItem struct {
	value   []byte
	expires time.Time
}

func newMemStore(clock Clock) *memStore {
	return &memStore{clock: clock, data: map[string]memItem{}, writes: map[string]int{}}
}

var errStoreDown = errors.New("store down")

func (m *memStore) live(key string) (memItem, bool) {
	it, ok := m.data[key]
	if ok && !it.expires.IsZero() && !m.clock.Now().Before(it.expires) {
		delete(m.data, key)
		return memItem{}, false
	}
	return it, ok
}

func (m *memStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.live(key)
	return bytes.Clone(it.value), ok, nil
}

func (m *memStore) Put(_ context.Context, key string, value []byte, ttl time.Duration) error {
	if m.failPut.Load() {
		return errStoreDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	it := memItem{value: bytes.Clone(value)}
	if ttl > 0 {
		it.expires = m.clock.Now().Add(ttl)
	}
	m.data[key] = it
	m.writes[key]++
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
	} else {
		m.data[key] = memItem{value: bytes.Clone(value)}
		if ttl > 0 {
			m.data[key] = memItem{value: bytes.Clone(value), expires: m.clock.Now().Add(ttl)}
		}
	}
	m.writes[key]++
	return true, nil
}

func (m *memStore) Delete(_ context.Context, key string) error {
	if m.failPut.Load() {
		return errStoreDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, key)
	m.writes[key]++
	return nil
}

func (m *memStore) Scan(_ context.Context, prefix string) ([]KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []KV
	for k := range m.data {
		if it, ok := m.live(k); ok && strings.HasPrefix(k, prefix) {
			out = append(out, KV{Key: k, Value: bytes.Clone(it.value)})
		}
	}
	slices.SortFunc(out, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (m *memStore) Close() error { return nil }

// has reports whether key is live.
func (m *memStore) has(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.live(key)
	return ok
}

// totalWrites counts every write so far.
func (m *memStore) totalWrites() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, w := range m.writes {
		n += w
	}
	return n
}

func (m *memStore) writesOf(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes[key]
}

var _ Store = (*memStore)(nil)

// testProviders: openai (apikey, codex family, two connections, hints on),
// claude (oauth), vllm (local, one disable_cooling connection).
func testProviders() []ProviderSpec {
	return []ProviderSpec{
		{
			ID: "openai", Profile: ProfileAPIKey, UseUpstreamRetryHints: true,
			QuotaFamilies: map[string][]string{"codex": {"gpt-5*"}},
			Connections:   []ConnectionSpec{{ID: "key-a"}, {ID: "key-b"}},
		},
		{ID: "claude", Profile: ProfileOAuth, Connections: []ConnectionSpec{{ID: "acct-1"}}},
		{ID: "vllm", Profile: ProfileLocal, Connections: []ConnectionSpec{{ID: "gpu-1"}, {ID: "gpu-2", DisableCooling: true}}},
	}
}

type testEngine struct {
	*Engine
	clock *clocktest.Clock
	store *memStore
}

func newTestEngine(t testing.TB, settings Settings) *testEngine {
	t.Helper()
	clock := clocktest.NewClock(engEpoch)
	return reopen(t, clock, newMemStore(clock), settings)
}

// reopen builds a new engine over an existing store, as a restart does.
func reopen(t testing.TB, clock *clocktest.Clock, store *memStore, settings Settings) *testEngine {
	t.Helper()
	e, err := New(context.Background(), Options{Clock: clock, Store: store, Settings: settings, Providers: testProviders()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &testEngine{Engine: e, clock: clock, store: store}
}

func lockoutOn() Settings {
	s := DefaultSettings()
	s.ModelLockout.Enabled = true
	return s
}

// fail records o and fails the test on a store error.
func (te *testEngine) fail(t testing.TB, o Outcome) {
	t.Helper()
	if err := te.RecordFailure(context.Background(), o); err != nil {
		t.Fatalf("RecordFailure: %v", err)
	}
}

func http503(provider, conn, model string) Outcome {
	return Outcome{Provider: provider, Connection: conn, Model: model, Status: 503,
		Reason: ReasonTransient, Scope: ScopeProvider, Retryable: true, RuleSource: DefaultRuleSource}
}

func http429(provider, conn, model string) Outcome {
	return Outcome{Provider: provider, Connection: conn, Model: model, Status: 429,
		Reason: ReasonRateLimit, Scope: ScopeConnection, Retryable: true, RuleSource: DefaultRuleSource, Message: "upstream 429"}
}

func http404(provider, conn, model string) Outcome {
	return Outcome{Provider: provider, Connection: conn, Model: model, Status: 404,
		Reason: ReasonNotFound, Scope: ScopeModel, Retryable: true, RuleSource: DefaultRuleSource}
}

func wantExcluded(t *testing.T, te *testEngine, p, c, m, reason string, until time.Time) {
	t.Helper()
	ex, excluded := te.Peek(p, c, m)
	if !excluded || ex.Reason != reason || !ex.Until.Equal(until) {
		t.Fatalf("Peek(%s/%s/%s) = %+v, %v; want %s until %v", p, c, m, ex, excluded, reason, until)
	}
}

func wantEligible(t *testing.T, te *testEngine, p, c, m string) {
	t.Helper()
	if ex, excluded := te.Peek(p, c, m); excluded {
		t.Fatalf("Peek(%s/%s/%s) excluded: %+v", p, c, m, ex)
	}
}

func TestNewRequiresStore(t *testing.T) {
	if _, err := New(context.Background(), Options{}); err == nil {
		t.Fatal("New without a store succeeded")
	}
}

func TestNewRejectsBadQuotaFamily(t *testing.T) {
	_, err := New(context.Background(), Options{Store: newMemStore(SystemClock{}), Providers: []ProviderSpec{
		{ID: "p", QuotaFamilies: map[string][]string{"f": {"gpt-[5"}}},
	}})
	if err == nil || !strings.Contains(err.Error(), `"gpt-[5"`) {
		t.Fatalf("New with a malformed glob: %v", err)
	}
}

func TestEngineZeroSettingsMeanDefaults(t *testing.T) {
	te := newTestEngine(t, Settings{})
	got, _ := json.Marshal(te.Settings())
	want, _ := json.Marshal(DefaultSettings().Normalize())
	if !bytes.Equal(got, want) {
		t.Fatalf("zero Options.Settings gave %s, want defaults %s", got, want)
	}
}

func TestEngineFailureRouting(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	now := te.clock.Now()

	// A provider-scoped 503 counts toward the breaker and locks the exact
	// model; it does not cool the connection.
	te.fail(t, http503("openai", "key-a", "gpt-4o"))
	if got := te.breakers.Peek("openai").FailureCount; got != 1 {
		t.Fatalf("breaker failure count after a 503 = %d, want 1", got)
	}
	if _, cooling := te.cooldowns.get("openai", "key-a"); cooling {
		t.Fatal("a provider-scoped 503 cooled the connection")
	}
	wantExcluded(t, te, "openai", "key-a", "gpt-4o", ExclusionModelLockout, now.Add(120*time.Second))
	wantEligible(t, te, "openai", "key-a", "gpt-4o-mini")

	// A 429 cools the connection (apikey base 3 s), not the breaker, and
	// locks the model's quota family.
	te.fail(t, http429("openai", "key-b", "gpt-5-codex"))
	if got := te.breakers.Peek("openai").FailureCount; got != 1 {
		t.Fatalf("a 429 changed the breaker count to %d", got)
	}
	wantExcluded(t, te, "openai", "key-b", "gpt-4o", ExclusionConnectionCooldown, now.Add(3*time.Second))
	te.clock.Advance(3 * time.Second)
	wantEligible(t, te, "openai", "key-b", "gpt-4o")
	wantExcluded(t, te, "openai", "key-b", "gpt-5-mini", ExclusionModelLockout, now.Add(120*time.Second))

	// A 404 locks just the model and leaves the connection alone.
	te.fail(t, http404("openai", "key-b", "gpt-5-nano"))
	if st, _ := te.cooldowns.get("openai", "key-b"); st.LastErrorType != string(ReasonRateLimit) {
		t.Fatalf("a 404 touched the connection: %+v", st)
	}
	if _, ok := te.lockouts.get(lockKey{"openai", "key-b", "gpt-5-nano"}); !ok {
		t.Fatal("a 404 did not lock the exact model")
	}
}

func TestEngineLocalErrorsTouchNothing(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	for _, o := range []Outcome{
		{Provider: "openai", Connection: "key-a", Model: "gpt-4o", Status: 499, Reason: ReasonClientAbort},
		{Provider: "openai", Connection: "key-a", Model: "gpt-4o", Status: 503, Reason: ReasonLocalError},
		{Provider: "openai", Connection: "key-a", Model: "gpt-4o", Status: 200, Success: true},
	} {
		te.fail(t, o)
	}
	if n := te.store.totalWrites(); n != 0 {
		t.Fatalf("local outcomes wrote %d store entries", n)
	}
	if ex, excluded := te.Check("openai", "key-a", "gpt-4o"); excluded {
		t.Fatalf("local outcomes excluded the target: %+v", ex)
	}
}

func TestEngineLockoutOffByDefault(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	te.fail(t, http404("openai", "key-a", "gpt-4o"))
	te.fail(t, http503("openai", "key-a", "gpt-4o"))
	wantEligible(t, te, "openai", "key-a", "gpt-4o")
	if n := len(te.Lockouts()); n != 0 {
		t.Fatalf("%d lockouts with model_lockout disabled", n)
	}
}

func TestEngineCheckPriorityAndProbe(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	now := te.clock.Now()
	for range 12 { // apikey opens at 12
		te.fail(t, http503("openai", "key-a", "gpt-4o"))
	}
	te.fail(t, http429("openai", "key-a", "gpt-4o"))
	// Both the breaker and the connection exclude: the breaker is reported.
	ex, excluded := te.Check("openai", "key-a", "gpt-4o")
	if !excluded || ex.Reason != ExclusionCircuitOpen || !ex.Until.Equal(now.Add(30*time.Second)) {
		t.Fatalf("Check = %+v, %v; want circuit_open until +30s", ex, excluded)
	}
	if open, d := te.ProviderOpen("openai"); !open || d != 30*time.Second {
		t.Fatalf("ProviderOpen = %v, %v; want true, 30s", open, d)
	}

	// After the reset timeout the breaker is HALF_OPEN: Peek never claims
	// the probe, the first Check does, the next is refused.
	te.clock.Advance(30 * time.Second)
	for range 3 {
		wantEligible(t, te, "openai", "key-b", "gpt-4o")
	}
	if _, excluded := te.Check("openai", "key-b", "gpt-4o"); excluded {
		t.Fatal("the first Check after the reset timeout did not get the probe")
	}
	ex, excluded = te.Check("openai", "key-b", "gpt-4o")
	if !excluded || ex.Reason != ExclusionCircuitOpen || ex.Detail != string(StateHalfOpen) ||
		!ex.Until.Equal(te.clock.Now().Add(30*time.Second)) {
		t.Fatalf("second Check during the probe = %+v, %v", ex, excluded)
	}
	if ex, excluded := te.Peek("openai", "key-b", "gpt-4o"); !excluded || ex.Detail != string(StateHalfOpen) {
		t.Fatalf("Peek during the probe = %+v, %v", ex, excluded)
	}
	// The probe's client aborted: the slot is freed for the next caller.
	te.fail(t, Outcome{Provider: "openai", Connection: "key-b", Model: "gpt-4o", Status: 499, Reason: ReasonClientAbort})
	if _, excluded := te.Check("openai", "key-b", "gpt-4o"); excluded {
		t.Fatal("the probe slot was not released by a client abort")
	}
	te.RecordSuccess("openai", "key-b", "gpt-4o")
	if s := te.breakers.Peek("openai").State; s != StateClosed {
		t.Fatalf("breaker after a successful probe = %s", s)
	}
}

func TestEngineCheckSkipsProbeWhenTargetExcluded(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	for range 12 {
		te.fail(t, http503("openai", "key-a", "gpt-4o"))
	}
	te.clock.Advance(30 * time.Second)
	te.fail(t, Outcome{Provider: "openai", Connection: "key-a", Model: "m", Status: 401,
		Reason: ReasonAuthError, Scope: ScopeConnection, Retryable: true})
	if ex, _ := te.Check("openai", "key-a", "gpt-4o"); ex.Reason != ExclusionConnectionCooldown {
		t.Fatalf("Check of a cooling connection = %+v", ex)
	}
	// The excluded target must not have taken the probe.
	if _, excluded := te.Check("openai", "key-b", "gpt-4o"); excluded {
		t.Fatal("an excluded target claimed the HALF_OPEN probe")
	}
}

func TestEngineWindowGate(t *testing.T) {
	s := DefaultSettings()
	s.ProviderCooldown.Enabled = true
	te := newTestEngine(t, s)
	now := te.clock.Now()
	// local: 2 failures (distinct connections) within 5 min cool for 1 min.
	te.fail(t, http429("vllm", "gpu-1", "llama"))
	te.fail(t, http429("vllm", "gpu-2", "llama"))
	wantExcluded(t, te, "vllm", "gpu-1", "llama", ExclusionProviderCooldown, now.Add(time.Minute))
	if !te.store.has(keyWindowGate + "vllm") {
		t.Fatal("window gate not persisted")
	}
	te.clock.Advance(time.Minute)
	te.RecordSuccess("vllm", "gpu-1", "llama")
	if _, excluded := te.Check("vllm", "gpu-1", "llama"); excluded {
		t.Fatal("provider still cooling after its minute")
	}

	// Disabled (the default), the gate is neither fed nor consulted.
	te2 := newTestEngine(t, DefaultSettings())
	te2.fail(t, http429("vllm", "gpu-1", "llama"))
	te2.fail(t, http429("vllm", "gpu-2", "llama"))
	if cooling, _ := te2.gate.Cooling("vllm"); cooling {
		t.Fatal("the disabled window gate recorded failures")
	}
}

func TestEngineAntiThunderingHerd(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	now := te.clock.Now()
	var wg sync.WaitGroup
	var cooled atomic.Int32
	te.SetObserver(Observer{OnCooldown: func(_, _, _ string, _ time.Duration) { cooled.Add(1) }})
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := te.RecordFailure(context.Background(), http429("openai", "key-a", "gpt-4o")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, _ := te.cooldowns.get("openai", "key-a")
	if st.BackoffLevel != 1 || !st.RateLimitedUntil.Equal(now.Add(3*time.Second)) {
		t.Fatalf("after 100 concurrent 429s: level %d until %v; want level 1 until +3s", st.BackoffLevel, st.RateLimitedUntil.Sub(now))
	}
	if n := cooled.Load(); n != 1 {
		t.Fatalf("the cooldown was armed %d times, want once", n)
	}
	if n := te.store.writesOf(keyCooldown + "openai/key-a"); n != 1 {
		t.Fatalf("the cooldown was written %d times, want once", n)
	}
}

func TestEngineDurableBeforeReturn(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	te.fail(t, http429("openai", "key-a", "gpt-5-codex"))
	te.fail(t, http503("claude", "acct-1", "opus"))
	for _, k := range []string{
		keyCooldown + "openai/key-a",
		keyLockout + "openai/key-a/family:codex",
		keyBreaker + "claude",
		keyLockout + "claude/acct-1/opus",
	} {
		if !te.store.has(k) {
			t.Errorf("%s not in the store when RecordFailure returned", k)
		}
	}
	te.store.failPut.Store(true)
	err := te.RecordFailure(context.Background(), http429("openai", "key-b", "gpt-4o"))
	if !errors.Is(err, errStoreDown) {
		t.Fatalf("RecordFailure with a failing store = %v, want errStoreDown", err)
	}
}

func TestEnginePersistenceRoundTrip(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	ctx := context.Background()
	if _, err := te.UpdateSettings(ctx, []byte(`{"model_lockout":{"enabled":true},"provider_cooldown":{"enabled":true}}`)); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		te.fail(t, http503("openai", "key-a", "gpt-4o"))
	}
	te.fail(t, http429("openai", "key-b", "gpt-5-codex"))
	te.fail(t, Outcome{Provider: "claude", Connection: "acct-1", Model: "opus", Status: 403,
		Reason: ReasonBanned, Scope: ScopeConnection, Permanent: true})
	te.fail(t, http503("vllm", "gpu-1", "llama"))
	te.fail(t, http503("vllm", "gpu-2", "llama"))

	before := te.Health()
	beforeCooldowns := te.Cooldowns("")
	beforeLocks := te.Lockouts()
	again := reopen(t, te.clock, te.store, DefaultSettings())

	if got := again.Settings(); !got.ModelLockout.Enabled || !got.ProviderCooldown.Enabled {
		t.Fatalf("settings patch lost on restart: %+v", got.ModelLockout)
	}
	after := again.Health()
	bj, _ := json.Marshal(before)
	aj, _ := json.Marshal(after)
	if !bytes.Equal(bj, aj) {
		t.Fatalf("health changed across restart:\nbefore %s\nafter  %s", bj, aj)
	}
	if before.Providers["openai"].State != string(StateOpen) || before.UnavailableConnections != 1 || before.CoolingConnections != 1 {
		t.Fatalf("unexpected health before restart: %s", bj)
	}
	cj1, _ := json.Marshal(beforeCooldowns)
	cj2, _ := json.Marshal(again.Cooldowns(""))
	if !bytes.Equal(cj1, cj2) {
		t.Fatalf("cooldowns changed across restart:\n%s\n%s", cj1, cj2)
	}
	lj1, _ := json.Marshal(beforeLocks)
	lj2, _ := json.Marshal(again.Lockouts())
	if !bytes.Equal(lj1, lj2) || len(beforeLocks) == 0 {
		t.Fatalf("lockouts changed across restart:\n%s\n%s", lj1, lj2)
	}
	if cooling, until := again.gate.Cooling("vllm"); !cooling || !until.Equal(engEpoch.Add(time.Minute)) {
		t.Fatalf("window gate after restart: %v until %v", cooling, until)
	}
	if ex, _ := again.Peek("claude", "acct-1", "opus"); ex.Reason != ExclusionUnavailable || ex.Detail != string(TestStatusBanned) {
		t.Fatalf("banned connection after restart: %+v", ex)
	}
	// Restored state keeps evolving: the next 429 escalates from level 1.
	again.clock.Advance(3 * time.Second)
	again.fail(t, http429("openai", "key-b", "gpt-4o"))
	if st, _ := again.cooldowns.get("openai", "key-b"); st.BackoffLevel != 2 {
		t.Fatalf("level after restart + 429 = %d, want 2", st.BackoffLevel)
	}
}

func TestEngineStoreTTLs(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	te.fail(t, http429("openai", "key-a", "gpt-4o"))
	te.fail(t, Outcome{Provider: "claude", Connection: "acct-1", Status: 402,
		Reason: ReasonCreditsExhausted, Scope: ScopeConnection, Permanent: true})
	// The lockout lives its 120 s plus the 30 min escalation window.
	te.clock.Advance(120*time.Second + 30*time.Minute + 2*time.Second)
	if te.store.has(keyLockout + "openai/key-a/gpt-4o") {
		t.Fatal("lockout entry outlived its escalation window")
	}
	if !te.store.has(keyCooldown + "openai/key-a") {
		t.Fatal("cooldown record expired within a day")
	}
	te.clock.Advance(25 * time.Hour)
	if te.store.has(keyCooldown + "openai/key-a") {
		t.Fatal("idle cooldown record not garbage-collected after a day")
	}
	if !te.store.has(keyCooldown + "claude/acct-1") {
		t.Fatal("terminal state expired")
	}
}

func TestEngineSuccessWritesOnlyOnChange(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	for range 10 {
		te.RecordSuccess("openai", "key-a", "gpt-4o")
	}
	if n := te.store.totalWrites(); n != 0 {
		t.Fatalf("successes on a clean target wrote %d entries", n)
	}
	te.fail(t, http429("openai", "key-a", "gpt-4o"))
	te.clock.Advance(time.Hour)
	w := te.store.totalWrites()
	te.RecordSuccess("openai", "key-a", "gpt-4o")
	if te.store.has(keyCooldown+"openai/key-a") || te.store.has(keyLockout+"openai/key-a/gpt-4o") {
		t.Fatal("success did not clear the persisted cooldown and decay the lockout")
	}
	if te.store.totalWrites() == w {
		t.Fatal("success that cleared state wrote nothing")
	}
	w = te.store.totalWrites()
	te.RecordSuccess("openai", "key-a", "gpt-4o")
	if n := te.store.totalWrites() - w; n != 0 {
		t.Fatalf("a success on the now clean target wrote %d entries", n)
	}
}

func TestEngineSuccessPersistsBreakerDecrement(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	for range 3 {
		te.fail(t, http503("openai", "key-a", "gpt-4o"))
	}
	te.RecordSuccess("openai", "key-a", "gpt-4o")
	again := reopen(t, te.clock, te.store, DefaultSettings())
	if n := again.breakers.Peek("openai").FailureCount; n != 2 {
		t.Fatalf("breaker count after restart = %d, want 2", n)
	}
}

func TestUpdateSettings(t *testing.T) {
	base := DefaultSettings()
	base.ComboCooldownWait.MaxWaitMS = 4000
	te := newTestEngine(t, base)
	ctx := context.Background()

	got, err := te.UpdateSettings(ctx, []byte(`{"combo_cooldown_wait":{"max_wait_ms":2000},"connection_cooldown":{"oauth":{"base_ms":7000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.ComboCooldownWait.MaxWaitMS != 2000 || got.ConnectionCooldown.OAuth.BaseMS != 7000 || got.ComboCooldownWait.MaxAttempts != 2 {
		t.Fatalf("UpdateSettings result: %+v", got.ComboCooldownWait)
	}
	// The new oauth base applies at once.
	te.fail(t, Outcome{Provider: "claude", Connection: "acct-1", Status: 429, Reason: ReasonRateLimit, Scope: ScopeConnection, Retryable: true})
	wantExcluded(t, te, "claude", "acct-1", "m", ExclusionConnectionCooldown, engEpoch.Add(7*time.Second))

	// Invalid patches: 400-style errors, old value untouched, nothing stored.
	writes := te.store.writesOf(SettingsKey)
	for patch, wantMsg := range map[string]string{
		`{"model_lockout":{"base_cooldown_ms":-5}}`:     "model_lockout.base_cooldown_ms: must be ≥ 0",
		`{"model_lockout":{"base_cooldown_ms":"soon"}}`: "model_lockout.base_cooldown_ms: must be a number",
		`{"model_lockout":{"bogus":1}}`:                 "model_lockout.bogus: unknown field",
		`{"combo_cooldown_wait":{"max_attempts":2.5}}`:  "combo_cooldown_wait.max_attempts",
		`[1,2]`:                                 "must be a JSON object",
		`{"circuit_breaker":{"enterprise":{}}}`: "circuit_breaker.enterprise: unknown field",
		`{"stream_recovery":{"throughput_watchdog":7}}`:   "stream_recovery.throughput_watchdog: must be an object",
		`{"model_lockout":{"error_codes":[429,"x"]}}`:     "model_lockout.error_codes",
		`{"request_queue":{"max_queue_depth":-1}}`:        "request_queue.max_queue_depth: must be ≥ 0",
		`{"quota_share_concurrency_limit":{"enabled":1}}`: "quota_share_concurrency_limit.enabled: must be a boolean",
	} {
		s, err := te.UpdateSettings(ctx, []byte(patch))
		if !errors.Is(err, ErrInvalidSettings) || !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("patch %s: err %v, want ErrInvalidSettings naming %q", patch, err, wantMsg)
		}
		if s.ComboCooldownWait.MaxWaitMS != 2000 || te.Settings().ComboCooldownWait.MaxWaitMS != 2000 {
			t.Errorf("patch %s changed the settings", patch)
		}
	}
	if te.store.writesOf(SettingsKey) != writes {
		t.Fatal("an invalid patch was persisted")
	}

	// A store failure keeps the old value too.
	te.store.failPut.Store(true)
	if _, err := te.UpdateSettings(ctx, []byte(`{"model_lockout":{"enabled":true}}`)); !errors.Is(err, errStoreDown) {
		t.Fatalf("UpdateSettings with a failing store: %v", err)
	}
	if te.Settings().ModelLockout.Enabled {
		t.Fatal("a patch that failed to persist was applied")
	}
	te.store.failPut.Store(false)

	// Clamps apply; the persisted patch survives a restart and wins over
	// the base settings; null drops an override back to the base.
	if got, _ := te.UpdateSettings(ctx, []byte(`{"combo_cooldown_wait":{"max_attempts":99}}`)); got.ComboCooldownWait.MaxAttempts != 10 {
		t.Fatalf("max_attempts 99 normalised to %d, want 10", got.ComboCooldownWait.MaxAttempts)
	}
	again := reopen(t, te.clock, te.store, base)
	if s := again.Settings(); s.ComboCooldownWait.MaxWaitMS != 2000 || s.ConnectionCooldown.OAuth.BaseMS != 7000 || s.ComboCooldownWait.MaxAttempts != 10 {
		t.Fatalf("settings after restart: %+v %+v", s.ComboCooldownWait, s.ConnectionCooldown.OAuth)
	}
	got, err = again.UpdateSettings(ctx, []byte(`{"combo_cooldown_wait":{"max_wait_ms":null}}`))
	if err != nil || got.ComboCooldownWait.MaxWaitMS != 4000 || got.ConnectionCooldown.OAuth.BaseMS != 7000 {
		t.Fatalf("null override: %v %+v", err, got.ComboCooldownWait)
	}
}

func TestNewIgnoresUnusablePersistedPatch(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	store := newMemStore(clock)
	_ = store.Put(context.Background(), SettingsKey, []byte(`{"removed_setting":true}`), 0)
	te := reopen(t, clock, store, DefaultSettings())
	if te.Settings().MaxAttemptsPerRequest != 10 {
		t.Fatal("defaults not used when the persisted patch is unusable")
	}
}

func TestEngineObserver(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	var mu sync.Mutex
	var events []string
	add := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	te.SetObserver(Observer{
		OnBreakerTransition: func(p, from, to string) { add("breaker " + p + " " + from + "→" + to) },
		OnCooldown:          func(p, c, r string, d time.Duration) { add("cooldown " + p + "/" + c + " " + r + " " + d.String()) },
		OnTerminal:          func(p, c, s string) { add("terminal " + p + "/" + c + " " + s) },
		OnLockout: func(p, c, m, r string, d time.Duration) {
			add("lockout " + p + "/" + c + "/" + m + " " + r + " " + d.String())
		},
		OnExclusion: func(r string) { add("excluded " + r) },
	})
	for range 2 {
		te.fail(t, http503("vllm", "gpu-1", "llama"))
	}
	te.fail(t, http429("openai", "key-a", "gpt-5-codex"))
	te.fail(t, Outcome{Provider: "claude", Connection: "acct-1", Status: 402, Reason: ReasonCreditsExhausted, Scope: ScopeConnection, Permanent: true})
	te.Check("openai", "key-a", "gpt-4o")
	want := []string{
		"breaker vllm CLOSED→DEGRADED",
		"lockout vllm/gpu-1/llama transient 2m0s",
		"breaker vllm DEGRADED→OPEN",
		"cooldown openai/key-a rate_limit 3s",
		"lockout openai/key-a/family:codex rate_limit 2m0s",
		"terminal claude/acct-1 credits_exhausted",
		"excluded connection_cooldown",
	}
	if !slices.Equal(events, want) {
		t.Fatalf("observer events:\n%s\nwant\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
}

func TestEngineCheckAndSuccessDoNotAllocate(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	// Surround the eligible target with state: other lockouts, another
	// connection cooling, a breaker with history.
	te.fail(t, http429("openai", "key-b", "gpt-4o"))
	te.fail(t, http404("openai", "key-a", "gpt-5-codex"))
	te.fail(t, http503("openai", "key-a", "o3"))
	te.clock.Advance(time.Minute)
	te.RecordSuccess("openai", "key-a", "o3") // breaker back to 0 failures
	if a := testing.AllocsPerRun(1000, func() {
		if _, excluded := te.Check("openai", "key-a", "gpt-4o"); excluded {
			panic("target unexpectedly excluded")
		}
	}); a != 0 {
		t.Fatalf("Check of an eligible target allocates %v times", a)
	}
	if a := testing.AllocsPerRun(1000, func() { te.RecordSuccess("openai", "key-a", "gpt-4o") }); a != 0 {
		t.Fatalf("RecordSuccess on a clean target allocates %v times", a)
	}
}

func BenchmarkEngineCheckRecordSuccess(b *testing.B) {
	// The wall clock: a clocktest.Clock's mutex would dominate the measurement.
	e, err := New(context.Background(), Options{Store: newMemStore(SystemClock{}), Settings: lockoutOn(), Providers: testProviders()})
	if err != nil {
		b.Fatal(err)
	}
	te := &testEngine{Engine: e}
	te.fail(b, http429("openai", "key-b", "gpt-5-codex"))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, excluded := te.Check("openai", "key-a", "gpt-5-codex"); !excluded {
				te.RecordSuccess("openai", "key-a", "gpt-5-codex")
			}
		}
	})
}
