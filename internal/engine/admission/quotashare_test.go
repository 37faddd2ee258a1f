package admission

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestPickQuotaShareDeprioritisesFull(t *testing.T) {
	cands := []QuotaShareCandidate{
		{Connection: "full", InFlight: 2, MaxConcurrent: 2},
		{Connection: "busy", InFlight: 1, MaxConcurrent: 2},
		{Connection: "idle", InFlight: 0, MaxConcurrent: 2},
	}
	p := NewQuotaSharePool(nil)
	for range 300 {
		if i := p.Pick(cands); cands[i].Connection == "full" {
			t.Fatal("picked a full connection while others had room")
		}
	}
	allFull := []QuotaShareCandidate{{Connection: "x", InFlight: 1, MaxConcurrent: 1}, {Connection: "y", InFlight: 3, MaxConcurrent: 1}}
	seen := map[string]int{}
	for range 100 {
		i := p.Pick(allFull)
		if i < 0 {
			t.Fatal("a pool of full connections must still pick (only de-prioritised)")
		}
		seen[allFull[i].Connection]++
	}
	if seen["x"] != 50 || seen["y"] != 50 {
		t.Errorf("all-full picks = %v, want an even share", seen)
	}
	if PickQuotaShare(map[string]int{}, nil, nil) != -1 {
		t.Error("empty pool picked")
	}
}

// TestPickQuotaShareDRR: equal loads share exactly by weight.
func TestPickQuotaShareDRR(t *testing.T) {
	cands := []QuotaShareCandidate{{Connection: "a"}, {Connection: "b", Weight: 2}, {Connection: "c"}}
	deficit := map[string]int{}
	got := map[string]int{}
	for range 400 {
		got[cands[PickQuotaShare(deficit, cands, nil)].Connection]++
	}
	if got["a"] != 100 || got["b"] != 200 || got["c"] != 100 {
		t.Errorf("shares = %v, want 100/200/100", got)
	}
}

// TestPickQuotaSharePowerOfTwo: of the two drawn candidates the less loaded
// one wins.
func TestPickQuotaSharePowerOfTwo(t *testing.T) {
	cands := []QuotaShareCandidate{
		{Connection: "a", InFlight: 3, MaxConcurrent: 4},
		{Connection: "b", InFlight: 1, MaxConcurrent: 4},
		{Connection: "c", InFlight: 0}, // unlimited, idle
	}
	draws := []int{0, 0} // a, then b (index 0 of the remaining two)
	intn := func(n int) int { d := draws[0]; draws = draws[1:]; return d }
	deficit := map[string]int{"a": 1, "b": 1, "c": 1}
	if i := PickQuotaShare(deficit, cands, intn); cands[i].Connection != "b" {
		t.Errorf("picked %s of a(3/4) and b(1/4)", cands[i].Connection)
	}
	if deficit["b"] != 0 || deficit["a"] != 1 {
		t.Errorf("deficits = %v", deficit)
	}
}

func TestManagerPickQuotaShareUsesLiveLoad(t *testing.T) {
	s := DefaultSettings()
	s.AutoEnableAPIKey = false
	a := oauth("p", "a")
	a.MaxConcurrent = 1
	b := oauth("p", "b")
	b.MaxConcurrent = 1
	m, _ := newManager(s, a, b)
	tk := mustAcquire(t, m, "p", "a", "")
	for range 20 {
		if got := m.PickQuotaShare("p", []string{"a", "b"}); got != "b" {
			t.Fatalf("picked %s while a is full", got)
		}
	}
	tk.Release()
	if m.PickQuotaShare("p", nil) != "" {
		t.Error("empty pool picked")
	}
}

func TestQuotaShareSlotAndToggle(t *testing.T) {
	spec := oauth("p", "c")
	spec.MaxConcurrent = 2
	m, _ := newManager(DefaultSettings(), spec, oauth("p", "unlimited"))
	tk := mustAcquire(t, m, "p", "c", "")
	if !tk.QuotaShareSlot() {
		t.Error("no qsconn slot with max_concurrent 2 and quota-share on")
	}
	tk.Release()
	if tk := mustAcquire(t, m, "p", "unlimited", ""); tk.QuotaShareSlot() {
		t.Error("quota-share slot without max_concurrent")
	} else {
		tk.Release()
	}
	s := DefaultSettings()
	s.QuotaShareEnabled = false
	m.UpdateSettings(s)
	tk = mustAcquire(t, m, "p", "c", "")
	if tk.QuotaShareSlot() {
		t.Error("quota-share slot with quota_share_concurrency_limit.enabled false")
	}
	tk.Release()
}

