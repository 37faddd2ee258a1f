package strategy

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestRoundRobinSticky(t *testing.T) {
	abc := mk("a", "b", "c")
	tests := []struct {
		name     string
		opts     Options
		n        int
		eligible func(int) bool
		fails    func(string) bool
		failover bool
		want     string
	}{
		{"sticky 3 over 10 requests", Options{StickyLimit: 3}, 10, nil, nil, true, "a,a,a,b,b,b,c,c,c,a"},
		{"global sticky 3", Options{GlobalSticky: 3}, 10, nil, nil, true, "a,a,a,b,b,b,c,c,c,a"},
		{"per-combo sticky 2 beats global 3", Options{StickyLimit: 2, GlobalSticky: 3}, 7, nil, nil, true, "a,a,b,b,c,c,a"},
		// Four requests with failover: a fails, b succeeds (1); b (2); c; c.
		{"A always 503, sticky 2, failover", Options{StickyLimit: 2}, 4, nil, failing("a"), true, "a,b,b,c,c"},
		// Five single-attempt requests: the failure moves on, the batch restarts on b.
		{"A always 503, sticky 2, one attempt each", Options{StickyLimit: 2}, 5, nil, failing("a"), false, "a,b,b,c,c"},
		{"A always 503, sticky 2, next round", Options{StickyLimit: 2}, 6, nil, failing("a"), true, "a,b,b,c,c,a,b,b"},
		{"A excluded, sticky 2", Options{StickyLimit: 2}, 6, except(abc, "a"), nil, true, "b,b,c,c,b,b"},
		{"no sticky", Options{}, 7, nil, nil, true, "a,b,c,a,b,c,a"},
		{"no sticky, b excluded", Options{}, 5, except(abc, "b"), nil, true, "a,c,a,c,a"},
		{"no sticky, a fails", Options{}, 4, nil, failing("a"), true, "a,b,b,c,a,b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, NameRoundRobin, tc.opts)
			if got := run(s, Request{Combo: "x"}, abc, tc.n, tc.eligible, tc.fails, tc.failover); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRoundRobinFailoverOrderAndCombosIndependent(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	s := mustNew(t, NameRoundRobin, Options{})
	for _, want := range []string{"a,b,c,d", "b,c,d,a", "c,d,a,b"} {
		if got := keysOf(ts, s.Order(Request{Combo: "one"}, ts, nil)); got != want {
			t.Errorf("combo one: %s, want %s", got, want)
		}
	}
	if got := keysOf(ts, s.Order(Request{Combo: "two"}, ts, nil)); got != "a,b,c,d" {
		t.Errorf("combo two starts at %s", got)
	}
}

func TestRoundRobinStateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	ts := mk("a", "b", "c")
	st := NewStateStore(store)
	s := mustNew(t, NameRoundRobin, Options{StickyLimit: 3, State: st})
	if got := run(s, Request{Combo: "x/y"}, ts, 4, nil, nil, true); got != "a,a,a,b" {
		t.Fatalf("before restart: %s", got)
	}
	if store.puts != 0 {
		t.Fatalf("write-behind: %d store writes before Flush", store.puts)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if store.puts != 1 {
		t.Fatalf("Flush wrote %d keys, want 1", store.puts)
	}
	if _, ok := store.m[StateKeyPrefix+"x%2Fy"]; !ok {
		t.Fatalf("no key %q in %v", StateKeyPrefix+"x%2Fy", store.m)
	}
	if err := st.Flush(ctx); err != nil || store.puts != 1 {
		t.Fatalf("clean Flush wrote again: puts %d err %v", store.puts, err)
	}

	st2 := NewStateStore(store)
	if err := st2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := mustNew(t, NameRoundRobin, Options{StickyLimit: 3, State: st2})
	if got := run(s2, Request{Combo: "x/y"}, ts, 6, nil, nil, true); got != "b,b,c,c,c,a" {
		t.Errorf("after restart: %s, want b,b,c,c,c,a", got)
	}
}

func TestNonStickyRoundRobinSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	ts := mk("a", "b", "c")
	st := NewStateStore(store)
	s := mustNew(t, NameRoundRobin, Options{State: st})
	run(s, Request{Combo: "x"}, ts, 2, nil, nil, true)
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st2 := NewStateStore(store)
	if err := st2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := run(mustNew(t, NameRoundRobin, Options{State: st2}), Request{Combo: "x"}, ts, 2, nil, nil, true); got != "c,a" {
		t.Errorf("after restart: %s, want c,a", got)
	}
	// A position written by another strategy is ignored.
	if got := run(mustNew(t, NameFillFirst, Options{State: st2}), Request{Combo: "x"}, ts, 1, nil, nil, true); got != "a" {
		t.Errorf("fill-first read round-robin's position: %s", got)
	}
}

func TestStateStoreFlushErrorKeepsDirty(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	store.failPut = errors.New("disk full")
	st := NewStateStore(store)
	st.set("a", Position{Strategy: NameLKGP, Key: "k"})
	st.set("b", Position{Strategy: NameLKGP, Key: "k"})
	err := st.Flush(ctx)
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), StateKeyPrefix+"a") {
		t.Fatalf("Flush error = %v", err)
	}
	store.failPut = nil
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(store.m) != 2 {
		t.Errorf("after retry the store holds %d keys, want 2", len(store.m))
	}
}

