package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/bench/internal/load"
)

// fullReport is a report in which every budget holds with a little room.
func fullReport() *Report {
	return &Report{
		OpenLoop: []OpenLoopResult{
			{RatePerS: 500,
				Direct:     Run{OK: 5000, Scheduled: 5000, Latency: Latency{P50MS: 0.40}},
				Gateway:    Run{OK: 5000, Scheduled: 5000, Latency: Latency{P50MS: 0.80}},
				AddedP50MS: 0.40},
			{RatePerS: 2000,
				Direct:  Run{OK: 20000, Scheduled: 20000, SuccessPct: 100, RPS: 1999},
				Gateway: Run{OK: 20000, Scheduled: 20000, SuccessPct: 100, RPS: 1998}},
		},
		Throughput: &ThroughputResult{Connections: 64, Direct: Run{RPS: 10000}, Gateway: Run{RPS: 2000}, Ratio: 0.20},
		Memory:     &MemoryResult{GatewayPeak: 60 << 20},
	}
}

func statuses(bs []Budget) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Status)
	}
	return out
}

func TestEvaluateBudgets(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *Report)
		want   []string // added p50, 2000 req/s, throughput, RSS
	}{
		{"all within", func(*Report) {}, []string{"PASS", "PASS", "PASS", "PASS"}},
		{"added p50 exactly 0.5 ms passes", func(r *Report) { r.OpenLoop[0].AddedP50MS = 0.5 },
			[]string{"PASS", "PASS", "PASS", "PASS"}},
		{"added p50 0.501 ms fails", func(r *Report) { r.OpenLoop[0].AddedP50MS = 0.501 },
			[]string{"FAIL", "PASS", "PASS", "PASS"}},
		{"gateway answered nothing at 500", func(r *Report) { r.OpenLoop[0].Gateway.OK = 0; r.OpenLoop[0].AddedP50MS = -0.4 },
			[]string{"FAIL", "PASS", "PASS", "PASS"}},
		{"one failure at 2000 req/s", func(r *Report) { r.OpenLoop[1].Gateway.OK = 19999 },
			[]string{"PASS", "FAIL", "PASS", "PASS"}},
		{"all answered but only 1031 req/s achieved", func(r *Report) { r.OpenLoop[1].Gateway.RPS = 1031 },
			[]string{"PASS", "FAIL", "PASS", "PASS"}},
		{"1800 req/s achieved is keeping up", func(r *Report) { r.OpenLoop[1].Gateway.RPS = 1800 },
			[]string{"PASS", "PASS", "PASS", "PASS"}},
		{"throughput exactly 15 %", func(r *Report) { r.Throughput.Ratio = 0.15 },
			[]string{"PASS", "PASS", "PASS", "PASS"}},
		{"throughput 14.9 %", func(r *Report) { r.Throughput.Ratio = 0.149 },
			[]string{"PASS", "PASS", "FAIL", "PASS"}},
		{"throughput at 32 connections is not the budget's", func(r *Report) { r.Throughput.Connections = 32 },
			[]string{"PASS", "PASS", "N/A", "PASS"}},
		{"peak RSS exactly 100 MiB", func(r *Report) { r.Memory.GatewayPeak = 100 << 20 },
			[]string{"PASS", "PASS", "PASS", "PASS"}},
		{"peak RSS 100 MiB + 1 page", func(r *Report) { r.Memory.GatewayPeak = 100<<20 + 4096 },
			[]string{"PASS", "PASS", "PASS", "FAIL"}},
		{"nothing measured", func(r *Report) { *r = Report{} }, []string{"N/A", "N/A", "N/A", "N/A"}},
		{"rates without 500 and 2000", func(r *Report) { r.OpenLoop[0].RatePerS = 100; r.OpenLoop[1].RatePerS = 300 },
			[]string{"N/A", "N/A", "PASS", "PASS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fullReport()
			tt.mutate(r)
			got := statuses(evaluateBudgets(r))
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("budgets = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFailed(t *testing.T) {
	if failed([]Budget{{Status: statusPass}, {Status: statusNA}}) {
		t.Error("PASS and N/A reported as failed")
	}
	if !failed([]Budget{{Status: statusPass}, {Status: statusFail}}) {
		t.Error("a FAIL not reported")
	}
}

func TestRunOf(t *testing.T) {
	ms := time.Millisecond
	res := &load.Result{
		Scheduled: 4, Sent: 3, OK: 2, Dropped: 1,
		Latency:      []time.Duration{3 * ms, 1 * ms},
		FromSchedule: []time.Duration{4 * ms, 1 * ms},
		Lag:          []time.Duration{0, ms, 0},
		Errors:       map[string]int{"HTTP 502": 1},
		Elapsed:      2 * time.Second,
	}
	r := runOf("gateway", res, true, false)
	if r.SuccessPct != 50 {
		t.Errorf("SuccessPct = %v, want 50 (2 of 4 scheduled)", r.SuccessPct)
	}
	if r.RPS != 1 {
		t.Errorf("RPS = %v, want 1 (2 OK in 2 s)", r.RPS)
	}
	if r.Latency.P50MS != 1 || r.Latency.MaxMS != 3 || r.Latency.Count != 2 {
		t.Errorf("Latency = %+v, want p50 1 ms, max 3 ms, 2 samples", r.Latency)
	}
	if r.FromSchedule == nil || r.SendLag == nil || r.FirstData != nil {
		t.Fatalf("open-loop run: from schedule %v, lag %v, first data %v", r.FromSchedule, r.SendLag, r.FirstData)
	}
	if r.FromSchedule.MaxMS != 4 {
		t.Errorf("FromSchedule max = %v ms, want 4", r.FromSchedule.MaxMS)
	}
	if r.UpstreamCalls != -1 {
		t.Errorf("UpstreamCalls = %d, want -1 (unknown)", r.UpstreamCalls)
	}
}

func TestMarkdownAndJSON(t *testing.T) {
	r := fullReport()
	r.Budgets = evaluateBudgets(r)
	r.Notes = []string{"plain note", "log:\nline 1\nline 2"}
	md := r.Markdown()
	for _, want := range []string{
		"## Budgets", "| added p50 latency at 500 req/s | ≤ 0.5 ms |", "**PASS**",
		"### 500 req/s", "### 2000 req/s", "**+0.400 ms**",
		"## 2. Max throughput (closed loop, 64 connections", "**20.0 %**",
		"VmHWM (peak) at the end", "**60.0 MiB**",
		"- plain note", "```\nline 1\nline 2\n```",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "## 3. Streaming") {
		t.Error("markdown has a streaming section without streaming results")
	}
	data, err := r.JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("JSON does not decode: %v", err)
	}
	if len(back.Budgets) != 4 || back.Throughput.Ratio != 0.20 || back.OpenLoop[0].AddedP50MS != 0.40 {
		t.Fatalf("JSON round trip lost data: %+v", back)
	}
}

func TestParseFlagsQuick(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-duration", "4s"})
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if o.openDuration != 4*time.Second {
		t.Errorf("explicit -duration overridden by -quick: %v", o.openDuration)
	}
	if o.throughputDur != 3*time.Second || o.streamDuration != 2*time.Second || o.warmup != 500*time.Millisecond {
		t.Errorf("quick durations = %v, %v, %v", o.throughputDur, o.streamDuration, o.warmup)
	}
	if len(o.rates) != 2 || o.rates[0] != 500 || o.rates[1] != 2000 || o.conns != 64 {
		t.Errorf("defaults: rates %v, conns %d; want [500 2000], 64", o.rates, o.conns)
	}
	for _, bad := range [][]string{{"-rates", "500,x"}, {"-conns", "0"}, {"-duration", "0s"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}