// TestQuotaShareFailsOpen: with its slots taken, a request waits for one
// up to its queue budget (max_wait_ms) and then proceeds without one,
// counted (docs/resilience.md §5); QuotaShareWait shortens the wait, a
// negative one fails open at once. max_concurrent never refuses.
func TestQuotaShareFailsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		spec := oauth("p", "c")
		spec.MaxConcurrent = 1
		m, clk := newManager(s, spec)
		var failOpen int
		m.SetObserver(Observer{OnQuotaShareFailOpen: func(string, string) { failOpen++ }})
		holder := mustAcquire(t, m, "p", "c", "")
		if !holder.QuotaShareSlot() {
			t.Fatal("the first request got no slot")
		}

		r := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		if st := statsOf(t, m, "p", "c"); st.Queued != 1 || st.QuotaShareSlots != 1 || st.QuotaShareHeld != 1 {
			t.Fatalf("stats while waiting: %+v", st)
		}
		clk.Advance(DefaultMaxWait - time.Millisecond)
		synctest.Wait()
		pending(t, r, "request inside its queue budget")
		clk.Advance(time.Millisecond)
		res := <-r
		if res.err != nil || res.tk.QuotaShareSlot() {
			t.Fatalf("err %v slot %v, want to proceed without a slot", res.err, res.tk != nil && res.tk.QuotaShareSlot())
		}
		res.tk.Release()

		s.QuotaShareWait = time.Second
		m.UpdateSettings(s)
		r = acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		clk.Advance(time.Second)
		if res := <-r; res.err != nil || res.tk.QuotaShareSlot() {
			t.Fatalf("QuotaShareWait 1 s: err %v", res.err)
		} else {
			res.tk.Release()
		}

		s.QuotaShareWait = -1
		m.UpdateSettings(s)
		tk := mustAcquire(t, m, "p", "c", "") // no wait at all
		if tk.QuotaShareSlot() {
			t.Error("got a slot from a full semaphore")
		}
		tk.Release()
		if failOpen != 3 || statsOf(t, m, "p", "c").QuotaShareFailOpen != 3 {
			t.Errorf("fail-open count = %d / %d", failOpen, statsOf(t, m, "p", "c").QuotaShareFailOpen)
		}
		holder.Release()
		if st := statsOf(t, m, "p", "c"); st.QuotaShareHeld != 0 || st.Rejections != 0 {
			t.Errorf("after release: %+v", st)
		}
	})
}

// TestQuotaShareWaiterGetsTheFreedSlot: a waiter is granted the slot a
// finished request frees, on any profile, without a gate.
func TestQuotaShareWaiterGetsTheFreedSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := apikey("p", "c") // protected by auto-enable: limiter first, then quota-share
		spec.MaxConcurrent = 2
		s := DefaultSettings()
		s.Defaults.MinSpacing = 0
		m, _ := newManager(s, spec)
		a, b := mustAcquire(t, m, "p", "c", ""), mustAcquire(t, m, "p", "c", "")
		r := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		pending(t, r, "third request on 2 slots")
		a.Release()
		res := <-r
		if res.err != nil || !res.tk.QuotaShareSlot() {
			t.Fatalf("err %v slot %v", res.err, res.tk.QuotaShareSlot())
		}
		if len(m.Gates()) != 0 {
			t.Fatalf("max_concurrent made a gate: %+v", m.Gates())
		}
		b.Release()
		res.tk.Release()
	})
}

// TestQuotaShareRoundRobinAcrossClientKeys: freed slots go to the waiting
// client keys in turn, not in arrival order: key A queued three requests
// before B and C queued theirs, and the grants go A, B, C, A, B, A.
// Within every round each waiting key is served once (±1).
func TestQuotaShareRoundRobinAcrossClientKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := oauth("p", "c")
		spec.MaxConcurrent = 1
		m, _ := newManager(DefaultSettings(), spec)
		holder := mustAcquire(t, m, "p", "c", "")
		type grant struct {
			key string
			tk  *Ticket
		}
		grants := make(chan grant, 8)
		for _, key := range []string{"A", "A", "A", "B", "B", "C"} {
			go func() {
				tk, err := m.AcquireFor(context.Background(), "p", "c", "", key)
				if err != nil {
					t.Error(err)
				}
				grants <- grant{key, tk}
			}()
			synctest.Wait() // queued in this order
		}
		holder.Release()
		var order []string
		for range 6 {
			g := <-grants
			if !g.tk.QuotaShareSlot() {
				t.Fatalf("%s proceeded without a slot", g.key)
			}
			order = append(order, g.key)
			g.tk.Release()
		}
		if got := strings.Join(order, ""); got != "ABCABA" {
			t.Fatalf("grant order %s, want ABCABA", got)
		}
	})
}

