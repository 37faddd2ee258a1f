package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

func newTestGate(t *testing.T) (*windowGate, *clocktest.Clock) {
	t.Helper()
	clock := clocktest.NewClock(breakerEpoch)
	return newWindowGate(clock), clock
}

func TestDefaultWindowGateConfig(t *testing.T) {
	tests := []struct {
		profile Profile
		want    windowGateConfig
	}{
		{ProfileOAuth, windowGateConfig{Threshold: 10, Window: 15 * time.Minute, Cooldown: 5 * time.Minute}},
		{ProfileAPIKey, windowGateConfig{Threshold: 15, Window: 30 * time.Minute, Cooldown: 10 * time.Minute}},
		{ProfileLocal, windowGateConfig{Threshold: 2, Window: 5 * time.Minute, Cooldown: time.Minute}},
		{Profile(""), windowGateConfig{Threshold: 15, Window: 30 * time.Minute, Cooldown: 10 * time.Minute}},
	}
	for _, tt := range tests {
		if got := defaultWindowGateConfig(tt.profile); got != tt.want {
			t.Errorf("DefaultWindowGateConfig(%q) = %+v, want %+v", tt.profile, got, tt.want)
		}
		if got := tt.want.Normalize(); got != tt.want {
			t.Errorf("defaults change under Normalize: %+v", got)
		}
	}
}

func TestWindowGateConfigNormalize(t *testing.T) {
	got := windowGateConfig{Threshold: 0, Window: 0, Cooldown: -time.Second}.Normalize()
	if want := (windowGateConfig{Threshold: 1, Window: time.Second, Cooldown: time.Second}); got != want {
		t.Errorf("Normalize(zero) = %+v, want %+v", got, want)
	}
	got = windowGateConfig{Threshold: 5000, Window: 48 * time.Hour, Cooldown: 25 * time.Hour}.Normalize()
	if want := (windowGateConfig{Threshold: 1000, Window: 24 * time.Hour, Cooldown: 24 * time.Hour}); got != want {
		t.Errorf("Normalize(huge) = %+v, want %+v", got, want)
	}
}

// fail records a failure of connection c on p with no dispatch time and
// outside any burst: it always counts unless the provider is cooling.
func fail(g *windowGate, p, c string) bool {
	return g.RecordFailure(p, c, gateFailure{Kind: "rate_limit/429"})
}

func TestWindowGateTripsPerProfile(t *testing.T) {
	for _, profile := range []Profile{ProfileOAuth, ProfileAPIKey, ProfileLocal} {
		t.Run(string(profile), func(t *testing.T) {
			g, clock := newTestGate(t)
			cfg := defaultWindowGateConfig(profile)
			g.Configure("p", cfg)
			// Failures spread over the window, one per distinct connection.
			step := cfg.Window / time.Duration(cfg.Threshold)
			for i := 1; i < cfg.Threshold; i++ {
				fail(g, "p", fmt.Sprintf("c%d", i))
				if cooling, _ := g.Cooling("p"); cooling {
					t.Fatalf("cooling after %d failures, threshold %d", i, cfg.Threshold)
				}
				clock.Advance(step)
			}
			fail(g, "p", "last")
			cooling, until := g.Cooling("p")
			if !cooling || !until.Equal(clock.Now().Add(cfg.Cooldown)) {
				t.Fatalf("after %d failures: cooling %v until %v, want true until now+%v", cfg.Threshold, cooling, until, cfg.Cooldown)
			}
			tripped := clock.Now()
			clock.Advance(cfg.Cooldown - time.Millisecond)
			if cooling, _ := g.Cooling("p"); !cooling {
				t.Errorf("not cooling at cooldown-1ms")
			}
			clock.Advance(time.Millisecond)
			if cooling, _ := g.Cooling("p"); cooling {
				t.Errorf("still cooling at tripped+%v (%v)", cfg.Cooldown, tripped)
			}
			// The window started afresh when the gate tripped.
			fail(g, "p", "c1")
			if cooling, _ := g.Cooling("p"); cooling && cfg.Threshold > 1 {
				t.Errorf("one failure after the cooldown re-tripped the gate")
			}
		})
	}
}

