package admission

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
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

// shareSem is the quota-share semaphore of one connection
// (docs/resilience.md §5): cap slots for the requests of every client key
// that shares the account. It fails open: a request that finds no slot
// within its wait proceeds without one (acquire reports it). Waiters queue
// per client key and a freed slot goes to the keys in deficit round robin
// with a quantum of one request per key per round (every request costs
// one): a key that sends a burst cannot starve the others, and within any
// round of grants each waiting key is served once. Keys join the round at
// its end. It is goroutine-safe.
type shareSem struct {
	mu      sync.Mutex
	cap     int // ≤ 0: no semaphore (waiters are let go without a slot)
	held    int
	waiting int
	keys    map[string]*shareQueue // the keys with waiters
	ring    []*shareQueue          // the same keys, in round-robin order
	next    int                    // index in ring of the key served next
}

// shareQueue holds one client key's waiters, oldest first.
type shareQueue struct {
	key        string
	head, tail *shareWaiter
}

// shareWaiter is one request waiting for a slot.
type shareWaiter struct {
	q          *shareQueue
	prev, next *shareWaiter
	ready      chan struct{}
	// granted: a slot was handed over; released: let go without one (the
	// semaphore was switched off).
	granted, released bool
}

// acquire takes a slot for a request of client key, waiting until
// deadline at most. held reports a slot; with held false, err is
// errGateFull (limit requests already wait), errGateTimeout (no slot by
// the deadline) or ctx.Err(), or nil when the semaphore is off.
func (s *shareSem) acquire(ctx context.Context, clk Clock, now, deadline time.Time, key string, limit int) (held bool, err error) {
	s.mu.Lock()
	switch {
	case s.cap <= 0:
		s.mu.Unlock()
		return false, nil
	case s.held < s.cap && s.waiting == 0:
		s.held++
		s.mu.Unlock()
		return true, nil
	case s.waiting >= limit:
		s.mu.Unlock()
		return false, errGateFull
	case !deadline.After(now):
		s.mu.Unlock()
		return false, errGateTimeout
	}
	w := s.pushLocked(key)
	s.mu.Unlock()

	tm := clk.NewTimer(deadline.Sub(now))
	select {
	case <-w.ready:
		tm.Stop()
		return w.granted, nil
	case <-tm.C():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.granted || w.released { // handed over while the timer fired
			return w.granted, nil
		}
		s.removeLocked(w, false)
		return false, errGateTimeout
	case <-ctx.Done():
		tm.Stop()
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case w.granted:
			s.held--
			s.grantLocked()
		case !w.released:
			s.removeLocked(w, false)
		}
		return false, ctx.Err()
	}
}

// release returns a slot and hands it to the next key in the round.
func (s *shareSem) release() {
	s.mu.Lock()
	s.held--
	s.grantLocked()
	s.mu.Unlock()
}

// setCap changes the number of slots; waiters that now fit are granted,
// and with the semaphore off (cap ≤ 0) every waiter is let go.
func (s *shareSem) setCap(n int) {
	s.mu.Lock()
	s.cap = n
	s.grantLocked()
	s.mu.Unlock()
}

// counts returns the semaphore's slots, the slots held and the waiters.
func (s *shareSem) counts() (slots, held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.cap, 0), s.held, s.waiting
}

// grantLocked hands free slots to the waiters, one key at a time in ring
// order (or lets every waiter go when the semaphore is off).
func (s *shareSem) grantLocked() {
	for s.waiting > 0 && (s.cap <= 0 || s.held < s.cap) {
		if s.next >= len(s.ring) {
			s.next = 0
		}
		q := s.ring[s.next]
		w := q.head
		s.removeLocked(w, true) // moves the round past q (or drops q from it)
		if s.cap <= 0 {
			w.released = true
		} else {
			w.granted = true
			s.held++
		}
		w.ready <- struct{}{} // capacity 1, handed over once: never blocks
	}
}

// pushLocked queues a waiter of key.
func (s *shareSem) pushLocked(key string) *shareWaiter {
	q := s.keys[key]
	if q == nil {
		if s.keys == nil {
			s.keys = map[string]*shareQueue{}
		}
		q = &shareQueue{key: key}
		s.keys[key] = q
		s.ring = append(s.ring, q)
	}
	w := &shareWaiter{q: q, ready: make(chan struct{}, 1), prev: q.tail}
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	s.waiting++
	return w
}

// removeLocked unlinks w from its key's queue; served means w was just
// granted, its key's turn, and the round moves on to the following key. A
// key left without waiters leaves the ring.
func (s *shareSem) removeLocked(w *shareWaiter, served bool) {
	q := w.q
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	s.waiting--
	i := slices.Index(s.ring, q)
	switch {
	case q.head == nil:
		s.ring = slices.Delete(s.ring, i, i+1)
		delete(s.keys, q.key)
		if i < s.next {
			s.next--
		}
	case served:
		s.next = i + 1
	}
	if s.next >= len(s.ring) {
		s.next = 0
	}
}
