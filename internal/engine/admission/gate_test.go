package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func gateSettings() Settings {
	s := DefaultSettings()
	s.AutoEnableAPIKey = false // gates only
	return s
}

// TestCompositeGateAllOrNothing: a request blocked by one gate holds none of
// the others while it waits.
func TestCompositeGateAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := gateSettings()
		s.GlobalConcurrency = 2
		a := apikey("p", "a")
		a.Overrides.MaxConcurrent = 1
		m, _ := newManager(s, a, apikey("p", "b"))
		ca := m.lookup("p", "a")

		a1 := mustAcquire(t, m, "p", "a", "")
		a2 := acquireAsync(context.Background(), m, "p", "a", "")
		synctest.Wait()
		pending(t, a2, "second request on a full account")
		if held, waiting := gateCounts(m, &m.global, &ca.account); held[0] != 1 || held[1] != 1 || waiting[1] != 1 {
			t.Fatalf("held %v waiting %v: the waiter must hold no global permit", held, waiting)
		}
		b1 := mustAcquire(t, m, "p", "b", "") // the free global permit
		if held, _ := gateCounts(m, &m.global); held[0] != 2 {
			t.Fatalf("global held = %d", held[0])
		}
		a1.Release() // account free, global 1/2 → a2 fits
		r := <-a2
		if r.err != nil {
			t.Fatal(r.err)
		}
		if held, _ := gateCounts(m, &m.global, &ca.account); held[0] != 2 || held[1] != 1 {
			t.Fatalf("after grant held %v", held)
		}
		b2 := acquireAsync(context.Background(), m, "p", "b", "")
		synctest.Wait()
		pending(t, b2, "request over the global cap")
		if st := statsOf(t, m, "p", "b"); st.Queued != 1 {
			t.Errorf("b queued = %d", st.Queued)
		}
		r.tk.Release()
		rb := <-b2
		if rb.err != nil {
			t.Fatal(rb.err)
		}
		b1.Release()
		rb.tk.Release()
		if held, waiting := gateCounts(m, &m.global, &ca.account); held[0]+held[1]+waiting[0]+waiting[1] != 0 {
			t.Fatalf("left held %v waiting %v", held, waiting)
		}
	})
}

func TestGateLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := gateSettings()
		s.ProviderConcurrency = map[string]int{"p": 2}
		a := apikey("p", "a")
		a.ModelConcurrency = map[string]int{"glm-5": 1, "ignored": 0}
		m, _ := newManager(s, a, apikey("p", "b"), apikey("q", "c"))

		m1 := mustAcquire(t, m, "p", "a", "glm-5")
		blocked := acquireAsync(context.Background(), m, "p", "a", "glm-5")
		synctest.Wait()
		pending(t, blocked, "second glm-5 on a model cap of 1")
		other := mustAcquire(t, m, "p", "a", "glm-4") // other model free
		// provider p is now at 2 (m1, other): b waits, q is free.
		pb := acquireAsync(context.Background(), m, "p", "b", "")
		synctest.Wait()
		pending(t, pb, "request over the provider cap")
		q := mustAcquire(t, m, "q", "c", "")
		m1.Release() // frees provider and model: FIFO → blocked glm-5 first
		r := <-blocked
		if r.err != nil {
			t.Fatal(r.err)
		}
		synctest.Wait()
		pending(t, pb, "b behind the earlier waiter")
		other.Release()
		rb := <-pb
		if rb.err != nil {
			t.Fatal(rb.err)
		}
		for _, tk := range []*Ticket{r.tk, rb.tk, q} {
			tk.Release()
		}
	})
}

func TestSemaphoreTimeoutAndQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := gateSettings()
		s.SemaphoreQueueLimit = 1
		a := apikey("p", "a")
		a.Overrides.MaxConcurrent = 1
		m, clk := newManager(s, a)
		holder := mustAcquire(t, m, "p", "a", "")
		waiter := acquireAsync(context.Background(), m, "p", "a", "")
		synctest.Wait()
		_, err := m.Acquire(context.Background(), "p", "a", "")
		wantCode(t, err, CodeSemaphoreQueueFull, http.StatusTooManyRequests)

		clk.Advance(30*time.Second - time.Millisecond)
		synctest.Wait()
		pending(t, waiter, "gate waiter inside max_wait_ms")
		clk.Advance(time.Millisecond)
		r := <-waiter
		e := wantCode(t, r.err, CodeSemaphoreTimeout, http.StatusServiceUnavailable)
		if e.Connection != "a" || e.RetryAfter < time.Second {
			t.Errorf("error = %+v", e)
		}
		st := statsOf(t, m, "p", "a")
		if st.RejectionsByCode[CodeSemaphoreTimeout] != 1 || st.RejectionsByCode[CodeSemaphoreQueueFull] != 1 || st.Queued != 0 {
			t.Errorf("stats = %+v", st)
		}
		holder.Release()
		if held, waiting := gateCounts(m, &m.lookup("p", "a").account); held[0] != 0 || waiting[0] != 0 {
			t.Errorf("account held %v waiting %v", held, waiting)
		}
	})
}

// TestGateFailureReleasesLimiterSlot: a protected request that passed the
// limiter but timed out on the gate gives its limiter slot back.
func TestGateFailureReleasesLimiterSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Defaults.MinSpacing = 0
		a := apikey("p", "a")
		a.Overrides.MaxConcurrent = 1
		m, clk := newManager(s, a)
		holder := mustAcquire(t, m, "p", "a", "")
		ctx, cancel := context.WithCancel(context.Background())
		waiter := acquireAsync(ctx, m, "p", "a", "")
		timeout := acquireAsync(context.Background(), m, "p", "a", "")
		synctest.Wait()
		c := m.lookup("p", "a")
		c.mu.Lock()
		running := c.lim.running
		c.mu.Unlock()
		if running != 3 {
			t.Fatalf("limiter running = %d, want 3 (two waiting on the gate)", running)
		}
		cancel()
		if r := <-waiter; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled gate waiter: %v", r.err)
		}
		clk.Advance(30 * time.Second)
		wantCode(t, (<-timeout).err, CodeSemaphoreTimeout, http.StatusServiceUnavailable)
		holder.Release()
		c.mu.Lock()
		running = c.lim.running
		c.mu.Unlock()
		if running != 0 {
			t.Fatalf("limiter running = %d after every request ended", running)
		}
	})
}

