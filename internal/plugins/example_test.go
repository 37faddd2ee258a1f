package plugins

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// acmeInput is a 429 carrying the example plugin's quota headers.
func acmeInput(remaining, reset string) abi.ErrorInput {
	h := map[string]string{"content-type": "application/json", "x-acme-quota-remaining": remaining}
	if reset != "" {
		h["x-acme-quota-reset"] = reset
	}
	return abi.ErrorInput{Provider: "acme", Connection: "acme/main", Model: "acme-large", Profile: "apikey",
		Status: 429, Headers: h, Body: `{"error":{"message":"quota exhausted"}}`}
}

func TestExamplePluginClassifies(t *testing.T) {
	th := newTestHost(t, Options{})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{{Name: "acme-quota", Path: guest(t, "example"), Hooks: []string{"classify"}}}); err != nil {
		t.Fatal(err)
	}
	epochIn90s := "1772366490" // testNow + 90 s: the guest reads the host's fake clock
	tests := []struct {
		name    string
		in      abi.ErrorInput
		want    abi.Decision
		decided bool
	}{
		{"exhausted, reset in 30 s", acmeInput("0", "30"),
			abi.Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 30000, RuleID: "acme.quota_header"}, true},
		{"exhausted, reset at Unix time", acmeInput("0", epochIn90s),
			abi.Decision{Reason: "quota_exhausted", Scope: "connection", CooldownMS: 90000, RuleID: "acme.quota_header"}, true},
		{"exhausted, no reset", acmeInput("0", ""),
			abi.Decision{Reason: "quota_exhausted", Scope: "connection", RuleID: "acme.quota_header"}, true},
		{"quota left", acmeInput("7", "30"), abi.Decision{}, false},
		{"no quota headers", abi.ErrorInput{Provider: "acme", Status: 503}, abi.Decision{}, false},
	}
	for _, tt := range tests {
		got, decided := th.Classify(ctx, tt.in)
		if decided != tt.decided || got != tt.want {
			t.Errorf("%s: Classify = %+v, %v; want %+v, %v", tt.name, got, decided, tt.want, tt.decided)
		}
	}
	// The hook is classify only: restate and on_request run no plugin.
	if _, ok := th.Restate(ctx, acmeInput("0", "30")); ok {
		t.Error("Restate answered, want no plugin for the restate hook")
	}

	st := th.status(t, "acme-quota")
	if st.Calls != uint64(len(tests)) || st.Errors != 0 {
		t.Errorf("calls, errors = %d, %d; want %d, 0", st.Calls, st.Errors, len(tests))
	}
	if st.P99Micros <= 0 {
		t.Errorf("p99_us = %d, want > 0 after %d calls", st.P99Micros, st.Calls)
	}
	if st.ABIVersion != "1.2" || st.Encoding != "binary" || st.Deadline != "instrumented" || strings.Join(st.Hooks, ",") != "classify" ||
		strings.Join(st.Features, ",") != "classify,binary" || !st.LoadedAt.Equal(testNow) || st.LastError != "" {
		t.Errorf("status = %+v", st)
	}
	// The guest's log calls land in the plugin's sub-logger.
	logs := th.logs.String()
	for _, want := range []string{"test.plugin.acme-quota: quota exhausted on connection acme/main; cooling down for 30s",
		"test.plugin.acme-quota: plugin loaded"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

func TestExamplePluginReloadAndUnload(t *testing.T) {
	th := newTestHost(t, Options{})
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rules.wasm")
	copyFile(t, guest(t, "example"), path)
	specs := []Spec{{Name: "rules", Path: path, Hooks: []string{"classify"}}}
	if err := th.Load(ctx, specs); err != nil {
		t.Fatal(err)
	}
	if d, ok := th.Classify(ctx, acmeInput("0", "30")); !ok || d.RuleID != "acme.quota_header" {
		t.Fatalf("Classify = %+v, %v; want the example's decision", d, ok)
	}
	first := th.status(t, "rules")

	// Loading the same specs keeps the plugin, its counters and load time.
	th.clock.Advance(time.Minute)
	if err := th.Load(ctx, specs); err != nil {
		t.Fatal(err)
	}
	if st := th.status(t, "rules"); st.Calls != 1 || !st.LoadedAt.Equal(first.LoadedAt) {
		t.Fatalf("after an unchanged Load: %+v, want calls 1 and loaded_at %v", st, first.LoadedAt)
	}

	// Replacing the file and reloading switches to the new guest.
	copyFile(t, guest(t, "faulty"), path)
	if err := th.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	st := th.status(t, "rules")
	if st.SHA256 == first.SHA256 || st.Calls != 0 || !st.LoadedAt.Equal(testNow.Add(time.Minute)) {
		t.Fatalf("after Reload: %+v, want a new sha256, calls 0, loaded_at +1m", st)
	}
	if d, ok := th.Classify(ctx, acmeInput("0", "30")); !ok || d.RuleID != "faulty.ok" {
		t.Fatalf("Classify after reload = %+v, %v; want the faulty guest's decision", d, ok)
	}

	// A broken file fails the reload and keeps the running version.
	if err := os.WriteFile(path, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := th.Reload(ctx)
	if err == nil || !strings.Contains(err.Error(), `plugin "rules"`) || !strings.Contains(err.Error(), "compile") {
		t.Fatalf("Reload of a broken file = %v, want a compile error naming the plugin", err)
	}
	if d, ok := th.Classify(ctx, acmeInput("0", "30")); !ok || d.RuleID != "faulty.ok" {
		t.Fatalf("Classify after a failed reload = %+v, %v; want the previous version to keep serving", d, ok)
	}
	if st := th.status(t, "rules"); !strings.Contains(st.LastError, "compile") {
		t.Fatalf("last_error = %q, want the failed reload", st.LastError)
	}

	// Loading no specs unloads it.
	if err := th.Load(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if l := th.List(); len(l) != 0 {
		t.Fatalf("List after unload = %+v, want empty", l)
	}
	if _, ok := th.Classify(ctx, acmeInput("0", "30")); ok {
		t.Fatal("Classify answered after unload")
	}
	if !strings.Contains(th.logs.String(), "plugin unloaded") {
		t.Error("unload not logged")
	}
}

// TestConcurrentCallsAndReload runs hooks from many goroutines while the
// plugin set is reloaded; some calls trap, so instances are discarded and
// replaced under load. It checks every answer and the counters.
func TestConcurrentCallsAndReload(t *testing.T) {
	th := newTestHost(t, Options{MaxIdleInstances: 2})
	ctx := context.Background()
	specs := []Spec{{Name: "faulty", Path: guest(t, "faulty"), Hooks: []string{"classify"}},
		{Name: "acme", Path: guest(t, "example"), Hooks: []string{"classify"}}}
	if err := th.Load(ctx, specs); err != nil {
		t.Fatal(err)
	}
	const workers, perWorker = 6, 25
	var wg sync.WaitGroup
	var panics atomic.Uint64
	errs := make(chan string, workers*perWorker+3)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				in := acmeInput("0", "30")
				in.Model = "pass" // faulty declines; the example decides
				want := "acme.quota_header"
				switch n := w*perWorker + i; {
				case n%5 == 0:
					in.Model = "plain" // faulty decides first
					want = "faulty.ok"
				case n%7 == 0:
					in.Model = "panic" // faulty traps; the example decides
					panics.Add(1)
				}
				if d, ok := th.Classify(ctx, in); !ok || d.RuleID != want {
					errs <- in.Model + ": got " + d.RuleID + ", want " + want
				}
			}
		})
	}
	// Reload with unchanged files while calls run: nothing changes.
	wg.Go(func() {
		for range 3 {
			if err := th.Reload(ctx); err != nil {
				errs <- err.Error()
			}
		}
	})
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	st := th.status(t, "faulty")
	if st.Calls != workers*perWorker || st.Errors != panics.Load() || panics.Load() == 0 {
		t.Errorf("faulty calls, errors = %d, %d; want %d, %d", st.Calls, st.Errors, workers*perWorker, panics.Load())
	}
	if st := th.status(t, "acme"); st.Errors != 0 {
		t.Errorf("acme errors = %d, want 0", st.Errors)
	}
	if got := len(th.set.Load().byName["acme"].pool); got > 2 {
		t.Errorf("idle instances = %d, want at most MaxIdleInstances 2", got)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