// A lone apikey connection failing once a second trips the gate at its
// 15th failure, 14 s after the first (docs/resilience.md §1b, amendments:
// failures are counted per provider, however often the connection fails).
func TestWindowGateLoneConnectionOncePerSecondTripsAtFifteen(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", defaultWindowGateConfig(ProfileAPIKey)) // 15 within 30 min, cools 10 min
	for i := 1; i <= 15; i++ {
		dispatched := clock.Now().Add(-200 * time.Millisecond)
		if !g.RecordFailure("p", "lone", gateFailure{Kind: "rate_limit/429", Dispatched: dispatched}) {
			t.Fatalf("failure %d was not counted", i)
		}
		cooling, until := g.Cooling("p")
		switch {
		case i < 15 && cooling:
			t.Fatalf("cooling after %d failures", i)
		case i == 15 && (!cooling || until.Sub(clock.Now()) != 10*time.Minute):
			t.Fatalf("15th failure: cooling %v for %v, want 10m", cooling, until.Sub(clock.Now()))
		}
		clock.Advance(time.Second)
	}
}

// Failures in flight together with an identical counted failure of the
// same connection count once: dispatched before it was recorded, or (the
// dispatch time unknown) inside its anti-herd burst.
func TestWindowGateInFlightDuplicatesCountOnce(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", defaultWindowGateConfig(ProfileLocal)) // trips after 2
	t0 := clock.Now()
	g.RecordFailure("p", "a", gateFailure{Kind: "server_error/503", Dispatched: t0.Add(-time.Second)})
	// Nine more requests sent before the first failure was recorded fail
	// the same way over the next second: the burst counts once.
	for i := range 9 {
		clock.Advance(100 * time.Millisecond)
		if g.RecordFailure("p", "a", gateFailure{Kind: "server_error/503", Dispatched: t0.Add(-time.Duration(i+1) * time.Millisecond)}) {
			t.Fatalf("in-flight duplicate %d was counted", i+1)
		}
	}
	if s := g.Snapshot("p"); len(s.Failures) != 1 {
		t.Fatalf("window holds %d counted failures, want 1", len(s.Failures))
	}
	// A different failure of the same connection is not identical: it
	// counts (and trips the threshold of 2).
	if !g.RecordFailure("p", "a", gateFailure{Kind: "server_error/500", Dispatched: t0.Add(-time.Second)}) {
		t.Fatal("a different failure of the same connection was not counted")
	}
	if cooling, _ := g.Cooling("p"); !cooling {
		t.Fatal("two distinct failures did not trip a threshold of 2")
	}

	// Dispatch time unknown: the burst flag decides.
	g2, _ := newTestGate(t)
	g2.Configure("p", defaultWindowGateConfig(ProfileLocal))
	fail(g2, "p", "a")
	if g2.RecordFailure("p", "a", gateFailure{Kind: "rate_limit/429", Burst: true}) {
		t.Error("a burst duplicate was counted")
	}
	if g2.RecordFailure("p", "b", gateFailure{Kind: "rate_limit/429", Burst: true}) == false {
		t.Error("another connection's first failure was not counted")
	}
	if cooling, _ := g2.Cooling("p"); !cooling {
		t.Error("a then b did not trip a threshold of 2")
	}
}

func TestWindowGateWindowExpiry(t *testing.T) {
	for _, tt := range []struct {
		gap  time.Duration
		trip bool
	}{
		{5*time.Minute - time.Millisecond, true},
		{5 * time.Minute, false},
	} {
		g, clock := newTestGate(t)
		g.Configure("p", defaultWindowGateConfig(ProfileLocal))
		fail(g, "p", "a")
		clock.Advance(tt.gap)
		fail(g, "p", "a")
		if cooling, _ := g.Cooling("p"); cooling != tt.trip {
			t.Errorf("failures %v apart: cooling %v, want %v", tt.gap, cooling, tt.trip)
		}
	}
}

