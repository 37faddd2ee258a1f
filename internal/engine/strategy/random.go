package strategy

import (
	"math/rand/v2"
	"sync"
)

// lockedRand is a seeded random source shared by one strategy's requests.
// Its methods are goroutine-safe.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// newLockedRand seeds a PCG source with seed; 0 picks a random seed.
func newLockedRand(seed int64) *lockedRand {
	s := uint64(seed)
	if seed == 0 {
		s = rand.Uint64()
	}
	return &lockedRand{r: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))}
}

// shuffle permutes idx uniformly (Fisher-Yates).
func (l *lockedRand) shuffle(idx []int) {
	l.mu.Lock()
	l.r.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
	l.mu.Unlock()
}

// Random is the "random" strategy: a fresh uniform shuffle of the eligible
// targets per request. It is goroutine-safe; with Options.Seed set its
// sequence of orders is reproducible.
type Random struct {
	rng *lockedRand
}

var _ Strategy = (*Random)(nil)

// Name returns "random".
func (*Random) Name() string { return NameRandom }

// Order returns the eligible targets in a uniformly shuffled order.
func (s *Random) Order(_ Request, targets []Target, eligible func(int) bool) []int {
	out := eligibleIndexes(len(targets), eligible)
	s.rng.shuffle(out)
	return out
}

// Report does nothing: random keeps no state.
func (*Random) Report(Request, []Target, int, bool) {}

// StrictRandom is the "strict-random" strategy: a shuffled deck of the
// combo's targets per combo; each request deals the next card, so no target
// leads twice until every target has led once, then the deck is reshuffled.
//
// An ineligible card is skipped but stays in the deck, so it leads a later
// request once eligible again. When every card left in the deck is
// ineligible while some dealt card is eligible, the deck is reshuffled
// early (a repeat forced by the exclusions; Order never drops an eligible
// target). The order after the dealt card is: the undealt cards in deck
// order, then the already dealt ones in deck order. Decks live in memory
// only. It is goroutine-safe.
type StrictRandom struct {
	rng   *lockedRand
	mu    sync.Mutex
	decks map[string]*deck
}

// deck is one combo's shuffled deck: cards[:next] are dealt.
type deck struct {
	cards []int
	next  int
}

var _ Strategy = (*StrictRandom)(nil)

// Name returns "strict-random".
func (*StrictRandom) Name() string { return NameStrictRandom }

// Order deals the next eligible card of the combo's deck first.
func (s *StrictRandom) Order(req Request, targets []Target, eligible func(int) bool) []int {
	n := len(targets)
	out := eligibleIndexes(n, eligible)
	if len(out) == 0 {
		return out
	}
	var buf [64]bool
	var ok []bool
	if n <= len(buf) {
		ok = buf[:n]
	} else {
		ok = make([]bool, n)
	}
	for _, i := range out {
		ok[i] = true
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.decks[req.Combo]
	if d == nil || len(d.cards) != n {
		d = &deck{cards: make([]int, n)}
		s.decks[req.Combo] = d
		s.reshuffle(d)
	}
	if !s.deal(d, ok) {
		s.reshuffle(d)
		s.deal(d, ok)
	}
	// d.cards[d.next-1] was just dealt; the undealt cards follow it, then
	// the cards dealt earlier in this round.
	out = out[:0]
	out = append(out, d.cards[d.next-1])
	for _, c := range d.cards[d.next:] {
		if ok[c] {
			out = append(out, c)
		}
	}
	for _, c := range d.cards[:d.next-1] {
		if ok[c] {
			out = append(out, c)
		}
	}
	return out
}

// reshuffle starts a new round of d. Callers hold s.mu.
func (s *StrictRandom) reshuffle(d *deck) {
	for i := range d.cards {
		d.cards[i] = i
	}
	s.rng.shuffle(d.cards)
	d.next = 0
}

// deal moves the first eligible undealt card to position d.next, keeping
// the order of the skipped ones, and deals it; it reports false when no
// undealt card is eligible.
func (s *StrictRandom) deal(d *deck, ok []bool) bool {
	for p := d.next; p < len(d.cards); p++ {
		if c := d.cards[p]; ok[c] {
			copy(d.cards[d.next+1:p+1], d.cards[d.next:p])
			d.cards[d.next] = c
			d.next++
			return true
		}
	}
	return false
}

// Report does nothing: dealing happens in Order.
func (*StrictRandom) Report(Request, []Target, int, bool) {}
