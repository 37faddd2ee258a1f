package strategy

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// Strategy names of docs/resilience.md §13, as written in a combo's config.
const (
	NamePriority         = "priority"
	NameWeighted         = "weighted"
	NameRoundRobin       = "round-robin"
	NameFillFirst        = "fill-first"
	NameP2C              = "p2c"
	NameRandom           = "random"
	NameStrictRandom     = "strict-random"
	NameLeastUsed        = "least-used"
	NameCostOptimized    = "cost-optimized"
	NameResetAware       = "reset-aware"
	NameResetWindow      = "reset-window"
	NameHeadroom         = "headroom"
	NameQuotaWeighted    = "quota-weighted"
	NameLKGP             = "lkgp"
	NameContextOptimized = "context-optimized"
	NameCacheOptimized   = "cache-optimized"
	NameContextRelay     = "context-relay"
	NameAuto             = "auto"
	NameFusion           = "fusion"
	NamePipeline         = "pipeline"
)

var names = [...]string{
	NamePriority, NameWeighted, NameRoundRobin, NameFillFirst, NameP2C,
	NameRandom, NameStrictRandom, NameLeastUsed, NameCostOptimized,
	NameResetAware, NameResetWindow, NameHeadroom, NameQuotaWeighted,
	NameLKGP, NameContextOptimized, NameCacheOptimized, NameContextRelay,
	NameAuto, NameFusion, NamePipeline,
}

// Names returns the 20 strategy names of docs/resilience.md §13 in the spec's
// order. The caller owns the returned slice.
func Names() []string { return slices.Clone(names[:]) }

// Target is one routable target of a combo: provider + model, optionally
// pinned to one connection, with the declarations strategies rank on. It is
// a plain value; strategies never modify a Target.
type Target struct {
	// Key is the target's stable id, e.g. "provider/model" or
	// "provider/model@conn". Persisted positions and signals use it.
	Key string
	// Provider, Model and Connection identify the upstream.
	Provider, Model, Connection string
	// Weight is the weighted strategy's relative weight; ≤ 0 counts as 0.
	Weight float64
	// PriceIn and PriceOut are the declared prices (any unit, the same for
	// every target of a combo, e.g. USD per million tokens); 0 means free.
	PriceIn, PriceOut float64
	// ContextWindow is the model's context window in tokens; 0 = unknown.
	ContextWindow int
}

// Request is what a strategy knows about the request being routed.
type Request struct {
	// Combo is the combo name; per-combo state (round-robin position,
	// sticky counters, decks, last known good) is kept under it.
	Combo string
	// Now is the routing time; zero means Options.Clock.
	Now time.Time
	// PromptTokens is the estimated prompt size in tokens; 0 = unknown.
	PromptTokens int
	// PrefixHash is a hash of the prompt prefix (cache-optimized); 0 =
	// none, which routes in configured order.
	PrefixHash uint64
	// Session is the client session id (context-relay); "" = none.
	Session string
}

// Strategy orders a combo's targets for one request.
//
// Order returns the indexes of the eligible targets in the order to try
// them: every index i with eligible(i) true appears exactly once and no
// other index appears. eligible is how the caller's exclusions (breaker,
// cooldown, lockout, lease, gate) reach the strategy; Order calls it exactly
// once per index, in index order, before deciding anything, so a
// non-claiming check (engine.Peek) is the right thing to pass — claim a
// half-open probe with engine.Check when dispatching. A nil eligible means
// every target is eligible. The caller owns the returned slice.
//
// Report tells the strategy how an attempt on targets[i] ended; stateful
// strategies (sticky batches, round-robin, fill-first, lkgp,
// context-relay) advance on it. Report does not feed Signals: the caller
// records latency and in-flight counts there itself.
//
// Every implementation in this package is goroutine-safe.
type Strategy interface {
	// Name returns the strategy's canonical name (one of Names()).
	Name() string
	// Order returns the eligible targets' indexes in the order to try them.
	Order(req Request, targets []Target, eligible func(i int) bool) []int
	// Report tells the strategy how an attempt on targets[i] ended.
	Report(req Request, targets []Target, i int, success bool)
}

