package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestObserverAndSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MaxConcurrent = 1
		s.Defaults.MaxQueueDepth = 1
		m, clk := newManager(s, apikey("p", "c"), oauth("a", "z"))
		var mu sync.Mutex
		var events []string
		add := func(format string, args ...any) {
			mu.Lock()
			events = append(events, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		m.SetObserver(Observer{
			OnQueued:   func(p, c string, q int) { add("queued %s/%s %d", p, c, q) },
			OnStarted:  func(p, c string, w time.Duration) { add("started %s/%s %v", p, c, w) },
			OnRejected: func(p, c, code string) { add("rejected %s/%s %s", p, c, code) },
			OnReleased: func(p, c string, r int) { add("released %s/%s %d", p, c, r) },
			OnPaused:   func(p, c string, u time.Time) { add("paused %s/%s %v", p, c, u.Sub(t0)) },
		})
		first := mustAcquire(t, m, "p", "c", "")
		second := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		m.Acquire(context.Background(), "p", "c", "")
		m.Pace("p", "c", "m", Hint{Wait: 2 * time.Second})

		snap := m.Snapshot()
		if len(snap) != 2 || snap[0].Provider != "a" || snap[1].Provider != "p" {
			t.Fatalf("snapshot order: %+v", snap)
		}
		st := snap[1]
		if !st.Protected || st.Queued != 1 || st.Running != 1 || st.Rejections != 1 || !st.PausedUntil.Equal(t0.Add(2*time.Second)) {
			t.Errorf("stats = %+v", st)
		}
		raw, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{`"provider":"p"`, `"connection":"c"`, `"protected":true`, `"queued":1`, `"running":1`, `"waits":0`, `"rejections":1`, `"paused_until":`} {
			if !strings.Contains(string(raw), field) {
				t.Errorf("JSON %s lacks %s", raw, field)
			}
		}
		if raw, _ := json.Marshal(snap[0]); strings.Contains(string(raw), "paused_until") {
			t.Errorf("unpaused connection shows paused_until: %s", raw)
		}

		clk.Advance(3 * time.Second)
		first.Release()
		r := <-second
		r.tk.Release()
		want := []string{
			"started p/c 0s",
			"queued p/c 1",
			"rejected p/c RATE_LIMIT_QUEUE_FULL",
			"paused p/c 2s",
			"released p/c 0",
			"started p/c 3s",
			"released p/c 0",
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(events, "\n") != strings.Join(want, "\n") {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
		}
		if st := statsOf(t, m, "p", "c"); st.Waits != 1 || st.WaitMSTotal != 3000 {
			t.Errorf("waits = %d total %d ms", st.Waits, st.WaitMSTotal)
		}
		m.SetObserver(Observer{})
		if m.obs.Load() != nil {
			t.Error("zero Observer not removed")
		}
	})
}
