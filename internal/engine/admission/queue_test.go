package admission

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestQueueConcurrencyOneDepthOne is the live test: concurrency 1,
// depth 1 → the first runs, the second queues, the third gets 429
// RATE_LIMIT_QUEUE_FULL, and the first two succeed.
func TestQueueConcurrencyOneDepthOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MaxConcurrent = 1
		s.Defaults.MaxQueueDepth = 1
		m, clk := newManager(s, apikey("p", "c"))
		ctx := context.Background()

		first := mustAcquire(t, m, "p", "c", "")
		second := acquireAsync(ctx, m, "p", "c", "")
		synctest.Wait()
		pending(t, second, "second request")
		if st := statsOf(t, m, "p", "c"); st.Queued != 1 || st.Running != 1 {
			t.Fatalf("queued/running = %d/%d, want 1/1", st.Queued, st.Running)
		}
		if err := m.Precheck("p", "c"); err == nil {
			t.Fatal("Precheck admitted a third request")
		}
		_, err := m.Acquire(ctx, "p", "c", "")
		e := wantCode(t, err, CodeQueueFull, http.StatusTooManyRequests)
		if e.Provider != "p" || e.Connection != "c" {
			t.Errorf("error names %s/%s", e.Provider, e.Connection)
		}

		clk.Advance(time.Second) // spacing and reservoir are no obstacle now
		synctest.Wait()
		pending(t, second, "second request while the first runs")
		first.Release()
		r := <-second
		if r.err != nil {
			t.Fatalf("second request: %v", r.err)
		}
		r.tk.Release()
		st := statsOf(t, m, "p", "c")
		if st.Queued != 0 || st.Running != 0 || st.Waits != 1 || st.Rejections != 2 || st.RejectionsByCode[CodeQueueFull] != 2 {
			t.Errorf("stats = %+v, want empty queue, 1 wait, 2 QUEUE_FULL rejections (Precheck + Acquire)", st)
		}
	})
}

// TestQueueUnboundedRunsInOrder: depth 0 → every request completes, in
// arrival order.
func TestQueueUnboundedRunsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MaxConcurrent = 1
		m, clk := newManager(s, apikey("p", "c"))
		const n = 25
		results := make(chan result, n)
		for i := range n {
			go func() {
				tk, err := m.Acquire(context.Background(), "p", "c", "")
				results <- result{i: i, tk: tk, err: err}
			}()
			synctest.Wait() // fix the arrival order
		}
		if st := statsOf(t, m, "p", "c"); st.Queued != n-1 {
			t.Fatalf("queued = %d, want %d", st.Queued, n-1)
		}
		for want := range n {
			r := <-results
			if r.err != nil {
				t.Fatalf("request %d: %v", r.i, r.err)
			}
			if r.i != want {
				t.Fatalf("request %d ran in position %d", r.i, want)
			}
			clk.Advance(time.Second)
			r.tk.Release()
		}
		if st := statsOf(t, m, "p", "c"); st.Rejections != 0 || st.Running != 0 || st.Queued != 0 {
			t.Errorf("stats = %+v", st)
		}
	})
}

// TestLimiterReservoirAndSpacing: a burst of RequestsPerMinute, then one
// request per 60s/RPM; MinSpacing between two dispatches.
func TestLimiterReservoirAndSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.RequestsPerMinute = 3
		s.Defaults.MinSpacing = 0
		m, clk := newManager(s, apikey("p", "c"))
		for range 3 {
			mustAcquire(t, m, "p", "c", "").Release()
		}
		fourth := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		clk.Advance(20*time.Second - time.Millisecond)
		synctest.Wait()
		pending(t, fourth, "fourth request before the reservoir refilled")
		clk.Advance(time.Millisecond)
		if r := <-fourth; r.err != nil || r.tk.QueueWait() != 20*time.Second {
			t.Fatalf("fourth: err %v wait %v, want dispatch after exactly 20s", r.err, r.tk.QueueWait())
		} else {
			r.tk.Release()
		}

		// Default spacing 200 ms.
		m2, clk2 := newManager(DefaultSettings(), apikey("p", "c"))
		mustAcquire(t, m2, "p", "c", "").Release()
		next := acquireAsync(context.Background(), m2, "p", "c", "")
		synctest.Wait()
		clk2.Advance(199 * time.Millisecond)
		synctest.Wait()
		pending(t, next, "request inside the 200 ms spacing")
		clk2.Advance(time.Millisecond)
		if r := <-next; r.err != nil {
			t.Fatal(r.err)
		} else {
			r.tk.Release()
		}
	})
}

