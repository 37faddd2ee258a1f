package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func newTestGate(t *testing.T) (*WindowGate, *FakeClock) {
	t.Helper()
	clock := NewFakeClock(breakerEpoch)
	return NewWindowGate(clock), clock
}

func TestDefaultWindowGateConfig(t *testing.T) {
	tests := []struct {
		profile Profile
		want    WindowGateConfig
	}{
		{ProfileOAuth, WindowGateConfig{Threshold: 10, Window: 15 * time.Minute, Cooldown: 5 * time.Minute}},
		{ProfileAPIKey, WindowGateConfig{Threshold: 15, Window: 30 * time.Minute, Cooldown: 10 * time.Minute}},
		{ProfileLocal, WindowGateConfig{Threshold: 2, Window: 5 * time.Minute, Cooldown: time.Minute}},
		{Profile(""), WindowGateConfig{Threshold: 15, Window: 30 * time.Minute, Cooldown: 10 * time.Minute}},
	}
	for _, tt := range tests {
		if got := DefaultWindowGateConfig(tt.profile); got != tt.want {
			t.Errorf("DefaultWindowGateConfig(%q) = %+v, want %+v", tt.profile, got, tt.want)
		}
		if got := tt.want.Normalize(); got != tt.want {
			t.Errorf("defaults change under Normalize: %+v", got)
		}
	}
}

func TestWindowGateConfigNormalize(t *testing.T) {
	got := WindowGateConfig{Threshold: 0, Window: 0, Cooldown: -time.Second}.Normalize()
	if want := (WindowGateConfig{Threshold: 1, Window: time.Second, Cooldown: time.Second}); got != want {
		t.Errorf("Normalize(zero) = %+v, want %+v", got, want)
	}
	got = WindowGateConfig{Threshold: 5000, Window: 48 * time.Hour, Cooldown: 25 * time.Hour}.Normalize()
	if want := (WindowGateConfig{Threshold: 1000, Window: 24 * time.Hour, Cooldown: 24 * time.Hour}); got != want {
		t.Errorf("Normalize(huge) = %+v, want %+v", got, want)
	}
}

func TestWindowGateTripsPerProfile(t *testing.T) {
	for _, profile := range []Profile{ProfileOAuth, ProfileAPIKey, ProfileLocal} {
		t.Run(string(profile), func(t *testing.T) {
			g, clock := newTestGate(t)
			cfg := DefaultWindowGateConfig(profile)
			g.Configure("p", cfg)
			// Failures spread over the window, one per distinct connection.
			step := cfg.Window / time.Duration(cfg.Threshold)
			for i := 1; i < cfg.Threshold; i++ {
				g.RecordFailure("p", fmt.Sprintf("c%d", i))
				if cooling, _ := g.Cooling("p"); cooling {
					t.Fatalf("cooling after %d failures, threshold %d", i, cfg.Threshold)
				}
				clock.Advance(step)
			}
			g.RecordFailure("p", "last")
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
			g.RecordFailure("p", "c1")
			if cooling, _ := g.Cooling("p"); cooling && cfg.Threshold > 1 {
				t.Errorf("one failure after the cooldown re-tripped the gate")
			}
		})
	}
}

func TestWindowGateDuplicateConnectionCountsOnce(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", DefaultWindowGateConfig(ProfileLocal)) // trips after 2
	// A burst from one connection inside its 5 s backoff counts once.
	for range 5 {
		g.RecordFailure("p", "a")
		clock.Advance(time.Second)
	}
	if cooling, _ := g.Cooling("p"); cooling {
		t.Fatal("a burst of one connection's failures tripped a threshold of 2")
	}
	if s := g.Snapshot("p"); len(s.Failures) != 1 {
		t.Errorf("window holds %d counted failures, want 1", len(s.Failures))
	}
	g.RecordFailure("p", "b")
	if cooling, _ := g.Cooling("p"); !cooling {
		t.Error("second distinct connection did not trip the gate")
	}
}

func TestWindowGateLoneConnectionStillTrips(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", DefaultWindowGateConfig(ProfileLocal)) // 2 within 5 min
	g.RecordFailure("p", "a")
	clock.Advance(5 * time.Second) // past the connection's first 5 s backoff
	g.RecordFailure("p", "a")
	cooling, until := g.Cooling("p")
	if !cooling || until.Sub(clock.Now()) != time.Minute {
		t.Fatalf("a single-connection provider failing twice outside its backoff: cooling=%v for %v, want 1m", cooling, until.Sub(clock.Now()))
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
		g.Configure("p", DefaultWindowGateConfig(ProfileLocal))
		g.RecordFailure("p", "a")
		clock.Advance(tt.gap)
		g.RecordFailure("p", "b")
		if cooling, _ := g.Cooling("p"); cooling != tt.trip {
			t.Errorf("failures %v apart: cooling %v, want %v", tt.gap, cooling, tt.trip)
		}
	}
}

