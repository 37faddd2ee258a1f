package strategy

// P2C is the "p2c" strategy (power of two choices): two distinct eligible
// targets are drawn at random and the less loaded one leads — fewer
// attempts in flight, then lower EWMA latency (no sample counts as 0), and
// on a full tie the first drawn. The others follow by the same load order,
// ties in configured order. Load comes from Signals. It is goroutine-safe;
// with Options.Seed set its draws are reproducible.
type P2C struct {
	env *env
	rng *lockedRand
}

var _ Strategy = (*P2C)(nil)

// Name returns "p2c".
func (*P2C) Name() string { return NameP2C }

// Order returns the better of two random eligible targets, then the rest
// by load.
func (s *P2C) Order(_ Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	if len(out) < 2 {
		return out
	}
	var buf [32]ranked
	r := rankBuf(buf[:], len(out))
	for p, i := range out {
		g := s.env.signals.lookup(targets[i].Key)
		r[p] = ranked{i, float64(g.inFlightN()), float64(g.latencyD())}
	}
	s.rng.mu.Lock()
	a := s.rng.r.IntN(len(r))
	b := s.rng.r.IntN(len(r) - 1)
	s.rng.mu.Unlock()
	if b >= a {
		b++
	}
	winner := a
	if rankedBefore(&r[b], &r[a]) {
		winner = b
	}
	w := r[winner]
	copy(r[1:winner+1], r[:winner]) // the rest keep configured order
	r[0] = w
	out[0] = w.i
	sortRanked(r[1:], out[1:])
	return out
}

// Report does nothing: load is read from Signals.
func (*P2C) Report(Request, []Target, int, bool) {}

// LeastUsed is the "least-used" strategy: fewest attempts in flight first,
// then fewest attempts ever started (recent usage), ties in configured
// order. Both come from Signals. It is goroutine-safe.
type LeastUsed struct {
	env *env
}

var _ Strategy = (*LeastUsed)(nil)

// Name returns "least-used".
func (*LeastUsed) Name() string { return NameLeastUsed }

// Order returns the eligible targets by in-flight count, then usage.
func (s *LeastUsed) Order(_ Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	rankBy(out, func(i int) (float64, float64) {
		g := s.env.signals.lookup(targets[i].Key)
		return float64(g.inFlightN()), float64(g.usesN())
	})
	return out
}

// Report does nothing: usage is read from Signals.
func (*LeastUsed) Report(Request, []Target, int, bool) {}
