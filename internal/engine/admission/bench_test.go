package admission

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/cputime"
)

// stepClock moves one second forward on every Now so that the limiter's
// spacing and reservoir always allow the next dispatch: the benchmark then
// measures the uncontended path through the limiter and every gate.
type stepClock struct{ n atomic.Int64 }

func (c *stepClock) Now() time.Time { return t0.Add(time.Duration(c.n.Add(1)) * time.Second) }
func (c *stepClock) NewTimer(time.Duration) Timer {
	panic("uncontended admission must not wait")
}

func benchManager() *Manager {
	s := DefaultSettings()
	s.GlobalConcurrency = 1000
	s.ProviderConcurrency = map[string]int{"p": 100}
	spec := apikey("p", "c")
	spec.MaxConcurrent = 10           // quota-share slots
	spec.Overrides.MaxConcurrent = 10 // account gate
	spec.ModelConcurrency = map[string]int{"m": 5}
	return NewManager(&stepClock{}, s, []ConnSpec{spec})
}

// BenchmarkAcquireRelease is uncontended admission of a protected
// connection: limiter, global/provider/account/model gates and the
// quota-share semaphore, acquired and released.
func BenchmarkAcquireRelease(b *testing.B) {
	m := benchManager()
	ctx := context.Background()
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		tk, err := m.Acquire(ctx, "p", "c", "m")
		if err != nil {
			b.Fatal(err)
		}
		tk.Release()
	}
	// CPU per operation: wall ns/op is unreliable on a loaded machine.
	if used := cputime.Process() - cpu; used > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func TestUncontendedAdmissionAllocs(t *testing.T) {
	m := benchManager()
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() {
		tk, err := m.Acquire(ctx, "p", "c", "m")
		if err != nil {
			t.Fatal(err)
		}
		if !tk.QuotaShareSlot() || tk.limiter == false || tk.gates[levelModel] == nil {
			t.Fatal("benchmark path skips a stage")
		}
		tk.Release()
	})
	if n > 2 {
		t.Errorf("uncontended Acquire+Release allocates %v times, want ≤ 2", n)
	}
}
