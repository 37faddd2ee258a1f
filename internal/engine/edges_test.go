package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/hashicorp/go-hclog"
)

func credits402(provider, conn string) Outcome {
	return Outcome{Provider: provider, Connection: conn, Model: "gpt-4o", Status: 402, Reason: ReasonCreditsExhausted,
		Scope: ScopeConnection, Retryable: true, Permanent: true, RuleSource: DefaultRuleSource, RuleID: "default.402",
		Message: "upstream 402: Insufficient Balance"}
}

// specsWithKeys is testProviders with a credential digest per connection.
func specsWithKeys(keys map[string]string) []ProviderSpec {
	specs := testProviders()
	for i := range specs {
		for j := range specs[i].Connections {
			c := &specs[i].Connections[j]
			c.CredentialHash = CredentialHash(keys[specs[i].ID+"/"+c.ID])
		}
	}
	return specs
}

func openWithKeys(t *testing.T, clock *clocktest.Clock, store *memStore, keys map[string]string, log hclog.Logger) *testEngine {
	t.Helper()
	e, err := New(context.Background(), Options{Clock: clock, Store: store, Providers: specsWithKeys(keys), Logger: log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &testEngine{Engine: e, clock: clock, store: store}
}

func TestCredentialHash(t *testing.T) {
	h := CredentialHash("sk-secret")
	if len(h) != 64 || h == CredentialHash("sk-other") || h != CredentialHash("sk-secret") || strings.Contains(h, "secret") {
		t.Fatalf("CredentialHash = %q", h)
	}
	if CredentialHash("") != "" {
		t.Error("the digest of an empty secret is not empty")
	}
}

// A terminal connection stays terminal across a restart with the same
// key, and starts clean when its key changed (logged without the key or
// its digest).
func TestCredentialChangeClearsTerminalState(t *testing.T) {
	clock := clocktest.NewClock(engEpoch)
	store := newMemStore(clock)
	keys := map[string]string{"openai/key-a": "sk-first", "openai/key-b": "sk-b"}
	te := openWithKeys(t, clock, store, keys, nil)
	te.fail(t, credits402("openai", "key-a"))
	if ex, _ := te.Peek("openai", "key-a", "gpt-4o"); ex.Detail != string(TestStatusCreditsExhausted) {
		t.Fatalf("402: %+v, want credits_exhausted", ex)
	}

	same := openWithKeys(t, clock, store, keys, nil)
	if ex, excluded := same.Peek("openai", "key-a", "gpt-4o"); !excluded || ex.Reason != ExclusionUnavailable {
		t.Fatalf("same key after restart: %+v %v, want still unavailable", ex, excluded)
	}

	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	keys["openai/key-a"] = "sk-second"
	changed := openWithKeys(t, clock, store, keys, log)
	wantEligible(t, changed, "openai", "key-a", "gpt-4o")
	if store.has(keyCooldown + "openai/key-a") {
		t.Error("the terminal record is still persisted")
	}
	out := logs.String()
	if !strings.Contains(out, "connection reset") || !strings.Contains(out, "reason=\"credential changed\"") ||
		!strings.Contains(out, "previous_state=credits_exhausted") {
		t.Errorf("log lacks the reset: %s", out)
	}
	for _, secret := range []string{"sk-first", "sk-second", CredentialHash("sk-first"), CredentialHash("sk-second")} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log reveals a credential or its digest: %s", out)
		}
	}
	// The other connection, unchanged, was not reset.
	if strings.Contains(out, "key-b") {
		t.Errorf("an unchanged connection was reset: %s", out)
	}
	// A reload with the same specs resets nothing more.
	if reset, err := changed.SyncCredentials(context.Background(), specsWithKeys(keys)); err != nil || len(reset) != 0 {
		t.Errorf("SyncCredentials again = %v, %v", reset, err)
	}
}