// Options configure New. The zero value works: no stickiness, a random
// seed, private in-memory Signals and StateStore, default auto weights and
// the system clock.
type Options struct {
	// StickyLimit is the combo's sticky batch size (successes on one
	// target before moving on) for weighted and round-robin; 0 means
	// GlobalSticky. A value ≤ 1 after that means no stickiness.
	StickyLimit int
	// GlobalSticky is the gateway-wide default sticky limit.
	GlobalSticky int
	// Seed seeds the strategy's random source; 0 picks a random seed.
	Seed int64
	// Signals are the engine's recorded inputs (in-flight, latency,
	// health, quota); nil means a private, empty Signals.
	Signals *Signals
	// State persists round-robin, sticky, fill-first and lkgp positions;
	// nil means a private in-memory StateStore (nothing survives a restart).
	State *StateStore
	// AutoWeights weighs the auto strategy's factors; zero = defaults.
	AutoWeights AutoWeights
	// Clock is the time source when Request.Now is zero; nil = system clock.
	Clock engine.Clock
	// Route asks a routing plugin, for the "plugin:<name>" strategies;
	// nil leaves them in configured order (see Plugin).
	Route RouteFunc
	// CandidateState describes a target's engine state to routing plugins;
	// nil shows none.
	CandidateState func(Target) CandidateState
}

// New returns the strategy called name (case-insensitive; "_" may stand
// for "-"), or a Plugin strategy for "plugin:<name>" (the plugin name as
// written). An unknown name returns priority and known=false: the caller
// logs the warning.
func New(name string, opts Options) (s Strategy, known bool) {
	e := newEnv(opts)
	if plugin, ok := PluginName(name); ok {
		return newPlugin(plugin, e, opts), true
	}
	switch normalizeName(name) {
	case NamePriority:
		return &Priority{}, true
	case NameWeighted:
		return &Weighted{env: e, sticky: e.sticky, rng: e.rng}, true
	case NameRoundRobin:
		return &RoundRobin{env: e, sticky: e.sticky}, true
	case NameFillFirst:
		return &FillFirst{env: e}, true
	case NameP2C:
		return &P2C{env: e, rng: e.rng}, true
	case NameRandom:
		return &Random{rng: e.rng}, true
	case NameStrictRandom:
		return &StrictRandom{rng: e.rng, decks: map[string]*deck{}}, true
	case NameLeastUsed:
		return &LeastUsed{env: e}, true
	case NameCostOptimized:
		return &CostOptimized{}, true
	case NameResetAware:
		return &ResetAware{env: e}, true
	case NameResetWindow:
		return &ResetWindow{env: e}, true
	case NameHeadroom:
		return &Headroom{env: e}, true
	case NameQuotaWeighted:
		return &QuotaWeighted{env: e, rng: e.rng}, true
	case NameLKGP:
		return &LKGP{env: e}, true
	case NameContextOptimized:
		return &ContextOptimized{}, true
	case NameCacheOptimized:
		return &CacheOptimized{}, true
	case NameContextRelay:
		return newContextRelay(e), true
	case NameAuto:
		return &Auto{env: e, weights: opts.AutoWeights.normalized()}, true
	case NameFusion:
		return &Fusion{}, true
	case NamePipeline:
		return &Pipeline{}, true
	}
	return &Priority{}, false
}

// normalizeName lower-cases name and spells separators as "-".
func normalizeName(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	return strings.ReplaceAll(name, "_", "-")
}

// env is what the stateful and signal-driven strategies share.
type env struct {
	clock   engine.Clock
	signals *Signals
	state   *StateStore
	sticky  int
	rng     *lockedRand
}

func newEnv(opts Options) *env {
	e := &env{clock: opts.Clock, signals: opts.Signals, state: opts.State}
	if e.clock == nil {
		e.clock = engine.SystemClock{}
	}
	if e.signals == nil {
		e.signals = NewSignals(e.clock)
	}
	if e.state == nil {
		e.state = NewStateStore(nil)
	}
	e.sticky = opts.StickyLimit
	if e.sticky <= 0 {
		e.sticky = opts.GlobalSticky
	}
	if e.sticky < 1 {
		e.sticky = 1
	}
	e.rng = newLockedRand(opts.Seed)
	return e
}

// now returns the request's time, or the clock's when it has none.
func (e *env) now(req Request) time.Time {
	if !req.Now.IsZero() {
		return req.Now
	}
	return e.clock.Now()
}

