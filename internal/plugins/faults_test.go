package plugins

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/memstore"
	"github.com/breakwater-dev/breakwater/plugins/abi"
)

// TestFaultyPluginFallsThrough puts a misbehaving guest in front of the
// echo guest: every fault is counted, logged and skipped, and the next
// plugin (standing in for the built-in decision) still answers.
func TestFaultyPluginFallsThrough(t *testing.T) {
	skipUnderRace(t)
	th := newTestHost(t, Options{
		Store:       memstore.New(clocktest.NewClock(testNow)),
		CallTimeout: 300 * time.Millisecond, // the loop case waits this long
	})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{
		{Name: "faulty", Path: guest(t, "faulty"), Hooks: []string{"classify"}},
		{Name: "echo", Path: guest(t, "echo"), Hooks: []string{"classify"}},
	}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		model     string
		wantRule  string // prefix of the winning RuleID
		wantError string // in faulty's last_error; "" = no new error
	}{
		{"plain", "faulty.ok", ""},
		{"pass", "acme|", ""},
		{"panic", "acme|", "breakwater_classify trapped"},
		{"plain", "faulty.ok", ""}, // a fresh instance replaces the trapped one
		{"loop", "acme|", "breakwater_classify timed out after 300ms"},
		{"plain", "faulty.ok", ""},
		{"oom", "acme|", "breakwater_classify trapped"},
		{"badreason", "acme|", `unknown reason "sunny"`},
		{"plain", "faulty.ok", ""},
	}
	errors := uint64(0)
	for i, tt := range tests {
		in := acmeInput("0", "30")
		in.Model = tt.model
		d, ok := th.Classify(ctx, in)
		if !ok || !strings.HasPrefix(d.RuleID, tt.wantRule) {
			t.Fatalf("%d %s: Classify = %+v, %v; want RuleID %q...", i, tt.model, d, ok, tt.wantRule)
		}
		st := th.status(t, "faulty")
		if tt.wantError != "" {
			errors++
			if !strings.Contains(st.LastError, tt.wantError) {
				t.Errorf("%d %s: last_error = %q, want %q", i, tt.model, st.LastError, tt.wantError)
			}
		}
		if st.Calls != uint64(i+1) || st.Errors != errors {
			t.Errorf("%d %s: calls, errors = %d, %d; want %d, %d", i, tt.model, st.Calls, st.Errors, i+1, errors)
		}
	}
	logs := th.logs.String()
	for _, want := range []string{
		"test.plugin.faulty: hook failed; using the built-in decision: hook=classify",
		"faulty guest: deliberate panic", // the guest's stderr, logged by the host
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if st := th.status(t, "echo"); st.Errors != 0 {
		t.Errorf("echo errors = %d, want 0", st.Errors)
	}
}

// TestGarbageAnswers checks answers that are not JSON or point outside the
// guest's memory, from a guest written without the SDK.
func TestGarbageAnswers(t *testing.T) {
	skipUnderRace(t)
	th := newTestHost(t, Options{})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{{Name: "raw", Path: guest(t, "raw"), Hooks: []string{"classify", "on_request"}}}); err != nil {
		t.Fatal(err)
	}
	if d, ok := th.Classify(ctx, acmeInput("0", "30")); ok {
		t.Fatalf("Classify = %+v, want no decision from garbage", d)
	}
	st := th.status(t, "raw")
	if st.Encoding != "JSON" {
		t.Errorf("raw guest (no binary feature) encoding = %q, want JSON", st.Encoding)
	}
	if st.Errors != 1 || !strings.Contains(st.LastError, "breakwater_classify answered an invalid JSON answer") {
		t.Fatalf("after garbage: errors %d, last_error %q", st.Errors, st.LastError)
	}
	if a, ok := th.OnRequest(ctx, abi.RequestInfo{Model: "m", Path: "/v1/chat/completions"}); ok {
		t.Fatalf("OnRequest = %+v, want no action from an out-of-bounds answer", a)
	}
	st = th.status(t, "raw")
	if st.Errors != 2 || !strings.Contains(st.LastError, "breakwater_on_request answered out of bounds") {
		t.Fatalf("after out of bounds: errors %d, last_error %q", st.Errors, st.LastError)
	}
	if st.Calls != 2 {
		t.Fatalf("calls = %d, want 2", st.Calls)
	}
}

