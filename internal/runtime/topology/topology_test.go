package topology

import (
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/strategy"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
)

func cfgWith(combos ...config.Combo) *config.Config {
	return &config.Config{
		Providers: []config.Provider{
			{ID: "p1", Kind: "openai", BaseURL: "http://127.0.0.1:1/v1/", Models: []string{"m", "shared"},
				Connections: []config.Connection{{ID: "k1", APIKey: "s1"}, {ID: "k2", APIKey: "s2"}}},
			{ID: "p2", Kind: "anthropic", Profile: "oauth", BaseURL: "http://127.0.0.1:2/v1", Models: []string{"shared", "combo-a"},
				Connections: []config.Connection{{ID: "k3", APIKey: "s3"}}},
		},
		Combos: combos,
	}
}

func refs(cs []Candidate) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Connection.Ref+":"+c.Model)
	}
	return strings.Join(out, ",")
}

func TestResolve(t *testing.T) {
	topo, err := Build(cfgWith(
		config.Combo{Name: "combo-a", Targets: []config.Target{{Model: "p2/shared"}, {Model: "p1/m", Connection: "k2"}}},
		config.Combo{Name: "outer", Targets: []config.Target{{Model: "combo-a"}, {Model: "p1/shared"}}},
	))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"p1/m":    "p1/k1:m,p1/k2:m",
		"shared":  "p1/k1:shared,p1/k2:shared,p2/k3:shared",
		"combo-a": "p2/k3:shared,p1/k2:m",
		"outer":   "p2/k3:shared,p1/k2:m,p1/k1:shared,p1/k2:shared",
	}
	for name, want := range cases {
		res, ok := topo.Resolve(name)
		if !ok || refs(res.Candidates) != want {
			t.Errorf("Resolve(%q) = %v %q, want %q", name, ok, refs(res.Candidates), want)
		}
	}
	if res, _ := topo.Resolve("p1/m"); res.Provider == nil || res.Provider.ID != "p1" {
		t.Error("explicit provider addressing must report the provider")
	}
	for _, unknown := range []string{"p1/nope", "nope", "p3/m"} {
		if _, ok := topo.Resolve(unknown); ok {
			t.Errorf("Resolve(%q) should be unknown", unknown)
		}
	}
	if len(topo.Warnings) != 1 || !strings.Contains(topo.Warnings[0], `"combo-a" shadows`) {
		t.Errorf("warnings %v", topo.Warnings)
	}
	if got := strings.Join(topo.ModelIDs(), ","); got != "p1/m,p1/shared,p2/combo-a,p2/shared,combo-a,outer" {
		t.Errorf("ModelIDs %s", got)
	}
	if p, _ := topo.Provider("p1"); p.BaseURL != "http://127.0.0.1:1/v1" {
		t.Errorf("base URL not trimmed: %q", p.BaseURL)
	}
}

func TestBuildRejectsCyclesAndBadTargets(t *testing.T) {
	cases := []struct {
		combos []config.Combo
		want   string
	}{
		{[]config.Combo{
			{Name: "a", Targets: []config.Target{{Model: "b"}}},
			{Name: "b", Targets: []config.Target{{Model: "c"}}},
			{Name: "c", Targets: []config.Target{{Model: "a"}}},
		}, "a -> b -> c -> a"},
		{[]config.Combo{{Name: "x", Targets: []config.Target{{Model: "p1/unlisted"}}}}, `does not list model "unlisted"`},
		{[]config.Combo{{Name: "x", Targets: []config.Target{{Model: "p1/m", Connection: "k9"}}}}, `no connection "k9"`},
		{[]config.Combo{{Name: "x", Targets: []config.Target{{Model: "loose"}}}}, "must be provider/model"},
	}
	for _, tc := range cases {
		if _, err := Build(cfgWith(tc.combos...)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error containing %q, got %v", tc.want, err)
		}
	}
}

func TestEngineSpecsDefaults(t *testing.T) {
	specs := EngineSpecs(cfgWith())
	if specs[0].Profile != "apikey" || !specs[0].UseUpstreamRetryHints {
		t.Errorf("apikey provider: %+v", specs[0])
	}
	if specs[1].Profile != "oauth" || specs[1].UseUpstreamRetryHints {
		t.Errorf("oauth provider must not use hints by default: %+v", specs[1])
	}
}

