package strategy

import "sync"

// Weighted is the "weighted" strategy: one random draw per request among
// the eligible targets with probability weight/total, then the rest by
// descending weight (ties keep configured order). A weight ≤ 0 is never
// drawn while an eligible target has a positive weight; when none has, the
// draw is uniform.
//
// With a sticky limit N > 1 the drawn target leads until it has N
// successes in a row, then the next request draws again; a failure on it
// ends the batch at once, and while it is excluded the request draws among
// the others (a success there starts a new batch). The sticky position is
// persisted through the StateStore. It is goroutine-safe.
type Weighted struct {
	env    *env
	sticky int
	rng    *lockedRand
	mu     sync.Mutex // serialises Report's read-modify-write
}

var _ Strategy = (*Weighted)(nil)

// Name returns "weighted".
func (*Weighted) Name() string { return NameWeighted }

// Order puts the sticky target or a weighted draw first, the rest by
// descending weight.
func (w *Weighted) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	if len(out) == 0 {
		return out
	}
	first := -1
	if w.sticky > 1 {
		p := w.env.state.get(req.Combo, NameWeighted)
		if k := keyIndex(targets, p.Key); k >= 0 && p.Count > 0 {
			first = positionOf(out, k)
		}
	}
	if first < 0 {
		w.rng.mu.Lock()
		first = drawWeighted(w.rng.r, len(out), func(p int) float64 { return targets[out[p]].Weight })
		w.rng.mu.Unlock()
	}
	moveToFront(out, first)
	rankBy(out[1:], func(i int) (float64, float64) { return -posWeight(targets[i].Weight), 0 })
	return out
}

// Report counts sticky successes; without stickiness it does nothing.
func (w *Weighted) Report(req Request, targets []Target, i int, success bool) {
	if w.sticky <= 1 || i < 0 || i >= len(targets) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.env.state.get(req.Combo, NameWeighted)
	switch {
	case !success:
		if p.Key == targets[i].Key {
			p.Key, p.Count = "", 0
		}
	case p.Key == targets[i].Key:
		p.Count++
	default:
		p.Key, p.Count = targets[i].Key, 1
	}
	if p.Count >= w.sticky {
		p.Key, p.Count = "", 0
	}
	w.env.state.set(req.Combo, p)
}

// positionOf returns the position of target index k in idx, or -1.
func positionOf(idx []int, k int) int {
	for p, i := range idx {
		if i == k {
			return p
		}
	}
	return -1
}

// RoundRobin is the "round-robin" strategy: the eligible targets rotated
// to start at the combo's position, wrapping around.
//
// Without stickiness (limit ≤ 1) every request advances the position past
// the target it leads with, so concurrent requests spread. With a sticky
// limit N > 1 the position moves on Report instead: a success on the
// current target counts toward its batch and the N-th moves the position
// to the next target; a success on another target (the current one was
// excluded or failed) starts a batch of 1 there; a failure moves the
// position past the failed target with an empty batch. With sticky 3 and
// every attempt succeeding, 10 requests go a,a,a,b,b,b,c,c,c,a; with A
// always failing and sticky 2 the attempts go a,b,b,c,c.
//
// The position is persisted through the StateStore by target Key, so it
// survives restarts and reordering of the configured list. It is
// goroutine-safe.
type RoundRobin struct {
	env    *env
	sticky int
	mu     sync.Mutex
}

var _ Strategy = (*RoundRobin)(nil)

// Name returns "round-robin".
func (*RoundRobin) Name() string { return NameRoundRobin }

// Order returns the eligible targets starting at the combo's position.
func (r *RoundRobin) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	if len(out) == 0 {
		return out
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.env.state.get(req.Combo, NameRoundRobin)
	rotateFrom(out, max(0, keyIndex(targets, p.Key)))
	if r.sticky <= 1 {
		p.Key, p.Count = targets[(out[0]+1)%len(targets)].Key, 0
		r.env.state.set(req.Combo, p)
	}
	return out
}

// Report advances a sticky batch; without stickiness it does nothing.
func (r *RoundRobin) Report(req Request, targets []Target, i int, success bool) {
	if r.sticky <= 1 || i < 0 || i >= len(targets) {
		return
	}
	next := targets[(i+1)%len(targets)].Key
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.env.state.get(req.Combo, NameRoundRobin)
	switch {
	case !success:
		p.Key, p.Count = next, 0
	case p.Key == targets[i].Key:
		p.Count++
	default:
		p.Key, p.Count = targets[i].Key, 1
	}
	if p.Count >= r.sticky {
		p.Key, p.Count = next, 0
	}
	r.env.state.set(req.Combo, p)
}

// FillFirst is the "fill-first" strategy: use one target until it is
// exhausted, then the next. The eligible targets are rotated to start at
// the combo's current target. A failure on the current target moves it to
// the next configured target; a success on another target (the current
// one was excluded) makes that one current; the first target is only
// used again when the rotation wraps around. The strategy sees only
// success or failure, so any failure counts as exhausted. The current
// target is persisted through the StateStore. It is goroutine-safe.
type FillFirst struct {
	env *env
	mu  sync.Mutex
}

var _ Strategy = (*FillFirst)(nil)

// Name returns "fill-first".
func (*FillFirst) Name() string { return NameFillFirst }

// Order returns the eligible targets starting at the current one.
func (f *FillFirst) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	if len(out) == 0 {
		return out
	}
	p := f.env.state.get(req.Combo, NameFillFirst)
	rotateFrom(out, max(0, keyIndex(targets, p.Key)))
	return out
}

// Report moves the current target on failure, or to a target that
// succeeded while the current one was passed over.
func (f *FillFirst) Report(req Request, targets []Target, i int, success bool) {
	if i < 0 || i >= len(targets) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.env.state.get(req.Combo, NameFillFirst)
	cur := max(0, keyIndex(targets, p.Key))
	switch {
	case success:
		p.Key = targets[i].Key
	case i == cur:
		p.Key = targets[(i+1)%len(targets)].Key
	default:
		return
	}
	f.env.state.set(req.Combo, p)
}

// LKGP is the "lkgp" strategy: the last known good target (the last one
// that succeeded for the combo) first while it is eligible, then the rest
// in configured order. A failure on it forgets it. It is persisted through
// the StateStore and is goroutine-safe.
type LKGP struct {
	env *env
	mu  sync.Mutex
}

var _ Strategy = (*LKGP)(nil)

// Name returns "lkgp".
func (*LKGP) Name() string { return NameLKGP }

// Order returns the last known good target first, then configured order.
func (l *LKGP) Order(req Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	p := l.env.state.get(req.Combo, NameLKGP)
	if k := keyIndex(targets, p.Key); k >= 0 {
		moveToFront(out, positionOf(out, k))
	}
	return out
}

// Report remembers a success and forgets a failed last known good target.
func (l *LKGP) Report(req Request, targets []Target, i int, success bool) {
	if i < 0 || i >= len(targets) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.env.state.get(req.Combo, NameLKGP)
	switch {
	case success:
		p.Key = targets[i].Key
	case p.Key == targets[i].Key:
		p.Key = ""
	default:
		return
	}
	l.env.state.set(req.Combo, p)
}
