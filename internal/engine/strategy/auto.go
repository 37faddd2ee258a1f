package strategy

import (
	"math"
	"slices"
	"strconv"
)

// AutoFactorsHeader is the response header in which the server reports
// the auto strategy's decision: Factors.String() of the winning target.
const AutoFactorsHeader = "X-Breakwater-Auto-Factors"

// AutoWeights weigh the auto strategy's five factors. Negative or NaN
// weights count as 0; the rest are normalised to sum 1. All zero means
// DefaultAutoWeights.
type AutoWeights struct {
	Health, Latency, Cost, Headroom, Context float64
}

// DefaultAutoWeights returns the default weights: health 0.35, latency
// 0.25, cost 0.15, headroom 0.15, context 0.10.
func DefaultAutoWeights() AutoWeights {
	return AutoWeights{Health: 0.35, Latency: 0.25, Cost: 0.15, Headroom: 0.15, Context: 0.10}
}

// normalized returns w with negative weights zeroed and the sum scaled to 1.
func (w AutoWeights) normalized() AutoWeights {
	c := func(x float64) float64 {
		if x > 0 && !math.IsInf(x, 1) {
			return x
		}
		return 0
	}
	w = AutoWeights{c(w.Health), c(w.Latency), c(w.Cost), c(w.Headroom), c(w.Context)}
	sum := w.Health + w.Latency + w.Cost + w.Headroom + w.Context
	if sum == 0 {
		return DefaultAutoWeights().normalized()
	}
	return AutoWeights{w.Health / sum, w.Latency / sum, w.Cost / sum, w.Headroom / sum, w.Context / sum}
}

// Factors is how much each factor contributed to the winning target's
// auto score, as shares of that score (they sum to 1, or are all 0 when no
// target was eligible or the score was 0).
type Factors struct {
	Health, Latency, Cost, Headroom, Context float64
}

// String formats f for AutoFactorsHeader, largest share first with two
// decimals, ties in the order health, latency, cost, headroom, context:
// "health=0.42,latency=0.31,cost=0.15,headroom=0.08,context=0.04". It
// returns "" for the zero Factors.
func (f Factors) String() string {
	if f == (Factors{}) {
		return ""
	}
	type kv struct {
		name  string
		share float64
	}
	parts := [...]kv{
		{"health", f.Health}, {"latency", f.Latency}, {"cost", f.Cost},
		{"headroom", f.Headroom}, {"context", f.Context},
	}
	slices.SortStableFunc(parts[:], func(a, b kv) int { return cmpFloat(b.share, a.share) })
	b := make([]byte, 0, 80)
	for n, p := range parts {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, p.name...)
		b = append(b, '=')
		b = strconv.AppendFloat(b, p.share, 'f', 2, 64)
	}
	return string(b)
}

// Auto is the "auto" strategy: every eligible target gets a score in
// [0, 1], the weighted sum of five factor scores, and the highest leads
// (ties in configured order):
//
//   - health: the Signals success EWMA (1 without data);
//   - latency: 1 − (l − min)/max over the candidates' EWMA latencies, so
//     the fastest scores 1 and one twice as slow 0.5; 0.5 without data;
//   - cost: the same formula over PriceIn + PriceOut (all free = 1);
//   - headroom: the quota headroom in Signals (1 without data);
//   - context: 1 when the window fits Request.PromptTokens or the prompt
//     size is unknown (0), 0.5 for an unknown window, 0 when too small.
//
// OrderExplain also returns the winner's Factors for AutoFactorsHeader;
// Order discards them. It keeps no state and is goroutine-safe.
type Auto struct {
	env     *env
	weights AutoWeights
}

var _ Strategy = (*Auto)(nil)

// Name returns "auto".
func (*Auto) Name() string { return NameAuto }

// Order returns the eligible targets by descending auto score.
func (a *Auto) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out, _ := a.OrderExplain(req, targets, eligible)
	return out
}

// Report does nothing: the scores are read from Signals.
func (*Auto) Report(Request, []Target, int, bool) {}

// OrderExplain is Order that also returns the winner's factor shares, for
// the server to send in AutoFactorsHeader. Each call's result is its own,
// so concurrent requests never see each other's explanation.
func (a *Auto) OrderExplain(req Request, targets []Target, eligible func(int) bool) ([]int, Factors) {
	out := eligibleIndexes(len(targets), eligible)
	if len(out) == 0 {
		return out, Factors{}
	}
	now := a.env.now(req).UnixNano()
	var ibuf [32]autoInput
	var in []autoInput
	if len(out) <= len(ibuf) {
		in = ibuf[:len(out)]
	} else {
		in = make([]autoInput, len(out))
	}
	var rng autoRange
	rng.minL, rng.minC = math.Inf(1), math.Inf(1)
	for p, i := range out {
		g := a.env.signals.lookup(targets[i].Key)
		x := autoInput{
			latency:  float64(g.latencyD()),
			health:   g.healthV(),
			headroom: g.view().headroom(now),
			cost:     targetCost(targets[i]),
		}
		if x.latency > 0 {
			rng.minL, rng.maxL = min(rng.minL, x.latency), max(rng.maxL, x.latency)
		}
		rng.minC, rng.maxC = min(rng.minC, x.cost), max(rng.maxC, x.cost)
		in[p] = x
	}
	var rbuf [32]ranked
	r := rankBuf(rbuf[:], len(out))
	best, bestScore := 0, math.Inf(-1)
	for p, i := range out {
		score := a.factors(req, targets[i], in[p], rng).sum()
		r[p] = ranked{i: i, k1: -score}
		if score > bestScore {
			best, bestScore = p, score
		}
	}
	f := a.factors(req, targets[out[best]], in[best], rng)
	sortRanked(r, out)
	if total := f.sum(); total > 0 {
		f = Factors{f.Health / total, f.Latency / total, f.Cost / total, f.Headroom / total, f.Context / total}
	} else {
		f = Factors{}
	}
	return out, f
}

// autoInput is what auto reads about one candidate.
type autoInput struct {
	latency, health, headroom, cost float64
}

// autoRange is the candidates' latency (known samples only) and cost range.
type autoRange struct {
	minL, maxL, minC, maxC float64
}

// sum returns the total of the weighted factor scores.
func (f Factors) sum() float64 { return f.Health + f.Latency + f.Cost + f.Headroom + f.Context }

// factors returns t's weighted factor scores (weight × score).
func (a *Auto) factors(req Request, t Target, x autoInput, r autoRange) Factors {
	latency := 0.5
	if x.latency > 0 {
		latency = 1 - (x.latency-r.minL)/r.maxL
	}
	cost := 1.0
	if r.maxC > 0 {
		cost = 1 - (x.cost-r.minC)/r.maxC
	}
	context := 1.0
	switch {
	case req.PromptTokens <= 0:
	case t.ContextWindow <= 0:
		context = 0.5
	case t.ContextWindow < req.PromptTokens:
		context = 0
	}
	w := a.weights
	return Factors{
		Health:   w.Health * x.health,
		Latency:  w.Latency * latency,
		Cost:     w.Cost * cost,
		Headroom: w.Headroom * x.headroom,
		Context:  w.Context * context,
	}
}
