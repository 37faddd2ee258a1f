package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
)

// sliceGap is the pause between two slices of an interleaved load (-settle
// comes after the whole load): every answer of the slice before is read
// by then, and what its processes do after one (an access-log line, a
// timer) takes microseconds.
const sliceGap = 20 * time.Millisecond

// interleaved is one load measured on several targets in turn, slice by
// slice, instead of one target after the other: a machine growing busier
// or quieter over the load then weighs on every target alike.
type interleaved struct {
	conns    int
	openLoop bool
	drive    driveFunc
	// warm is each target's unmeasured time before the measured rounds,
	// total its measured time; both are sent in slices of slice (rounded
	// up to whole slices, so no target gets less).
	warm, total, slice time.Duration
	// profiles names each target's profiles when profiling ("" none).
	profiles []string
}

// sliceAt is one slice of an interleaved load: its round, the target it
// is sent to (an index into the targets) and whether it is warm-up.
type sliceAt struct {
	round, target int
	warm          bool
}

// roundsOf returns how many slices of length slice make at least d (0
// when d ≤ 0).
func roundsOf(d, slice time.Duration) int {
	if d <= 0 || slice <= 0 {
		return 0
	}
	return int((d + slice - 1) / slice)
}

// interleaveSchedule returns every slice of an interleaved load on n
// targets, in the order they are sent: warmRounds unmeasured rounds, then
// rounds measured ones, each visiting every target once in the same order
// (0, 1, … n−1). So every target waits the same n−1 slices between two of
// its own (its keep-alive connections idle alike) and every target has
// its share of each stretch of the load.
func interleaveSchedule(n, warmRounds, rounds int) []sliceAt {
	out := make([]sliceAt, 0, n*(warmRounds+rounds))
	for r := range warmRounds + rounds {
		for i := range n {
			out = append(out, sliceAt{round: r, target: i, warm: r < warmRounds})
		}
	}
	return out
}

// interleave measures il on tgts and returns one run per target, in the
// order of tgts: each target gets its own client, kept over all its
// slices; every slice is measured as a run of its own (mock counters,
// CPU, RSS) and a target's slices are merged into one run (latencies over
// every slice's samples). The main gateway's requests, warm-up included,
// are counted for the access-log check.
func (b *bench) interleave(ctx context.Context, tgts []target, il interleaved) ([]Run, error) {
	clients := make([]*http.Client, len(tgts))
	for i := range clients {
		clients[i] = load.NewClient(il.conns, b.o.timeout)
		defer clients[i].CloseIdleConnections()
	}
	warmRounds, rounds := roundsOf(il.warm, il.slice), max(1, roundsOf(il.total, il.slice))
	got := make([]parts, len(tgts))
	var caps []*capture
	measuring := false
	for _, s := range interleaveSchedule(len(tgts), warmRounds, rounds) {
		tgt, client := tgts[s.target], clients[s.target]
		if s.warm {
			res, err := il.drive(ctx, client, tgt.req, il.slice)
			if err != nil {
				return nil, fmt.Errorf("warm-up of %s: %w", label(tgt), err)
			}
			if tgt.mid == b.gw {
				b.rep.Gateway.Requests += res.Sent
			}
			if err := sleepCtx(ctx, sliceGap); err != nil {
				return nil, err
			}
			continue
		}
		if !measuring {
			measuring = true
			caps = b.profileAll(ctx, tgts, il, rounds)
		}
		var res *load.Result
		run, err := b.measure(ctx, measurement{tgt: tgt, client: client, conns: il.conns, openLoop: il.openLoop, quiet: true, dur: il.slice, pause: sliceGap,
			run: func(ctx context.Context, c *http.Client) (*load.Result, error) {
				r, err := il.drive(ctx, c, tgt.req, il.slice)
				res = r
				return r, err
			}})
		if err != nil {
			return nil, fmt.Errorf("%s, round %d: %w", label(tgt), s.round-warmRounds+1, err)
		}
		got[s.target].add(res, run)
	}
	for _, c := range caps {
		if c != nil {
			c.wait()
		}
	}
	if err := sleepCtx(ctx, b.o.settle); err != nil {
		return nil, err
	}
	out := make([]Run, len(tgts))
	for i, tgt := range tgts {
		out[i] = got[i].total(tgt.name, il.openLoop, tgt.req.Stream)
		if i < len(caps) && caps[i] != nil {
			caps[i].requests = out[i].Sent
		}
		progress(label(tgt), out[i])
	}
	return out, nil
}