func TestWindowGateSuccessClears(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", DefaultWindowGateConfig(ProfileLocal))
	g.RecordFailure("p", "a")
	g.RecordSuccess("p")
	g.RecordFailure("p", "b")
	if cooling, _ := g.Cooling("p"); cooling {
		t.Error("success did not clear the window")
	}
	g.RecordFailure("p", "c")
	if cooling, _ := g.Cooling("p"); !cooling {
		t.Fatal("not cooling after b and c")
	}
	g.RecordSuccess("p")
	if cooling, _ := g.Cooling("p"); cooling {
		t.Error("success did not end the cooling")
	}
	// Connection entries survive a provider success.
	if cooling, _ := g.ConnectionCooling("p", "c"); !cooling {
		t.Error("RecordSuccess cleared a connection entry")
	}
	g.RecordConnectionSuccess("p", "c")
	if cooling, _ := g.ConnectionCooling("p", "c"); cooling {
		t.Error("RecordConnectionSuccess did not clear the entry")
	}
	_ = clock
}

func TestWindowGateCoolingNotExtended(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", DefaultWindowGateConfig(ProfileLocal))
	g.RecordFailure("p", "a")
	g.RecordFailure("p", "b")
	_, until := g.Cooling("p")
	clock.Advance(30 * time.Second)
	g.RecordFailure("p", "c")
	g.RecordFailure("p", "d")
	if _, again := g.Cooling("p"); !again.Equal(until) {
		t.Errorf("failures while cooling moved the deadline from %v to %v", until, again)
	}
	clock.Advance(30 * time.Second)
	if cooling, _ := g.Cooling("p"); cooling {
		t.Error("cooling after the cooldown; failures while cooling must not count")
	}
}

func TestWindowGateConnectionBackoff(t *testing.T) {
	g, clock := newTestGate(t)
	want := []time.Duration{5, 10, 20, 40, 80, 160, 300, 300, 300}
	for i, secs := range want {
		g.RecordFailure("p", "a")
		cooling, until := g.ConnectionCooling("p", "a")
		d := secs * time.Second
		if !cooling || until.Sub(clock.Now()) != d {
			t.Fatalf("failure %d: cooling %v for %v, want %v", i+1, cooling, until.Sub(clock.Now()), d)
		}
		// A duplicate failure while cooling does not escalate.
		g.RecordFailure("p", "a")
		if _, again := g.ConnectionCooling("p", "a"); !again.Equal(until) {
			t.Fatalf("failure %d: duplicate moved the deadline to %v", i+1, again)
		}
		clock.Advance(d - time.Millisecond)
		if cooling, _ := g.ConnectionCooling("p", "a"); !cooling {
			t.Fatalf("failure %d: not cooling 1ms before the end", i+1)
		}
		clock.Advance(time.Millisecond)
		if cooling, _ := g.ConnectionCooling("p", "a"); cooling {
			t.Fatalf("failure %d: still cooling at the end", i+1)
		}
	}
	if cooling, _ := g.ConnectionCooling("p", "b"); cooling {
		t.Error("unrelated connection cooling")
	}
	// After a quiet window the backoff starts again at 5 s.
	clock.Advance(30 * time.Minute)
	g.RecordFailure("p", "a")
	if _, until := g.ConnectionCooling("p", "a"); until.Sub(clock.Now()) != 5*time.Second {
		t.Errorf("after a quiet window: %v, want 5s", until.Sub(clock.Now()))
	}
}

func TestWindowGateSnapshotRestoreAndOnChange(t *testing.T) {
	g, clock := newTestGate(t)
	g.Configure("p", DefaultWindowGateConfig(ProfileOAuth))
	var mu sync.Mutex
	var got []WindowGateSnapshot
	g.OnChange(func(p string, s WindowGateSnapshot) {
		_ = g.Snapshot(p) // re-entrant read must not deadlock
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	})
	g.RecordFailure("p", "a")
	clock.Advance(time.Second)
	g.RecordFailure("p", "b")
	if len(got) != 2 || len(got[1].Failures) != 2 {
		t.Fatalf("OnChange snapshots %+v", got)
	}
	raw, err := json.Marshal(g.Snapshot("p"))
	if err != nil {
		t.Fatal(err)
	}
	var back WindowGateSnapshot
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	g2 := NewWindowGate(clock)
	g2.Configure("p", DefaultWindowGateConfig(ProfileOAuth))
	g2.Restore("p", back)
	for i := range 8 {
		g2.RecordFailure("p", fmt.Sprintf("x%d", i))
	}
	if cooling, _ := g2.Cooling("p"); !cooling {
		t.Errorf("restored window (2) + 8 = 10 failures did not trip; json %s", raw)
	}
	if cooling, until := g2.ConnectionCooling("p", "b"); !cooling || !until.Equal(clock.Now().Add(5*time.Second)) {
		t.Errorf("restored connection entry: %v %v", cooling, until)
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
	g.OnChange(func(string, WindowGateSnapshot) {})
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
					g.RecordFailure(p, c)
				case 2:
					g.Cooling(p)
					g.ConnectionCooling(p, c)
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
