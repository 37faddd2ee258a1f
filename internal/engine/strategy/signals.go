package strategy

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// ewmaAlpha is the weight of a new sample in the latency and health
// averages: about the last ten attempts matter.
const ewmaAlpha = 0.2

// Signals are the per-target inputs the engine records for strategies:
// in-flight count, attempts started, latency (EWMA of successful attempts),
// health (EWMA of success = 1, failure = 0) and the last observed quota.
// Targets are identified by Target.Key. Signals is goroutine-safe; reads
// take no lock, and once a key has been seen, Start/Attempt.Done,
// ObserveQuota and the readers do not allocate.
type Signals struct {
	clock engine.Clock

	mu sync.Mutex                         // serialises adding keys
	m  atomic.Pointer[map[string]*signal] // copy-on-write: readers load, never lock
}

// signal is one key's record, all atomics so that the hot path takes no
// lock. The quota is a seqlock: qseq is odd while a writer (holding qmu)
// updates the fields, and readers retry until they see the same even qseq
// before and after reading.
type signal struct {
	inFlight atomic.Int64
	uses     atomic.Int64
	latency  atomic.Int64  // EWMA in ns; 0 = no sample yet
	health   atomic.Uint64 // float64 bits of the success EWMA; 0 bits = no sample

	qmu    sync.Mutex
	qseq   atomic.Uint64
	qrem   atomic.Uint64 // float64 bits
	qlim   atomic.Uint64 // float64 bits
	qreset atomic.Int64  // unix ns; 0 = no reset time
	qhas   atomic.Bool
}

// NewSignals returns empty Signals timing attempts with clock (nil = the
// system clock).
func NewSignals(clock engine.Clock) *Signals {
	if clock == nil {
		clock = engine.SystemClock{}
	}
	s := &Signals{clock: clock}
	m := map[string]*signal{}
	s.m.Store(&m)
	return s
}

// lookup returns key's record or nil.
func (s *Signals) lookup(key string) *signal { return (*s.m.Load())[key] }

