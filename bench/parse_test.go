package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

func TestParseTop(t *testing.T) {
	out := `File: breakwater
Type: cpu
Duration: 3s, Total samples = 1.20s (40.00%)
Showing nodes accounting for 0.60s, 50.00% of 1.20s total
Showing top 10 nodes out of 250
      flat  flat%   sum%        cum   cum%
     0.30s 25.00% 25.00%      0.30s 25.00%  runtime.futex
     0.20s 16.67% 41.67%      0.90s 75.00%  github.com/valyala/fasthttp.(*Server).serveConn
     0.10s  8.33% 50.00%      0.15s 12.50%  encoding/json.(*decodeState).object (inline)
`
	rows, err := parseTop(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	want := ProfileLine{Function: "encoding/json.(*decodeState).object (inline)", Flat: "0.10s", FlatPct: 8.33, Cum: "0.15s", CumPct: 12.5}
	if rows[2] != want {
		t.Errorf("row 3 = %+v, want %+v", rows[2], want)
	}
	if rows[1].CumPct != 75 || rows[1].Function != "github.com/valyala/fasthttp.(*Server).serveConn" {
		t.Errorf("row 2 = %+v", rows[1])
	}
	if _, err := parseTop("no profile here"); err == nil {
		t.Error("output without the header line accepted")
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkFailurePath/restated_403-2   2000   83496 ns/op   76598 median-ns   66109 p10-ns   100023 p90-ns   100.0 rules   10400 B/op   188 allocs/op
BenchmarkFailurePath/plain_429-2      2000  237577 ns/op  208555 median-ns  185233 p10-ns   285373 p90-ns   100.0 rules   13064 B/op   242 allocs/op
PASS
`
	cs := parseBench(out)
	if len(cs) != 2 {
		t.Fatalf("%d cases, want 2", len(cs))
	}
	want := FailurePathCase{Name: "restated_403", NsPerOp: 83496, MedianNs: 76598, P10Ns: 66109, P90Ns: 100023, BytesPerOp: 10400, AllocsPerOp: 188, Rules: 100}
	if cs[0] != want {
		t.Errorf("case 1 = %+v, want %+v", cs[0], want)
	}
	if cs[1].Name != "plain_429" || cs[1].MedianNs != 208555 {
		t.Errorf("case 2 = %+v", cs[1])
	}
}

func TestGoroutinesOf(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_threads 9\n"
	if n := goroutinesOf(bufio.NewScanner(strings.NewReader(text))); n != 42 {
		t.Errorf("goroutinesOf = %d, want 42", n)
	}
	if n := goroutinesOf(bufio.NewScanner(strings.NewReader("go_threads 9\n"))); n != -1 {
		t.Errorf("goroutinesOf without the metric = %d, want -1", n)
	}
}

func TestSizedBody(t *testing.T) {
	for _, size := range []int{1024, 10240, 1 << 20} {
		b := sizedBody(gatewayModel, size)
		if len(b) != size {
			t.Errorf("sizedBody(%d) is %d bytes", size, len(b))
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct{ Content string }
		}
		if err := json.Unmarshal(b, &req); err != nil || req.Model != gatewayModel || len(req.Messages) != 1 {
			t.Errorf("sizedBody(%d) is not the chat request: %v", size, err)
		}
	}
	if b := sizedBody(directModel, 10); len(b) <= 10 || !json.Valid(b) {
		t.Errorf("a size below the bare request gives %q", b)
	}
}

func TestLeaked(t *testing.T) {
	before := Census{Goroutines: 30, FDs: 20}
	for _, tt := range []struct {
		after Census
		want  bool
	}{
		{Census{Goroutines: 30 + leakGoroutines, FDs: 20 + leakFDs}, false},
		{Census{Goroutines: 31 + leakGoroutines, FDs: 20}, true},
		{Census{Goroutines: 30, FDs: 21 + leakFDs}, true},
		{Census{Goroutines: -1, FDs: 20}, true},
	} {
		if got := leaked(before, tt.after); got != tt.want {
			t.Errorf("leaked(%+v, %+v) = %v, want %v", before, tt.after, got, tt.want)
		}
	}
}

func TestBodySlopes(t *testing.T) {
	c := fullReport().Curves.BodySize
	bare, gw, ok := c.slopes()
	if !ok || bare < 399.99 || bare > 400.01 || gw < 699.99 || gw > 700.01 {
		t.Errorf("slopes = %v, %v, %v; want 400 and 700 µs/MB", bare, gw, ok)
	}
	if _, _, ok := (&BodyCurve{Rows: c.Rows[:1]}).slopes(); ok {
		t.Error("one row gave a slope")
	}
}