// TestQueueTimeoutNeverReachesUpstream: a request queued longer than
// max_wait_ms gets RATE_LIMIT_QUEUE_TIMEOUT and is never dispatched.
func TestQueueTimeoutNeverReachesUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MaxConcurrent = 1
		m, clk := newManager(s, apikey("p", "c"))
		holder := mustAcquire(t, m, "p", "c", "")
		waiter := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		clk.Advance(30*time.Second - time.Millisecond)
		synctest.Wait()
		pending(t, waiter, "waiter inside max_wait_ms")
		clk.Advance(time.Millisecond)
		r := <-waiter
		e := wantCode(t, r.err, CodeQueueTimeout, http.StatusTooManyRequests)
		if e.RetryAfter < time.Second {
			t.Errorf("RetryAfter = %v", e.RetryAfter)
		}
		if st := statsOf(t, m, "p", "c"); st.Running != 1 || st.Queued != 0 {
			t.Errorf("running/queued = %d/%d, want only the holder running", st.Running, st.Queued)
		}
		holder.Release()
		if clk.Pending() != 0 {
			t.Errorf("%d timers left", clk.Pending())
		}
	})
}

// TestBudgetsNeverMix: the queue-wait budget ends when the job starts and
// never shortens the execution budget; the execution budget is raised to
// the first-byte timeout and never feeds the queue wait.
func TestBudgetsNeverMix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings() // 30 s queue, 600 s execution
		s.Defaults.MaxConcurrent = 1
		short := apikey("p", "short-exec")
		short.Overrides.ExecutionMaxWait = 10 * time.Second
		m, clk := newManager(s, apikey("p", "c"), short)

		tk := mustAcquire(t, m, "p", "c", "")
		if clk.Pending() != 0 {
			t.Fatalf("%d timers outlive admission: the queue budget must be cleared", clk.Pending())
		}
		// A slow-first-byte upstream answering after 40 s is not cut by
		// the 30 s queue budget.
		if got := tk.ExecutionBudget(40 * time.Second); got != 600*time.Second {
			t.Errorf("ExecutionBudget(40s) = %v, want 600s", got)
		}
		clk.Advance(40 * time.Second)
		waiter := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		clk.Advance(20 * time.Second) // queued 20 s of its 30 s
		tk.Release()
		r := <-waiter
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.tk.QueueWait() != 20*time.Second {
			t.Errorf("QueueWait = %v, want 20s", r.tk.QueueWait())
		}
		if got := r.tk.ExecutionBudget(0); got != 600*time.Second {
			t.Errorf("after 20 s queued ExecutionBudget = %v, want the full 600s", got)
		}
		r.tk.Release()

		ex := mustAcquire(t, m, "p", "short-exec", "")
		for _, tt := range []struct{ firstByte, want time.Duration }{
			{60 * time.Second, 60 * time.Second}, // raised to the fetch-start timeout
			{5 * time.Second, 10 * time.Second},
			{0, 10 * time.Second},
		} {
			if got := ex.ExecutionBudget(tt.firstByte); got != tt.want {
				t.Errorf("ExecutionBudget(%v) = %v, want %v", tt.firstByte, got, tt.want)
			}
		}
		// A 10 s execution budget does not cut a queue wait of 25 s.
		waiter = acquireAsync(context.Background(), m, "p", "short-exec", "")
		synctest.Wait()
		clk.Advance(25 * time.Second)
		synctest.Wait()
		pending(t, waiter, "waiter of the short-exec connection")
		ex.Release()
		if r := <-waiter; r.err != nil {
			t.Fatalf("queued 25 s with a 10 s execution budget: %v", r.err)
		} else {
			r.tk.Release()
		}
	})
}

func TestCancelWhileQueuedReleasesEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MaxConcurrent = 1
		m, _ := newManager(s, apikey("p", "c"))
		holder := mustAcquire(t, m, "p", "c", "")
		ctx, cancel := context.WithCancel(context.Background())
		waiter := acquireAsync(ctx, m, "p", "c", "")
		synctest.Wait()
		cancel()
		r := <-waiter
		if !errors.Is(r.err, context.Canceled) || r.tk != nil {
			t.Fatalf("err = %v, want context.Canceled", r.err)
		}
		var e *Error
		if errors.As(r.err, &e) {
			t.Errorf("cancellation reported as %s", e.Code)
		}
		st := statsOf(t, m, "p", "c")
		if st.Queued != 0 || st.Running != 1 || st.RejectionsByCode[CodeCanceled] != 1 {
			t.Errorf("stats = %+v", st)
		}
		holder.Release()
		c := m.lookup("p", "c")
		c.mu.Lock()
		running := c.lim.running
		c.mu.Unlock()
		if running != 0 {
			t.Errorf("limiter running = %d after release", running)
		}
		// An already-cancelled context takes nothing.
		if _, err := m.Acquire(ctx, "p", "c", ""); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire with a cancelled ctx: %v", err)
		}
	})
}

func TestReleaseIsIdempotent(t *testing.T) {
	s := DefaultSettings()
	s.GlobalConcurrency = 1
	spec := apikey("p", "c")
	spec.Overrides.MaxConcurrent = 1
	m, clk := newManager(s, spec)
	tk := mustAcquire(t, m, "p", "c", "")
	tk.Release()
	tk.Release()
	(*Ticket)(nil).Release()
	held, _ := gateCounts(m, &m.global, &m.lookup("p", "c").account)
	if held[0] != 0 || held[1] != 0 {
		t.Fatalf("held after double release = %v", held)
	}
	if st := statsOf(t, m, "p", "c"); st.Running != 0 {
		t.Fatalf("running = %d", st.Running)
	}
	clk.Advance(time.Second)
	a := mustAcquire(t, m, "p", "c", "")
	defer a.Release()
	if held, _ := gateCounts(m, &m.global, &m.lookup("p", "c").account); held[0] != 1 || held[1] != 1 {
		t.Fatalf("held after one acquire = %v, want [1 1]", held)
	}
}

func TestUnprotectedSkipsLimiter(t *testing.T) {
	s := DefaultSettings()
	m, _ := newManager(s, oauth("p", "c"))
	if m.Protected("p", "c") {
		t.Fatal("oauth connection protected by auto-enable")
	}
	// 200 ms spacing and the reservoir do not apply: 150 at once.
	var tks []*Ticket
	for range 150 {
		tks = append(tks, mustAcquire(t, m, "p", "c", ""))
	}
	if st := statsOf(t, m, "p", "c"); st.Running != 150 || st.Waits != 0 {
		t.Errorf("stats = %+v", st)
	}
	for _, tk := range tks {
		tk.Release()
	}
	if _, err := m.Acquire(context.Background(), "p", "nope", ""); !errors.Is(err, ErrUnknownConnection) {
		t.Errorf("unknown connection: %v", err)
	}
	if err := m.Precheck("p", "nope"); !errors.Is(err, ErrUnknownConnection) {
		t.Errorf("Precheck unknown: %v", err)
	}
	if err := m.Precheck("p", "c"); err != nil {
		t.Errorf("Precheck unprotected: %v", err)
	}
}

// TestConfigChangesWakeWaiters: raising the limiter's concurrency or
// turning protection off lets queued requests go.
func TestConfigChangesWakeWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MaxConcurrent = 1
		s.Defaults.MinSpacing = 0
		m, _ := newManager(s, apikey("p", "c"))
		holder := mustAcquire(t, m, "p", "c", "")
		w1 := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		s.Defaults.MaxConcurrent = 2
		m.UpdateSettings(s)
		r := <-w1
		if r.err != nil {
			t.Fatal(r.err)
		}
		w2 := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		pending(t, w2, "third request at concurrency 2")
		env := false
		s.AutoEnableEnv = &env // RATE_LIMIT_AUTO_ENABLE=off wins
		m.UpdateSettings(s)
		r2 := <-w2
		if r2.err != nil || r2.tk.limiter {
			t.Fatalf("after protection off: err %v, holds limiter slot %v", r2.err, r2.tk != nil && r2.tk.limiter)
		}
		for _, tk := range []*Ticket{holder, r.tk, r2.tk} {
			tk.Release()
		}
		c := m.lookup("p", "c")
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.lim.running != 0 || c.queued != 0 {
			t.Errorf("running/queued = %d/%d", c.lim.running, c.queued)
		}
	})
}