func TestWindowGateSuccessClears(t *testing.T) {
	g, _ := newTestGate(t)
	g.Configure("p", defaultWindowGateConfig(ProfileLocal))
	fail(g, "p", "a")
	g.RecordSuccess("p")
	fail(g, "p", "b")
	if cooling, _ := g.Cooling("p"); cooling {
		t.Error("success did not clear the window")
	}
	fail(g, "p", "c")
	if cooling, _ := g.Cooling("p"); !cooling {
		t.Fatal("not cooling after b and c")
	}
	g.RecordSuccess("p")
	if cooling, _ := g.Cooling("p"); cooling {
		t.Error("success did not end the cooling")
	}
	if s := g.Snapshot("p"); len(s.Failures) != 0 {
		t.Errorf("success left %+v", s)
	}
	// A request in flight with c's counted failure that fails after the
	// success is still its duplicate.
	if g.RecordFailure("p", "c", gateFailure{Kind: "rate_limit/429", Burst: true}) {
		t.Error("an in-flight duplicate counted after a success")
	}
}

func TestWindowGateCoolingNotExtended(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", defaultWindowGateConfig(ProfileLocal))
	fail(g, "p", "a")
	fail(g, "p", "b")
	_, until := g.Cooling("p")
	clock.Advance(30 * time.Second)
	if fail(g, "p", "c") || fail(g, "p", "d") {
		t.Error("a failure while cooling was counted")
	}
	if _, again := g.Cooling("p"); !again.Equal(until) {
		t.Errorf("failures while cooling moved the deadline from %v to %v", until, again)
	}
	clock.Advance(30 * time.Second)
	if cooling, _ := g.Cooling("p"); cooling {
		t.Error("cooling after the cooldown; failures while cooling must not count")
	}
}

func TestWindowGateSnapshotRestoreAndOnChange(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", defaultWindowGateConfig(ProfileOAuth))
	var mu sync.Mutex
	var got []windowGateSnapshot
	g.OnChange(func(p string, s windowGateSnapshot) {
		_ = g.Snapshot(p) // re-entrant read must not deadlock
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	})
	fail(g, "p", "a")
	clock.Advance(time.Second)
	fail(g, "p", "b")
	if len(got) != 2 || len(got[1].Failures) != 2 {
		t.Fatalf("OnChange snapshots %+v", got)
	}
	raw, err := json.Marshal(g.Snapshot("p"))
	if err != nil {
		t.Fatal(err)
	}
	var back windowGateSnapshot
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	g2 := newWindowGate(clock)
	g2.Configure("p", defaultWindowGateConfig(ProfileOAuth))
	g2.Restore("p", back)
	// The restored last failure of b still de-duplicates its burst.
	if g2.RecordFailure("p", "b", gateFailure{Kind: "rate_limit/429", Burst: true}) {
		t.Error("restored last failure of b did not de-duplicate its burst")
	}
	for i := range 8 {
		fail(g2, "p", fmt.Sprintf("x%d", i))
	}
	if cooling, _ := g2.Cooling("p"); !cooling {
		t.Errorf("restored window (2) + 8 = 10 failures did not trip; json %s", raw)
	}
	if names := g2.Reset(""); !slices.Equal(names, []string{"p"}) {
		t.Errorf("Reset = %v", names)
	}
	if cooling, _ := g2.Cooling("p"); cooling {
		t.Error("cooling after Reset")
	}
	if !slices.Equal(g.Providers(), []string{"p"}) {
		t.Errorf("Providers = %v", g.Providers())
	}
}

func TestWindowGateConcurrentUse(t *testing.T) {
	g, clock := newTestGate(t)
	g.OnChange(func(string, windowGateSnapshot) {})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				p := fmt.Sprintf("p%d", w%2)
				c := fmt.Sprintf("c%d", i%20)
				switch i % 4 {
				case 0, 1:
					g.RecordFailure(p, c, gateFailure{Kind: "k", Burst: i%3 == 0})
				case 2:
					g.Cooling(p)
					clock.Advance(time.Second)
				case 3:
					if i%40 == 3 {
						g.RecordSuccess(p)
					}
					g.Snapshot(p)
				}
			}
		}()
	}
	wg.Wait()
}
