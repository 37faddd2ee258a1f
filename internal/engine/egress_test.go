package engine

import (
	"context"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

// egressProviders: "free" is egress-bucketed with five connections (c5
// disable_cooling); "paid" is not flagged.
func egressProviders() []ProviderSpec {
	return []ProviderSpec{
		{
			ID: "free", Profile: ProfileAPIKey, EgressBucketed: true,
			Connections: []ConnectionSpec{{ID: "c1"}, {ID: "c2"}, {ID: "c3"}, {ID: "c4"}, {ID: "c5", DisableCooling: true}},
		},
		{ID: "paid", Profile: ProfileAPIKey, Connections: []ConnectionSpec{{ID: "p1"}, {ID: "p2"}}},
	}
}

func newEgressEngine(t *testing.T, clock *clocktest.Clock, store *memStore, s Settings) *testEngine {
	t.Helper()
	e, err := New(context.Background(), Options{Clock: clock, Store: store, Settings: s, Providers: egressProviders()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &testEngine{Engine: e, clock: clock, store: store}
}

// quota429 is a 429 a rule classified quota_exhausted with a 60 s cooldown.
func quota429(provider, conn, model string) Outcome {
	return Outcome{Provider: provider, Connection: conn, Model: model, Status: 429,
		Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Retryable: true,
		CooldownHint: time.Minute, RuleSource: "builtin", RuleID: "test.quota", Message: "upstream 429: quota"}
}

func TestEgressSiblingsCoolTogether(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
	now := clock.Now()
	te.RecordEgress("free", "c1", "203.0.113.7")
	te.RecordEgress("free", "c2", "203.0.113.7")
	te.RecordEgress("free", "c3", "198.51.100.9") // another egress
	te.RecordEgress("free", "c5", "203.0.113.7")  // disable_cooling
	// c4 has no record.

	te.fail(t, quota429("free", "c1", "m"))
	until := now.Add(time.Minute)
	wantExcluded(t, te, "free", "c1", "m", ExclusionConnectionCooldown, until)
	wantExcluded(t, te, "free", "c2", "m", ExclusionConnectionCooldown, until)
	wantEligible(t, te, "free", "c3", "m")
	wantEligible(t, te, "free", "c4", "m")
	wantEligible(t, te, "free", "c5", "m")

	st, _ := te.cooldowns.get("free", "c2")
	if st.TestStatus != testStatusUnavailable || st.BackoffLevel != 0 || st.LastErrorType != string(ReasonQuotaExhausted) || st.ErrorCode != 429 {
		t.Fatalf("sibling state = %+v", st)
	}
	// The sibling's cooldown is durable: a restart keeps it.
	te2 := newEgressEngine(t, clock, te.store, DefaultSettings())
	wantExcluded(t, te2, "free", "c2", "m", ExclusionConnectionCooldown, until)

	clock.Advance(time.Minute)
	wantEligible(t, te, "free", "c2", "m")
}

func TestEgressRateLimitUsesFailingConnectionsBackoff(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
	now := clock.Now()
	te.RecordEgress("free", "c1", "203.0.113.7")
	te.RecordEgress("free", "c2", "203.0.113.7")
	// A plain default 429 rate_limit: c1 gets the apikey base 3 s, and so
	// does its sibling.
	te.fail(t, http429("free", "c1", "m"))
	wantExcluded(t, te, "free", "c1", "m", ExclusionConnectionCooldown, now.Add(3*time.Second))
	wantExcluded(t, te, "free", "c2", "m", ExclusionConnectionCooldown, now.Add(3*time.Second))
}

func TestEgressNoRecordCoolsOnlyFailingConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(te *testEngine)
	}{
		{"no record of the failing connection", func(te *testEngine) {
			te.RecordEgress("free", "c2", "203.0.113.7")
		}},
		{"failing connection's record older than 24 h", func(te *testEngine) {
			te.RecordEgress("free", "c1", "203.0.113.7")
			te.clock.Advance(egressWindow + time.Second)
			te.RecordEgress("free", "c2", "203.0.113.7")
		}},
		{"sibling's record older than 24 h", func(te *testEngine) {
			te.RecordEgress("free", "c2", "203.0.113.7")
			te.clock.Advance(egressWindow + time.Second)
			te.RecordEgress("free", "c1", "203.0.113.7")
		}},
		{"sibling moved to another egress", func(te *testEngine) {
			te.RecordEgress("free", "c1", "203.0.113.7")
			te.RecordEgress("free", "c2", "203.0.113.7")
			te.RecordEgress("free", "c2", "198.51.100.9")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.NewClock(engEpoch)
			te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
			tc.setup(te)
			te.fail(t, quota429("free", "c1", "m"))
			wantExcluded(t, te, "free", "c1", "m", ExclusionConnectionCooldown, clock.Now().Add(time.Minute))
			wantEligible(t, te, "free", "c2", "m")
		})
	}
}

func TestEgressWithin24hCounts(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
	te.RecordEgress("free", "c2", "203.0.113.7")
	clock.Advance(egressWindow) // exactly 24 h: still inside the window
	te.RecordEgress("free", "c1", "203.0.113.7")
	te.fail(t, quota429("free", "c1", "m"))
	wantExcluded(t, te, "free", "c2", "m", ExclusionConnectionCooldown, clock.Now().Add(time.Minute))
}

func TestEgressOnlyQuotaAndRateLimit429(t *testing.T) {
	for _, o := range []Outcome{
		{Provider: "free", Connection: "c1", Model: "m", Status: 429, Reason: ReasonConcurrencyLimited, Scope: ScopeConnection, Retryable: true, RuleSource: DefaultRuleSource},
		{Provider: "free", Connection: "c1", Model: "m", Status: 403, Reason: ReasonAuthError, Scope: ScopeConnection, Retryable: true, RuleSource: DefaultRuleSource},
		{Provider: "free", Connection: "c1", Model: "m", Status: 403, Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Retryable: true, CooldownHint: time.Minute, RuleSource: "builtin"},
	} {
		clock := clocktest.NewClock(engEpoch)
		te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
		te.RecordEgress("free", "c1", "203.0.113.7")
		te.RecordEgress("free", "c2", "203.0.113.7")
		te.fail(t, o)
		if _, excluded := te.Peek("free", "c1", "m"); !excluded {
			t.Fatalf("%d %s did not cool the failing connection", o.Status, o.Reason)
		}
		wantEligible(t, te, "free", "c2", "m")
	}
}

func TestEgressUnflaggedProviderUntouched(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
	te.RecordEgress("paid", "p1", "203.0.113.7")
	te.RecordEgress("paid", "p2", "203.0.113.7")
	te.fail(t, quota429("paid", "p1", "m"))
	wantEligible(t, te, "paid", "p2", "m")
}

func TestEgressSiblingNeverOverwritten(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
	now := clock.Now()
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		te.RecordEgress("free", c, "203.0.113.7")
	}
	// c2 is terminal, c3 cools for 10 minutes, c4 for 10 seconds.
	te.fail(t, Outcome{Provider: "free", Connection: "c2", Status: 401, Reason: ReasonBanned, Scope: ScopeConnection, Permanent: true, RuleSource: DefaultRuleSource})
	te.fail(t, Outcome{Provider: "free", Connection: "c3", Status: 503, Reason: ReasonTransient, Scope: ScopeConnection, Retryable: true, CooldownHint: 10 * time.Minute, RuleSource: "builtin"})
	te.fail(t, Outcome{Provider: "free", Connection: "c4", Status: 503, Reason: ReasonTransient, Scope: ScopeConnection, Retryable: true, CooldownHint: 10 * time.Second, RuleSource: "builtin"})
	c4 := mustConn(t, te, "c4")

	te.fail(t, quota429("free", "c1", "m"))
	if st := mustConn(t, te, "c2"); st.TestStatus != TestStatusBanned {
		t.Fatalf("terminal sibling changed to %+v", st)
	}
	wantExcluded(t, te, "free", "c3", "m", ExclusionConnectionCooldown, now.Add(10*time.Minute))
	if st := mustConn(t, te, "c3"); st.LastErrorType != string(ReasonTransient) {
		t.Fatalf("sibling with a longer cooldown was rewritten: %+v", st)
	}
	// The shorter one is extended to c1's deadline, its backoff level kept.
	wantExcluded(t, te, "free", "c4", "m", ExclusionConnectionCooldown, now.Add(time.Minute))
	if st := mustConn(t, te, "c4"); st.BackoffLevel != c4.BackoffLevel || st.TestStatus.Terminal() {
		t.Fatalf("extended sibling = %+v, before %+v", st, c4)
	}
}

