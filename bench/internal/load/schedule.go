package load

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Schedule is a constant arrival-rate (open-loop) schedule: arrival i is due
// At(i) = i/Rate seconds after the start, for every i whose due time falls
// in [0, Duration). Arrival times depend on nothing but Rate and Duration —
// never on how fast earlier requests were answered — so a slow server cannot
// thin out the load it is measured under (no coordinated omission).
// Schedule is a plain value, safe for concurrent use.
type Schedule struct {
	// Rate is the number of arrivals per second; ≤ 0 means no arrivals.
	Rate float64
	// Duration is the length of the schedule; ≤ 0 means no arrivals.
	Duration time.Duration
	// Offsets, when not nil, are the due times of the arrivals, in
	// increasing order, instead of the constant rate (see Poisson).
	Offsets []time.Duration
}

// Poisson returns a schedule of random arrivals at rate per second on
// average over d: exponential gaps drawn from a generator seeded with seed
// (the same seed gives the same arrivals). Bursts and lulls come as they
// do in real traffic, which a constant rate never shows.
func Poisson(rate float64, d time.Duration, seed uint64) Schedule {
	s := Schedule{Rate: rate, Duration: d, Offsets: []time.Duration{}}
	if rate <= 0 || d <= 0 {
		return s
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if at >= d {
			return s
		}
		s.Offsets = append(s.Offsets, at)
	}
}

// At returns the due time of arrival i, as an offset from the start.
func (s Schedule) At(i int) time.Duration {
	if s.Offsets != nil {
		if i >= len(s.Offsets) {
			return s.Duration
		}
		return s.Offsets[i]
	}
	return time.Duration(float64(i) * float64(time.Second) / s.Rate)
}

// Count returns the number of arrivals: how many i ≥ 0 have At(i) < Duration.
func (s Schedule) Count() int {
	if s.Offsets != nil {
		return len(s.Offsets)
	}
	if s.Rate <= 0 || s.Duration <= 0 {
		return 0
	}
	n := int(math.Ceil(s.Duration.Seconds() * s.Rate))
	// Correct the float estimate by at most a step or two either way.
	for n > 0 && s.At(n-1) >= s.Duration {
		n--
	}
	for s.At(n) < s.Duration {
		n++
	}
	return n
}

// DueBy returns how many arrivals are due at or before elapsed (At(i) ≤
// elapsed), at most Count(). The dispatcher sends arrivals [sent, DueBy(now))
// each time it wakes, so a late wake-up sends the backlog at once instead of
// dropping or delaying the rest of the schedule.
func (s Schedule) DueBy(elapsed time.Duration) int {
	total := s.Count()
	if total == 0 || elapsed < 0 {
		return 0
	}
	if s.Offsets != nil {
		n, found := slices.BinarySearch(s.Offsets, elapsed)
		for found && n < total && s.Offsets[n] <= elapsed {
			n++
		}
		return n
	}
	k := int(math.Floor(elapsed.Seconds()*s.Rate)) + 1
	for k > 0 && s.At(k-1) > elapsed {
		k--
	}
	for k < total && s.At(k) <= elapsed {
		k++
	}
	return min(k, total)
}

// dispatch calls fire(i) for every arrival of sched, in order, each as soon
// as now() (the time since the start) reaches sched.At(i): on every wake-up
// it fires the whole backlog that is due, then sleeps until the next due
// time. fire must not block; arrival times depend only on sched and the
// clock, never on what fire's requests do. dispatch returns ctx.Err() when
// ctx ends first (arrivals not yet fired are then never fired).
func dispatch(ctx context.Context, sched Schedule, now func() time.Duration,
	sleep func(context.Context, time.Duration) error, fire func(i int)) error {
	n := sched.Count()
	next := 0
	for {
		for due := sched.DueBy(now()); next < due; next++ {
			fire(next)
		}
		if next >= n {
			return nil
		}
		if err := sleep(ctx, sched.At(next)-now()); err != nil {
			return err
		}
	}
}

// sleepCtx waits for d or until ctx ends, whichever is first; it returns
// ctx.Err() in the second case.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
