package admission

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCheckQueueDepth(t *testing.T) {
	tests := []struct {
		queued, depth int
		admit         bool
	}{
		{0, 0, true},
		{50, 0, true},
		{3, -1, true},
		{0, 1, true},
		{1, 2, true},
		{99_999, 100_000, true},
		{1, 1, false},
		{2, 2, false},
		{5, 2, false},
	}
	for _, tt := range tests {
		err := CheckQueueDepth(tt.queued, tt.depth, "key-a")
		if tt.admit {
			if err != nil {
				t.Errorf("CheckQueueDepth(%d, %d) = %v, want admit", tt.queued, tt.depth, err)
			}
			continue
		}
		e := wantCode(t, err, CodeQueueFull, http.StatusTooManyRequests)
		for _, part := range []string{"max_queue_depth", `"key-a"`} {
			if !strings.Contains(e.Message, part) {
				t.Errorf("CheckQueueDepth(%d, %d) message %q does not name %s", tt.queued, tt.depth, e.Message, part)
			}
		}
		if e.RetryAfter < time.Second {
			t.Errorf("RetryAfter = %v, want ≥ 1s", e.RetryAfter)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = CheckQueueDepth(1, 2, "key-a") }); n != 0 {
		t.Errorf("admitting allocates %v times", n)
	}
}

func TestResolveBudgets(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	n := func(v int) *int { return &v }
	tests := []struct {
		name                     string
		env, persisted, override Budgets
		want                     Resolved
	}{
		{"built-in defaults", Budgets{}, Budgets{}, Budgets{}, Resolved{30 * time.Second, 600 * time.Second, 0}},
		{"env gives the default", Budgets{MaxWait: d(10 * time.Second), ExecutionMaxWait: d(time.Minute), MaxQueueDepth: n(50)}, Budgets{}, Budgets{},
			Resolved{10 * time.Second, time.Minute, 50}},
		{"persisted wins over env", Budgets{MaxWait: d(10 * time.Second), MaxQueueDepth: n(50)}, Budgets{MaxWait: d(20 * time.Second), MaxQueueDepth: n(0)}, Budgets{},
			Resolved{20 * time.Second, 600 * time.Second, 0}},
		{"override wins over both", Budgets{MaxWait: d(10 * time.Second)}, Budgets{MaxWait: d(20 * time.Second), ExecutionMaxWait: d(time.Hour)}, Budgets{MaxWait: d(5 * time.Second), MaxQueueDepth: n(7)},
			Resolved{5 * time.Second, time.Hour, 7}},
		{"clamped low", Budgets{}, Budgets{MaxWait: d(0), ExecutionMaxWait: d(-time.Second), MaxQueueDepth: n(-3)}, Budgets{},
			Resolved{time.Millisecond, time.Millisecond, 0}},
		{"clamped high", Budgets{}, Budgets{}, Budgets{MaxWait: d(48 * time.Hour), ExecutionMaxWait: d(25 * time.Hour), MaxQueueDepth: n(200_000)},
			Resolved{24 * time.Hour, 24 * time.Hour, 100_000}},
	}
	for _, tt := range tests {
		if got := ResolveBudgets(tt.env, tt.persisted, tt.override); got != tt.want {
			t.Errorf("%s: ResolveBudgets = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestBudgetPrecedenceThroughManager checks env < persisted < override on
// the effective per-connection budgets.
func TestBudgetPrecedenceThroughManager(t *testing.T) {
	// RATE_LIMIT_MAX_WAIT_MS=10000, RATE_LIMIT_EXECUTION_MAX_WAIT_MS=120000
	// and RATE_LIMIT_MAX_QUEUE_DEPTH=40, as the configuration reads them.
	env := Defaults{Budgets: Budgets{MaxWait: new(10 * time.Second), ExecutionMaxWait: new(120 * time.Second), MaxQueueDepth: new(40)}}
	s := SettingsFrom(env, Budgets{MaxWait: new(20 * time.Second)}, true, true)
	plain := apikey("p", "plain")
	over := apikey("p", "over")
	over.Overrides = Overrides{MaxWait: 5 * time.Second, ExecutionMaxWait: 48 * time.Hour, MaxQueueDepth: -1}
	m, _ := newManager(s, plain, over)
	if got := statsOf(t, m, "p", "plain"); got.MaxWaitMS != 20_000 || got.ExecutionMaxWaitMS != 120_000 || got.MaxQueueDepth != 40 {
		t.Errorf("plain budgets = %d/%d/%d, want persisted 20000, env 120000, env 40", got.MaxWaitMS, got.ExecutionMaxWaitMS, got.MaxQueueDepth)
	}
	if got := statsOf(t, m, "p", "over"); got.MaxWaitMS != 5_000 || got.ExecutionMaxWaitMS != 24*3600*1000 || got.MaxQueueDepth != 0 {
		t.Errorf("override budgets = %d/%d/%d, want 5000, clamped 86400000, unbounded", got.MaxWaitMS, got.ExecutionMaxWaitMS, got.MaxQueueDepth)
	}
}

func TestErrorsAreLocalAndTyped(t *testing.T) {
	e := ExecutionTimeoutError("p", "key-a", 600*time.Second)
	if e.Code != CodeExecutionTimeout || e.Status != http.StatusGatewayTimeout || !strings.Contains(e.Message, "600000") {
		t.Errorf("ExecutionTimeoutError = %+v", e)
	}
	var target *Error
	if !errors.As(error(e), &target) || target.Error() != CodeExecutionTimeout+": "+e.Message {
		t.Errorf("Error() = %q", target.Error())
	}
}
