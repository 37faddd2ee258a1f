package admission

import (
	"fmt"
	"reflect"
	"testing"
)

// TestNewManagerRegistersAsUpdatesDo: the connections given at start end up
// exactly as if each had been registered with UpdateConnection in turn — a
// repeated connection takes its later spec and keeps its first protection
// flag.
func TestNewManagerRegistersAsUpdatesDo(t *testing.T) {
	specs := []ConnSpec{apikey("p", "a"), oauth("p", "b"), apikey("q", "a")}
	specs[1].RateLimitProtection = true
	specs[0].MaxConcurrent = 3
	again := apikey("p", "b") // protection false, ignored for a registered connection
	again.MaxConcurrent = 2
	again.Overrides.MaxConcurrent = 4
	specs = append(specs, again)

	s := DefaultSettings()
	atOnce := NewManager(nil, s, specs)
	oneByOne := NewManager(nil, s, nil)
	for _, spec := range specs {
		oneByOne.UpdateConnection(spec)
	}
	if got, want := atOnce.Snapshot(), oneByOne.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("NewManager registered\n%+v\nUpdateConnection one by one\n%+v", got, want)
	}
	if !atOnce.Protected("p", "b") {
		t.Fatal("p/b: the first spec's rate_limit_protection must survive the repeated spec")
	}
	if got := len(atOnce.Snapshot()); got != 3 {
		t.Fatalf("%d connections registered, want 3", got)
	}
	if !atOnce.QuotaShared("p", "b") {
		t.Fatal("p/b: the later spec's max_concurrent 2 must size its quota-share semaphore")
	}
}

// BenchmarkNewManager is start-up with many connections: linear in their
// number (it copied the whole map once per connection before).
func BenchmarkNewManager(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		specs := make([]ConnSpec, n)
		for i := range specs {
			specs[i] = apikey("p", fmt.Sprintf("c%d", i))
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				NewManager(nil, DefaultSettings(), specs)
			}
		})
	}
}