func TestResetConnections(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	ctx := context.Background()
	te.fail(t, credits402("openai", "key-a"))
	te.fail(t, http429("openai", "key-b", "gpt-4o"))
	te.fail(t, http404("openai", "key-b", "gpt-4o"))

	// POST /api/resilience/cooldowns keeps terminal states.
	res, err := te.ClearCooldowns(ctx, ClearRequest{All: true, Provider: "openai"})
	if err != nil || res.SkippedTerminal != 1 {
		t.Fatalf("ClearCooldowns = %+v, %v", res, err)
	}
	te.fail(t, http429("openai", "key-b", "gpt-4o"))

	got, err := te.ResetConnections(ctx, "openai", "", ResetByOperator)
	if err != nil {
		t.Fatal(err)
	}
	want := []ResetEntry{
		{Provider: "openai", Connection: "key-a", PreviousState: TestStatusCreditsExhausted},
		// The 429 also locked gpt-4o (429 is in model_lockout.error_codes).
		{Provider: "openai", Connection: "key-b", PreviousState: testStatusUnavailable, LockoutsCleared: 1},
	}
	if len(got.Connections) != 2 || got.Connections[0] != want[0] || got.Connections[1] != want[1] {
		t.Fatalf("ResetConnections = %+v, want %+v", got.Connections, want)
	}
	wantEligible(t, te, "openai", "key-a", "gpt-4o")
	wantEligible(t, te, "openai", "key-b", "gpt-4o")

	// One connection; the model lockout goes too.
	te.fail(t, http404("openai", "key-b", "gpt-4o"))
	got, err = te.ResetConnections(ctx, "openai", "key-b", ResetByOperator)
	if err != nil || len(got.Connections) != 1 || got.Connections[0].LockoutsCleared != 1 {
		t.Fatalf("reset key-b = %+v, %v", got, err)
	}
	for _, bad := range [][2]string{{"", ""}, {"nope", ""}, {"openai", "key-z"}} {
		if _, err := te.ResetConnections(ctx, bad[0], bad[1], ResetByOperator); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("ResetConnections(%q, %q) = %v, want ErrInvalidRequest", bad[0], bad[1], err)
		}
	}
}

// Terminal records say when and why; the cooldowns view and the health
// API show them.
func TestTerminalRecordShown(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	at := te.clock.Now()
	te.fail(t, credits402("openai", "key-a"))
	te.clock.Advance(time.Hour)
	var st ConnectionStatus
	for _, c := range te.Cooldowns("openai") {
		if c.Connection == "key-a" {
			st = c
		}
	}
	if st.TestStatus != TestStatusCreditsExhausted || !st.TerminalAt.Equal(at) || st.TerminalReason != "credits_exhausted" || st.TerminalRule != "default.402" {
		t.Fatalf("cooldowns view: %+v", st)
	}
	h := te.Health()
	tc := h.Providers["openai"].TerminalConnections
	if len(tc) != 1 || tc[0].Connection != "key-a" || tc[0].State != TestStatusCreditsExhausted || !tc[0].Since.Equal(at) ||
		tc[0].LastError != "upstream 402: Insufficient Balance" {
		t.Fatalf("health terminal connections: %+v", tc)
	}
}

// geminiDaily is the outcome the built-in rule gives a Gemini 429 whose
// QuotaFailure names a per-model daily quota and whose RetryInfo says
// 86399 s.
func geminiDaily(conn, model string) Outcome {
	return Outcome{Provider: "openai", Connection: conn, Model: model, Status: 429, Reason: ReasonQuotaExhausted,
		Scope: ScopeModel, Retryable: true, RuleSource: "builtin", RuleID: "gemini.model_quota",
		CooldownHint: 86399 * time.Second, RetryHint: 86399 * time.Second, RetryHintSource: HintSourceBody}
}

