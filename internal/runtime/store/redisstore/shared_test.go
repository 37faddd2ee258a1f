package redisstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/storetest"
)

// openCluster opens a Store on the shared test Cluster under prefix.
func openCluster(t testing.TB, clock engine.Clock, prefix string) *Store {
	t.Helper()
	return openWith(t, clock, Options{Mode: ModeCluster, Addrs: requireCluster(t).Addrs(), KeyPrefix: prefix})
}

func TestConformanceCluster(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T, clock *clocktest.Clock) engine.Store {
		return openCluster(t, clock, uniquePrefix())
	})
}

// TestClusterKeepsAGroupInOneSlot: a provider's breaker, cooldown and
// lockout keys and its version counter hash to one slot, so one script
// may touch them together; another provider may live elsewhere.
func TestClusterKeepsAGroupInOneSlot(t *testing.T) {
	c := requireCluster(t)
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cl.Close()
	l := layout{prefix: "breakwater:"}
	ctx := context.Background()
	slot := func(k string) int64 { return cl.ClusterKeySlot(ctx, k).Val() }
	g := l.group("breaker/openai")
	want := slot(l.version(g))
	for _, k := range []string{"breaker/openai", "windowgate/openai", "cooldown/openai/key-a", "lockout/openai/key-a/gpt-4o"} {
		if kg := l.group(k); kg != g {
			t.Errorf("group(%q) = %q, want %q", k, kg, g)
		}
		if got := slot(l.data(l.group(k), k)); got != want {
			t.Errorf("slot of %q = %d, want %d (the version counter's)", k, got, want)
		}
	}
	if l.group("lease/owner/x") != l.group("lease/conn/openai/key-a") {
		t.Error("a lease's owner and connection records are in different groups")
	}
}

func TestSwapReturnsTheCurrentValue(t *testing.T) {
	for _, mode := range []string{ModeSingle, ModeCluster} {
		t.Run(mode, func(t *testing.T) {
			clock := clocktest.NewClock(storetest.Epoch)
			s := open(t, clock, uniquePrefix())
			if mode == ModeCluster {
				s = openCluster(t, clock, uniquePrefix())
			}
			ctx := context.Background()
			ok, cur, exists, err := s.Swap(ctx, "breaker/p", nil, []byte("one"), 0)
			if err != nil || !ok || cur != nil || exists {
				t.Fatalf("Swap on absent = %v %q %v %v", ok, cur, exists, err)
			}
			ok, cur, exists, err = s.Swap(ctx, "breaker/p", nil, []byte("two"), 0)
			if err != nil || ok || string(cur) != "one" || !exists {
				t.Fatalf("Swap expecting absent = %v %q %v %v, want false \"one\" true", ok, cur, exists, err)
			}
			ok, cur, exists, err = s.Swap(ctx, "breaker/p", []byte("zero"), []byte("two"), 0)
			if err != nil || ok || string(cur) != "one" || !exists {
				t.Fatalf("Swap expecting a stale value = %v %q %v %v", ok, cur, exists, err)
			}
			ok, _, _, err = s.Swap(ctx, "breaker/p", []byte("one"), nil, 0)
			if err != nil || !ok {
				t.Fatalf("Swap deleting = %v %v", ok, err)
			}
			ok, cur, exists, err = s.Swap(ctx, "breaker/p", []byte("one"), []byte("x"), 0)
			if err != nil || ok || cur != nil || exists {
				t.Fatalf("Swap expecting a deleted value = %v %q %v %v, want false nil false", ok, cur, exists, err)
			}
		})
	}
}

// watchLog collects what Watch delivers.
type watchLog struct {
	mu      sync.Mutex
	changes []engine.Change
	at      []time.Time
	fail    bool
}

func (w *watchLog) fn(c engine.Change) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes = append(w.changes, c)
	w.at = append(w.at, time.Now())
	if w.fail && c.Kind == engine.ChangeResync {
		w.fail = false
		return errors.New("resync failed once")
	}
	return nil
}

// wait waits up to within for a change matching ok and returns its index.
func (w *watchLog) wait(t *testing.T, within time.Duration, what string, ok func(engine.Change) bool) int {
	t.Helper()
	return w.waitFrom(t, 0, within, what, ok)
}

// waitFrom is wait for a change at index from or later.
func (w *watchLog) waitFrom(t *testing.T, from int, within time.Duration, what string, ok func(engine.Change) bool) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		w.mu.Lock()
		for i, c := range w.changes {
			if i >= from && ok(c) {
				w.mu.Unlock()
				return i
			}
		}
		w.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; got %+v", what, within, w.snapshot())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (w *watchLog) snapshot() []engine.Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]engine.Change(nil), w.changes...)
}

func (w *watchLog) reset() {
	w.mu.Lock()
	w.changes, w.at = nil, nil
	w.mu.Unlock()
}

