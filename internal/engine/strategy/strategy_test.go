package strategy

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// mk builds targets with the given keys.
func mk(keys ...string) []Target {
	ts := make([]Target, len(keys))
	for i, k := range keys {
		ts[i] = Target{Key: k, Provider: "p", Model: k}
	}
	return ts
}

// except returns an eligible func excluding the given keys.
func except(targets []Target, keys ...string) func(int) bool {
	return func(i int) bool { return !slices.Contains(keys, targets[i].Key) }
}

// keysOf maps indexes to keys.
func keysOf(targets []Target, idx []int) string {
	ks := make([]string, len(idx))
	for n, i := range idx {
		ks[n] = targets[i].Key
	}
	return strings.Join(ks, ",")
}

// run routes n requests: each tries its order until a success (or, with
// failover false, only the first target), reporting every attempt. It
// returns the attempted keys.
func run(s Strategy, req Request, targets []Target, n int, eligible func(int) bool, fails func(key string) bool, failover bool) string {
	var got []string
	for r := 0; r < n; r++ {
		for _, i := range s.Order(req, targets, eligible) {
			got = append(got, targets[i].Key)
			ok := fails == nil || !fails(targets[i].Key)
			s.Report(req, targets, i, ok)
			if ok || !failover {
				break
			}
		}
	}
	return strings.Join(got, ",")
}

func failing(keys ...string) func(string) bool {
	return func(k string) bool { return slices.Contains(keys, k) }
}

func mustNew(t testing.TB, name string, opts Options) Strategy {
	t.Helper()
	s, known := New(name, opts)
	if !known {
		t.Fatalf("New(%q): unknown", name)
	}
	return s
}

// memStore is a tiny in-memory engine.Store.
type memStore struct {
	mu      sync.Mutex
	m       map[string][]byte
	puts    int
	failPut error
}

func newMemStore() *memStore { return &memStore{m: map[string][]byte{}} }

func (s *memStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return slices.Clone(v), ok, nil
}

func (s *memStore) Put(_ context.Context, key string, value []byte, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPut != nil {
		return s.failPut
	}
	s.puts++
	s.m[key] = slices.Clone(value)
	return nil
}

func (s *memStore) CompareAndSet(_ context.Context, key string, old, value []byte, _ time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[key]
	if (old == nil && ok) || (old != nil && (!ok || string(cur) != string(old))) {
		return false, nil
	}
	if value == nil {
		delete(s.m, key)
	} else {
		s.m[key] = slices.Clone(value)
	}
	return true, nil
}

func (s *memStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

func (s *memStore) Scan(_ context.Context, prefix string) ([]engine.KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []engine.KV
	for k, v := range s.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, engine.KV{Key: k, Value: slices.Clone(v)})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	return out, nil
}

func (s *memStore) Close() error { return nil }

var _ engine.Store = (*memStore)(nil)

func TestNamesAndNew(t *testing.T) {
	ns := Names()
	if len(ns) != 20 {
		t.Fatalf("Names: %d names, want 20", len(ns))
	}
	seen := map[string]bool{}
	for _, n := range ns {
		if seen[n] {
			t.Fatalf("duplicate name %q", n)
		}
		seen[n] = true
		s, known := New(n, Options{Seed: 1})
		if !known || s.Name() != n {
			t.Errorf("New(%q) = %q, known %v", n, s.Name(), known)
		}
	}
	ns[0] = "mutated"
	if Names()[0] != NamePriority {
		t.Error("Names returned a shared slice")
	}
	for _, alias := range []string{"Round_Robin", " FILL-FIRST ", "strict_random"} {
		if _, known := New(alias, Options{}); !known {
			t.Errorf("New(%q): not recognised", alias)
		}
	}
}

func TestUnknownFallsBackToPriority(t *testing.T) {
	for _, name := range []string{"", "bogus", "round robin"} {
		s, known := New(name, Options{})
		if known || s.Name() != NamePriority {
			t.Errorf("New(%q) = %s known=%v, want priority known=false", name, s.Name(), known)
		}
	}
}

