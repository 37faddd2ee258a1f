package proxy

import (
	"io"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine/admission"
	"github.com/breakwater-dev/breakwater/internal/runtime/accesslog"
	"github.com/breakwater-dev/breakwater/internal/runtime/metrics"
	"github.com/breakwater-dev/breakwater/internal/runtime/reqlog"
	"github.com/breakwater-dev/breakwater/internal/runtime/topology"
	"github.com/breakwater-dev/breakwater/internal/runtime/wire"
)

// BenchmarkFinish is the bookkeeping of a request answered on its first
// attempt, as the binary wires it: the request metric, the console's
// request log (full, as on a busy gateway) and the access line, batched.
func BenchmarkFinish(b *testing.B) {
	log := reqlog.New(reqlog.DefaultCapacity, admission.SystemClock())
	p := &Proxy{metrics: metrics.New(), clock: admission.SystemClock(),
		access:  accesslog.New(accesslog.Options{Output: io.Discard, Name: "breakwater.access", FlushEvery: accesslog.DefaultFlushEvery}),
		observe: func(r reqlog.Record) { log.Add(&r) }}
	defer p.access.Flush()
	parsed, err := wire.ParseFor(wire.FormatChat, []byte(`{"model":"alpha/m1","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	cd := topology.Candidate{Provider: &topology.Provider{ID: "alpha"}, Connection: &topology.Connection{ID: "alpha-key-1"}, Model: "m1"}
	x := &state{req: Request{ID: "0badf00d-1a2b", Format: wire.FormatChat, Parsed: parsed}, format: wire.FormatChat,
		start: time.Now(), attempts: 1, final: cd, upstreamTime: time.Millisecond}
	x.trail = append(x.trailBuf[:0], reqlog.Attempt{Provider: "alpha", Connection: "alpha-key-1", Model: "m1", Outcome: "success", Status: 200, DurationMS: 1})
	for range reqlog.DefaultCapacity {
		p.finish(x, 200, "")
	}
	b.ReportAllocs()
	for b.Loop() {
		p.finish(x, 200, "")
	}
}
