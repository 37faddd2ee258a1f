package engine_test

// Shared mode, tested with several engines — as several gateway
// instances — on one real redis-server, time driven by a fake clock.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
)

var sharedEpoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var redisServer struct {
	once sync.Once
	dir  string
	srv  *redisproc.Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if redisServer.srv != nil {
		redisServer.srv.Kill()
		_ = os.RemoveAll(redisServer.dir)
	}
	os.Exit(code)
}

// requireRedis returns the shared redis-server, started on first use; it
// skips the test when redis-server is missing (fails with CI=true).
func requireRedis(t *testing.T) *redisproc.Server {
	t.Helper()
	redisproc.Require(t)
	redisServer.once.Do(func() {
		redisServer.dir, redisServer.err = os.MkdirTemp("", "breakwater-engine-redis-")
		if redisServer.err == nil {
			redisServer.srv, redisServer.err = redisproc.Start(filepath.Join(redisServer.dir, "redis"))
		}
	})
	if redisServer.err != nil {
		t.Fatal(redisServer.err)
	}
	return redisServer.srv
}

var prefixSeq atomic.Int64

// instances is a set of engines sharing one Redis key space.
type instances struct {
	clock  *clocktest.Clock
	engs   []*engine.Engine
	stores []*redisstore.Store
	raw    *redis.Client
	prefix string
}

func sharedProviders() []engine.ProviderSpec {
	return []engine.ProviderSpec{
		{ID: "openai", Profile: engine.ProfileAPIKey, Connections: []engine.ConnectionSpec{{ID: "key-a"}, {ID: "key-b"}}},
		{ID: "vllm", Profile: engine.ProfileLocal, Connections: []engine.ConnectionSpec{{ID: "gpu-1"}, {ID: "gpu-2"}}},
	}
}

// newInstances starts n engines on srv, each with its own Store (so each
// is another instance to the others), sharing a fake clock.
func newInstances(t *testing.T, srv *redisproc.Server, n int, settings engine.Settings) *instances {
	t.Helper()
	in := &instances{clock: clocktest.NewClock(sharedEpoch), prefix: fmt.Sprintf("bwengine:%d:%d:", time.Now().UnixNano(), prefixSeq.Add(1))}
	for range n {
		s, err := redisstore.Open(redisstore.Options{URL: srv.URL(), KeyPrefix: in.prefix}, in.clock, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		e, err := engine.New(context.Background(), engine.Options{Clock: in.clock, Store: s, Settings: settings, Providers: sharedProviders()})
		if err != nil {
			t.Fatal(err)
		}
		if !e.Shared() {
			t.Fatal("an engine on the Redis store is not in shared mode")
		}
		in.engs = append(in.engs, e)
		in.stores = append(in.stores, s)
	}
	in.raw = redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = in.raw.Close() })
	return in
}

func fail503(provider string) engine.Outcome {
	return engine.Outcome{Provider: provider, Connection: "key-a", Model: "m", Status: 503,
		Reason: engine.ReasonServerError, Retryable: true, RuleSource: "default"}
}

func fail429(provider, connection string) engine.Outcome {
	return engine.Outcome{Provider: provider, Connection: connection, Model: "m", Status: 429,
		Reason: engine.ReasonRateLimit, Retryable: true, RuleSource: "default"}
}

