package admission

import (
	"context"
	"testing"
	"testing/synctest"
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

// TestQuotaShareFailsOpen: a saturated qsconn semaphore lets the request
// proceed without a slot after QuotaShareWait, or at once with a negative
// wait, instead of refusing it. The account gate normally keeps the
// semaphore from saturating, so the test fills it directly.
func TestQuotaShareFailsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		spec := oauth("p", "c")
		spec.MaxConcurrent = 1
		m, clk := newManager(s, spec)
		var failOpen int
		m.SetObserver(Observer{OnQuotaShareFailOpen: func(string, string) { failOpen++ }})
		c := m.lookup("p", "c")
		c.qs.mu.Lock()
		c.qsCounter.held = 1 // saturated by a request of another path
		c.qs.mu.Unlock()

		r := acquireAsync(context.Background(), m, "p", "c", "")
		synctest.Wait()
		pending(t, r, "request inside QuotaShareWait")
		clk.Advance(DefaultQuotaShareWait)
		res := <-r
		if res.err != nil || res.tk.QuotaShareSlot() {
			t.Fatalf("err %v slot %v, want to proceed without a slot", res.err, res.tk != nil && res.tk.QuotaShareSlot())
		}
		res.tk.Release()

		s.QuotaShareWait = -1
		m.UpdateSettings(s)
		tk := mustAcquire(t, m, "p", "c", "") // no wait at all
		if tk.QuotaShareSlot() {
			t.Error("got a slot from a full semaphore")
		}
		tk.Release()
		if failOpen != 2 || statsOf(t, m, "p", "c").QuotaShareFailOpen != 2 {
			t.Errorf("fail-open count = %d / %d", failOpen, statsOf(t, m, "p", "c").QuotaShareFailOpen)
		}
		c.qs.mu.Lock()
		held := c.qsCounter.held
		c.qs.mu.Unlock()
		if held != 1 {
			t.Errorf("qs held = %d, want only the outside holder", held)
		}
	})
}