func TestPriority(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	s := mustNew(t, NamePriority, Options{})
	if got := keysOf(ts, s.Order(Request{}, ts, nil)); got != "a,b,c,d" {
		t.Errorf("order %s", got)
	}
	if got := keysOf(ts, s.Order(Request{}, ts, except(ts, "a", "c"))); got != "b,d" {
		t.Errorf("order with a,c excluded: %s", got)
	}
}

func TestFusionPipelineConfiguredOrder(t *testing.T) {
	ts := mk("panel1", "panel2", "judge")
	for _, name := range []string{NameFusion, NamePipeline} {
		s := mustNew(t, name, Options{})
		for r := 0; r < 3; r++ {
			if got := keysOf(ts, s.Order(Request{}, ts, nil)); got != "panel1,panel2,judge" {
				t.Errorf("%s order %s", name, got)
			}
			s.Report(Request{}, ts, r%3, r%2 == 0)
		}
		if got := keysOf(ts, s.Order(Request{}, ts, except(ts, "panel2"))); got != "panel1,judge" {
			t.Errorf("%s order with panel2 excluded: %s", name, got)
		}
	}
}

// TestExclusionsHonouredByEveryStrategy drives every strategy with random
// exclusion masks and reports: Order must return exactly the eligible
// targets, each once, and call eligible exactly once per index.
func TestExclusionsHonouredByEveryStrategy(t *testing.T) {
	ts := mk("a", "b", "c", "d", "e", "f")
	for i := range ts {
		ts[i].Weight = float64(i % 3)
		ts[i].PriceIn = float64(5 - i%4)
		ts[i].ContextWindow = 1000 * (i + 1)
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			clock := clocktest.NewClock(t0)
			sig := NewSignals(clock)
			for i, tg := range ts {
				sig.ObserveQuota(tg.Key, Quota{Remaining: float64(i), Limit: 5, ResetAt: t0.Add(time.Duration(6-i) * time.Minute)})
			}
			s := mustNew(t, name, Options{Seed: 7, StickyLimit: 2, Signals: sig, Clock: clock})
			rng := rand.New(rand.NewPCG(3, 4))
			for round := 0; round < 300; round++ {
				mask := make([]bool, len(ts))
				for i := range mask {
					mask[i] = rng.IntN(3) > 0
				}
				calls := make([]int, len(ts))
				req := Request{Combo: "c", PromptTokens: 2500, PrefixHash: uint64(round % 5), Session: "s"}
				got := s.Order(req, ts, func(i int) bool { calls[i]++; return mask[i] })
				for i, c := range calls {
					if c != 1 {
						t.Fatalf("round %d: eligible(%d) called %d times", round, i, c)
					}
				}
				var want, have []int
				for i, ok := range mask {
					if ok {
						want = append(want, i)
					}
				}
				have = slices.Clone(got)
				slices.Sort(have)
				if !slices.Equal(have, want) {
					t.Fatalf("round %d: order %v, eligible %v", round, got, want)
				}
				if len(got) > 0 {
					s.Report(req, ts, got[0], rng.IntN(4) > 0)
				}
			}
		})
	}
}

// TestStrategiesConcurrent drives every strategy from several goroutines
// with shared Signals and StateStore, for the race detector.
func TestStrategiesConcurrent(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	sig := NewSignals(clocktest.NewClock(t0))
	st := NewStateStore(newMemStore())
	for _, name := range Names() {
		s := mustNew(t, name, Options{Seed: 2, StickyLimit: 2, Signals: sig, State: st})
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := Request{Combo: name, Session: "s", PrefixHash: 9, PromptTokens: 10}
				for r := 0; r < 100; r++ {
					order := s.Order(req, ts, except(ts, ts[r%4].Key))
					if len(order) != 3 {
						t.Errorf("%s: order %v", name, order)
						return
					}
					a := sig.Start(ts[order[0]].Key)
					a.Done(r%3 != 0)
					s.Report(req, ts, order[0], r%3 != 0)
					if r%25 == 0 {
						_ = st.Flush(context.Background())
					}
				}
			}()
		}
		wg.Wait()
	}
}