func mustConn(t *testing.T, te *testEngine, c string) connState {
	t.Helper()
	st, ok := te.cooldowns.get("free", c)
	if !ok {
		t.Fatalf("no cooldown state for free/%s", c)
	}
	return st
}

func TestEgressLocksPerConnection(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	te := newEgressEngine(t, clock, newMemStore(clock), lockoutOn())
	now := clock.Now()
	modelScoped := func(p, c string) Outcome {
		o := quota429(p, c, "m")
		o.Scope = ScopeModel
		return o
	}
	// Flagged provider, single failing connection: the model-scoped 429
	// cools the connection and locks no model.
	te.fail(t, modelScoped("free", "c1"))
	wantExcluded(t, te, "free", "c1", "other-model", ExclusionConnectionCooldown, now.Add(time.Minute))
	if _, ok := te.lockouts.get(lockKey{"free", "c1", "m"}); ok {
		t.Fatal("an egress-bucketed 429 armed a model lockout")
	}
	// A default-classified 429 (lockout by status) locks no model either.
	te.fail(t, http429("free", "c2", "m"))
	if _, ok := te.lockouts.get(lockKey{"free", "c2", "m"}); ok {
		t.Fatal("an egress-bucketed default 429 armed a model lockout")
	}
	// Unflagged provider: the same outcome is a model lockout only.
	te.fail(t, modelScoped("paid", "p1"))
	wantEligible(t, te, "paid", "p1", "other-model")
	wantExcluded(t, te, "paid", "p1", "m", ExclusionModelLockout, now.Add(time.Minute))
}

func TestRecordEgressIgnoresEmpty(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
	te.RecordEgress("free", "c1", "")
	te.RecordEgress("", "c1", "203.0.113.7")
	te.RecordEgress("free", "", "203.0.113.7")
	if _, ok := te.egress.lookup(connKey{"free", "c1"}, clock.Now()); ok {
		t.Fatal("an empty egress address was recorded")
	}
	if n := len(te.egress.m); n != 0 {
		t.Fatalf("%d records after empty arguments", n)
	}
}

func TestEgressObserverSeesSiblings(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	te := newEgressEngine(t, clock, newMemStore(clock), DefaultSettings())
	var got []string
	te.SetObserver(Observer{OnCooldown: func(p, c, r string, d time.Duration) {
		got = append(got, p+"/"+c+" "+r+" "+d.String())
	}})
	te.RecordEgress("free", "c1", "203.0.113.7")
	te.RecordEgress("free", "c2", "203.0.113.7")
	te.fail(t, quota429("free", "c1", "m"))
	want := []string{"free/c1 quota_exhausted 1m0s", "free/c2 quota_exhausted 1m0s"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("observer cooldowns = %q, want %q", got, want)
	}
}
