package main

import (
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
)

// TestInterleaveSchedule checks the order of an interleaved load: the
// warm-up rounds first, then the measured ones; every round visits every
// target exactly once, in the same order; every target gets one slice per
// round, so its measured slices number the rounds; and every target waits
// the same number of slices between two of its own.
func TestInterleaveSchedule(t *testing.T) {
	for _, c := range []struct{ n, warm, rounds int }{{3, 2, 5}, {6, 2, 5}, {6, 0, 1}, {1, 1, 3}, {2, 4, 10}} {
		sched := interleaveSchedule(c.n, c.warm, c.rounds)
		if len(sched) != c.n*(c.warm+c.rounds) {
			t.Fatalf("%+v: %d slices, want %d", c, len(sched), c.n*(c.warm+c.rounds))
		}
		for r := range c.warm + c.rounds {
			round := sched[r*c.n : (r+1)*c.n]
			for i, s := range round {
				if s.round != r || s.target != i || s.warm != (r < c.warm) {
					t.Errorf("%+v: slice %d of round %d = %+v, want target %d, warm %v", c, i, r, s, i, r < c.warm)
				}
			}
		}
		last := map[int]int{}
		measured := map[int]int{}
		for pos, s := range sched {
			if prev, ok := last[s.target]; ok && pos-prev != c.n {
				t.Errorf("%+v: target %d sent at slices %d and %d, want %d apart", c, s.target, prev, pos, c.n)
			}
			last[s.target] = pos
			if !s.warm {
				measured[s.target]++
			}
		}
		for i := range c.n {
			if measured[i] != c.rounds {
				t.Errorf("%+v: target %d measured in %d slices, want %d", c, i, measured[i], c.rounds)
			}
		}
	}
}

// TestRoundsOf checks that a time is cut in whole slices, rounded up so
// no target gets less than it asked.
func TestRoundsOf(t *testing.T) {
	for _, c := range []struct {
		d, slice time.Duration
		want     int
	}{{5 * time.Second, time.Second, 5}, {1500 * time.Millisecond, time.Second, 2}, {2 * time.Second, time.Second, 2},
		{500 * time.Millisecond, time.Second, 1}, {10 * time.Second, 3 * time.Second, 4}, {0, time.Second, 0}, {time.Second, 0, 0}} {
		if got := roundsOf(c.d, c.slice); got != c.want {
			t.Errorf("roundsOf(%v, %v) = %d, want %d", c.d, c.slice, got, c.want)
		}
	}
}

// TestPartsTotal checks that a target's slices make one run: the p50
// over every slice's samples (not an average of the slices' p50s), first
// data of streams included, counts, CPU and calls added up.
func TestPartsTotal(t *testing.T) {
	ms := time.Millisecond
	var p parts
	// Slice p50s are 1 ms and 3 ms; over all six samples it is 2 ms.
	p.add(&load.Result{Scheduled: 3, Sent: 3, OK: 3, Elapsed: time.Second, Latency: []time.Duration{1 * ms, 1 * ms, 2 * ms},
		FirstData: []time.Duration{ms, ms, ms}}, Run{ProxyCPUMS: 3, UpstreamCalls: 3, ProxyMaxRSS: 10})
	p.add(&load.Result{Scheduled: 3, Sent: 3, OK: 3, Elapsed: time.Second, Latency: []time.Duration{3 * ms, 3 * ms, 2 * ms},
		FirstData: []time.Duration{2 * ms, 2 * ms, 2 * ms}}, Run{ProxyCPUMS: 5, UpstreamCalls: 3, ProxyMaxRSS: 20})
	run := p.total("gateway", true, true)
	if run.Target != "gateway" || run.Sent != 6 || run.OK != 6 || run.RPS != 3 || run.Latency.Count != 6 || run.Latency.P50MS != 2 {
		t.Errorf("run = %+v, want 6 sent and OK, 3 req/s, p50 2 ms over 6 samples", run)
	}
	if run.FirstData == nil || run.FirstData.Count != 6 || run.FirstData.MaxMS != 2 {
		t.Errorf("first data = %+v, want 6 samples up to 2 ms", run.FirstData)
	}
	if run.ProxyCPUMS != 8 || run.UpstreamCalls != 6 || run.ProxyMaxRSS != 20 {
		t.Errorf("CPU %v ms, calls %d, RSS %d; want 8, 6, 20", run.ProxyCPUMS, run.UpstreamCalls, run.ProxyMaxRSS)
	}
}
