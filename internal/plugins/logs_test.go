package plugins

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/redact"
)

// TestGuestLogsAreBounded replays issue 19 item 10: a guest could log
// without limit on every call. Each call logs at most MaxLogLinesPerCall
// lines (sdk.Log and stdout together), the plugin at most LogBurst lines
// at once and LogLinesPerSecond after that (on the host's clock); the rest
// is dropped and counted; every line is redacted.
func TestGuestLogsAreBounded(t *testing.T) {
	th := newTestHost(t, Options{Redactor: redact.New("configured-credential-value")})
	ctx := context.Background()
	if err := th.Load(ctx, []Spec{{Name: "faulty", Path: guest(t, "faulty"), Hooks: []string{"classify"}}}); err != nil {
		t.Fatal(err)
	}
	in := acmeInput("0", "30")
	in.Model = "spam"
	in.Body = `{"error":{"message":"Incorrect API key provided: sk-proj-AbC123dEf456GhI789jKl012mNo345 / configured-credential-value"}}`
	lines := func() int { return strings.Count(th.logs.String(), "spam") }

	if _, ok := th.Classify(ctx, in); ok {
		t.Fatal("spam declines")
	}
	if n := lines(); n != MaxLogLinesPerCall {
		t.Fatalf("one call logged %d lines, want %d", n, MaxLogLinesPerCall)
	}
	st := th.List()[0]
	if st.LogsDropped != 2000-MaxLogLinesPerCall {
		t.Fatalf("LogsDropped %d, want %d", st.LogsDropped, 2000-MaxLogLinesPerCall)
	}
	out := th.logs.String()
	if strings.Contains(out, "sk-proj-") || strings.Contains(out, "configured-credential-value") || !strings.Contains(out, redact.Mask) {
		t.Fatalf("guest log lines not redacted:\n%s", out[:min(len(out), 2000)])
	}

	// 20 calls at one instant: the bucket lets LogBurst lines through.
	for range 20 {
		th.Classify(ctx, in)
	}
	if n := lines(); n != LogBurst {
		t.Fatalf("after a burst of calls %d lines were logged, want the burst of %d", n, LogBurst)
	}
	// One second later, LogLinesPerSecond more.
	th.clock.Advance(time.Second)
	th.Classify(ctx, in)
	if n := lines(); n != LogBurst+LogLinesPerSecond {
		t.Fatalf("a second later %d lines, want %d", n, LogBurst+LogLinesPerSecond)
	}
	if !strings.Contains(th.logs.String(), "log_lines_dropped_before") {
		t.Fatal("the first line after drops does not say how many were dropped")
	}
	if st := th.List()[0]; st.LogsDropped != 22*2000-LogBurst-LogLinesPerSecond {
		t.Fatalf("LogsDropped %d, want %d", st.LogsDropped, 22*2000-LogBurst-LogLinesPerSecond)
	}
}