// profileAll starts, when profiling, the profiles of every target il
// names one for, lasting about the measured rounds; the captures are
// indexed like tgts (nil: none for that target).
func (b *bench) profileAll(ctx context.Context, tgts []target, il interleaved, rounds int) []*capture {
	if b.profiler == nil {
		return nil
	}
	d := time.Duration(rounds*len(tgts)) * (il.slice + sliceGap)
	caps := make([]*capture, len(tgts))
	for i, tgt := range tgts {
		if i < len(il.profiles) && il.profiles[i] != "" && tgt.mid != nil {
			caps[i] = b.profiler.start(ctx, tgt.mid.Name, il.profiles[i], d)
		}
	}
	return caps
}

// label names a target in progress lines: its name, or the name of the
// gateway in the middle when that is not the main one.
func label(t target) string {
	if t.name == "gateway" && t.mid != nil {
		return t.mid.Name
	}
	return t.name
}

// parts gathers the runs of one target measured in several parts.
type parts struct {
	results []*load.Result
	runs    []Run
}

// add records one part: the generator's result and measure's figures.
func (p *parts) add(r *load.Result, run Run) {
	p.results, p.runs = append(p.results, r), append(p.runs, run)
}

// total returns the parts as one run: latencies over every part's
// samples, CPU and upstream calls added up (-1 when one part's are
// unknown), the generator's CPU share averaged, the highest RSS.
func (p *parts) total(name string, openLoop, stream bool) Run {
	run := runOf(name, mergeResults(p.results), openLoop, stream)
	run.UpstreamCalls = 0
	for _, r := range p.runs {
		run.SliceP50MS = append(run.SliceP50MS, r.Latency.P50MS)
		run.ProxyCPUMS += r.ProxyCPUMS
		run.MockCPUMS += r.MockCPUMS
		run.GeneratorCPUPct += r.GeneratorCPUPct / float64(len(p.runs))
		run.ProxyMaxRSS = max(run.ProxyMaxRSS, r.ProxyMaxRSS)
		if run.UpstreamCalls >= 0 && r.UpstreamCalls >= 0 {
			run.UpstreamCalls += r.UpstreamCalls
		} else {
			run.UpstreamCalls = -1
		}
	}
	return run
}

// mergeResults returns the results of several runs of one request as one:
// counts and wall times added up, samples, errors and tallies joined.
func mergeResults(rs []*load.Result) *load.Result {
	out := &load.Result{}
	for _, r := range rs {
		out.Scheduled += r.Scheduled
		out.Sent += r.Sent
		out.OK += r.OK
		out.Dropped += r.Dropped
		out.Elapsed += r.Elapsed
		out.Latency = append(out.Latency, r.Latency...)
		out.FromSchedule = append(out.FromSchedule, r.FromSchedule...)
		out.FirstData = append(out.FirstData, r.FirstData...)
		out.Lag = append(out.Lag, r.Lag...)
		for k, n := range r.Errors {
			if out.Errors == nil {
				out.Errors = map[string]int{}
			}
			out.Errors[k] += n
		}
		for k, n := range r.Tally {
			if out.Tally == nil {
				out.Tally = map[load.TallyKey]int{}
			}
			out.Tally[k] += n
		}
	}
	return out
}

// openDrive returns a drive of open loop at rate req/s.
func (b *bench) openDrive(rate float64) driveFunc {
	return func(ctx context.Context, c *http.Client, req load.Request, d time.Duration) (*load.Result, error) {
		return load.OpenLoop(ctx, c, req, load.Schedule{Rate: rate, Duration: d}, b.o.maxInFlight)
	}
}