func TestStateStoreLoadSkipsMalformed(t *testing.T) {
	store := newMemStore()
	store.m[StateKeyPrefix+"bad"] = []byte("{")
	store.m[StateKeyPrefix+"good"] = []byte(`{"strategy":"lkgp","key":"b"}`)
	st := NewStateStore(store)
	err := st.Load(context.Background())
	if err == nil || !strings.Contains(err.Error(), StateKeyPrefix+"bad") {
		t.Fatalf("Load error = %v", err)
	}
	if p, ok := st.Position("good"); !ok || p.Key != "b" {
		t.Errorf("good position = %+v %v", p, ok)
	}
	if err := NewStateStore(nil).Load(context.Background()); err != nil {
		t.Errorf("memory-only Load: %v", err)
	}
}

func TestWeightedDrawProportions(t *testing.T) {
	ts := mk("a", "b", "c", "z")
	ts[0].Weight, ts[1].Weight, ts[2].Weight, ts[3].Weight = 5, 3, 2, 0
	s := mustNew(t, NameWeighted, Options{Seed: 42})
	const draws = 10000
	counts := map[string]int{}
	for r := 0; r < draws; r++ {
		order := s.Order(Request{}, ts, nil)
		counts[ts[order[0]].Key]++
		// The rest follow by descending weight, ties in configured order.
		rest := order[1:]
		for k := 1; k < len(rest); k++ {
			if ts[rest[k-1]].Weight < ts[rest[k]].Weight {
				t.Fatalf("rest not by descending weight: %s", keysOf(ts, order))
			}
		}
	}
	for k, w := range map[string]float64{"a": 0.5, "b": 0.3, "c": 0.2} {
		if got := float64(counts[k]) / draws; math.Abs(got-w) > 0.02 {
			t.Errorf("%s drawn %.4f, want %.2f ± 0.02", k, got, w)
		}
	}
	if counts["z"] != 0 {
		t.Errorf("weight 0 drawn %d times", counts["z"])
	}
}

func TestWeightedZeroWeightsAndExclusions(t *testing.T) {
	ts := mk("a", "b", "z")
	ts[0].Weight, ts[1].Weight = 1, 3
	s := mustNew(t, NameWeighted, Options{Seed: 1})
	// Only the zero-weight target is eligible: it is drawn.
	if got := keysOf(ts, s.Order(Request{}, ts, except(ts, "a", "b"))); got != "z" {
		t.Errorf("only z eligible: %s", got)
	}
	// b excluded: a always drawn, z last.
	for r := 0; r < 50; r++ {
		if got := keysOf(ts, s.Order(Request{}, ts, except(ts, "b"))); got != "a,z" {
			t.Fatalf("b excluded: %s", got)
		}
	}
	// All weights 0: uniform draw.
	zs := mk("x", "y")
	counts := map[string]int{}
	for r := 0; r < 4000; r++ {
		counts[zs[s.Order(Request{}, zs, nil)[0]].Key]++
	}
	if math.Abs(float64(counts["x"])/4000-0.5) > 0.03 {
		t.Errorf("all-zero weights not uniform: %v", counts)
	}
}

