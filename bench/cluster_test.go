package main

import (
	"strings"
	"testing"
)

func TestClusterBudgetsAndMarkdown(t *testing.T) {
	r := &Report{Settings: Settings{Connections: 64, ClusterSeconds: 10}}
	if got := clusterBudgets(r); len(got) != 1 || got[0].Status != statusNA {
		t.Fatalf("not measured: %+v", got)
	}
	r.Cluster = &ClusterResult{Instances: 3, Redis: "Redis 7.0.15",
		Propagation: Latency{Count: 200, P50MS: 1.7, P99MS: 100},
		Badger:      Run{OK: 1000, RPS: 5000}, RedisMode: Run{OK: 990, RPS: 4950}, Ratio: 0.99}
	if got := clusterBudgets(r); got[0].Status != statusPass {
		t.Fatalf("p99 exactly 100 ms: %+v", got)
	}
	r.Cluster.Propagation.P99MS = 100.001
	r.ClusterBudgets = clusterBudgets(r)
	if r.ClusterBudgets[0].Status != statusFail {
		t.Fatalf("p99 100.001 ms: %+v", r.ClusterBudgets)
	}
	md := r.Markdown()
	for _, want := range []string{"## Several instances on one Redis", "| throughput | 5000 req/s | 4950 req/s | **×0.99** |",
		"**100.001 ms**", "| propagation to every other instance, p99 | ≤ 100 ms |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