func TestEngineSpecsCarryCredentialDigests(t *testing.T) {
	cfg := cfgWith()
	cfg.Providers[0].Connections[1].RateLimitOverrides.MaxWaitMS = 90000
	specs := EngineSpecs(cfg)
	if len(specs) != 2 || len(specs[0].Connections) != 2 || strings.Join(specs[0].Models, ",") != "m,shared" {
		t.Fatalf("specs = %+v", specs)
	}
	k1, k2 := specs[0].Connections[0], specs[0].Connections[1]
	if k1.CredentialHash != engine.CredentialHash("s1") || k2.CredentialHash != engine.CredentialHash("s2") || k1.CredentialHash == k2.CredentialHash {
		t.Errorf("credential digests %q %q", k1.CredentialHash, k2.CredentialHash)
	}
	if strings.Contains(k1.CredentialHash, "s1") && len(k1.CredentialHash) != 64 {
		t.Errorf("the digest is not a SHA-256 hex: %q", k1.CredentialHash)
	}
	if k1.MaxWait != 0 || k2.MaxWait != 90*time.Second {
		t.Errorf("max waits %v %v", k1.MaxWait, k2.MaxWait)
	}
}

// TestResolveIsBuiltOnce: a name's candidates are built on its first
// Resolve and shared after (the cost of resolving does not grow with the
// connections), read-only: appending to them copies, and Providers lists
// each provider of the candidates once, in order.
func TestResolveIsBuiltOnce(t *testing.T) {
	topo, err := Build(cfgWith(config.Combo{Name: "combo-a", Targets: []config.Target{{Model: "p2/shared"}, {Model: "p1/shared"}}}))
	if err != nil {
		t.Fatal(err)
	}
	for name, providers := range map[string]string{"p1/m": "p1", "shared": "p1,p2", "combo-a": "p2,p1"} {
		first, _ := topo.Resolve(name)
		again, _ := topo.Resolve(name)
		if &first.Candidates[0] != &again.Candidates[0] {
			t.Errorf("%s: resolved twice", name)
		}
		if cap(first.Candidates) != len(first.Candidates) {
			t.Errorf("%s: an append would write into the shared candidates", name)
		}
		var ids []string
		for _, p := range first.Providers {
			ids = append(ids, p.ID)
		}
		if strings.Join(ids, ",") != providers {
			t.Errorf("%s: providers %v, want %s", name, ids, providers)
		}
	}
	if _, ok := topo.Resolve("p1/nope"); ok {
		t.Error("an unknown name resolved")
	}
}

// TestWithCombosSharesConnections: a topology derived with other combos (a
// combo defined through the API) routes over the very connections of the
// file's, so what an upstream reported to one of them counts in both, and
// its combos are validated as Build's are.
func TestWithCombosSharesConnections(t *testing.T) {
	file, err := Build(cfgWith())
	if err != nil {
		t.Fatal(err)
	}
	api, err := file.WithCombos([]config.Combo{{Name: "api", Targets: []config.Target{{Model: "p1/m", Connection: "k2"}, {Model: "p2/shared"}}}})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := api.Resolve("api")
	if !ok || refs(res.Candidates) != "p1/k2:m,p2/k3:shared" {
		t.Fatalf("Resolve(api) = %v %q", ok, refs(res.Candidates))
	}
	direct, _ := file.Resolve("p1/m")
	if res.Candidates[0].Connection != direct.Candidates[1].Connection {
		t.Fatal("the derived topology must share the file topology's connections")
	}
	direct.Candidates[1].Connection.Reported.Store(&strategy.Quota{Remaining: 7, Limit: 10})
	if q := res.Candidates[0].Connection.Reported.Load(); q == nil || q.Remaining != 7 {
		t.Fatalf("a report on the file topology's p1/k2 is not seen through the API combo: %+v", q)
	}
	if _, ok := file.Resolve("api"); ok {
		t.Fatal("the file topology must not gain the API combo")
	}
	if _, err := file.WithCombos([]config.Combo{{Name: "bad", Targets: []config.Target{{Model: "p9/m"}}}}); err == nil {
		t.Fatal("a combo naming an unknown provider must be rejected")
	}
	if _, err := file.WithCombos([]config.Combo{
		{Name: "a", Targets: []config.Target{{Model: "b"}}},
		{Name: "b", Targets: []config.Target{{Model: "a"}}},
	}); err == nil || !strings.Contains(err.Error(), "a") {
		t.Fatalf("a cycle must be rejected, got %v", err)
	}
}
