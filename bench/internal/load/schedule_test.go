package load

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestScheduleCountAndArrivalTimes(t *testing.T) {
	tests := []struct {
		name     string
		sched    Schedule
		count    int
		interval time.Duration // exact spacing, 0 = not an integer ns
		last     time.Duration
	}{
		{"500 req/s for 10s", Schedule{Rate: 500, Duration: 10 * time.Second}, 5000, 2 * time.Millisecond, 9998 * time.Millisecond},
		{"2000 req/s for 10s", Schedule{Rate: 2000, Duration: 10 * time.Second}, 20000, 500 * time.Microsecond, 9999500 * time.Microsecond},
		{"1000 req/s for 1.0005s", Schedule{Rate: 1000, Duration: 1000500 * time.Microsecond}, 1001, time.Millisecond, time.Second},
		{"3 req/s for 1s", Schedule{Rate: 3, Duration: time.Second}, 3, 0, 666666666},
		{"0.5 req/s for 3s", Schedule{Rate: 0.5, Duration: 3 * time.Second}, 2, 2 * time.Second, 2 * time.Second},
		{"zero rate", Schedule{Rate: 0, Duration: time.Second}, 0, 0, 0},
		{"zero duration", Schedule{Rate: 500, Duration: 0}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.sched.Count()
			if n != tt.count {
				t.Fatalf("Count() = %d, want %d", n, tt.count)
			}
			if n == 0 {
				return
			}
			if got := tt.sched.At(0); got != 0 {
				t.Fatalf("At(0) = %v, want 0", got)
			}
			if got := tt.sched.At(n - 1); got != tt.last {
				t.Fatalf("At(%d) = %v, want %v", n-1, got, tt.last)
			}
			if got := tt.sched.At(n); got < tt.sched.Duration {
				t.Fatalf("At(Count()) = %v, inside the %v schedule", got, tt.sched.Duration)
			}
			if tt.interval == 0 {
				return
			}
			for i := 1; i < n; i++ {
				if d := tt.sched.At(i) - tt.sched.At(i-1); d != tt.interval {
					t.Fatalf("spacing At(%d)-At(%d) = %v, want %v", i, i-1, d, tt.interval)
				}
			}
		})
	}
}

func TestScheduleDueBy(t *testing.T) {
	s := Schedule{Rate: 500, Duration: 10 * time.Second} // one arrival every 2ms
	tests := []struct {
		elapsed time.Duration
		want    int
	}{
		{-time.Millisecond, 0},
		{0, 1}, // arrival 0 is due at the start
		{1999 * time.Microsecond, 1},
		{2 * time.Millisecond, 2},
		{2001 * time.Microsecond, 2},
		{time.Second, 501},
		{9998 * time.Millisecond, 5000},
		{time.Minute, 5000}, // never more than Count
	}
	for _, tt := range tests {
		if got := s.DueBy(tt.elapsed); got != tt.want {
			t.Errorf("DueBy(%v) = %d, want %d", tt.elapsed, got, tt.want)
		}
	}
	if got := (Schedule{}).DueBy(time.Second); got != 0 {
		t.Errorf("zero Schedule DueBy = %d, want 0", got)
	}
}

// fakeClock is a clock whose sleeps overshoot by a fixed lateness, like a
// coarse OS timer.
type fakeClock struct {
	t    time.Duration
	late time.Duration
}

func (c *fakeClock) now() time.Duration { return c.t }

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.t += max(d, 0) + c.late
	return nil
}

func TestDispatchFiresEveryArrivalOnScheduleWithLateWakeups(t *testing.T) {
	tests := []struct {
		name  string
		sched Schedule
		late  time.Duration
	}{
		{"500 req/s exact timer", Schedule{Rate: 500, Duration: time.Second}, 0},
		{"500 req/s timer 0.7ms late", Schedule{Rate: 500, Duration: time.Second}, 700 * time.Microsecond},
		{"2000 req/s timer 1ms late", Schedule{Rate: 2000, Duration: time.Second}, time.Millisecond},
		{"2000 req/s timer 25ms late", Schedule{Rate: 2000, Duration: time.Second}, 25 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{late: tt.late}
			var fired []int
			var firedAt []time.Duration
			err := dispatch(context.Background(), tt.sched, clk.now, clk.sleep, func(i int) {
				fired = append(fired, i)
				firedAt = append(firedAt, clk.t)
			})
			if err != nil {
				t.Fatalf("dispatch: %v", err)
			}
			if len(fired) != tt.sched.Count() {
				t.Fatalf("fired %d arrivals, want %d", len(fired), tt.sched.Count())
			}
			for k, i := range fired {
				if i != k {
					t.Fatalf("arrival %d fired as %d: out of order", k, i)
				}
				due := tt.sched.At(i)
				if firedAt[k] < due {
					t.Fatalf("arrival %d fired at %v, before its due time %v", i, firedAt[k], due)
				}
				// Fired at the first wake-up after its due time: never
				// later than one timer overshoot.
				if firedAt[k]-due > tt.late {
					t.Fatalf("arrival %d fired %v after due, more than the %v timer overshoot", i, firedAt[k]-due, tt.late)
				}
			}
		})
	}
}

