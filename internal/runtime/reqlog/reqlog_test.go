package reqlog

import (
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
)

func TestAddStampsAndNumbers(t *testing.T) {
	clk := clocktest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := New(3, clk)
	if got := l.List(0); len(got) != 0 {
		t.Fatalf("empty log lists %d records", len(got))
	}
	if _, ok := l.Get(1); ok {
		t.Fatal("Get on an empty log must miss")
	}
	l.Add(&Record{Model: "a"})
	clk.Advance(time.Second)
	at := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := l.Add(&Record{Model: "b", At: at})
	if seq != 2 {
		t.Fatalf("second record numbered %d, want 2", seq)
	}
	r, ok := l.Get(1)
	if !ok || r.Model != "a" || !r.At.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("record 1 = %+v: want model a stamped with the clock", r)
	}
	if r, _ := l.Get(2); !r.At.Equal(at) {
		t.Fatalf("a given At must be kept, got %v", r.At)
	}
}

func TestRingDropsTheOldest(t *testing.T) {
	clk := clocktest.NewClock(time.Unix(0, 0))
	l := New(3, clk)
	for _, m := range []string{"a", "b", "c", "d", "e"} {
		l.Add(&Record{Model: m})
		clk.Advance(time.Second)
	}
	list := l.List(0)
	if len(list) != 3 || list[0].Model != "e" || list[2].Model != "c" {
		t.Fatalf("List = %+v: want e, d, c (newest first, capacity 3)", list)
	}
	if got := l.List(2); len(got) != 2 || got[1].Model != "d" {
		t.Fatalf("List(2) = %+v", got)
	}
	if _, ok := l.Get(2); ok {
		t.Fatal("record 2 was dropped and must miss")
	}
	if r, ok := l.Get(4); !ok || r.Model != "d" {
		t.Fatalf("Get(4) = %+v, %v", r, ok)
	}
	if _, ok := l.Get(6); ok {
		t.Fatal("a future sequence number must miss")
	}
	recs, last := l.Since(1) // 2 is gone: starts at the oldest kept
	if last != 5 || len(recs) != 3 || recs[0].Seq != 3 || recs[2].Seq != 5 {
		t.Fatalf("Since(1) = %+v, %d", recs, last)
	}
	if recs, last := l.Since(5); len(recs) != 0 || last != 5 {
		t.Fatalf("Since(newest) = %+v, %d: want nothing", recs, last)
	}
}

func TestConcurrentAdds(t *testing.T) {
	l := New(DefaultCapacity, engine.SystemClock{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				l.Add(&Record{Model: "m"})
				l.List(10)
			}
		}()
	}
	wg.Wait()
	if _, last := l.Since(0); last != 800 {
		t.Fatalf("last sequence %d, want 800", last)
	}
	if got := len(l.List(0)); got != DefaultCapacity {
		t.Fatalf("kept %d, want %d", got, DefaultCapacity)
	}
}

// A record is stored as a copy: the caller's slices stay the caller's, a
// listed record stays as it was listed when its slot is reused, and a full
// log stores a record with a trail without allocating.
func TestAddCopiesIntoReusedSlots(t *testing.T) {
	l := New(1, clocktest.NewClock(time.Unix(0, 0)))
	r := Record{Model: "a", Trail: []Attempt{{Provider: "p1"}}, Skipped: []Skip{{Provider: "s1"}}}
	l.Add(&r)
	r.Trail[0].Provider, r.Skipped[0].Provider = "changed", "changed"
	listed := l.List(0)
	if len(listed) != 1 || listed[0].Trail[0].Provider != "p1" || listed[0].Skipped[0].Provider != "s1" {
		t.Fatalf("stored %+v: want the trail and skips as added", listed)
	}
	l.Add(&Record{Model: "b", Trail: []Attempt{{Provider: "p2"}}})
	got, ok := l.Get(2)
	if !ok || got.Model != "b" || len(got.Trail) != 1 || got.Trail[0].Provider != "p2" || got.Skipped != nil || got.Seq != 2 {
		t.Fatalf("record 2 = %+v, %v: want model b, trail p2, no skips", got, ok)
	}
	if listed[0].Trail[0].Provider != "p1" || listed[0].Model != "a" {
		t.Fatalf("a record listed before its slot was reused changed: %+v", listed[0])
	}
	next := Record{Model: "c", Trail: []Attempt{{Provider: "p3"}}}
	if n := testing.AllocsPerRun(100, func() { l.Add(&next) }); n != 0 {
		t.Fatalf("%v allocations per record in a full log, want 0", n)
	}
}