// TestQuotaShareToggleLetsWaitersGo: switching quota-share off releases
// the waiters without a slot; that is not a fail-open.
func TestQuotaShareToggleLetsWaitersGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		spec := oauth("p", "c")
		spec.MaxConcurrent = 1
		m, _ := newManager(s, spec)
		holder := mustAcquire(t, m, "p", "c", "")
		r := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		s.QuotaShareEnabled = false
		m.UpdateSettings(s)
		res := <-r
		if res.err != nil || res.tk.QuotaShareSlot() || statsOf(t, m, "p", "c").QuotaShareFailOpen != 0 {
			t.Fatalf("err %v, stats %+v", res.err, statsOf(t, m, "p", "c"))
		}
		res.tk.Release()
		holder.Release()
		if st := statsOf(t, m, "p", "c"); st.QuotaShareHeld != 0 || st.QuotaShareSlots != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestOverridesCapIsTheAccountGate: rate_limit_overrides.max_concurrent is
// the account level of the composite gate on every profile, unprotected
// oauth connections included: excess requests wait, then get the typed
// errors; the limiter's own concurrency is not changed by it.
func TestOverridesCapIsTheAccountGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.SemaphoreQueueLimit = 1
		spec := oauth("p", "c")
		spec.Overrides.MaxConcurrent = 1
		m, clk := newManager(s, spec, func() ConnSpec { a := apikey("p", "k"); a.Overrides.MaxConcurrent = 30; return a }())
		holder := mustAcquire(t, m, "p", "c", "")
		waiter := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		_, err := m.Acquire(context.Background(), "p", "c", "")
		wantCode(t, err, CodeSemaphoreQueueFull, http.StatusTooManyRequests)
		clk.Advance(DefaultMaxWait)
		wantCode(t, (<-waiter).err, CodeSemaphoreTimeout, http.StatusServiceUnavailable)
		holder.Release()
		if got := m.lookup("p", "k").cfg.Load().limiter.MaxConcurrent; got != DefaultLimiterConcurrency {
			t.Fatalf("the limiter's concurrency became %d", got)
		}
	})
}

// TestOrderQuotaShare: among a target's connections the free one goes
// first, a full one last — never dropped; without quota-share slots the
// configured order stays.
func TestOrderQuotaShare(t *testing.T) {
	s := DefaultSettings()
	specs := []ConnSpec{oauth("p", "a"), oauth("p", "b"), oauth("p", "c"), oauth("q", "x"), oauth("q", "y")}
	for i := range 3 {
		specs[i].MaxConcurrent = 1
	}
	m, _ := newManager(s, specs...)
	a := mustAcquire(t, m, "p", "a", "") // a is full
	defer a.Release()
	for range 50 {
		order := m.OrderQuotaShare("p", []string{"a", "b", "c"})
		if len(order) != 3 || order[2] != 0 || order[0] == 0 {
			t.Fatalf("order %v: the full connection a must come last, never dropped", order)
		}
	}
	// Deficit round robin spreads the picks over b and c.
	picks := map[int]int{}
	for range 100 {
		picks[m.OrderQuotaShare("p", []string{"a", "b", "c"})[0]]++
	}
	if picks[1] != 50 || picks[2] != 50 {
		t.Fatalf("first picks %v, want b and c 50 each", picks)
	}
	if order := m.OrderQuotaShare("q", []string{"x", "y"}); order != nil {
		t.Fatalf("connections without max_concurrent reordered: %v", order)
	}
	s.QuotaShareEnabled = false
	m.UpdateSettings(s)
	if order := m.OrderQuotaShare("p", []string{"a", "b", "c"}); order != nil {
		t.Fatalf("quota-share off reordered: %v", order)
	}
}