func TestDispatchArrivalsIgnoreSlowResponses(t *testing.T) {
	// fire stands for "start a request"; a request that takes 50ms to
	// answer must not delay the next arrival (2ms later at 500 req/s).
	sched := Schedule{Rate: 500, Duration: 100 * time.Millisecond}
	clk := &fakeClock{}
	inFlight, maxInFlight := 0, 0
	var answerAt []time.Duration
	var firedAt []time.Duration
	err := dispatch(context.Background(), sched, clk.now, clk.sleep, func(i int) {
		for len(answerAt) > 0 && answerAt[0] <= clk.t {
			answerAt = answerAt[1:]
			inFlight--
		}
		firedAt = append(firedAt, clk.t)
		answerAt = append(answerAt, clk.t+50*time.Millisecond)
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
	})
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	if len(firedAt) != 50 {
		t.Fatalf("fired %d, want 50", len(firedAt))
	}
	for i, at := range firedAt {
		if at != sched.At(i) {
			t.Fatalf("arrival %d at %v, want %v", i, at, sched.At(i))
		}
	}
	// 50ms answers at one arrival per 2ms: 25 outstanding at the peak.
	if maxInFlight != 25 {
		t.Fatalf("max in flight %d, want 25 (arrivals did not wait for answers)", maxInFlight)
	}
}

func TestDispatchStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := &fakeClock{}
	fired := 0
	err := dispatch(ctx, Schedule{Rate: 1000, Duration: time.Second}, clk.now, clk.sleep, func(int) {
		fired++
		if fired == 10 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("dispatch error = %v, want context.Canceled", err)
	}
	if fired != 10 {
		t.Fatalf("fired %d after cancel, want 10", fired)
	}
}

func TestPoisson(t *testing.T) {
	s := Poisson(100, 100*time.Second, 7)
	n := s.Count()
	// 10,000 arrivals expected; the standard deviation is 100.
	if n < 9500 || n > 10500 {
		t.Fatalf("Count = %d, want about 10000", n)
	}
	if again := Poisson(100, 100*time.Second, 7); again.Count() != n || again.At(n/2) != s.At(n/2) {
		t.Error("the same seed gave other arrivals")
	}
	var gaps []time.Duration
	for i := 1; i < n; i++ {
		if s.At(i) < s.At(i-1) || s.At(i) >= s.Duration {
			t.Fatalf("arrival %d at %v after %v (duration %v)", i, s.At(i), s.At(i-1), s.Duration)
		}
		gaps = append(gaps, s.At(i)-s.At(i-1))
	}
	// Exponential gaps of mean 10 ms: about 1-1/e of them below the mean,
	// and some far above (bursts and lulls).
	below, long := 0, 0
	for _, g := range gaps {
		if g < 10*time.Millisecond {
			below++
		}
		if g > 40*time.Millisecond {
			long++
		}
	}
	if frac := float64(below) / float64(len(gaps)); frac < 0.60 || frac > 0.66 {
		t.Errorf("%.3f of the gaps below the mean, want about 0.632", frac)
	}
	if long == 0 {
		t.Error("no gap above four times the mean: not exponential")
	}
	if got := s.DueBy(s.At(10)); got != 11 {
		t.Errorf("DueBy(At(10)) = %d, want 11", got)
	}
	if got := s.DueBy(s.At(10) - 1); got != 10 {
		t.Errorf("DueBy(At(10)-1) = %d, want 10", got)
	}
	if got := s.DueBy(time.Hour); got != n {
		t.Errorf("DueBy(1h) = %d, want %d", got, n)
	}
	if Poisson(0, time.Second, 1).Count() != 0 {
		t.Error("rate 0 has arrivals")
	}
}