func isKind(k engine.ChangeKind) func(engine.Change) bool {
	return func(c engine.Change) bool { return c.Kind == k }
}

// startWatch runs s.Watch into a watchLog until the test ends and waits
// for the initial resync.
func startWatch(t *testing.T, s *Store) *watchLog {
	t.Helper()
	w := &watchLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, w.fn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	w.wait(t, 5*time.Second, "initial resync", isKind(engine.ChangeResync))
	w.reset()
	return w
}

func TestWatchDeliversOtherInstancesChanges(t *testing.T) {
	for _, mode := range []string{ModeSingle, ModeCluster} {
		t.Run(mode, func(t *testing.T) {
			prefix := uniquePrefix()
			clock := engine.SystemClock{}
			openFn := func() *Store { return open(t, clock, prefix) }
			if mode == ModeCluster {
				openFn = func() *Store { return openCluster(t, clock, prefix) }
			}
			a, b := openFn(), openFn()
			w := startWatch(t, b)
			ctx := context.Background()
			keys := []string{"breaker/openai", "cooldown/openai/k1", "lease/owner/abc", "settings/resilience"}
			for _, k := range keys {
				if err := a.Put(ctx, k, []byte("v"), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Delete(ctx, "cooldown/openai/k1"); err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				w.wait(t, 2*time.Second, "notice of "+k, func(c engine.Change) bool { return c.Kind == engine.ChangeKey && c.Key == k })
			}
			// Its own writes are not reported to the writer.
			if err := b.Put(ctx, "breaker/own", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			if err := a.Put(ctx, "breaker/marker", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			w.wait(t, 2*time.Second, "the marker", func(c engine.Change) bool { return c.Key == "breaker/marker" })
			for _, c := range w.snapshot() {
				if c.Key == "breaker/own" {
					t.Error("the instance's own write was reported to it")
				}
				if c.Kind == engine.ChangeKey && (c.SentAt.IsZero() || time.Since(c.SentAt) > 10*time.Second) {
					t.Errorf("change %q has sent time %v", c.Key, c.SentAt)
				}
			}
		})
	}
}

// TestWatchHealsAMissedNotice: a change whose notice never arrives (here
// made with raw commands: value and version bumped, nothing published) is
// found by the version check within two intervals, and Watch asks for a
// resync; a failed resync is asked for again.
func TestWatchHealsAMissedNotice(t *testing.T) {
	prefix := uniquePrefix()
	s := openWith(t, engine.SystemClock{}, Options{URL: requireServer(t), KeyPrefix: prefix, CheckInterval: 50 * time.Millisecond})
	writer := open(t, engine.SystemClock{}, prefix)
	w := startWatch(t, s)
	ctx := context.Background()
	if err := writer.Put(ctx, "breaker/p", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	w.wait(t, time.Second, "the notice", isKind(engine.ChangeKey))
	// Quiet checks find no gap.
	time.Sleep(200 * time.Millisecond)
	for _, c := range w.snapshot() {
		if c.Kind == engine.ChangeResync {
			t.Fatalf("resync without a missed notice: %+v", w.snapshot())
		}
	}
	raw := rawClient(t)
	l := layout{prefix: prefix}
	g := l.group("breaker/p")
	if err := raw.Incr(ctx, l.version(g)).Err(); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.fail = true
	w.mu.Unlock()
	start := time.Now()
	first := w.wait(t, time.Second, "a resync", isKind(engine.ChangeResync))
	w.waitFrom(t, first+1, time.Second, "a second resync after the failed one", isKind(engine.ChangeResync))
	t.Logf("missed notice healed within %v (check interval 50ms)", time.Since(start).Round(time.Millisecond))
}

// TestOutageFailsFastAndRecovers: with Redis gone, calls fail at once
// with ErrStoreUnavailable (after the first detects it), Status and Watch
// report the outage once, and when Redis is back the next call succeeds,
// Watch reports it and asks for a resync.
func TestOutageFailsFastAndRecovers(t *testing.T) {
	requireServer(t)
	srv, err := redisproc.Start(filepath.Join(t.TempDir(), "outage"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	s := openWith(t, engine.SystemClock{}, Options{URL: srv.URL(), CheckInterval: 50 * time.Millisecond, Timeout: 200 * time.Millisecond})
	w := startWatch(t, s)
	ctx := context.Background()
	if err := s.Put(ctx, "k/1", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	w.wait(t, 2*time.Second, "ChangeDown", isKind(engine.ChangeDown))
	if st := s.Status(); st.Up || st.Outages != 1 || st.LastError == "" {
		t.Fatalf("Status during the outage = %+v", st)
	}
	for range 20 {
		t0 := time.Now()
		_, _, err := s.Get(ctx, "k/1")
		if !errors.Is(err, engine.ErrStoreUnavailable) {
			t.Fatalf("Get during the outage: %v, want ErrStoreUnavailable", err)
		}
		if d := time.Since(t0); d > 300*time.Millisecond {
			t.Fatalf("Get during the outage took %v (timeout 200ms)", d)
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	up := w.wait(t, 5*time.Second, "ChangeUp", isKind(engine.ChangeUp))
	w.waitFrom(t, up, 5*time.Second, "a resync after ChangeUp", isKind(engine.ChangeResync))
	if err := s.Put(ctx, "k/2", []byte("v"), 0); err != nil {
		t.Fatalf("Put after the outage: %v", err)
	}
	if st := s.Status(); !st.Up || st.Outages != 1 {
		t.Fatalf("Status after the outage = %+v", st)
	}
	downs := 0
	for _, c := range w.snapshot() {
		if c.Kind == engine.ChangeDown {
			downs++
			if strings.Contains(c.Err.Error(), "state store unavailable: state store unavailable") {
				t.Errorf("doubled error text: %v", c.Err)
			}
		}
	}
	if downs != 1 {
		t.Errorf("%d ChangeDown for one outage", downs)
	}
}

// TestSentinel: the store reaches the master through a Sentinel, passes
// the conformance suite, and after the master dies and the Sentinel
// promotes its replica, writes succeed again on the new master with the
// acknowledged data.
func TestSentinel(t *testing.T) {
	requireServer(t)
	dir := t.TempDir()
	master, err := redisproc.Start(filepath.Join(dir, "master"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(master.Kill)
	replica, err := redisproc.Start(filepath.Join(dir, "replica"), "--replicaof", "127.0.0.1", fmt.Sprint(master.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replica.Kill)
	sentinel, err := redisproc.StartSentinel(filepath.Join(dir, "sentinel"), master, "bwmaster", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sentinel.Kill)
	opts := func(prefix string) Options {
		return Options{Mode: ModeSentinel, Addrs: []string{sentinel.Addr}, MasterName: "bwmaster", KeyPrefix: prefix, Timeout: 300 * time.Millisecond}
	}
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, clock *clocktest.Clock) engine.Store {
			return openWith(t, clock, opts(uniquePrefix()))
		})
	})
	t.Run("Failover", func(t *testing.T) {
		prefix := uniquePrefix()
		s := openWith(t, engine.SystemClock{}, opts(prefix))
		ctx := context.Background()
		if err := s.Put(ctx, "lease/owner/x", []byte("acked"), 0); err != nil {
			t.Fatal(err)
		}
		// The replica must hold the write before the master dies.
		mc := redis.NewClient(&redis.Options{Addr: master.Addr})
		defer mc.Close()
		if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
			t.Fatalf("WAIT for the replica: %d %v", n, err)
		}

		master.Kill()
		t0 := time.Now()
		for {
			err := s.Put(ctx, "breaker/after", []byte("v"), 0)
			if err == nil {
				break
			}
			if time.Since(t0) > 20*time.Second {
				t.Fatalf("no write accepted 20 s after the master died: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("writes accepted again %v after the master died", time.Since(t0).Round(time.Millisecond))
		v, ok, err := s.Get(ctx, "lease/owner/x")
		if err != nil || !ok || string(v) != "acked" {
			t.Fatalf("the acknowledged value after the failover: %q %v %v", v, ok, err)
		}
	})
}

// TestSlowRedisCallsAreBounded: a Redis that stops answering (paused,
// its connections open) costs a call at most its timeout, then fails
// fast until it answers again.
func TestSlowRedisCallsAreBounded(t *testing.T) {
	requireServer(t)
	srv, err := redisproc.Start(filepath.Join(t.TempDir(), "slow"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	const timeout = 200 * time.Millisecond
	s := openWith(t, engine.SystemClock{}, Options{URL: srv.URL(), Timeout: timeout})
	ctx := context.Background()
	if err := s.Put(ctx, "k/1", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	t0 := time.Now()
	_, _, _, err = s.Swap(ctx, "breaker/p", nil, []byte("v"), 0)
	if took := time.Since(t0); !errors.Is(err, engine.ErrStoreUnavailable) || took > timeout+300*time.Millisecond {
		t.Fatalf("Swap on a paused Redis: %v after %v, want ErrStoreUnavailable within about %v", err, took, timeout)
	}
	for range 10 {
		t0 = time.Now()
		if _, _, err := s.Get(ctx, "k/1"); !errors.Is(err, engine.ErrStoreUnavailable) || time.Since(t0) > 50*time.Millisecond {
			t.Fatalf("Get while Redis is known down: %v after %v, want an immediate ErrStoreUnavailable", err, time.Since(t0))
		}
	}
	srv.Resume()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, ok, err := s.Get(ctx, "k/1")
		if err == nil && ok && string(v) == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis answered again but the store did not: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
