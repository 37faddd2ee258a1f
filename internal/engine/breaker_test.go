package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

var breakerEpoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// tripping is an outcome that counts as a provider failure.
var tripping = Outcome{Status: 503, Reason: ReasonTransient, Scope: ScopeProvider, Retryable: true}

func newTestBreakers(t *testing.T) (*breakers, *clocktest.Clock) {
	t.Helper()
	clock := clocktest.NewClock(breakerEpoch)
	return newBreakers(clock), clock
}

func failN(b *breakers, provider string, n int) {
	for range n {
		b.RecordFailure(provider, tripping)
	}
}

func TestDefaultBreakerConfig(t *testing.T) {
	tests := []struct {
		profile Profile
		want    breakerConfig
	}{
		{ProfileOAuth, bc(5, 8, 60*time.Second)},
		{ProfileAPIKey, bc(7, 12, 30*time.Second)},
		// derived ceil(60% of 2) = 2 is clamped to open-1 = 1.
		{ProfileLocal, bc(1, 2, 15*time.Second)},
		{Profile("other"), bc(7, 12, 30*time.Second)},
	}
	for _, tt := range tests {
		if got := defaultBreakerConfig(tt.profile); got != tt.want {
			t.Errorf("DefaultBreakerConfig(%q) = %+v, want %+v", tt.profile, got, tt.want)
		}
	}
}

func TestDerivedDegradationThreshold(t *testing.T) {
	for open, want := range map[int]int{0: 0, 1: 1, 2: 2, 5: 3, 8: 5, 10: 6, 12: 8, 1000: 600} {
		if got := DerivedDegradationThreshold(open); got != want {
			t.Errorf("DerivedDegradationThreshold(%d) = %d, want %d", open, got, want)
		}
	}
}

// bc is a breakerConfig with the default exit run (3) and multiplier cap
// (16), as Normalize fills them in.
func bc(degraded, open int, reset time.Duration) breakerConfig {
	return breakerConfig{DegradationThreshold: degraded, FailureThreshold: open, Reset: reset,
		DegradedExitSuccesses: 3, MaxBackoffMultiplier: 16}
}