// entry returns key's record, creating it (copying the map once per new key).
func (s *Signals) entry(key string) *signal {
	if g := s.lookup(key); g != nil {
		return g
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.m.Load()
	if g := old[key]; g != nil {
		return g
	}
	m := make(map[string]*signal, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	g := &signal{}
	m[key] = g
	s.m.Store(&m)
	return g
}

// Attempt is one attempt in flight, returned by Signals.Start. It is a
// small value; call Done exactly once.
type Attempt struct {
	s     *Signals
	g     *signal
	start time.Time
}

// Start records the start of an attempt on key (in-flight +1, uses +1) and
// returns it. It does not allocate once key has been seen.
func (s *Signals) Start(key string) Attempt {
	g := s.entry(key)
	g.inFlight.Add(1)
	g.uses.Add(1)
	return Attempt{s: s, g: g, start: s.clock.Now()}
}

// Done ends the attempt: in-flight −1, the health average takes the
// outcome and, on success, the latency average takes the elapsed time
// (a fast failure such as an immediate 429 says nothing about latency).
// Calling Done on a zero Attempt does nothing.
func (a Attempt) Done(success bool) {
	if a.g == nil {
		return
	}
	a.g.inFlight.Add(-1)
	sample := 0.0
	if success {
		sample = 1
		lat := a.s.clock.Now().Sub(a.start)
		if lat < 1 {
			lat = 1 // 0 means "no sample"
		}
		for {
			old := a.g.latency.Load()
			next := int64(lat)
			if old != 0 {
				next = max(1, old+int64(ewmaAlpha*float64(int64(lat)-old)))
			}
			if a.g.latency.CompareAndSwap(old, next) {
				break
			}
		}
	}
	for {
		oldBits := a.g.health.Load()
		next := sample
		if oldBits != 0 {
			old := math.Float64frombits(oldBits)
			next = old + ewmaAlpha*(sample-old)
		}
		nb := math.Float64bits(next)
		if nb == 0 {
			nb = 1 // +0.0 has 0 bits, which means "no sample": keep the smallest positive float
		}
		if a.g.health.CompareAndSwap(oldBits, nb) {
			return
		}
	}
}

// Begin is Start returning its Done as a func. The returned func allocates
// one closure per call; hot paths use Start and Attempt.Done.
func (s *Signals) Begin(key string) (done func(success bool)) {
	return s.Start(key).Done
}

// InFlight returns the number of attempts on key started and not done.
func (s *Signals) InFlight(key string) int { return int(s.lookup(key).inFlightN()) }

// Uses returns the number of attempts ever started on key.
func (s *Signals) Uses(key string) int64 { return s.lookup(key).usesN() }

// Latency returns the EWMA latency of key's successful attempts; 0 when
// none finished yet.
func (s *Signals) Latency(key string) time.Duration { return s.lookup(key).latencyD() }

// Health returns the EWMA success rate of key's attempts in [0, 1]; 1 when
// no attempt finished yet (no evidence against it).
func (s *Signals) Health(key string) float64 { return s.lookup(key).healthV() }

// ObserveQuota records the quota key's upstream last reported (see
// ParseQuotaHeaders); a later observation replaces it.
func (s *Signals) ObserveQuota(key string, q Quota) {
	g := s.entry(key)
	var reset int64
	if !q.ResetAt.IsZero() {
		reset = q.ResetAt.UnixNano()
	}
	g.qmu.Lock()
	g.qseq.Add(1)
	g.qrem.Store(math.Float64bits(q.Remaining))
	g.qlim.Store(math.Float64bits(q.Limit))
	g.qreset.Store(reset)
	g.qhas.Store(true)
	g.qseq.Add(1)
	g.qmu.Unlock()
}

// Quota returns the last quota observed for key.
func (s *Signals) Quota(key string) (Quota, bool) { return s.lookup(key).quota() }

// The readers below accept a nil record (an unseen key) and return the
// neutral value.

func (g *signal) inFlightN() int64 {
	if g == nil {
		return 0
	}
	return g.inFlight.Load()
}

func (g *signal) usesN() int64 {
	if g == nil {
		return 0
	}
	return g.uses.Load()
}

func (g *signal) latencyD() time.Duration {
	if g == nil {
		return 0
	}
	return time.Duration(g.latency.Load())
}

func (g *signal) healthV() float64 {
	if g != nil {
		if b := g.health.Load(); b != 0 {
			return math.Float64frombits(b)
		}
	}
	return 1
}

// quotaView is a record's quota in unix nanoseconds, for cheap ranking.
type quotaView struct {
	rem, lim float64
	reset    int64 // unix ns; 0 = not reported
	ok       bool
}

// view reads the seqlocked quota.
func (g *signal) view() quotaView {
	if g == nil || !g.qhas.Load() {
		return quotaView{}
	}
	for {
		seq := g.qseq.Load()
		if seq&1 != 0 {
			runtime.Gosched()
			continue
		}
		v := quotaView{
			rem:   math.Float64frombits(g.qrem.Load()),
			lim:   math.Float64frombits(g.qlim.Load()),
			reset: g.qreset.Load(),
			ok:    true,
		}
		if g.qseq.Load() == seq {
			return v
		}
	}
}

// quota returns the record's quota as a Quota.
func (g *signal) quota() (Quota, bool) {
	v := g.view()
	if !v.ok {
		return Quota{}, false
	}
	q := Quota{Remaining: v.rem, Limit: v.lim}
	if v.reset != 0 {
		q.ResetAt = time.Unix(0, v.reset)
	}
	return q, true
}

// headroom is Quota.Headroom at now (unix ns); 1 without an observation (a
// target that reports no limit is treated as unconstrained).
func (v quotaView) headroom(now int64) float64 {
	switch {
	case !v.ok, v.reset != 0 && now >= v.reset:
		return 1
	case v.lim > 0:
		f := v.rem / v.lim
		if f > 1 {
			return 1
		}
		if f > 0 {
			return f
		}
		return 0
	case v.rem > 0:
		return 1
	}
	return 0
}

// untilReset returns the nanoseconds until the window resets at now, or
// +Inf when the reset is unknown or already past.
func (v quotaView) untilReset(now int64) float64 {
	if !v.ok || v.reset == 0 || v.reset <= now {
		return math.Inf(1)
	}
	return float64(v.reset - now)
}

// Quota is a target's remaining upstream quota in its binding dimension
// (requests or tokens), as reported by x-ratelimit-* headers.
type Quota struct {
	// Remaining is what is left in the current window.
	Remaining float64
	// Limit is the window's size; 0 = not reported.
	Limit float64
	// ResetAt is when the window refills; zero = not reported.
	ResetAt time.Time
}

// Headroom returns the fraction of the quota left at now, in [0, 1]: 1
// once ResetAt has passed (the window refilled), Remaining/Limit when the
// limit is known, else 1 while anything remains and 0 when nothing does.
func (q Quota) Headroom(now time.Time) float64 {
	v := quotaView{rem: q.Remaining, lim: q.Limit, ok: true}
	if !q.ResetAt.IsZero() {
		v.reset = q.ResetAt.UnixNano()
	}
	return v.headroom(now.UnixNano())
}