func TestLoadRejects(t *testing.T) {
	skipUnderRace(t)
	missing := filepath.Join(t.TempDir(), "missing.wasm")
	tests := []struct {
		name  string
		opts  Options
		specs func(t *testing.T) []Spec
		want  []string // substrings of the error
	}{
		{"missing file", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "gone", Path: missing}}
		}, []string{`plugin "gone"`, "no such file"}},
		{"unknown hook", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "x", Path: guest(t, "example"), Hooks: []string{"classfy"}}}
		}, []string{`plugin "x": unknown hook "classfy"`}},
		{"duplicate name", Options{}, func(t *testing.T) []Spec {
			p := guest(t, "example")
			return []Spec{{Name: "x", Path: p}, {Name: "x", Path: p}}
		}, []string{`plugin "x": duplicate name`}},
		{"name unsafe for a KV prefix", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "a/b", Path: guest(t, "example")}}
		}, []string{`plugin "a/b": name must be letters, digits`}},
		{"hook the guest lacks", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "acme", Path: guest(t, "example"), Hooks: []string{"restate"}}}
		}, []string{`plugin "acme"`, "hook restate is configured but the guest does not implement it (features: classify|binary)"}},
		{"wrong export signature", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "raw", Path: guest(t, "raw"), Hooks: []string{"restate"}}}
		}, []string{`plugin "raw"`, `export "breakwater_restate" has signature (i32) -> (i32), want (i32, i32) -> (i64)`}},
		{"ABI major mismatch", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "v2", Path: guest(t, "raw-v2"), Hooks: []string{"classify"}}}
		}, []string{`plugin "v2"`, "guest speaks ABI major 2, host speaks 1.2"}},
		{"WASI command", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "cmd", Path: guest(t, "raw-cmd")}}
		}, []string{`plugin "cmd"`, `exports "_start"`, "-buildmode=c-shared"}},
		{"KV required without a store", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "echo", Path: guest(t, "echo")}}
		}, []string{`plugin "echo"`, "guest requires features the host cannot provide: kv"}},
		{"memory limit below the guest's minimum", Options{MemoryLimitPages: 4}, func(t *testing.T) []Spec {
			return []Spec{{Name: "small", Path: guest(t, "example")}}
		}, []string{`plugin "small"`, "over limit of 4 pages"}},
		// Issue 19 item 9: a device ran the gateway out of memory, a FIFO
		// blocked start-up (and SIGTERM); both fail at once now.
		{"a device", Options{}, func(t *testing.T) []Spec {
			return []Spec{{Name: "zero", Path: "/dev/zero"}}
		}, []string{`plugin "zero": read /dev/zero: not a regular file (a character device)`}},
		{"a named pipe", Options{}, func(t *testing.T) []Spec {
			p := filepath.Join(t.TempDir(), "plugin.wasm")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			return []Spec{{Name: "fifo", Path: p}}
		}, []string{`plugin "fifo": read `, "not a regular file (a named pipe)"}},
		{"not wasm", Options{}, func(t *testing.T) []Spec {
			p := filepath.Join(t.TempDir(), "junk.wasm")
			if err := os.WriteFile(p, []byte("\x00asm junk"), 0o644); err != nil {
				t.Fatal(err)
			}
			return []Spec{{Name: "junk", Path: p}}
		}, []string{`plugin "junk"`, "compile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := newTestHost(t, tt.opts)
			ctx := context.Background()
			// A working plugin is loaded first: a failed Load must keep it.
			// (Under a tiny memory limit nothing loads.)
			keep := tt.opts.MemoryLimitPages == 0
			specs := tt.specs(t)
			if keep {
				if err := th.Load(ctx, []Spec{{Name: "keep", Path: guest(t, "example")}}); err != nil {
					t.Fatal(err)
				}
				specs = append(specs, Spec{Name: "keep", Path: guest(t, "example")})
			}
			err := th.Load(ctx, specs)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !keep {
				if l := th.List(); len(l) != 0 {
					t.Errorf("List after a failed Load = %+v, want empty", l)
				}
				return
			}
			if l := th.List(); len(l) != 1 || l[0].Name != "keep" {
				t.Errorf("List after a failed Load = %+v, want only the previous plugin", l)
			}
			if _, ok := th.Classify(ctx, acmeInput("0", "30")); !ok {
				t.Error("the previous plugin stopped answering")
			}
		})
	}
}

func TestCallerCancelledIsNotAPluginError(t *testing.T) {
	th := newTestHost(t, Options{})
	if err := th.Load(context.Background(), []Spec{{Name: "acme", Path: guest(t, "example")}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := th.Classify(ctx, acmeInput("0", "30")); ok {
		t.Fatal("Classify answered a cancelled caller")
	}
	if st := th.status(t, "acme"); st.Calls != 0 || st.Errors != 0 {
		t.Fatalf("calls, errors = %d, %d; want 0, 0", st.Calls, st.Errors)
	}
}

func TestClosedHost(t *testing.T) {
	th := newTestHost(t, Options{})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{{Name: "acme", Path: guest(t, "example")}}); err != nil {
		t.Fatal(err)
	}
	if err := th.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := th.Classify(ctx, acmeInput("0", "30")); ok {
		t.Error("Classify answered after Close")
	}
	if err := th.Load(ctx, nil); err == nil {
		t.Error("Load after Close succeeded")
	}
	if err := th.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