func TestBreakerConfigNormalize(t *testing.T) {
	raw := func(degraded, open int, reset time.Duration) breakerConfig {
		return breakerConfig{DegradationThreshold: degraded, FailureThreshold: open, Reset: reset}
	}
	tests := []struct {
		in, want breakerConfig
	}{
		{raw(7, 12, 30*time.Second), bc(7, 12, 30*time.Second)},
		{raw(0, 0, 0), bc(0, 1, time.Second)},
		{raw(2, 2, 15*time.Second), bc(1, 2, 15*time.Second)},
		{raw(12, 12, time.Minute), bc(11, 12, time.Minute)},
		{raw(-3, 5, 500*time.Millisecond), bc(0, 5, time.Second)},
		{raw(5000, 5000, 48*time.Hour), bc(999, 1000, 24*time.Hour)},
		{raw(3, -1, -time.Second), bc(0, 1, time.Second)},
		// Kind cooldowns: 0 stays (= reset), others clamp to 1 s..24 h;
		// the exit run and the multiplier clamp to 1..1000 and 1..1024.
		{breakerConfig{FailureThreshold: 2, Reset: time.Second,
			CooldownByKind:        KindCooldowns{ServerError: time.Millisecond, Timeout: 48 * time.Hour, Transport: -time.Second},
			DegradedExitSuccesses: 5000, MaxBackoffMultiplier: -4},
			breakerConfig{DegradationThreshold: 0, FailureThreshold: 2, Reset: time.Second,
				CooldownByKind:        KindCooldowns{ServerError: time.Second, Timeout: 24 * time.Hour},
				DegradedExitSuccesses: 1000, MaxBackoffMultiplier: 1}},
	}
	for _, tt := range tests {
		if got := tt.in.Normalize(); got != tt.want {
			t.Errorf("%+v.Normalize() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestBreakerThresholdsPerProfile(t *testing.T) {
	tests := []struct {
		profile        Profile
		degradedAt     int
		opensAt        int
		reset          time.Duration
		configureFirst bool
	}{
		{ProfileAPIKey, 7, 12, 30 * time.Second, true},
		{ProfileOAuth, 5, 8, 60 * time.Second, true},
		{ProfileLocal, 1, 2, 15 * time.Second, true},
		// A provider never configured uses the apikey defaults.
		{ProfileAPIKey, 7, 12, 30 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/configured=%v", tt.profile, tt.configureFirst), func(t *testing.T) {
			b, clock := newTestBreakers(t)
			if tt.configureFirst {
				b.Configure("p", defaultBreakerConfig(tt.profile))
			}
			for i := 1; i < tt.opensAt; i++ {
				b.RecordFailure("p", tripping)
				want := StateClosed
				if i >= tt.degradedAt {
					want = StateDegraded
				}
				if s := b.Peek("p"); s.State != want || s.FailureCount != i {
					t.Fatalf("after %d failures: state %s count %d, want %s %d", i, s.State, s.FailureCount, want, i)
				}
				if ok, _ := b.Allow("p"); !ok {
					t.Fatalf("after %d failures: Allow refused", i)
				}
			}
			if changed := b.RecordFailure("p", tripping); !changed {
				t.Fatalf("failure %d: changed = false, want true", tt.opensAt)
			}
			s := b.Peek("p")
			if s.State != StateOpen {
				t.Fatalf("after %d failures: state %s, want OPEN", tt.opensAt, s.State)
			}
			if !s.RetryAt.Equal(breakerEpoch.Add(tt.reset)) || !s.OpenedAt.Equal(breakerEpoch) {
				t.Errorf("opened %v retry %v, want %v and %v", s.OpenedAt, s.RetryAt, breakerEpoch, breakerEpoch.Add(tt.reset))
			}
			ok, retry := b.Allow("p")
			if ok || retry != tt.reset {
				t.Errorf("Allow on OPEN = %v, %v; want false, %v", ok, retry, tt.reset)
			}
			clock.Advance(tt.reset - time.Millisecond)
			if s := b.Peek("p"); s.State != StateOpen {
				t.Errorf("at reset-1ms: state %s, want OPEN", s.State)
			}
			if ok, retry := b.Allow("p"); ok || retry != time.Millisecond {
				t.Errorf("at reset-1ms: Allow = %v, %v; want false, 1ms", ok, retry)
			}
			clock.Advance(time.Millisecond)
			if s := b.Peek("p"); s.State != StateHalfOpen {
				t.Errorf("at reset: state %s, want HALF_OPEN", s.State)
			}
		})
	}
}

// DEGRADED ends after degraded_exit_successes (3) consecutive successes,
// not at the first success (docs/resilience.md §1, amendments).
func TestBreakerDegradedExitAfterThreeSuccesses(t *testing.T) {
	b, _ := newTestBreakers(t)
	b.Configure("p", defaultBreakerConfig(ProfileAPIKey))
	failN(b, "p", 7)
	if s := b.Peek("p"); s.State != StateDegraded {
		t.Fatalf("7 failures: %s, want DEGRADED", s.State)
	}
	for i, want := range []int{6, 5} {
		b.RecordSuccess("p")
		if s := b.Peek("p"); s.State != StateDegraded || s.FailureCount != want || s.Successes != i+1 {
			t.Fatalf("success %d: %s count %d run %d, want DEGRADED %d run %d", i+1, s.State, s.FailureCount, s.Successes, want, i+1)
		}
	}
	// A failure in between restarts the run.
	failN(b, "p", 1) // count 6
	b.RecordSuccess("p")
	b.RecordSuccess("p")
	if s := b.Peek("p"); s.State != StateDegraded || s.Successes != 2 {
		t.Fatalf("failure then 2 successes: %s run %d, want DEGRADED run 2", s.State, s.Successes)
	}
	if !b.RecordSuccess("p") {
		t.Error("third success in a row: changed = false")
	}
	s := b.Peek("p")
	if s.State != StateClosed || s.FailureCount != 0 || s.Successes != 0 {
		t.Fatalf("3 successes in a row: %s count %d run %d, want CLOSED 0 0", s.State, s.FailureCount, s.Successes)
	}
	if last := s.Transitions[len(s.Transitions)-1]; last.Reason != TransitionRecovered {
		t.Errorf("transition reason %q, want %q", last.Reason, TransitionRecovered)
	}
	// In CLOSED a success still decrements and never goes negative.
	failN(b, "p", 3)
	for range 10 {
		b.RecordSuccess("p")
	}
	if s := b.Peek("p"); s.State != StateClosed || s.FailureCount != 0 {
		t.Errorf("CLOSED count after many successes = %s %d, want CLOSED 0", s.State, s.FailureCount)
	}

	// degraded_exit_successes is a setting: 5.
	cfg := defaultBreakerConfig(ProfileAPIKey)
	cfg.DegradedExitSuccesses = 5
	b.Configure("q", cfg)
	failN(b, "q", 7)
	for i := 1; i <= 5; i++ {
		b.RecordSuccess("q")
		if st := b.Peek("q").State; (i < 5 && st != StateDegraded) || (i == 5 && st != StateClosed) {
			t.Fatalf("exit run 5, success %d: %s", i, st)
		}
	}
}

func TestBreakerQuietPeriod(t *testing.T) {
	for _, path := range []string{"Peek", "Allow", "RecordSuccess", "Providers"} {
		t.Run(path, func(t *testing.T) {
			b, clock := newTestBreakers(t)
			b.Configure("p", defaultBreakerConfig(ProfileAPIKey))
			failN(b, "p", 8)
			clock.Advance(30*time.Second - time.Millisecond)
			if s := b.Peek("p"); s.State != StateDegraded {
				t.Fatalf("29.999 s quiet: %s, want DEGRADED", s.State)
			}
			clock.Advance(time.Millisecond)
			switch path {
			case "Peek":
				b.Peek("p")
			case "Allow":
				b.Allow("p")
			case "RecordSuccess":
				b.RecordSuccess("p")
			case "Providers":
				b.Providers()
			}
			br, _ := b.lookup("p")
			if br.state != StateClosed || br.failures != 0 {
				t.Fatalf("30 s quiet: %s count %d, want CLOSED 0", br.state, br.failures)
			}
			if tr := b.Peek("p").Transitions; tr[len(tr)-1].Reason != TransitionQuietPeriod {
				t.Errorf("last transition %+v, want reason %s", tr[len(tr)-1], TransitionQuietPeriod)
			}
		})
	}

	t.Run("closed count forgotten", func(t *testing.T) {
		b, clock := newTestBreakers(t)
		failN(b, "p", 6)
		clock.Advance(30 * time.Second)
		b.RecordFailure("p", tripping)
		if s := b.Peek("p"); s.State != StateClosed || s.FailureCount != 1 {
			t.Errorf("6 failures, 30 s quiet, 1 failure: %s %d, want CLOSED 1", s.State, s.FailureCount)
		}
	})
	t.Run("failures keep it degraded", func(t *testing.T) {
		b, clock := newTestBreakers(t)
		failN(b, "p", 7)
		for range 4 {
			clock.Advance(29 * time.Second)
			b.RecordFailure("p", tripping)
		}
		if s := b.Peek("p"); s.State != StateDegraded {
			t.Errorf("failures every 29 s: %s, want DEGRADED", s.State)
		}
	})
}

// openAndExpire opens the breaker of p and advances past its reset.
func openAndExpire(b *breakers, clock *clocktest.Clock, p string) {
	failN(b, p, 12)
	clock.Advance(30 * time.Second)
}

func TestBreakerLazyRecoveryEveryReadPath(t *testing.T) {
	paths := map[string]func(b *breakers){
		"Allow":     func(b *breakers) { b.Allow("p") },
		"Peek":      func(b *breakers) { b.Peek("p") },
		"Providers": func(b *breakers) { b.Providers() },
		"Snapshots": func(b *breakers) { b.Snapshots() },
	}
	for name, read := range paths {
		t.Run(name, func(t *testing.T) {
			b, clock := newTestBreakers(t)
			var events []BreakerTransition
			b.OnChange(func(_ string, _ BreakerSnapshot, tr *BreakerTransition) {
				if tr != nil {
					events = append(events, *tr)
				}
			})
			openAndExpire(b, clock, "p")
			read(b)
			br, _ := b.lookup("p")
			if br.state != StateHalfOpen {
				t.Fatalf("state after %s = %s, want HALF_OPEN", name, br.state)
			}
			last := events[len(events)-1]
			want := BreakerTransition{From: StateOpen, To: StateHalfOpen, At: breakerEpoch.Add(30 * time.Second), Reason: TransitionResetTimeout}
			if last != want {
				t.Errorf("last OnChange transition %+v, want %+v", last, want)
			}
		})
	}
}

func TestBreakerHalfOpenSingleProbe(t *testing.T) {
	b, clock := newTestBreakers(t)
	openAndExpire(b, clock, "p")

	// Peek never claims the probe.
	for range 3 {
		if s := b.Peek("p"); s.State != StateHalfOpen || !s.ProbeAt.IsZero() {
			t.Fatalf("Peek = %s probe %v, want HALF_OPEN with free probe", s.State, s.ProbeAt)
		}
	}
	if ok, _ := b.Allow("p"); !ok {
		t.Fatal("first Allow in HALF_OPEN refused, want the probe")
	}
	if s := b.Peek("p"); !s.ProbeAt.Equal(clock.Now()) {
		t.Errorf("ProbeAt = %v, want %v", s.ProbeAt, clock.Now())
	}
	if ok, retry := b.Allow("p"); ok || retry != 30*time.Second {
		t.Errorf("second Allow = %v, %v; want false, 30s", ok, retry)
	}
	// The probe is never reported: the slot frees after Reset.
	clock.Advance(30*time.Second - time.Millisecond)
	if ok, retry := b.Allow("p"); ok || retry != time.Millisecond {
		t.Errorf("Allow at 29.999 s = %v, %v; want false, 1ms", ok, retry)
	}
	clock.Advance(time.Millisecond)
	if ok, _ := b.Allow("p"); !ok {
		t.Error("Allow after an unreported probe's Reset refused, want a new probe")
	}
	if ok, _ := b.Allow("p"); ok {
		t.Error("second caller got a probe too")
	}
	b.ReleaseProbe("p")
	if ok, _ := b.Allow("p"); !ok {
		t.Error("Allow after ReleaseProbe refused")
	}
}

func TestBreakerProbeSuccessCloses(t *testing.T) {
	b, clock := newTestBreakers(t)
	openAndExpire(b, clock, "p")
	b.Allow("p")
	if !b.RecordSuccess("p") {
		t.Error("probe success changed = false")
	}
	s := b.Peek("p")
	if s.State != StateClosed || s.FailureCount != 0 || s.Cycles != 0 || !s.RetryAt.IsZero() || !s.ProbeAt.IsZero() || !s.LastFailureAt.IsZero() {
		t.Errorf("after probe success: %+v, want CLOSED with counters cleared", s)
	}
	if tr := s.Transitions[len(s.Transitions)-1]; tr.Reason != TransitionProbeSucceeded || tr.To != StateClosed {
		t.Errorf("last transition %+v", tr)
	}
	// Counters really restart: 11 failures do not open it again.
	failN(b, "p", 11)
	if s := b.Peek("p"); s.State != StateDegraded {
		t.Errorf("11 failures after close: %s, want DEGRADED", s.State)
	}
}

func TestBreakerProbeFailureBackoff(t *testing.T) {
	// cycle n → reset multiplier: 1..3 ×1, 4 ×2, 5 ×4, 6 ×8, 7+ ×16.
	wantMult := []int{1, 1, 1, 2, 4, 8, 16, 16, 16}
	for _, profile := range []Profile{ProfileAPIKey, ProfileOAuth, ProfileLocal} {
		t.Run(string(profile), func(t *testing.T) {
			b, clock := newTestBreakers(t)
			cfg := defaultBreakerConfig(profile)
			b.Configure("p", cfg)
			failN(b, "p", cfg.FailureThreshold)
			for cycle, mult := range wantMult {
				s := b.Peek("p")
				want := cfg.Reset * time.Duration(mult)
				if s.State != StateOpen || s.Cycles != cycle+1 || s.RetryAt.Sub(clock.Now()) != want {
					t.Fatalf("cycle %d: state %s cycles %d cooldown %v, want OPEN %d %v",
						cycle+1, s.State, s.Cycles, s.RetryAt.Sub(clock.Now()), cycle+1, want)
				}
				clock.Advance(want - time.Millisecond)
				if ok, _ := b.Allow("p"); ok {
					t.Fatalf("cycle %d: allowed before cooldown end", cycle+1)
				}
				clock.Advance(time.Millisecond)
				if ok, _ := b.Allow("p"); !ok {
					t.Fatalf("cycle %d: probe refused at cooldown end", cycle+1)
				}
				if !b.RecordFailure("p", tripping) {
					t.Fatalf("cycle %d: probe failure changed = false", cycle+1)
				}
			}
		})
	}
	if got := breakerBackoff(1<<20, 16); got != 16 {
		t.Errorf("breakerBackoff(huge, 16) = %d, want 16", got)
	}
}

func TestBreakerOpenIgnoresFailuresAndSuccesses(t *testing.T) {
	b, clock := newTestBreakers(t)
	failN(b, "p", 12)
	before := b.Peek("p")
	clock.Advance(10 * time.Second)
	if b.RecordFailure("p", tripping) {
		t.Error("failure while OPEN changed = true")
	}
	if b.RecordSuccess("p") {
		t.Error("success while OPEN changed = true")
	}
	after := b.Peek("p")
	if !after.RetryAt.Equal(before.RetryAt) || after.State != StateOpen || after.FailureCount != before.FailureCount {
		t.Errorf("OPEN changed by failure/success: before %+v after %+v", before, after)
	}
}

func TestBreakerStragglerFailureAfterExpiry(t *testing.T) {
	b, clock := newTestBreakers(t)
	var events []BreakerTransition
	b.OnChange(func(_ string, _ BreakerSnapshot, tr *BreakerTransition) {
		if tr != nil {
			events = append(events, *tr)
		}
	})
	openAndExpire(b, clock, "p")
	// No read in between: the failure sees HALF_OPEN and reopens.
	if !b.RecordFailure("p", tripping) {
		t.Fatal("changed = false")
	}
	got := events[len(events)-2:]
	if got[0].To != StateHalfOpen || got[1].To != StateOpen || got[1].Reason != TransitionProbeFailed {
		t.Errorf("transitions %+v, want →HALF_OPEN then →OPEN", got)
	}
	if s := b.Peek("p"); s.Cycles != 2 {
		t.Errorf("cycles = %d, want 2", s.Cycles)
	}
}

func TestTripsBreaker(t *testing.T) {
	tests := []struct {
		name string
		o    Outcome
		want bool
	}{
		{"408", Outcome{Status: 408, Reason: ReasonTransient, Scope: ScopeProvider}, true},
		{"500", Outcome{Status: 500, Reason: ReasonServerError, Scope: ScopeProvider}, true},
		{"502", Outcome{Status: 502, Reason: ReasonTransient, Scope: ScopeProvider}, true},
		{"503", Outcome{Status: 503, Reason: ReasonTransient, Scope: ScopeProvider}, true},
		{"504", Outcome{Status: 504, Reason: ReasonTransient, Scope: ScopeProvider}, true},
		{"504 unclassified", Outcome{Status: 504}, true},
		{"transport", Outcome{Transport: true, Reason: ReasonNetworkError, Scope: ScopeProvider}, true},
		{"401", Outcome{Status: 401, Reason: ReasonAuthError, Scope: ScopeConnection}, false},
		{"401 unclassified", Outcome{Status: 401}, false},
		{"403", Outcome{Status: 403, Reason: ReasonAuthError, Scope: ScopeConnection}, false},
		{"429", Outcome{Status: 429, Reason: ReasonRateLimit, Scope: ScopeConnection}, false},
		{"429 unclassified", Outcome{Status: 429}, false},
		{"499", Outcome{Status: 499, Reason: ReasonClientAbort}, false},
		{"400", Outcome{Status: 400, Reason: ReasonBadRequest}, false},
		{"404", Outcome{Status: 404, Reason: ReasonNotFound, Scope: ScopeModel}, false},
		{"501", Outcome{Status: 501, Reason: ReasonServerError, Scope: ScopeProvider}, false},
		{"529", Outcome{Status: 529, Reason: ReasonTransient, Scope: ScopeProvider}, false},
		{"client abort transport", Outcome{Transport: true, Reason: ReasonClientAbort}, false},
		{"local error 503", Outcome{Status: 503, Reason: ReasonLocalError}, false},
		{"local error 504", Outcome{Status: 504, Reason: ReasonLocalError}, false},
		{"concurrency 503", Outcome{Status: 503, Reason: ReasonConcurrencyLimited}, false},
		{"stream stall 502", Outcome{Status: 502, Reason: ReasonStreamStall}, false},
		{"quota on 500", Outcome{Status: 500, Reason: ReasonQuotaExhausted, Scope: ScopeConnection}, false},
		{"503 narrowed to model", Outcome{Status: 503, Reason: ReasonTransient, Scope: ScopeModel}, false},
		{"success", Outcome{Status: 503, Success: true}, false},
	}
	for _, tt := range tests {
		if got := TripsBreaker(tt.o); got != tt.want {
			t.Errorf("%s: TripsBreaker = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBreakerNeverTripsOnAccountOrLocalErrors(t *testing.T) {
	b, _ := newTestBreakers(t)
	b.Configure("p", defaultBreakerConfig(ProfileLocal))
	c := DefaultClassifier{}
	inputs := []ErrorInput{
		{Status: 401}, {Status: 403}, {Status: 429}, {Status: 499},
		{Status: 429, Body: "too many concurrent requests"},
		{TransportErr: errCanceled()},
	}
	for _, in := range inputs {
		for range 10 {
			if b.RecordFailure("p", c.Classify(in)) {
				t.Fatalf("%+v changed the breaker", in)
			}
		}
	}
	for _, o := range []Outcome{
		{Status: 503, Reason: ReasonLocalError},
		{Status: 502, Reason: ReasonStreamStall},
		{Status: 499, Reason: ReasonClientAbort},
	} {
		for range 10 {
			b.RecordFailure("p", o)
		}
	}
	if s := b.Peek("p"); s.State != StateClosed || s.FailureCount != 0 {
		t.Errorf("after account/local errors: %s %d, want CLOSED 0", s.State, s.FailureCount)
	}
	if got := b.Providers(); !slices.Equal(got, []string{"p"}) {
		t.Errorf("Providers = %v; ignored failures must not create breakers", got)
	}
}

func TestBreakerTransitionHistoryKeepsLast20(t *testing.T) {
	b, clock := newTestBreakers(t)
	b.Configure("p", defaultBreakerConfig(ProfileLocal))
	// Each round: CLOSED→DEGRADED→OPEN→HALF_OPEN→CLOSED = 4 transitions.
	for range 8 {
		failN(b, "p", 2)
		clock.Advance(15 * time.Second)
		b.Allow("p")
		b.RecordSuccess("p")
	}
	tr := b.Peek("p").Transitions
	if len(tr) != MaxBreakerTransitions {
		t.Fatalf("len(Transitions) = %d, want 20", len(tr))
	}
	if last := tr[19]; last.From != StateHalfOpen || last.To != StateClosed || !last.At.Equal(clock.Now()) {
		t.Errorf("newest transition %+v", last)
	}
	if first := tr[0]; first.From != StateClosed || first.To != StateDegraded || !first.At.Equal(breakerEpoch.Add(3*15*time.Second)) {
		t.Errorf("oldest kept transition %+v, want the 4th round's first", first)
	}
	for i := 1; i < len(tr); i++ {
		if tr[i].From != tr[i-1].To || tr[i].At.Before(tr[i-1].At) {
			t.Fatalf("history not contiguous at %d: %+v then %+v", i, tr[i-1], tr[i])
		}
	}
}

func TestBreakerReset(t *testing.T) {
	b, _ := newTestBreakers(t)
	failN(b, "b", 12)
	failN(b, "a", 7)
	b.Configure("c", defaultBreakerConfig(ProfileOAuth))
	if got := b.Reset("missing"); got != nil {
		t.Errorf("Reset(missing) = %v, want nil", got)
	}
	if got := b.Reset("b"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("Reset(b) = %v", got)
	}
	s := b.Peek("b")
	if s.State != StateClosed || s.FailureCount != 0 || s.Cycles != 0 || !s.RetryAt.IsZero() {
		t.Errorf("b after reset: %+v", s)
	}
	if tr := s.Transitions[len(s.Transitions)-1]; tr.From != StateOpen || tr.Reason != TransitionManualReset {
		t.Errorf("reset transition %+v", tr)
	}
	if s := b.Peek("a"); s.State != StateDegraded {
		t.Errorf("a touched by Reset(b): %s", s.State)
	}
	if got := b.Reset(""); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Reset(\"\") = %v, want [a b c]", got)
	}
	if s := b.Peek("a"); s.State != StateClosed || s.FailureCount != 0 {
		t.Errorf("a after reset all: %+v", s)
	}
}

func TestBreakerSnapshotJSONAndRestore(t *testing.T) {
	b, clock := newTestBreakers(t)
	openAndExpire(b, clock, "p")
	b.Allow("p") // claims the probe
	snap := b.Peek("p")
	raw, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"state":"HALF_OPEN"`, `"failure_count":12`, `"opened_at"`, `"retry_at"`, `"last_failure_at"`, `"cycles":1`, `"probe_at"`, `"transitions"`, `"from":"OPEN"`, `"reason":"reset_timeout_elapsed"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("JSON %s lacks %s", raw, key)
		}
	}
	var back BreakerSnapshot
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}

	restored := newBreakers(clock)
	restored.Configure("p", defaultBreakerConfig(ProfileAPIKey))
	restored.Restore("p", back)
	got := restored.Peek("p")
	if got.State != StateHalfOpen || got.FailureCount != 12 || got.Cycles != 1 || !got.ProbeAt.IsZero() || len(got.Transitions) != len(snap.Transitions) {
		t.Errorf("restored %+v, want HALF_OPEN 12 cycles 1 with the probe freed", got)
	}
	if ok, _ := restored.Allow("p"); !ok {
		t.Error("restored HALF_OPEN refused the probe")
	}

	// A restored OPEN breaker recovers lazily once its RetryAt passes.
	open := BreakerSnapshot{State: StateOpen, FailureCount: 8, RetryAt: clock.Now().Add(time.Second), Cycles: 1}
	restored.Restore("q", open)
	if s := restored.Peek("q"); s.State != StateOpen {
		t.Errorf("restored OPEN: %s", s.State)
	}
	clock.Advance(time.Second)
	if s := restored.Peek("q"); s.State != StateHalfOpen {
		t.Errorf("restored OPEN after RetryAt: %s, want HALF_OPEN", s.State)
	}

	long := BreakerSnapshot{State: "bogus", FailureCount: -4, Transitions: make([]BreakerTransition, 30)}
	restored.Restore("r", long)
	if s := restored.Peek("r"); s.State != StateClosed || s.FailureCount != 0 || len(s.Transitions) != 20 {
		t.Errorf("restored bogus snapshot: state %s count %d transitions %d", s.State, s.FailureCount, len(s.Transitions))
	}
}

func TestBreakerOnChange(t *testing.T) {
	b, clock := newTestBreakers(t)
	type event struct {
		provider string
		state    BreakerState
		count    int
		to       BreakerState
	}
	var events []event
	b.OnChange(func(p string, s BreakerSnapshot, tr *BreakerTransition) {
		e := event{provider: p, state: s.State, count: s.FailureCount}
		if tr != nil {
			e.to = tr.To
		}
		// Re-entrant reads must not deadlock.
		_ = b.Peek(p)
		_, _ = b.Allow("other")
		events = append(events, e)
	})
	b.Configure("p", defaultBreakerConfig(ProfileLocal))
	b.RecordSuccess("p") // nothing to change
	b.RecordFailure("p", tripping)
	b.RecordFailure("p", tripping)
	clock.Advance(15 * time.Second)
	b.Allow("p")
	b.RecordSuccess("p")
	b.RecordSuccess("p") // CLOSED, count 0: no event
	want := []event{
		{"p", StateDegraded, 1, StateDegraded},
		{"p", StateOpen, 2, StateOpen},
		{"p", StateHalfOpen, 2, StateHalfOpen},
		{"p", StateClosed, 0, StateClosed},
	}
	if !slices.Equal(events, want) {
		t.Errorf("events\n got %+v\nwant %+v", events, want)
	}
}

func TestBreakerConfigureKeepsState(t *testing.T) {
	b, _ := newTestBreakers(t)
	failN(b, "p", 7)
	b.Configure("p", defaultBreakerConfig(ProfileOAuth))
	if s := b.Peek("p"); s.State != StateDegraded || s.FailureCount != 7 {
		t.Fatalf("after Configure: %+v", s)
	}
	b.RecordFailure("p", tripping) // 8 = oauth open threshold
	if s := b.Peek("p"); s.State != StateOpen || s.RetryAt.Sub(breakerEpoch) != time.Minute {
		t.Errorf("oauth threshold after Configure: %s retry %v", s.State, s.RetryAt.Sub(breakerEpoch))
	}
}

func TestBreakerUnknownProvider(t *testing.T) {
	b, _ := newTestBreakers(t)
	if ok, retry := b.Allow("x"); !ok || retry != 0 {
		t.Errorf("Allow(unknown) = %v, %v", ok, retry)
	}
	if b.RecordSuccess("x") {
		t.Error("RecordSuccess(unknown) changed")
	}
	if s := b.Peek("x"); s.State != StateClosed {
		t.Errorf("Peek(unknown) = %s", s.State)
	}
	if got := b.Providers(); len(got) != 0 {
		t.Errorf("Providers = %v, want none", got)
	}
}

func TestBreakerSuccessPathDoesNotAllocate(t *testing.T) {
	b, _ := newTestBreakers(t)
	b.Configure("p", defaultBreakerConfig(ProfileAPIKey))
	b.OnChange(func(string, BreakerSnapshot, *BreakerTransition) {})
	for _, p := range []string{"p", "unknown"} {
		allocs := testing.AllocsPerRun(1000, func() {
			if ok, _ := b.Allow(p); !ok {
				panic("refused")
			}
			b.RecordSuccess(p)
		})
		if allocs != 0 {
			t.Errorf("%s: Allow+RecordSuccess allocates %.1f times per run, want 0", p, allocs)
		}
	}
}

func TestBreakerConcurrentUse(t *testing.T) {
	b, clock := newTestBreakers(t)
	var mu sync.Mutex
	last := map[string]BreakerState{}
	b.OnChange(func(p string, s BreakerSnapshot, tr *BreakerTransition) {
		mu.Lock()
		defer mu.Unlock()
		if tr != nil {
			if prev, ok := last[p]; ok && tr.From != prev {
				t.Errorf("%s: transition %s→%s delivered after %s", p, tr.From, tr.To, prev)
			}
			last[p] = tr.To
		}
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("p%d", g%3)
			for i := range 500 {
				switch i % 5 {
				case 0, 1:
					b.RecordFailure(p, tripping)
				case 2:
					if ok, _ := b.Allow(p); ok {
						b.RecordSuccess(p)
					}
				case 3:
					clock.Advance(time.Second)
					b.Peek(p)
				case 4:
					if i%100 == 4 {
						b.Reset(p)
					}
					b.Providers()
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkBreakersAllowRecordSuccess(b *testing.B) {
	br := newBreakers(SystemClock{})
	br.Configure("openai", defaultBreakerConfig(ProfileAPIKey))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if ok, _ := br.Allow("openai"); ok {
				br.RecordSuccess("openai")
			}
		}
	})
}
