package strategy

import (
	"math"
)

// CostOptimized is the "cost-optimized" strategy: cheapest first by the
// declared PriceIn + PriceOut (0 = free), ties in configured order. It
// keeps no state and is goroutine-safe.
type CostOptimized struct{}

var _ Strategy = (*CostOptimized)(nil)

// Name returns "cost-optimized".
func (*CostOptimized) Name() string { return NameCostOptimized }

// Order returns the eligible targets cheapest first.
func (*CostOptimized) Order(_ Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	rankBy(out, func(i int) (float64, float64) { return targetCost(targets[i]), 0 })
	return out
}

// Report does nothing.
func (*CostOptimized) Report(Request, []Target, int, bool) {}

// targetCost is the declared price a target is ranked on.
func targetCost(t Target) float64 { return max(0, t.PriceIn) + max(0, t.PriceOut) }

// ContextOptimized is the "context-optimized" strategy: the smallest model
// whose context window fits the request first. Order: windows ≥
// Request.PromptTokens ascending, then targets with an unknown window
// (ContextWindow 0) in configured order, then windows too small,
// largest first. Ties keep configured order. It keeps no state and is
// goroutine-safe.
type ContextOptimized struct{}

var _ Strategy = (*ContextOptimized)(nil)

// Name returns "context-optimized".
func (*ContextOptimized) Name() string { return NameContextOptimized }

// Order returns the eligible targets, smallest fitting window first.
func (*ContextOptimized) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	rankBy(out, func(i int) (float64, float64) { return contextFit(targets[i].ContextWindow, req.PromptTokens) })
	return out
}

// contextFit ranks a window for a prompt: group 0 fits (smaller first),
// 1 unknown, 2 too small (larger first).
func contextFit(window, prompt int) (group, key float64) {
	switch {
	case window <= 0:
		return 1, 0
	case window >= prompt:
		return 0, float64(window)
	default:
		return 2, -float64(window)
	}
}

// Report does nothing.
func (*ContextOptimized) Report(Request, []Target, int, bool) {}

// CacheOptimized is the "cache-optimized" strategy: prompt-cache affinity
// by rendezvous (highest random weight) hashing of Request.PrefixHash with
// each target's Key. The same prefix always leads with the same target;
// excluding or removing a target only moves the prefixes that led with
// it, and never reorders the others. PrefixHash 0 (no prefix) routes in
// configured order. It keeps no state and is goroutine-safe.
type CacheOptimized struct{}

var _ Strategy = (*CacheOptimized)(nil)

// Name returns "cache-optimized".
func (*CacheOptimized) Name() string { return NameCacheOptimized }

// Order returns the eligible targets by descending rendezvous score.
func (*CacheOptimized) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	if req.PrefixHash == 0 {
		return out
	}
	// The top 53 bits of the score convert to float64 exactly.
	rankBy(out, func(i int) (float64, float64) {
		return -float64(rendezvous(req.PrefixHash, targets[i].Key) >> 11), 0
	})
	return out
}

// Report does nothing.
func (*CacheOptimized) Report(Request, []Target, int, bool) {}

// rendezvous scores key for prefix: a 64-bit mix of the prefix hash and
// the FNV-1a hash of key.
func rendezvous(prefix uint64, key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return mix64(prefix ^ mix64(h))
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ResetWindow is the "reset-window" strategy: the soonest window reset
// first (spend the quota that refills soonest), by the ResetAt of the
// quota last observed in Signals; targets with no known future reset
// follow in configured order. Remaining quota is not considered (see
// ResetAware). It is goroutine-safe.
type ResetWindow struct {
	env *env
}

var _ Strategy = (*ResetWindow)(nil)

// Name returns "reset-window".
func (*ResetWindow) Name() string { return NameResetWindow }

// Order returns the eligible targets, soonest reset first.
func (s *ResetWindow) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	now := s.env.now(req).UnixNano()
	rankBy(out, func(i int) (float64, float64) {
		return s.env.signals.lookup(targets[i].Key).view().untilReset(now), 0
	})
	return out
}

// Report does nothing.
func (*ResetWindow) Report(Request, []Target, int, bool) {}

// ResetAware is the "reset-aware" strategy: ranks connections by quota
// reset time, knowing which still have quota. First the targets with
// quota left and a known future reset, soonest reset first (use it before
// it refills); then those with quota left and no known reset (including
// no quota data), in configured order; last the exhausted ones (headroom
// 0), soonest refill first. Quota comes from Signals. It is
// goroutine-safe.
type ResetAware struct {
	env *env
}

var _ Strategy = (*ResetAware)(nil)

// Name returns "reset-aware".
func (*ResetAware) Name() string { return NameResetAware }

// Order returns the eligible targets by availability, then reset time.
func (s *ResetAware) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	now := s.env.now(req).UnixNano()
	rankBy(out, func(i int) (float64, float64) {
		v := s.env.signals.lookup(targets[i].Key).view()
		until := v.untilReset(now)
		switch {
		case v.ok && v.headroom(now) == 0:
			return 2, until
		case math.IsInf(until, 1):
			return 1, 0
		default:
			return 0, until
		}
	})
	return out
}

// Report does nothing.
func (*ResetAware) Report(Request, []Target, int, bool) {}

// Headroom is the "headroom" strategy: the most remaining quota first
// (Quota.Headroom of the last observation in Signals; a target without
// data counts as 1, a window already reset as 1), ties in configured
// order. It is goroutine-safe.
type Headroom struct {
	env *env
}

var _ Strategy = (*Headroom)(nil)

// Name returns "headroom".
func (*Headroom) Name() string { return NameHeadroom }

// Order returns the eligible targets, most headroom first.
func (s *Headroom) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	now := s.env.now(req).UnixNano()
	rankBy(out, func(i int) (float64, float64) { return -s.env.signals.lookup(targets[i].Key).view().headroom(now), 0 })
	return out
}

// Report does nothing.
func (*Headroom) Report(Request, []Target, int, bool) {}

// QuotaWeighted is the "quota-weighted" strategy: the weighted draw of
// Weighted with each target's quota headroom (as Headroom reads it) as its
// weight — an exhausted target is never drawn while another has quota —
// then the rest by descending headroom, ties in configured order. It is
// goroutine-safe; with Options.Seed set its draws are reproducible.
type QuotaWeighted struct {
	env *env
	rng *lockedRand
}

var _ Strategy = (*QuotaWeighted)(nil)

// Name returns "quota-weighted".
func (*QuotaWeighted) Name() string { return NameQuotaWeighted }

// Order draws the first target by headroom, then the rest by headroom.
func (s *QuotaWeighted) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	if len(out) == 0 {
		return out
	}
	now := s.env.now(req).UnixNano()
	var buf [32]ranked
	r := rankBuf(buf[:], len(out))
	for p, i := range out {
		r[p] = ranked{i: i, k1: -s.env.signals.lookup(targets[i].Key).view().headroom(now)}
	}
	s.rng.mu.Lock()
	first := drawWeighted(s.rng.r, len(r), func(p int) float64 { return -r[p].k1 })
	s.rng.mu.Unlock()
	drawn := r[first]
	copy(r[1:first+1], r[:first]) // the rest keep configured order
	r[0] = drawn
	out[0] = drawn.i
	sortRanked(r[1:], out[1:])
	return out
}

// Report does nothing.
func (*QuotaWeighted) Report(Request, []Target, int, bool) {}