// TestCompositeGateStress runs hundreds of goroutines over overlapping
// gates with random cancellations and asserts no cap is ever exceeded and
// no permit leaks. Run it under -race.
func TestCompositeGateStress(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := DefaultSettings()
	s.Defaults.RequestsPerMinute = 0 // real clock: keep the limiter out of the way but on
	s.Defaults.MinSpacing = 0
	s.Defaults.MaxConcurrent = 3
	s.Defaults.MaxWait = 20 * time.Second
	s.GlobalConcurrency = 6
	s.ProviderConcurrency = map[string]int{"p1": 4, "p2": 5}
	specs := []ConnSpec{
		{Provider: "p1", Connection: "a", Profile: "apikey", Overrides: Overrides{MaxConcurrent: 2}, ModelConcurrency: map[string]int{"m": 1}},
		{Provider: "p1", Connection: "b", Profile: "oauth", Overrides: Overrides{MaxConcurrent: 3}, MaxConcurrent: 2},
		{Provider: "p2", Connection: "c", Profile: "apikey", Overrides: Overrides{MaxConcurrent: 2}},
		{Provider: "p2", Connection: "d", Profile: "local", ModelConcurrency: map[string]int{"m": 2}},
	}
	m := NewManager(SystemClock(), s, specs)

	type key struct{ provider, conn, model string }
	caps := map[string]int{"global": 6, "p1": 4, "p2": 5, "p1/a": 2, "p1/b": 3, "p2/c": 2, "p1/a/m": 1, "p2/d/m": 2}
	var counts sync.Map // name → *atomic.Int64
	for name := range caps {
		counts.Store(name, new(atomic.Int64))
	}
	var exceeded atomic.Int64
	names := func(k key) []string {
		out := []string{"global", k.provider, k.provider + "/" + k.conn}
		if k.model == "m" {
			out = append(out, k.provider+"/"+k.conn+"/m")
		}
		return out
	}
	enter := func(k key, delta int64) {
		for _, name := range names(k) {
			v, ok := counts.Load(name)
			if !ok {
				continue
			}
			if n := v.(*atomic.Int64).Add(delta); delta > 0 && n > int64(caps[name]) {
				exceeded.Add(1)
			}
		}
	}

	const workers = 400
	var ok, canceled, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			sp := specs[rng.IntN(len(specs))]
			k := key{sp.Provider, sp.Connection, []string{"m", "x", ""}[rng.IntN(3)]}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if rng.IntN(3) == 0 { // cancel at a random point, maybe mid-wait
				spins := rng.IntN(50)
				go func() {
					for range spins {
						runtime.Gosched()
					}
					cancel()
				}()
			}
			tk, err := m.Acquire(ctx, k.provider, k.conn, k.model)
			var e *Error
			switch {
			case err == nil:
			case errors.Is(err, context.Canceled):
				canceled.Add(1)
				return
			case errors.As(err, &e):
				refused.Add(1)
				return
			default:
				t.Errorf("Acquire: %v", err)
				return
			}
			ok.Add(1)
			enter(k, 1)
			for range rng.IntN(20) {
				runtime.Gosched()
			}
			enter(k, -1)
			tk.Release()
			if rng.IntN(4) == 0 {
				tk.Release() // idempotent
			}
		})
	}
	wg.Wait()
	if n := exceeded.Load(); n > 0 {
		t.Errorf("a cap was exceeded %d times", n)
	}
	if ok.Load() == 0 || ok.Load()+canceled.Load()+refused.Load() != workers {
		t.Errorf("ok %d canceled %d refused %d", ok.Load(), canceled.Load(), refused.Load())
	}
	t.Logf("ok %d canceled %d refused %d", ok.Load(), canceled.Load(), refused.Load())

	all := []*gateCounter{&m.global}
	for _, p := range []string{"p1", "p2"} {
		all = append(all, m.providers[p])
	}
	for _, sp := range specs {
		c := m.lookup(sp.Provider, sp.Connection)
		all = append(all, &c.account)
		for _, n := range c.models {
			all = append(all, n)
		}
		c.mu.Lock()
		if c.lim.running != 0 || c.queued != 0 || c.qhead != nil {
			t.Errorf("%s/%s limiter running %d queued %d", sp.Provider, sp.Connection, c.lim.running, c.queued)
		}
		c.mu.Unlock()
		if _, held, waiting := c.share.counts(); held != 0 || waiting != 0 || len(c.share.ring) != 0 {
			t.Errorf("%s/%s quota-share held %d waiting %d", sp.Provider, sp.Connection, held, waiting)
		}
	}
	held, waiting := gateCounts(m, all...)
	for i := range all {
		if held[i] != 0 || waiting[i] != 0 {
			t.Errorf("gate %d leaked: held %d waiting %d", i, held[i], waiting[i])
		}
	}
	if m.gates.head != nil {
		t.Error("gate waiter list not empty")
	}
	for _, st := range m.Snapshot() {
		if st.Running != 0 || st.Queued != 0 {
			t.Errorf("%s/%s running %d queued %d", st.Provider, st.Connection, st.Running, st.Queued)
		}
	}
}

// TestMaxQueueDepthBoundsGateWaiters: a connection's max_queue_depth also
// bounds the requests waiting on its gates, so SEMAPHORE_QUEUE_FULL comes
// at that depth on any profile.
func TestMaxQueueDepthBoundsGateWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := oauth("p", "c")
		spec.Overrides = Overrides{MaxConcurrent: 1, MaxQueueDepth: 2}
		m, clk := newManager(gateSettings(), spec)
		holder := mustAcquire(t, m, "p", "c", "")
		w1 := acquireAsync(context.Background(), m, "p", "c", "")
		w2 := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		_, err := m.Acquire(context.Background(), "p", "c", "")
		wantCode(t, err, CodeSemaphoreQueueFull, http.StatusTooManyRequests)
		clk.Advance(DefaultMaxWait)
		for _, w := range []<-chan result{w1, w2} {
			wantCode(t, (<-w).err, CodeSemaphoreTimeout, http.StatusServiceUnavailable)
		}
		holder.Release()
	})
}