func TestWeightedSticky(t *testing.T) {
	ts := mk("a", "b", "c")
	ts[0].Weight, ts[1].Weight, ts[2].Weight = 1, 1, 1
	s := mustNew(t, NameWeighted, Options{Seed: 9, StickyLimit: 3})
	req := Request{Combo: "w"}
	var leads []string
	for r := 0; r < 30; r++ {
		i := s.Order(req, ts, nil)[0]
		leads = append(leads, ts[i].Key)
		s.Report(req, ts, i, true)
	}
	for b := 0; b < 30; b += 3 {
		if leads[b] != leads[b+1] || leads[b] != leads[b+2] {
			t.Fatalf("batch %d not sticky for 3 successes: %v", b/3, leads)
		}
	}
	if strings.Join(leads, "") == strings.Repeat(leads[0], 30) {
		t.Errorf("never drew again after a batch: %v", leads)
	}
	// A failure ends the batch: the next request draws again.
	i := s.Order(req, ts, nil)[0]
	s.Report(req, ts, i, true)
	s.Report(req, ts, i, false)
	if p := s.(*Weighted).env.state.get("w", NameWeighted); p.Key != "" {
		t.Errorf("failure kept the sticky target: %+v", p)
	}
	// The sticky target excluded: another leads and starts its own batch.
	j := s.Order(req, ts, nil)[0]
	s.Report(req, ts, j, true)
	k := s.Order(req, ts, except(ts, ts[j].Key))[0]
	if k == j {
		t.Fatal("excluded sticky target led")
	}
	s.Report(req, ts, k, true)
	if p := s.(*Weighted).env.state.get("w", NameWeighted); p.Key != ts[k].Key || p.Count != 1 {
		t.Errorf("after success on %s: %+v", ts[k].Key, p)
	}
}

func TestFillFirst(t *testing.T) {
	abc := mk("a", "b", "c")
	tests := []struct {
		name     string
		n        int
		eligible func(int) bool
		fails    func(string) bool
		want     string
	}{
		{"stays on the first", 3, nil, nil, "a,a,a"},
		{"a exhausted moves on and stays on b", 3, nil, failing("a"), "a,b,b,b"},
		{"a excluded: b fills", 3, except(abc, "a"), nil, "b,b,b"},
		{"a and b exhausted", 2, nil, failing("a", "b"), "a,b,c,c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, NameFillFirst, Options{})
			if got := run(s, Request{Combo: "f"}, abc, tc.n, tc.eligible, tc.fails, true); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// Failover order wraps from the current target; a recovered a is not
	// used again until the rotation wraps.
	s := mustNew(t, NameFillFirst, Options{})
	run(s, Request{Combo: "f"}, abc, 1, nil, failing("a"), true)
	if got := keysOf(abc, s.Order(Request{Combo: "f"}, abc, nil)); got != "b,c,a" {
		t.Errorf("failover order %s, want b,c,a", got)
	}
	run(s, Request{Combo: "f"}, abc, 1, nil, failing("b"), true)
	if got := keysOf(abc, s.Order(Request{Combo: "f"}, abc, nil)); got != "c,a,b" {
		t.Errorf("after b exhausted: %s, want c,a,b", got)
	}
	if got := keysOf(abc, s.Order(Request{Combo: "f"}, abc, except(abc, "c"))); got != "a,b" {
		t.Errorf("c excluded: %s, want a,b", got)
	}
	// The current target c excluded (cooling down): a fills, and stays
	// current when c comes back.
	run(s, Request{Combo: "f"}, abc, 1, except(abc, "c"), nil, true)
	if got := keysOf(abc, s.Order(Request{Combo: "f"}, abc, nil)); got != "a,b,c" {
		t.Errorf("after a filled while c was excluded: %s, want a,b,c", got)
	}
}

func TestLKGP(t *testing.T) {
	ts := mk("a", "b", "c")
	s := mustNew(t, NameLKGP, Options{})
	req := Request{Combo: "l"}
	if got := run(s, req, ts, 1, nil, failing("a", "b"), true); got != "a,b,c" {
		t.Fatalf("first request %s", got)
	}
	if got := keysOf(ts, s.Order(req, ts, nil)); got != "c,a,b" {
		t.Errorf("after c succeeded: %s, want c,a,b", got)
	}
	if got := keysOf(ts, s.Order(req, ts, except(ts, "c"))); got != "a,b" {
		t.Errorf("c excluded: %s, want a,b", got)
	}
	s.Report(req, ts, 2, false)
	if got := keysOf(ts, s.Order(req, ts, nil)); got != "a,b,c" {
		t.Errorf("after c failed: %s, want a,b,c", got)
	}
}