// A long model-scoped quota locks that model on that connection for
// 23 h 59 m 59 s, with model_lockout disabled; the connection is not
// cooled, other models and other connections keep flowing.
func TestModelScopedQuotaIsAModelLockout(t *testing.T) {
	te := newTestEngine(t, DefaultSettings()) // model_lockout.enabled false
	now := te.clock.Now()
	te.fail(t, geminiDaily("key-a", "gemini-2.5-flash"))
	wantExcluded(t, te, "openai", "key-a", "gemini-2.5-flash", ExclusionModelLockout, now.Add(23*time.Hour+59*time.Minute+59*time.Second))
	wantEligible(t, te, "openai", "key-a", "gemini-2.5-pro")
	wantEligible(t, te, "openai", "key-b", "gemini-2.5-flash")
	if _, cooled := te.cooldowns.get("openai", "key-a"); cooled {
		t.Fatal("a model-scoped quota cooled the connection")
	}
	if s := te.breakers.Peek("openai"); s.FailureCount != 0 {
		t.Fatal("a model-scoped quota counted toward the breaker")
	}
	// Capped at 24 h, not at max_cooldown_ms (30 min).
	o := geminiDaily("key-b", "gemini-2.5-pro")
	o.CooldownHint, o.RetryHint = 3*24*time.Hour, 3*24*time.Hour
	te.fail(t, o)
	wantExcluded(t, te, "openai", "key-b", "gemini-2.5-pro", ExclusionModelLockout, now.Add(24*time.Hour))
	// It survives a restart.
	again := reopen(t, te.clock, te.store, DefaultSettings())
	wantExcluded(t, again, "openai", "key-a", "gemini-2.5-flash", ExclusionModelLockout, now.Add(86399*time.Second))
}