// stored reads the breaker of provider as the store holds it.
func (in *instances) storedBreaker(t *testing.T, provider string) engine.BreakerSnapshot {
	t.Helper()
	raw, ok, err := in.stores[0].Get(context.Background(), "breaker/"+provider)
	if err != nil || !ok {
		t.Fatalf("stored breaker of %s: %v %v", provider, ok, err)
	}
	var snap engine.BreakerSnapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestSharedBreakerOpensAtTheSingleInstanceThreshold: failures spread over
// three instances count as one instance's would. Eleven failures, made on
// instances whose local views are stale, leave the breaker short of its
// threshold (apikey: 12); the twelfth, on any instance, opens it.
func TestSharedBreakerOpensAtTheSingleInstanceThreshold(t *testing.T) {
	in := newInstances(t, requireRedis(t), 3, engine.Settings{})
	ctx := context.Background()
	for i, n := range []int{5, 4, 2} {
		for range n {
			if err := in.engs[i].RecordFailure(ctx, fail503("openai")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if snap := in.storedBreaker(t, "openai"); snap.State != engine.StateDegraded || snap.FailureCount != 11 {
		t.Fatalf("after 11 failures on three instances: %s with %d, want DEGRADED with 11", snap.State, snap.FailureCount)
	}
	// Instance 0 still believes 5 failures; its next failure is the 12th.
	if ex, excluded := in.engs[0].Peek("openai", "key-a", "m"); excluded {
		t.Fatalf("instance 0 excluded openai before the threshold: %+v", ex)
	}
	if err := in.engs[0].RecordFailure(ctx, fail503("openai")); err != nil {
		t.Fatal(err)
	}
	snap := in.storedBreaker(t, "openai")
	if snap.State != engine.StateOpen || snap.FailureCount != 12 {
		t.Fatalf("after the 12th failure: %s with %d, want OPEN with 12", snap.State, snap.FailureCount)
	}
	if _, excluded := in.engs[0].Peek("openai", "key-a", "m"); !excluded {
		t.Fatal("the instance that opened the breaker still routes to openai")
	}
	// The others learn it from the store (Watch calls LoadKey).
	if _, err := in.engs[2].LoadKey(ctx, "breaker/openai"); err != nil {
		t.Fatal(err)
	}
	if ex, excluded := in.engs[2].Peek("openai", "key-a", "m"); !excluded || ex.Reason != engine.ExclusionCircuitOpen {
		t.Fatalf("instance 2 after LoadKey: %+v %v, want circuit_open", ex, excluded)
	}
}

// TestSharedBreakerConcurrentFailuresOpenOnce: 3 instances × 20
// goroutines fail at once; the breaker opens exactly once, at 12.
func TestSharedBreakerConcurrentFailuresOpenOnce(t *testing.T) {
	in := newInstances(t, requireRedis(t), 3, engine.Settings{})
	var opened atomic.Int64
	for _, e := range in.engs {
		e.SetObserver(engine.Observer{OnBreakerTransition: func(_, _, to string) {
			if to == string(engine.StateOpen) {
				opened.Add(1)
			}
		}})
	}
	var wg sync.WaitGroup
	for _, e := range in.engs {
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := e.RecordFailure(context.Background(), fail503("openai")); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	snap := in.storedBreaker(t, "openai")
	opens := 0
	for _, tr := range snap.Transitions {
		if tr.To == engine.StateOpen {
			opens++
		}
	}
	if snap.State != engine.StateOpen || snap.FailureCount != 12 || opens != 1 {
		t.Fatalf("after 60 concurrent failures: %s, count %d, %d openings (%+v); want OPEN, 12, 1", snap.State, snap.FailureCount, opens, snap.Transitions)
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("observers saw %d openings across the instances, want 1", n)
	}
}

// TestSharedCooldownOneExtensionPerBurst: 30 concurrent 429s of one
// connection on three instances arm one cooldown at the base (apikey 3 s)
// and raise the backoff level once.
func TestSharedCooldownOneExtensionPerBurst(t *testing.T) {
	in := newInstances(t, requireRedis(t), 3, engine.Settings{})
	var wg sync.WaitGroup
	for _, e := range in.engs {
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := e.RecordFailure(context.Background(), fail429("openai", "key-a")); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	for i, e := range in.engs {
		if _, err := e.LoadKey(context.Background(), "cooldown/openai/key-a"); err != nil {
			t.Fatal(err)
		}
		cs := e.Cooldowns("openai")
		if len(cs) != 1 || cs[0].BackoffLevel != 1 || !cs[0].RateLimitedUntil.Equal(sharedEpoch.Add(3*time.Second)) {
			t.Fatalf("instance %d: %+v, want one cooldown until +3s at backoff level 1", i, cs)
		}
	}
	// The next burst, after the cooldown, escalates once more: 6 s, level 2.
	in.clock.Advance(3 * time.Second)
	for _, e := range in.engs {
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = e.RecordFailure(context.Background(), fail429("openai", "key-a"))
			}()
		}
	}
	wg.Wait()
	if _, err := in.engs[1].LoadKey(context.Background(), "cooldown/openai/key-a"); err != nil {
		t.Fatal(err)
	}
	cs := in.engs[1].Cooldowns("openai")
	if len(cs) != 1 || cs[0].BackoffLevel != 2 || !cs[0].RateLimitedUntil.Equal(sharedEpoch.Add(9*time.Second)) {
		t.Fatalf("second burst: %+v, want until +9s at level 2", cs)
	}
}

// TestSharedWindowGateCountsEveryInstance: the local profile's gate trips
// after 2 failures in the window; one failure on each of two instances
// (two connections) trips it, where each instance alone would not.
func TestSharedWindowGateCountsEveryInstance(t *testing.T) {
	s := engine.DefaultSettings()
	s.ProviderCooldown.Enabled = true
	in := newInstances(t, requireRedis(t), 3, s)
	ctx := context.Background()
	o := fail503("vllm")
	o.Connection = "gpu-1"
	if err := in.engs[0].RecordFailure(ctx, o); err != nil {
		t.Fatal(err)
	}
	o.Connection = "gpu-2"
	if err := in.engs[1].RecordFailure(ctx, o); err != nil {
		t.Fatal(err)
	}
	if _, err := in.engs[2].LoadKey(ctx, "windowgate/vllm"); err != nil {
		t.Fatal(err)
	}
	ex, excluded := in.engs[2].Peek("vllm", "gpu-1", "m")
	if !excluded || ex.Reason != engine.ExclusionProviderCooldown || !ex.Until.Equal(sharedEpoch.Add(time.Minute)) {
		t.Fatalf("instance 2: %+v %v, want provider_cooldown for 1 min", ex, excluded)
	}
}

// TestSharedLockoutBurstLocksOnce: concurrent 429s of one model on three
// instances arm one lockout at the base, count 1.
func TestSharedLockoutBurstLocksOnce(t *testing.T) {
	s := engine.DefaultSettings()
	s.ModelLockout.Enabled = true
	in := newInstances(t, requireRedis(t), 3, s)
	var wg sync.WaitGroup
	for _, e := range in.engs {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := fail429("openai", "key-b")
				o.Model = "gpt-4o"
				_ = e.RecordFailure(context.Background(), o)
			}()
		}
	}
	wg.Wait()
	if _, err := in.engs[0].LoadKey(context.Background(), "lockout/openai/key-b/gpt-4o"); err != nil {
		t.Fatal(err)
	}
	ls := in.engs[0].Lockouts()
	if len(ls) != 1 || ls[0].FailureCount != 1 || !ls[0].ExpiresAt.Equal(sharedEpoch.Add(2*time.Minute)) {
		t.Fatalf("lockouts = %+v, want one, count 1, 2 min", ls)
	}
}

// trips counts the Redis round trips of instance i during fn.
func (in *instances) trips(i int, fn func()) int {
	before := in.stores[i].RoundTrips()
	fn()
	return int(in.stores[i].RoundTrips() - before)
}

// TestSharedRoundTrips pins the cost of each path, in round trips to
// Redis:
// a clean success makes none, a failure whose outcome changes the breaker
// one (two when another instance changed it since), a failure on an OPEN
// breaker none, and a success that decrements a count one, in the
// background.
func TestSharedRoundTrips(t *testing.T) {
	in := newInstances(t, requireRedis(t), 2, engine.Settings{})
	ctx := context.Background()
	a, b := in.engs[0], in.engs[1]
	// Warm up: script loaded, groups registered.
	if err := a.RecordFailure(ctx, fail503("openai")); err != nil {
		t.Fatal(err)
	}
	if err := b.RecordFailure(ctx, fail503("openai")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadKey(ctx, "breaker/openai"); err != nil {
		t.Fatal(err)
	}

	if n := in.trips(0, func() {
		for range 1000 {
			a.RecordSuccess("vllm", "gpu-1", "m")
		}
	}); n != 0 {
		t.Fatalf("1000 clean successes made %d Redis round trips, want 0", n)
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		if _, excluded := a.Check("vllm", "gpu-1", "m"); !excluded {
			a.RecordSuccess("vllm", "gpu-1", "m")
		}
	}); allocs != 0 {
		t.Fatalf("Check + RecordSuccess of a clean target in shared mode allocates %v times, want 0", allocs)
	}
	if n := in.trips(0, func() {
		if err := a.RecordFailure(ctx, fail503("openai")); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("a failure on an up-to-date instance made %d round trips, want 1", n)
	}
	if n := in.trips(1, func() {
		if err := b.RecordFailure(ctx, fail503("openai")); err != nil { // b has not seen a's last failure
			t.Fatal(err)
		}
	}); n != 2 {
		t.Fatalf("a failure on a stale instance made %d round trips, want 2 (the swap, and again on the current value)", n)
	}
	if snap := in.storedBreaker(t, "openai"); snap.FailureCount != 4 {
		t.Fatalf("count = %d, want 4", snap.FailureCount)
	}
	if n := in.trips(1, func() {
		b.RecordSuccess("openai", "key-a", "m")
		b.Flush()
	}); n != 1 {
		t.Fatalf("a success that decrements the count made %d round trips, want 1 (in the background)", n)
	}
	if snap := in.storedBreaker(t, "openai"); snap.FailureCount != 3 {
		t.Fatalf("count after the success = %d, want 3", snap.FailureCount)
	}
	for range 9 {
		if err := b.RecordFailure(ctx, fail503("openai")); err != nil {
			t.Fatal(err)
		}
	}
	if snap := in.storedBreaker(t, "openai"); snap.State != engine.StateOpen {
		t.Fatalf("state = %s, want OPEN", snap.State)
	}
	if n := in.trips(1, func() {
		for range 100 {
			if err := b.RecordFailure(ctx, fail503("openai")); err != nil {
				t.Fatal(err)
			}
		}
	}); n != 0 {
		t.Fatalf("100 failures on an OPEN breaker made %d round trips, want 0 (they change nothing)", n)
	}
}

// TestSharedAdminChangesReachOtherInstances: a cleared cooldown, a reset
// breaker and a settings patch made on one instance are installed by
// another's LoadKey.
func TestSharedAdminChangesReachOtherInstances(t *testing.T) {
	in := newInstances(t, requireRedis(t), 2, engine.Settings{})
	ctx := context.Background()
	a, b := in.engs[0], in.engs[1]
	if err := a.RecordFailure(ctx, fail429("openai", "key-b")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LoadKey(ctx, "cooldown/openai/key-b"); err != nil {
		t.Fatal(err)
	}
	if _, excluded := b.Peek("openai", "key-b", "m"); !excluded {
		t.Fatal("instance b does not see the cooldown")
	}
	if _, err := a.ClearCooldowns(ctx, engine.ClearRequest{ConnectionIDs: []string{"openai/key-b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LoadKey(ctx, "cooldown/openai/key-b"); err != nil {
		t.Fatal(err)
	}
	if ex, excluded := b.Peek("openai", "key-b", "m"); excluded {
		t.Fatalf("instance b still excludes key-b after the clear: %+v", ex)
	}
	if _, err := a.UpdateSettings(ctx, []byte(`{"max_attempts_per_request": 3, "circuit_breaker": {"apikey": {"failure_threshold": 2}}}`)); err != nil {
		t.Fatal(err)
	}
	if handled, err := b.LoadKey(ctx, engine.SettingsKey); !handled || err != nil {
		t.Fatalf("LoadKey(settings) = %v, %v", handled, err)
	}
	if got := b.Settings().MaxAttemptsPerRequest; got != 3 {
		t.Fatalf("instance b max_attempts_per_request = %d, want 3", got)
	}
	// The new threshold applies to b's next decision.
	for range 2 {
		if err := b.RecordFailure(ctx, fail503("openai")); err != nil {
			t.Fatal(err)
		}
	}
	if snap := in.storedBreaker(t, "openai"); snap.State != engine.StateOpen {
		t.Fatalf("after 2 failures with threshold 2: %s", snap.State)
	}
	if _, err := a.ResetBreakers(ctx, "openai"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LoadKey(ctx, "breaker/openai"); err != nil {
		t.Fatal(err)
	}
	if ex, excluded := b.Peek("openai", "key-a", "m"); excluded {
		t.Fatalf("instance b after the reset: %+v", ex)
	}
	if handled, _ := b.LoadKey(ctx, "combos/api"); handled {
		t.Fatal("LoadKey claimed a key that is not the engine's")
	}
}

// TestSharedOutageKeepsLocalChangesAndResyncs: while Redis is down a
// failure still changes the local view (routing fails open on it) and the
// call returns at once; when Redis is back, Resync writes the change,
// unless another instance changed the same key first — then the
// acknowledged value in the store wins.
func TestSharedOutageKeepsLocalChangesAndResyncs(t *testing.T) {
	requireRedis(t)
	srv, err := redisproc.Start(filepath.Join(t.TempDir(), "outage"), "--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	s := engine.DefaultSettings()
	s.CircuitBreaker.APIKey.FailureThreshold = 2
	in := newInstances(t, srv, 2, s)
	ctx := context.Background()
	a, b := in.engs[0], in.engs[1]
	if err := a.RecordFailure(ctx, fail429("openai", "key-b")); err != nil { // acknowledged before the outage
		t.Fatal(err)
	}

	srv.Kill()
	for i := range 2 {
		t0 := time.Now()
		if err := a.RecordFailure(ctx, fail503("openai")); err != nil {
			t.Fatalf("failure %d during the outage: %v (want it kept locally)", i, err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("failure during the outage took %v", d)
		}
	}
	if ex, excluded := a.Peek("openai", "key-a", "m"); !excluded || ex.Reason != engine.ExclusionCircuitOpen {
		t.Fatalf("instance a during the outage: %+v %v, want its own breaker OPEN", ex, excluded)
	}
	// b changes the same connection's cooldown during the outage too.
	in.clock.Advance(10 * time.Second)
	if err := b.RecordFailure(ctx, fail429("openai", "key-a")); err != nil {
		t.Fatal(err)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	resync := func(e *engine.Engine) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := e.Resync(ctx)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Resync after the outage: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	resync(a)
	if snap := in.storedBreaker(t, "openai"); snap.State != engine.StateOpen {
		t.Fatalf("a's breaker after the resync: %s, want OPEN written back", snap.State)
	}
	resync(b)
	if ex, excluded := b.Peek("openai", "key-a", "m"); !excluded || ex.Reason != engine.ExclusionCircuitOpen {
		t.Fatalf("instance b after both resyncs: %+v %v, want a's OPEN breaker", ex, excluded)
	}
	// The cooldown of key-b acknowledged before the outage survived it.
	if _, excluded := b.Peek("openai", "key-b", "m"); !excluded {
		t.Fatal("the acknowledged cooldown of key-b was lost")
	}

	// A change kept locally loses to one another instance stored first.
	srv.Kill()
	if err := a.RecordFailure(ctx, fail429("openai", "key-b")); err != nil { // a: key-b cooling, kept local
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClearCooldowns(ctx, engine.ClearRequest{ConnectionIDs: []string{"openai/key-b"}}); err != nil {
		// b's store may still be in its fail-fast second: retry.
		time.Sleep(1100 * time.Millisecond)
		if _, err := b.ClearCooldowns(ctx, engine.ClearRequest{ConnectionIDs: []string{"openai/key-b"}}); err != nil {
			t.Fatal(err)
		}
	}
	resync(a)
	for _, c := range a.Cooldowns("openai") {
		if c.Connection == "key-b" {
			t.Fatalf("a kept its outage-time cooldown over the cleared one in the store: %+v", c)
		}
	}
}

// TestSharedToolLimitReachesOtherInstances: a tool limit learned on one
// instance is in force on another after LoadKey, and gone after it is
// cleared; Resync reloads them all.
func TestSharedToolLimitReachesOtherInstances(t *testing.T) {
	in := newInstances(t, requireRedis(t), 2, engine.Settings{})
	ctx := context.Background()
	a, b := in.engs[0], in.engs[1]
	o := engine.Outcome{Provider: "openai", Connection: "key-a", Model: "gpt-4o", Status: 400,
		Reason: engine.ReasonToolLimit, Tools: 200, Message: "maximum of 128 tools", RuleSource: "default"}
	if err := a.RecordFailure(ctx, o); err != nil {
		t.Fatal(err)
	}
	if handled, err := b.LoadKey(ctx, "toollimit/openai/gpt-4o"); !handled || err != nil {
		t.Fatalf("LoadKey = %v %v", handled, err)
	}
	if got := b.ToolLimits(); len(got) != 1 || got[0].Limit != 128 {
		t.Fatalf("instance b tool limits = %+v, want 128 learned on a", got)
	}
	if _, err := a.ClearToolLimit(ctx, "openai", "gpt-4o"); err != nil {
		t.Fatal(err)
	}
	if err := b.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.ToolLimits(); len(got) != 0 {
		t.Fatalf("instance b after the clear and a resync: %+v", got)
	}
}

// BenchmarkSuccessPath is Check + RecordSuccess on a clean target, the
// request path of every success, with the state in a shared Redis and in
// a single-instance memory store: the shared mode reads the same local
// view and must cost the same (no round trip, no allocation).
func BenchmarkSuccessPath(b *testing.B) {
	for _, mode := range []string{"memory", "redis"} {
		b.Run(mode, func(b *testing.B) {
			var st engine.Store = memstore.New(engine.SystemClock{})
			if mode == "redis" {
				redisproc.Require(b)
				dir := b.TempDir()
				srv, err := redisproc.Start(filepath.Join(dir, "redis"))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(srv.Kill)
				rs, err := redisstore.Open(redisstore.Options{URL: srv.URL()}, engine.SystemClock{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = rs.Close() })
				st = rs
			}
			e, err := engine.New(context.Background(), engine.Options{Store: st, Providers: sharedProviders()})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, excluded := e.Check("openai", "key-a", "m"); !excluded {
						e.RecordSuccess("openai", "key-a", "m")
					}
				}
			})
		})
	}
}
