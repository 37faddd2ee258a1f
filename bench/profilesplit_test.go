package main

import (
	"strings"
	"testing"
)

// tracesText is `go tool pprof -traces` output in its real shape: a
// header, then blocks of a sample time and its frames, leaf first.
const tracesText = `File: breakwater
Type: cpu
Duration: 31s, Total samples = 6.29s (20.29%)
-----------+-------------------------------------------------------
     860ms   internal/runtime/syscall/linux.Syscall6
             syscall.RawSyscall6
             syscall.Syscall
             syscall.write
             net.(*conn).Write
             github.com/breakwater-dev/breakwater/internal/runtime/server.(*lingerConn).Write
             github.com/valyala/fasthttp.(*Server).serveConn
-----------+-------------------------------------------------------
     200ms   internal/runtime/syscall/linux.Syscall6
             syscall.read
             github.com/valyala/fasthttp.(*HostClient).Do
-----------+-------------------------------------------------------
      30ms   github.com/valyala/fasthttp.normalizeHeaderKey (inline)
             github.com/valyala/fasthttp.(*ResponseHeader).parse
             github.com/valyala/fasthttp.(*HostClient).doNonNilReqResp
             github.com/breakwater-dev/breakwater/internal/runtime/upstream.(*Pool).DoBuffered
             github.com/valyala/fasthttp.(*Server).serveConn
-----------+-------------------------------------------------------
      10ms   github.com/breakwater-dev/breakwater/internal/runtime/wire.stringStops (inline)
             github.com/breakwater-dev/breakwater/internal/runtime/wire.(*scanner).skipString
-----------+-------------------------------------------------------
      10ms   github.com/breakwater-dev/breakwater/internal/runtime/metrics.(*children[go.shape.struct { a int }]).get (inline)
             github.com/valyala/fasthttp.(*Server).serveConn
             github.com/valyala/fasthttp.(*Server).serveConn
-----------+-------------------------------------------------------
      20ms   runtime.memclrNoHeapPointers
             runtime.mallocgc
             github.com/breakwater-dev/breakwater/internal/runtime/server.(*Server).serveClient
-----------+-------------------------------------------------------
      40ms   runtime.findRunnable
             runtime.schedule
             runtime.park_m
             runtime.mcall
-----------+-------------------------------------------------------
      50ms   github.com/valyala/fasthttp.(*RequestHeader).parse
             github.com/valyala/fasthttp.(*Server).serveConn
-----------+-------------------------------------------------------
      1.5s   runtime.memmove
             crypto/sha256.block
-----------+-------------------------------------------------------
`

// Every sample lands in the first part one of its frames belongs to: a
// write under the gateway's own frames is a write syscall, a fasthttp
// client parse under the gateway's pool is the upstream client, an
// allocation in the gateway's code is the collector's, and so on.
func TestSplitTracesAssignsEachSampleToItsFirstPart(t *testing.T) {
	parts, own, funcs, err := splitTraces(tracesText)
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != 2 || own[0].Part != "internal/runtime/metrics" || own[1].Part != "internal/runtime/wire" || own[1].Seconds != 0.01 {
		t.Errorf("own code by package: %+v, want internal/runtime/metrics and internal/runtime/wire 0.01 s each", own)
	}
	if len(funcs) != 2 || funcs[0].Part != "internal/runtime/metrics.(*children[go.shape.struct { a int }]).get" || funcs[1].Part != "internal/runtime/wire.stringStops" {
		t.Errorf("own code by function: %+v, want the generic method whole (spaces kept, no inline mark) and wire.stringStops", funcs)
	}
	fn := ownFrame([]string{"runtime.memmove", "github.com/breakwater-dev/breakwater/internal/runtime/server.(*Server).serveClient"})
	if fn != "internal/runtime/server.(*Server).serveClient" || packageOf(fn) != "internal/runtime/server" {
		t.Errorf("ownFrame = %q, packageOf = %q", fn, packageOf(fn))
	}
	want := map[string]float64{
		"write syscalls (client answers, upstream requests)": 0.86,
		"read syscalls": 0.2,
		"scheduler, network poller, thread wake-ups":       0.04,
		"garbage collection and allocation":                0.02,
		"upstream client (fasthttp, net/http)":             0.03,
		"the proxy's own code":                             0.02,
		"fasthttp server (requests read, answers written)": 0.05,
		otherPart: 1.5,
	}
	if len(parts) != len(splitParts)+1 {
		t.Fatalf("%d parts, want every part and %q: %+v", len(parts), otherPart, parts)
	}
	for _, p := range parts {
		w, ok := want[p.Part]
		if !ok {
			t.Fatalf("unexpected part %q", p.Part)
		}
		if d := p.Seconds - w; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: %.3f s, want %.3f", p.Part, p.Seconds, w)
		}
	}
	if _, _, _, err := splitTraces("File: x\nType: cpu\n"); err == nil {
		t.Error("a profile without samples split without an error")
	}
	if _, _, _, err := splitTraces("-----------+---\n   tenms   main.f\n"); err == nil {
		t.Error("a malformed sample time was accepted")
	}
}

// The report pairs a gateway profile with the bare proxy's of the same
// window and gives each part per request in both and the difference.
func TestSplitMarkdownPairsBareAndGateway(t *testing.T) {
	split := func(secs ...float64) []SplitPart {
		var out []SplitPart
		for i, s := range secs {
			name := otherPart
			if i < len(splitParts) {
				name = splitParts[i].name
			}
			out = append(out, SplitPart{Part: name, Seconds: s})
		}
		return out
	}
	r := &Report{Profiles: []Profile{
		{Scenario: "throughput", Requests: 100000, Split: split(1.6, 0.5, 0.4, 0.1, 0.6, 2.0, 0.3, 0.1),
			Own:      []SplitPart{{Part: "internal/runtime/proxy", Seconds: 1.2}, {Part: "internal/runtime/wire", Seconds: 0.8}},
			OwnFuncs: []SplitPart{{Part: "internal/runtime/proxy.(*Proxy).finish", Seconds: 0.25}}},
		{Scenario: "throughput-bare", Requests: 200000, Split: split(3.0, 0.8, 0.6, 0.0, 1.0, 0.2, 0.6, 0.0)},
		{Scenario: "under-fire", Requests: 0, Split: split(1, 1, 1, 1, 1, 1, 1, 1)},
	}}
	var b strings.Builder
	r.splitMarkdown(&b)
	got := b.String()
	for _, want := range []string{
		"**throughput** (bare proxy 200000 requests, gateway 100000):",
		"| write syscalls (client answers, upstream requests) | 15.0 | 16.0 | +1.0 |",
		"| the proxy's own code | 1.0 | 20.0 | +19.0 |",
		"| **all** | **31.0** | **56.0** | **+25.0** |",
		"| `internal/runtime/proxy` | 12.00 |",
		"| `internal/runtime/proxy.(*Proxy).finish` | 2.50 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("split table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "under-fire") {
		t.Error("a profile without a bare proxy's beside it was split")
	}
}
