package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// seedAdminState: openai/key-a cooling (429, gpt-4o locked), openai/key-b
// with the codex family locked, claude/acct-1 banned, vllm breaker open.
func seedAdminState(t *testing.T) *testEngine {
	te := newTestEngine(t, lockoutOn())
	te.fail(t, http429("openai", "key-a", "gpt-4o"))
	te.fail(t, http429("openai", "key-b", "gpt-5-codex"))
	te.clock.Advance(3 * time.Second) // key-b's cooldown ends; its lock stays
	te.fail(t, http429("openai", "key-a", "gpt-4o"))
	te.fail(t, Outcome{Provider: "claude", Connection: "acct-1", Model: "opus", Status: 403,
		Reason: ReasonBanned, Scope: ScopeConnection, Permanent: true})
	te.fail(t, Outcome{Provider: "vllm", Connection: "gpu-1", Model: "llama", Status: 0,
		Transport: true, Reason: ReasonNetworkError, Scope: ScopeProvider, Retryable: true})
	te.fail(t, Outcome{Provider: "vllm", Connection: "gpu-1", Model: "llama", Status: 0,
		Transport: true, Reason: ReasonNetworkError, Scope: ScopeProvider, Retryable: true})
	return te
}

func TestHealth(t *testing.T) {
	te := seedAdminState(t)
	h := te.Health()
	v := h.Providers["vllm"]
	if v.State != string(StateOpen) || v.FailureCount != 2 || v.RetryAfterMS != 15000 || len(v.Transitions) != 2 {
		t.Fatalf("vllm health: %+v", v)
	}
	if o := h.Providers["openai"]; o.State != string(StateClosed) || o.Transitions == nil {
		t.Fatalf("openai health: %+v", o)
	}
	if h.CoolingConnections != 1 || h.UnavailableConnections != 1 || h.Lockouts != 2 || h.LockoutsByReason["rate_limit"] != 2 {
		t.Fatalf("health counts: %+v", h)
	}
	raw, _ := json.Marshal(h)
	for _, k := range []string{`"state"`, `"failure_count"`, `"retry_after_ms"`, `"transitions"`, `"cooling_connections"`, `"lockouts_by_reason"`} {
		if !strings.Contains(string(raw), k) {
			t.Errorf("health JSON lacks %s: %s", k, raw)
		}
	}
}

func TestCooldownsView(t *testing.T) {
	te := seedAdminState(t)
	all := te.Cooldowns("")
	if len(all) != 3 {
		t.Fatalf("Cooldowns(\"\") listed %d connections: %+v", len(all), all)
	}
	a := all[1]
	if a.Provider != "openai" || a.Connection != "key-a" || a.TestStatus != testStatusUnavailable ||
		a.RemainingMS != 6000 || a.BackoffLevel != 2 || a.LastErrorType != "rate_limit" || len(a.Lockouts) != 1 {
		t.Fatalf("openai/key-a: %+v", a)
	}
	b := all[2]
	if b.Connection != "key-b" || b.TestStatus != TestStatusActive || b.RemainingMS != 0 ||
		len(b.Lockouts) != 1 || b.Lockouts[0].Family != "codex" || b.Lockouts[0].RemainingMS != 117000 {
		t.Fatalf("openai/key-b: %+v", b)
	}
	if c := all[0]; c.Provider != "claude" || c.TestStatus != TestStatusBanned {
		t.Fatalf("claude/acct-1: %+v", c)
	}
	if only := te.Cooldowns("claude"); len(only) != 1 || only[0].Provider != "claude" {
		t.Fatalf("Cooldowns(claude) = %+v", only)
	}
}