// A short model-scoped hint is pacing: no lockout (with lockout off), no
// connection cooldown. The pacing bound is the connection's max_wait
// override, else request_queue.max_wait_ms (30 s).
func TestModelScopedShortHintIsPacing(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	o := geminiDaily("key-a", "gemini-2.5-flash")
	o.CooldownHint, o.RetryHint = 30*time.Second, 30*time.Second
	te.fail(t, o)
	wantEligible(t, te, "openai", "key-a", "gemini-2.5-flash")
	if _, cooled := te.cooldowns.get("openai", "key-a"); cooled {
		t.Fatal("a short model-scoped hint cooled the connection")
	}
	o.CooldownHint = 31 * time.Second
	te.fail(t, o)
	wantExcluded(t, te, "openai", "key-a", "gemini-2.5-flash", ExclusionModelLockout, te.clock.Now().Add(31*time.Second))

	// A connection whose max_wait is 2 min paces a 90 s hint.
	specs := testProviders()
	specs[0].Connections[0].MaxWait = 2 * time.Minute
	clock := clocktest.NewClock(engEpoch)
	e, err := New(context.Background(), Options{Clock: clock, Store: newMemStore(clock), Providers: specs})
	if err != nil {
		t.Fatal(err)
	}
	o.CooldownHint = 90 * time.Second
	if err := e.RecordFailure(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if ex, excluded := e.Peek("openai", "key-a", "gemini-2.5-flash"); excluded {
		t.Fatalf("a 90 s hint within the connection's 2 min max_wait locked the model: %+v", ex)
	}
	// The quota family is locked when the provider declares one.
	o = geminiDaily("key-b", "gpt-5-codex")
	te.fail(t, o)
	wantExcluded(t, te, "openai", "key-b", "gpt-5-mini", ExclusionModelLockout, te.clock.Now().Add(86399*time.Second))
	wantEligible(t, te, "openai", "key-b", "gpt-4o")
}

// Window gate, engine level: a lone apikey connection failing once a
// second trips the gate at the 15th failure; a burst of concurrent
// identical failures counts once.
func TestEngineWindowGateLoneConnection(t *testing.T) {
	s := DefaultSettings()
	s.ProviderCooldown.Enabled = true
	te := newTestEngine(t, s)
	for i := 1; i <= 15; i++ {
		o := http429("openai", "key-a", "gpt-4o")
		o.Started = te.clock.Now().Add(-300 * time.Millisecond)
		te.fail(t, o)
		cooling, until := te.gate.Cooling("openai")
		if i < 15 && cooling {
			t.Fatalf("gate cooling after %d failures", i)
		}
		if i == 15 {
			if !cooling || until.Sub(te.clock.Now()) != 10*time.Minute {
				t.Fatalf("15th failure: cooling %v for %v, want 10m", cooling, until.Sub(te.clock.Now()))
			}
			wantExcluded(t, te, "openai", "key-b", "gpt-4o", ExclusionProviderCooldown, until)
		}
		te.clock.Advance(time.Second)
	}

	// Without a dispatch time, failures inside the anti-herd burst of the
	// first (the connection still cooling from it) count once.
	te2 := newTestEngine(t, s)
	for range 20 {
		te2.fail(t, http429("openai", "key-a", "gpt-4o"))
	}
	if n := len(te2.gate.Snapshot("openai").Failures); n != 1 {
		t.Fatalf("a burst of 20 concurrent 429s counted %d times, want 1", n)
	}
	te2.clock.Advance(3 * time.Second) // the 3 s cooldown ended
	te2.fail(t, http429("openai", "key-a", "gpt-4o"))
	if n := len(te2.gate.Snapshot("openai").Failures); n != 2 {
		t.Fatalf("a failure after the burst counted %d in all, want 2", n)
	}
}

// provider_cooldown per-profile settings reach the gate.
func TestWindowGateSettingsPatch(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	s, err := te.UpdateSettings(context.Background(), []byte(`{"provider_cooldown": {"enabled": true,
		"apikey": {"failure_threshold": 3, "failure_window_ms": 60000, "cooldown_ms": 500}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if g := s.ProviderCooldown.APIKey; g.FailureThreshold != 3 || g.FailureWindowMS != 60_000 || g.CooldownMS != 1_000 {
		t.Fatalf("patched gate settings %+v (cooldown clamps to 1 s)", g)
	}
	for i := range 3 {
		te.fail(t, http503("openai", "key-a", "gpt-4o"))
		te.clock.Advance(time.Second)
		_ = i
	}
	if cooling, _ := te.gate.Cooling("openai"); cooling {
		t.Fatal("3 failures over 3 s tripped, but the last is 1 s old and cooling lasts 1 s")
	}
	if _, err := te.UpdateSettings(context.Background(), []byte(`{"provider_cooldown": {"oauth": {"failure_window_ms": -1}}}`)); err == nil {
		t.Error("a negative window was accepted")
	}
}

func TestToolLimitLearning(t *testing.T) {
	te := newTestEngine(t, lockoutOn())
	ctx := context.Background()
	if _, ok := te.ToolLimit("openai", "gpt-4o"); ok {
		t.Fatal("a limit before any refusal")
	}
	te.RecordToolsSucceeded("openai", "gpt-4o", 40)
	te.RecordToolsSucceeded("openai", "gpt-4o", 90)
	refusal := Outcome{Provider: "openai", Connection: "key-a", Model: "gpt-4o", Status: 400, Reason: ReasonToolLimit,
		Scope: ScopeModel, Retryable: true, RuleSource: "builtin", RuleID: "tools.too_many", Tools: 150,
		Message: "upstream 400: too many tools"}
	te.fail(t, refusal)
	if n, ok := te.ToolLimit("openai", "gpt-4o"); !ok || n != 90 {
		t.Fatalf("after 90 ok and 150 refused: limit %d %v, want 90", n, ok)
	}
	// The refusal locks nothing else: the model, with few tools, flows.
	wantEligible(t, te, "openai", "key-a", "gpt-4o")
	if _, cooled := te.cooldowns.get("openai", "key-a"); cooled {
		t.Fatal("a tool-limit refusal cooled the connection")
	}
	// A stated limit below the refused count wins.
	refusal.Tools, refusal.Message = 129, "upstream 400: Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 129 instead."
	te.fail(t, refusal)
	if n, _ := te.ToolLimit("openai", "gpt-4o"); n != 128 {
		t.Fatalf("stated limit: %d, want 128", n)
	}
	// Nothing known: failing − 1.
	refusal.Model, refusal.Tools, refusal.Message = "o3", 64, "upstream 400: too many tools"
	te.fail(t, refusal)
	if n, _ := te.ToolLimit("openai", "o3"); n != 63 {
		t.Fatalf("no success known: %d, want 63", n)
	}
	// A success above the limit raises it; persisted across a restart.
	te.RecordToolsSucceeded("openai", "o3", 70)
	again := reopen(t, te.clock, te.store, lockoutOn())
	if n, _ := again.ToolLimit("openai", "o3"); n != 70 {
		t.Fatalf("after a 70-tool success and a restart: %d, want 70", n)
	}
	list := again.ToolLimits()
	if len(list) != 2 || list[0].Model != "gpt-4o" || list[0].Failing != 129 || list[1].Model != "o3" || list[1].Failing != 71 {
		t.Fatalf("ToolLimits = %+v", list)
	}
	if ok, err := again.ClearToolLimit(ctx, "openai", "o3"); !ok || err != nil {
		t.Fatalf("ClearToolLimit = %v %v", ok, err)
	}
	if _, ok := reopen(t, te.clock, te.store, lockoutOn()).ToolLimit("openai", "o3"); ok {
		t.Fatal("a cleared limit came back after a restart")
	}
}

func TestParseToolLimitText(t *testing.T) {
	for text, want := range map[string]int{
		"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 150 instead.":                                 128,
		"You may not include more than 128 tools in your request.":                                                                                              128,
		"The GenerateContentRequest proto is invalid:\n  * tools[0].function_declarations: [FIELD_INVALID] At most 512 function declarations can be specified.": 512,
		"a maximum of 64 tools is supported": 64,
		"too many tools":                     0,
	} {
		got, ok := parseToolLimitText(text)
		if got != want || ok != (want > 0) {
			t.Errorf("ParseToolLimitText(%q) = %d %v, want %d", text, got, ok, want)
		}
	}
}

func TestEmergencyFallback(t *testing.T) {
	specs := testProviders()
	specs[0].Models = []string{"gpt-4o", "gpt-4o-mini"}
	clock := clocktest.NewClock(engEpoch)
	s := DefaultSettings()
	s.EmergencyFallback = EmergencyFallbackSettings{Enabled: false, Targets: []string{"openai/gpt-4o-mini"}}
	e, err := New(context.Background(), Options{Clock: clock, Store: newMemStore(clock), Providers: specs, Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	te := &testEngine{Engine: e, clock: clock}
	if te.EmergencyTargets() != nil {
		t.Fatal("targets while disabled")
	}
	ctx := context.Background()
	if _, err := te.UpdateSettings(ctx, []byte(`{"emergency_fallback": {"enabled": true}}`)); err != nil {
		t.Fatal(err)
	}
	if got := te.EmergencyTargets(); len(got) != 1 || got[0] != "openai/gpt-4o-mini" {
		t.Fatalf("EmergencyTargets = %v", got)
	}
	for _, bad := range []string{`["openai/o9"]`, `["nope/gpt-4o"]`, `["gpt-4o"]`} {
		_, err := te.UpdateSettings(ctx, []byte(`{"emergency_fallback": {"targets": `+bad+`}}`))
		if !errors.Is(err, ErrInvalidSettings) || !strings.Contains(err.Error(), "emergency_fallback.targets[0]") {
			t.Errorf("targets %s: %v, want a 400 naming the field", bad, err)
		}
	}
	if got := te.Settings().EmergencyFallback.Targets; len(got) != 1 {
		t.Fatalf("a refused PATCH changed the targets: %v", got)
	}

	// Cooldowns, lockouts and the window gate are bypassed ...
	te.fail(t, http429("openai", "key-a", "gpt-4o-mini"))
	te.fail(t, geminiDaily("key-b", "gpt-4o-mini"))
	if _, excluded := te.Check("openai", "key-a", "gpt-4o-mini"); !excluded {
		t.Fatal("setup: key-a not cooling")
	}
	for _, c := range []string{"key-a", "key-b"} {
		if ex, excluded := te.EmergencyCheck("openai", c, "gpt-4o-mini"); excluded {
			t.Errorf("%s: emergency check excluded by %+v", c, ex)
		}
	}
	// ... a terminal state and an OPEN breaker are not.
	te.fail(t, credits402("openai", "key-a"))
	if ex, excluded := te.EmergencyCheck("openai", "key-a", "gpt-4o-mini"); !excluded || ex.Reason != ExclusionUnavailable {
		t.Errorf("terminal connection: %+v %v", ex, excluded)
	}
	for range 12 {
		te.fail(t, http503("openai", "key-b", "gpt-4o"))
	}
	if ex, excluded := te.EmergencyCheck("openai", "key-b", "gpt-4o-mini"); !excluded || ex.Reason != ExclusionCircuitOpen {
		t.Errorf("open breaker: %+v %v", ex, excluded)
	}
	// The breaker's probe rule holds: after the reset one probe goes.
	clock.Advance(30 * time.Second)
	if _, excluded := te.EmergencyCheck("openai", "key-b", "gpt-4o-mini"); excluded {
		t.Error("the probe was refused")
	}
	if ex, excluded := te.EmergencyCheck("openai", "key-b", "gpt-4o-mini"); !excluded || ex.Reason != ExclusionCircuitOpen {
		t.Errorf("a second probe was allowed: %+v %v", ex, excluded)
	}

	// An unknown target in the base settings is refused at start.
	s.EmergencyFallback.Targets = []string{"openai/o9"}
	if _, err := New(ctx, Options{Clock: clock, Store: newMemStore(clock), Providers: specs, Settings: s}); err == nil ||
		!strings.Contains(err.Error(), "emergency_fallback.targets[0]") {
		t.Errorf("New with an unknown target: %v", err)
	}
	// A validator hook replaces the check.
	s.EmergencyFallback.Targets = []string{"any/thing"}
	if _, err := New(ctx, Options{Clock: clock, Store: newMemStore(clock), Providers: specs, Settings: s,
		ValidateTarget: func(string) error { return nil }}); err != nil {
		t.Errorf("New with a permissive validator: %v", err)
	}
}

func TestStreamErrorStatus(t *testing.T) {
	for _, tt := range []struct {
		typ, code string
		want      int
	}{
		{"rate_limit_error", "", 429},
		{"overloaded_error", "", 529},
		{"api_error", "", 500},
		{"invalid_request_error", "", 400},
		{"authentication_error", "", 401},
		{"billing_error", "", 402},
		{"Overloaded_Error", "", 529},
		{"server_error", "", 500},
		{"something_new", "", 502},
		{"", "", 502},
		{"", "429", 429},
		{"RESOURCE_EXHAUSTED", "", 429},
		{"api_error", "503", 503},
		{"api_error", "200", 500},
	} {
		if got := StreamErrorStatus(tt.typ, tt.code); got != tt.want {
			t.Errorf("StreamErrorStatus(%q, %q) = %d, want %d", tt.typ, tt.code, got, tt.want)
		}
	}
}

// An empty answer is a failure of the model, not of the connection or
// the provider; with lockout enabled it locks the exact model.
func TestEmptyResponseRecording(t *testing.T) {
	s := lockoutOn()
	s.ProviderCooldown.Enabled = true
	te := newTestEngine(t, s)
	o := EmptyResponseOutcome("openai", "key-a", "gpt-4o", ProfileAPIKey, 200)
	if !o.Retryable || o.Success || o.Scope != ScopeModel {
		t.Fatalf("EmptyResponseOutcome = %+v", o)
	}
	te.fail(t, o)
	wantExcluded(t, te, "openai", "key-a", "gpt-4o", ExclusionModelLockout, te.clock.Now().Add(2*time.Minute))
	wantEligible(t, te, "openai", "key-a", "gpt-4o-mini")
	if _, cooled := te.cooldowns.get("openai", "key-a"); cooled {
		t.Fatal("an empty answer cooled the connection")
	}
	if te.breakers.Peek("openai").FailureCount != 0 || len(te.gate.Snapshot("openai").Failures) != 0 {
		t.Fatal("an empty answer counted toward the breaker or the window gate")
	}
	// Lockout off: nothing is locked, nothing cools.
	te2 := newTestEngine(t, DefaultSettings())
	te2.fail(t, o)
	wantEligible(t, te2, "openai", "key-a", "gpt-4o")
}

func TestCoolingDownLine(t *testing.T) {
	now := engEpoch
	got := CoolingDownLine([]ExcludedTarget{
		{Provider: "alpha", Connection: "a1", Model: "m1", Reason: ExclusionConnectionCooldown, Detail: "rate_limit", Until: now.Add(6500 * time.Millisecond)},
		{Provider: "beta", Connection: "b1", Model: "m2", Reason: ExclusionUnavailable, Detail: "credits_exhausted"},
		{Provider: "gamma", Connection: "g1", Model: "m3", Reason: ExclusionCircuitOpen, Detail: "OPEN", Until: now.Add(30 * time.Second)},
		{Provider: "delta", Connection: "d1", Model: "m4", Reason: ExclusionModelLockout, Until: now.Add(-time.Second)},
	}, now)
	want := "all_targets_cooling_down: 4 targets excluded: alpha/a1/m1 connection_cooldown (rate_limit) 7s left; " +
		"beta/b1/m2 unavailable (credits_exhausted) terminal; gamma/g1/m3 circuit_open (OPEN) 30s left; delta/d1/m4 model_lockout 0s left"
	if got != want {
		t.Fatalf("CoolingDownLine =\n%s\nwant\n%s", got, want)
	}
	if got := CoolingDownLine(nil, now); got != "all_targets_cooling_down: 0 targets excluded" {
		t.Errorf("empty: %q", got)
	}
}

// The window gate has no connection-level entries any more: a connection
// that failed is excluded only by its own §2 cooldown, and a snapshot an
// older version wrote with "connections" still loads.
func TestWindowGateHasNoConnectionEntries(t *testing.T) {
	s := DefaultSettings()
	s.ProviderCooldown.Enabled = true
	te := newTestEngine(t, s)
	te.fail(t, http503("openai", "key-a", "gpt-4o")) // provider-scoped: no connection cooldown
	wantEligible(t, te, "openai", "key-a", "gpt-4o")
	raw, ok, _ := te.store.Get(context.Background(), keyWindowGate+"openai")
	if !ok || strings.Contains(string(raw), "connections") || !strings.Contains(string(raw), `"last"`) {
		t.Fatalf("persisted gate %s", raw)
	}
	old := `{"failures":{"key-a@x":"` + engEpoch.Format(time.RFC3339Nano) + `"},"connections":{"key-a":{"level":3,"until":"` +
		engEpoch.Add(time.Hour).Format(time.RFC3339Nano) + `","last_failure_at":"` + engEpoch.Format(time.RFC3339Nano) + `"}}}`
	store := newMemStore(te.clock)
	if err := store.Put(context.Background(), keyWindowGate+"openai", []byte(old), 0); err != nil {
		t.Fatal(err)
	}
	again := reopen(t, te.clock, store, s)
	wantEligible(t, again, "openai", "key-a", "gpt-4o")
	if n := len(again.gate.Snapshot("openai").Failures); n != 1 {
		t.Fatalf("restored failures %d, want 1", n)
	}
}

func TestModelQuotaWait(t *testing.T) {
	rule := geminiDaily("key-a", "m")
	for _, tt := range []struct {
		name string
		o    Outcome
		want time.Duration
		ok   bool
	}{
		{"rule cooldown", rule, 86399 * time.Second, true},
		{"upstream hint when the rule gives none", func() Outcome { o := rule; o.CooldownHint = 0; o.RetryHint = 90 * time.Second; return o }(), 90 * time.Second, true},
		{"rate limit", func() Outcome { o := rule; o.Reason = ReasonRateLimit; return o }(), 86399 * time.Second, true},
		{"no wait", func() Outcome { o := rule; o.CooldownHint, o.RetryHint = 0, 0; return o }(), 0, false},
		{"connection scope", func() Outcome { o := rule; o.Scope = ScopeConnection; return o }(), 0, false},
		{"default classification", func() Outcome { o := rule; o.RuleSource = DefaultRuleSource; return o }(), 0, false},
		{"not a quota", func() Outcome { o := rule; o.Reason = ReasonNotFound; return o }(), 0, false},
		{"no model", func() Outcome { o := rule; o.Model = ""; return o }(), 0, false},
		{"typed body delay when nothing else", func() Outcome {
			o := rule
			o.CooldownHint, o.RetryHint, o.BodyRetryHint, o.BodyRetryHintTyped = 0, 0, 86399*time.Second, true
			return o
		}(), 86399 * time.Second, true},
		{"a prose body delay does not count", func() Outcome {
			o := rule
			o.CooldownHint, o.RetryHint, o.BodyRetryHint = 0, 0, 86399*time.Second
			return o
		}(), 0, false},
	} {
		if got, ok := modelQuotaWait(tt.o); got != tt.want || ok != tt.ok {
			t.Errorf("%s: ModelQuotaWait = %v %v, want %v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// ModelQuotaLockout is the one rule of a model-scoped quota: the wait
// beyond the connection's pacing bound (request_queue.max_wait_ms, 30 s,
// or the connection's max_wait override) becomes a lockout capped at
// 24 h, and RecordFailure applies exactly what it says.
func TestModelQuotaLockoutIsTheRecordedRule(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	o := geminiDaily("key-a", "gemini-2.5-flash")
	o.CooldownHint, o.RetryHint, o.BodyRetryHint, o.BodyRetryHintTyped = 0, 0, 86399*time.Second, true
	if d, ok := te.ModelQuotaLockout(o); !ok || d != 86399*time.Second {
		t.Fatalf("typed 86399 s: %v %v, want a lockout of 86399 s", d, ok)
	}
	te.fail(t, o)
	wantExcluded(t, te, "openai", "key-a", "gemini-2.5-flash", ExclusionModelLockout, te.clock.Now().Add(86399*time.Second))
	if _, cooled := te.cooldowns.get("openai", "key-a"); cooled {
		t.Fatal("the model lockout cooled the connection")
	}
	o.BodyRetryHint = 30 * time.Second // at the bound: pacing
	if d, ok := te.ModelQuotaLockout(o); ok {
		t.Fatalf("30 s is within the 30 s pacing bound, got a lockout of %v", d)
	}
	o.BodyRetryHint = 3 * 24 * time.Hour
	if d, ok := te.ModelQuotaLockout(o); !ok || d != 24*time.Hour {
		t.Fatalf("3 days: %v %v, want the 24 h cap", d, ok)
	}
	o.Provider = "unknown" // an unconfigured provider has the settings' bound
	if d, ok := te.ModelQuotaLockout(o); !ok || d != 24*time.Hour {
		t.Fatalf("unknown provider: %v %v", d, ok)
	}
}

// BreakerState reads the state lazily: CLOSED for an unknown provider,
// DEGRADED at the degradation threshold, OPEN at the failure threshold,
// HALF_OPEN once the reset timeout passed (no probe claimed).
func TestBreakerStateAccessor(t *testing.T) {
	te := newTestEngine(t, DefaultSettings())
	if st := te.BreakerState("openai"); st != StateClosed {
		t.Fatalf("fresh: %s", st)
	}
	fail := Outcome{Provider: "openai", Connection: "key-a", Model: "gpt-4o", Status: 503, Reason: ReasonServerError, Retryable: true}
	for range 7 {
		te.fail(t, fail)
	}
	if st := te.BreakerState("openai"); st != StateDegraded {
		t.Fatalf("after 7 apikey failures: %s, want DEGRADED", st)
	}
	for range 5 {
		te.fail(t, fail)
	}
	if st := te.BreakerState("openai"); st != StateOpen {
		t.Fatalf("after 12 apikey failures: %s, want OPEN", st)
	}
	te.clock.Advance(30 * time.Second)
	if st := te.BreakerState("openai"); st != StateHalfOpen {
		t.Fatalf("after the 30 s reset: %s, want HALF_OPEN", st)
	}
	if _, excluded := te.Check("openai", "key-b", "gpt-4o"); excluded {
		t.Fatal("BreakerState claimed the probe")
	}
}