// eligibleIndexes returns the indexes i < n with eligible(i), ascending,
// calling eligible exactly once per index. A nil eligible admits all.
func eligibleIndexes(n int, eligible func(int) bool) []int {
	out := make([]int, 0, n)
	for i := 0; i < n; i++ {
		if eligible == nil || eligible(i) {
			out = append(out, i)
		}
	}
	return out
}

// keyIndex returns the index of the target whose Key is key, or -1.
func keyIndex(targets []Target, key string) int {
	if key == "" {
		return -1
	}
	for i := range targets {
		if targets[i].Key == key {
			return i
		}
	}
	return -1
}

// rotateFrom rotates idx (ascending target indexes) so that it starts at
// the first index ≥ start, wrapping around. It does not allocate.
func rotateFrom(idx []int, start int) {
	k, _ := slices.BinarySearch(idx, start)
	if k == 0 || k == len(idx) {
		return
	}
	slices.Reverse(idx[:k])
	slices.Reverse(idx[k:])
	slices.Reverse(idx)
}

// moveToFront moves the element at position p of idx to position 0,
// keeping the relative order of the others.
func moveToFront(idx []int, p int) {
	if p <= 0 {
		return
	}
	v := idx[p]
	copy(idx[1:p+1], idx[:p])
	idx[0] = v
}

// ranked is one eligible target with its sort keys.
type ranked struct {
	i      int
	k1, k2 float64
}

// rankBuf returns a ranked slice of length n, using buf when it fits.
func rankBuf(buf []ranked, n int) []ranked {
	if n <= cap(buf) {
		return buf[:n]
	}
	return make([]ranked, n)
}

// rankedBefore orders by k1 then k2 ascending, NaN last.
func rankedBefore(a, b *ranked) bool {
	switch {
	case floatBefore(a.k1, b.k1):
		return true
	case floatBefore(b.k1, a.k1):
		return false
	}
	return floatBefore(a.k2, b.k2)
}

// floatBefore reports a < b with NaN after every number.
func floatBefore(a, b float64) bool { return a < b || (a == a && b != b) }

// sortRanked stably sorts r by (k1, k2) ascending, so that ties keep the
// order r was filled in (the configured order), and writes the target
// indexes to out[:len(r)]. Small sets use an insertion sort without
// indirect calls.
func sortRanked(r []ranked, out []int) {
	if len(r) <= 32 {
		for j := 1; j < len(r); j++ {
			x := r[j]
			k := j
			for ; k > 0 && rankedBefore(&x, &r[k-1]); k-- {
				r[k] = r[k-1]
			}
			r[k] = x
		}
	} else {
		slices.SortStableFunc(r, func(a, b ranked) int {
			switch {
			case rankedBefore(&a, &b):
				return -1
			case rankedBefore(&b, &a):
				return 1
			}
			return 0
		})
	}
	for p := range r {
		out[p] = r[p].i
	}
}

// rankBy fills a ranking of idx with keys(i) and sorts idx by it.
func rankBy(idx []int, keys func(i int) (k1, k2 float64)) {
	var buf [32]ranked
	r := rankBuf(buf[:], len(idx))
	for p, i := range idx {
		k1, k2 := keys(i)
		r[p] = ranked{i, k1, k2}
	}
	sortRanked(r, idx)
}

// cmpFloat compares two floats, NaN greater than everything.
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	case math.IsNaN(a) && math.IsNaN(b):
		return 0
	case math.IsNaN(a):
		return 1
	default:
		return -1
	}
}

// posWeight returns w when it is a positive finite number, else 0.
func posWeight(w float64) float64 {
	if w > 0 && !math.IsInf(w, 1) {
		return w
	}
	return 0
}

// drawWeighted draws one of n candidates with probability weight/total,
// where weight(p) ≤ 0 never wins while any weight is positive; with no
// positive weight the draw is uniform. It returns the drawn position.
func drawWeighted(r *rand.Rand, n int, weight func(p int) float64) int {
	total := 0.0
	for p := 0; p < n; p++ {
		total += posWeight(weight(p))
	}
	if total <= 0 {
		return r.IntN(n)
	}
	x := r.Float64() * total
	last := -1
	for p := 0; p < n; p++ {
		w := posWeight(weight(p))
		if w == 0 {
			continue
		}
		last = p
		if x < w {
			return p
		}
		x -= w
	}
	return last // rounding left x ≥ the last weight
}