func TestClearCooldowns(t *testing.T) {
	te := seedAdminState(t)
	ctx := context.Background()

	res, err := te.ClearCooldowns(ctx, ClearRequest{ConnectionIDs: []string{"openai/key-a", "claude/acct-1", "openai/key-z"}})
	if err != nil {
		t.Fatal(err)
	}
	if res != (ClearResult{Cleared: 1, Unchanged: 1, SkippedTerminal: 1, LockoutsCleared: 1}) {
		t.Fatalf("ClearCooldowns by id = %+v", res)
	}
	if _, excluded := te.Check("openai", "key-a", "gpt-4o"); excluded {
		t.Fatal("openai/key-a still excluded after a clear")
	}
	if te.store.has(keyCooldown+"openai/key-a") || te.store.has(keyLockout+"openai/key-a/gpt-4o") {
		t.Fatal("cleared state still persisted")
	}
	if ex, _ := te.Peek("claude", "acct-1", "opus"); ex.Reason != ExclusionUnavailable {
		t.Fatal("a terminal state was cleared")
	}

	res, err = te.ClearCooldowns(ctx, ClearRequest{All: true, Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	// key-a is clean now; key-b still held its backoff level and the family lock.
	if res != (ClearResult{Cleared: 1, Unchanged: 1, LockoutsCleared: 1}) {
		t.Fatalf("ClearCooldowns all openai = %+v", res)
	}
	if n := len(te.Lockouts()); n != 0 {
		t.Fatalf("%d lockouts left", n)
	}

	for _, bad := range []ClearRequest{{}, {ConnectionIDs: []string{"no-slash"}}, {ConnectionIDs: []string{"/c"}}} {
		if _, err := te.ClearCooldowns(ctx, bad); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("ClearCooldowns(%+v) = %v, want ErrInvalidRequest", bad, err)
		}
	}
}

func TestLockoutsAndClearLockout(t *testing.T) {
	te := seedAdminState(t)
	ctx := context.Background()
	locks := te.Lockouts()
	if len(locks) != 2 {
		t.Fatalf("Lockouts = %+v", locks)
	}
	if l := locks[1]; l.Connection != "key-b" || l.Model != "gpt-5-codex" || l.Family != "codex" ||
		l.Reason != "rate_limit" || !l.ExpiresAt.Equal(engEpoch.Add(120*time.Second)) {
		t.Fatalf("family lockout info: %+v", l)
	}
	// Clearing another member of the family re-enables the whole family.
	ok, err := te.ClearLockout(ctx, "openai", "key-b", "gpt-5-mini")
	if err != nil || !ok {
		t.Fatalf("ClearLockout = %v, %v", ok, err)
	}
	if _, excluded := te.Check("openai", "key-b", "gpt-5-codex"); excluded {
		t.Fatal("family still locked")
	}
	if te.store.has(keyLockout + "openai/key-b/family:codex") {
		t.Fatal("cleared lockout still persisted")
	}
	if ok, _ := te.ClearLockout(ctx, "openai", "key-b", "gpt-5-mini"); ok {
		t.Fatal("clearing twice reported a removal")
	}
	// By family name too.
	te.fail(t, http429("openai", "key-b", "gpt-5"))
	if ok, _ := te.ClearLockout(ctx, "openai", "key-b", "codex"); !ok {
		t.Fatal("ClearLockout by family name did not clear")
	}
	if _, err := te.ClearLockout(ctx, "openai", "", "m"); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("ClearLockout without a connection: %v", err)
	}
}

func TestResetBreakers(t *testing.T) {
	te := seedAdminState(t)
	names, err := te.ResetBreakers(context.Background(), "vllm")
	if err != nil || len(names) != 1 || names[0] != "vllm" {
		t.Fatalf("ResetBreakers = %v, %v", names, err)
	}
	if _, excluded := te.Check("vllm", "gpu-1", "other"); excluded {
		t.Fatal("vllm still excluded after a reset")
	}
	again := reopen(t, te.clock, te.store, lockoutOn())
	if s := again.breakers.Peek("vllm"); s.State != StateClosed || s.FailureCount != 0 {
		t.Fatalf("reset not persisted: %+v", s)
	}
	all, err := te.ResetBreakers(context.Background(), "")
	if err != nil || len(all) != 3 {
		t.Fatalf("ResetBreakers(all) = %v, %v", all, err)
	}
}

func TestResetConnectionClearsTerminal(t *testing.T) {
	te := seedAdminState(t)
	ok, err := te.ResetConnection(context.Background(), "claude", "acct-1")
	if err != nil || !ok {
		t.Fatalf("ResetConnection = %v, %v", ok, err)
	}
	if _, excluded := te.Check("claude", "acct-1", "opus"); excluded {
		t.Fatal("banned connection still excluded after ResetConnection")
	}
	if te.store.has(keyCooldown + "claude/acct-1") {
		t.Fatal("terminal state still persisted")
	}
}
