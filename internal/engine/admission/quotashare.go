package admission

import (
	"math/rand/v2"
	"sync"
)

// QuotaShareCandidate is one connection of a quota-share pool.
type QuotaShareCandidate struct {
	Connection string
	// InFlight is the connection's running requests.
	InFlight int
	// MaxConcurrent is its max_concurrent; ≤ 0 = unlimited (never full).
	MaxConcurrent int
	// Weight is its deficit-round-robin quantum; ≤ 0 = 1.
	Weight int
}

// Full reports whether the candidate has no free concurrency.
func (c QuotaShareCandidate) Full() bool { return c.MaxConcurrent > 0 && c.InFlight >= c.MaxConcurrent }

// load is the candidate's utilisation: InFlight/MaxConcurrent, or for an
// unlimited one InFlight/(InFlight+1), which stays below 1.
func (c QuotaShareCandidate) load() float64 {
	if c.MaxConcurrent > 0 {
		return float64(c.InFlight) / float64(c.MaxConcurrent)
	}
	return float64(c.InFlight) / float64(c.InFlight+1)
}

// PickQuotaShare selects the candidate for the next request of a
// quota-share pool and returns its index (-1 for no candidates). Full
// connections are only de-prioritised: they are considered only when every
// candidate is full, never excluded. Among the considered ones deficit round
// robin keeps the share fair (deficit holds each connection's credit: when
// nobody has a credit of 1, every considered candidate gains its Weight; the
// pick spends 1), and power of two choices picks, of two random candidates
// with credit, the one with the lower load (ties: more credit, then the
// earlier index). intn(n) must return a uniform value in [0, n); nil uses
// math/rand/v2. deficit is updated in place and is not goroutine-safe: use
// QuotaSharePool to share one.
func PickQuotaShare(deficit map[string]int, cands []QuotaShareCandidate, intn func(n int) int) int {
	if len(cands) == 0 {
		return -1
	}
	if intn == nil {
		intn = rand.IntN
	}
	var buf [16]int
	pool := buf[:0]
	for i, c := range cands {
		if !c.Full() {
			pool = append(pool, i)
		}
	}
	if len(pool) == 0 {
		for i := range cands {
			pool = append(pool, i)
		}
	}
	var ebuf [16]int
	eligible := ebuf[:0]
	for len(eligible) == 0 {
		for _, i := range pool {
			if deficit[cands[i].Connection] >= 1 {
				eligible = append(eligible, i)
			}
		}
		if len(eligible) == 0 {
			for _, i := range pool {
				deficit[cands[i].Connection] += max(cands[i].Weight, 1)
			}
		}
	}
	pick := eligible[0]
	if len(eligible) > 1 {
		ia, ib := intn(len(eligible)), intn(len(eligible)-1)
		if ib >= ia { // two distinct draws
			ib++
		}
		pick = better(cands, deficit, eligible[ia], eligible[ib])
	}
	deficit[cands[pick].Connection]--
	return pick
}

// better returns whichever of candidates a and b should take the request.
func better(cands []QuotaShareCandidate, deficit map[string]int, a, b int) int {
	la, lb := cands[a].load(), cands[b].load()
	switch {
	case la < lb:
		return a
	case lb < la:
		return b
	}
	da, db := deficit[cands[a].Connection], deficit[cands[b].Connection]
	switch {
	case da > db:
		return a
	case db > da:
		return b
	case a < b:
		return a
	}
	return b
}

// QuotaSharePool is the deficit state of one quota-share pool around
// PickQuotaShare. It is goroutine-safe.
type QuotaSharePool struct {
	mu      sync.Mutex
	deficit map[string]int
	intn    func(n int) int
}

// NewQuotaSharePool returns a pool drawing with intn (nil = math/rand/v2).
func NewQuotaSharePool(intn func(n int) int) *QuotaSharePool {
	return &QuotaSharePool{deficit: map[string]int{}, intn: intn}
}

// Pick is PickQuotaShare over the pool's deficits. Credits of connections
// absent from cands are dropped so the state stays as small as the pool.
func (p *QuotaSharePool) Pick(cands []QuotaShareCandidate) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.deficit) > 2*len(cands)+8 {
		keep := make(map[string]int, len(cands))
		for _, c := range cands {
			if d, ok := p.deficit[c.Connection]; ok {
				keep[c.Connection] = d
			}
		}
		p.deficit = keep
	}
	return PickQuotaShare(p.deficit, cands, p.intn)
}
