package proc

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
)

func TestParseStatus(t *testing.T) {
	status := "Name:\tbreakwater\nVmPeak:\t 1300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n"
	m, err := ParseStatus(strings.NewReader(status))
	if err != nil {
		t.Fatalf("ParseStatus: %v", err)
	}
	if want := (Memory{RSS: 40960 * 1024, Peak: 51200 * 1024}); m != want {
		t.Fatalf("ParseStatus = %+v, want %+v", m, want)
	}
}

func TestParseStatusErrors(t *testing.T) {
	for name, status := range map[string]string{
		"missing VmHWM": "VmRSS:\t 10 kB\n",
		"missing VmRSS": "VmHWM:\t 10 kB\n",
		"bad unit":      "VmRSS:\t 10 MB\nVmHWM:\t 10 kB\n",
		"bad number":    "VmRSS:\t ten kB\nVmHWM:\t 10 kB\n",
	} {
		if _, err := ParseStatus(strings.NewReader(status)); err == nil {
			t.Errorf("%s: ParseStatus accepted %q", name, status)
		}
	}
}

func TestParseStat(t *testing.T) {
	// utime 250 ticks + stime 50 ticks = 3 s at USER_HZ 100. The command
	// name holds spaces and a ')' to check fields are counted from the last.
	stat := "4242 (bench (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 9 0 12345 1300000000 10000 18446744073709551615"
	d, err := ParseStat(stat)
	if err != nil {
		t.Fatalf("ParseStat: %v", err)
	}
	if d != 3*time.Second {
		t.Fatalf("ParseStat = %v, want 3s", d)
	}
	if _, err := ParseStat("4242 (x) S 1 2"); err == nil {
		t.Fatal("ParseStat accepted a truncated stat")
	}
}

func TestParseBanner(t *testing.T) {
	tests := []struct {
		line, banner, want string
		ok                 bool
	}{
		{"mock upstream listening on http://127.0.0.1:40123", "mock upstream listening on", "127.0.0.1:40123", true},
		{"breakwater listening on http://127.0.0.1:8080/\n", "breakwater listening on", "127.0.0.1:8080", true},
		{"2026-01-01T00:00:00Z [WARN] breakwater: something", "breakwater listening on", "", false},
		{"breakwater listening on 127.0.0.1:8080", "breakwater listening on", "", false},
	}
	for _, tt := range tests {
		got, ok := parseBanner(tt.line, tt.banner)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseBanner(%q) = %q, %v; want %q, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func TestGatewayConfigIsValid(t *testing.T) {
	data := GatewayConfig(Shape{Listen: "127.0.0.1:18080", DataDir: "/tmp/bench data/data", MockAddr: "127.0.0.1:19090", Providers: 1})
	cfg, err := config.Parse(data, "bench.yaml")
	if err != nil {
		t.Fatalf("config.Parse rejected the bench configuration: %v\n%s", err, data)
	}
	if cfg.Server.Listen != "127.0.0.1:18080" {
		t.Errorf("listen = %q", cfg.Server.Listen)
	}
	if cfg.State.Backend != "badger" || cfg.State.Path != "/tmp/bench data/data" {
		t.Errorf("state = %+v, want badger at the data dir", cfg.State)
	}
	if len(cfg.Keys) != 0 {
		t.Errorf("%d client keys, want none (open on loopback)", len(cfg.Keys))
	}
	if len(cfg.Providers) != 1 {
		t.Fatalf("%d providers, want 1", len(cfg.Providers))
	}
	p := cfg.Providers[0]
	if p.ID != "bench" || p.Kind != "openai" || p.BaseURL != "http://127.0.0.1:19090/v1" {
		t.Errorf("provider = %s %s %s", p.ID, p.Kind, p.BaseURL)
	}
	if len(p.Models) != 1 || p.Models[0] != "bench-model" {
		t.Errorf("models = %v, want [bench-model]", p.Models)
	}
	if len(p.Connections) != 2 || p.Connections[0].APIKey.Value() == "" || p.Connections[1].APIKey.Value() == "" {
		t.Errorf("connections = %d, want 2 with api keys", len(p.Connections))
	}
	if q := cfg.Resilience.RequestQueue.AutoEnableAPIKeyProviders; q == nil || *q {
		t.Errorf("request_queue.auto_enable_api_key_providers = %v, want false (the default limiter would dominate)", q)
	}
}

// TestGatewayConfigShapes checks the curve configurations: the number of
// providers, of the benchmark provider's connections and of combos, the
// benchmark combo targeting the benchmark provider, and the admin token.
func TestGatewayConfigShapes(t *testing.T) {
	data := GatewayConfig(Shape{Listen: "127.0.0.1:18080", DataDir: "/tmp/d", MockAddr: "127.0.0.1:19090",
		Providers: 30, Connections: 7, Combos: 40, AdminToken: "tok"})
	cfg, err := config.Parse(data, "curve.yaml")
	if err != nil {
		t.Fatalf("config.Parse rejected a curve configuration: %v\n%s", err, data)
	}
	if len(cfg.Providers) != 30 || cfg.Providers[0].ID != BenchProvider || len(cfg.Providers[0].Connections) != 7 {
		t.Fatalf("%d providers, first %s with %d connections; want 30, bench with 7", len(cfg.Providers), cfg.Providers[0].ID, len(cfg.Providers[0].Connections))
	}
	if len(cfg.Providers[29].Connections) != 2 || cfg.Providers[29].Models[0] != "other-model-30" {
		t.Errorf("last provider = %+v", cfg.Providers[29])
	}
	if len(cfg.Combos) != 40 || cfg.Combos[0].Name != BenchCombo || cfg.Combos[0].Targets[0].Model != "bench/bench-model" {
		t.Fatalf("%d combos, first %+v; want 40, bench-combo → bench/bench-model", len(cfg.Combos), cfg.Combos[0])
	}
	if cfg.Server.AdminToken.Value() != "tok" {
		t.Errorf("admin token = %q", cfg.Server.AdminToken.Value())
	}
	if data := GatewayConfig(Shape{Listen: "127.0.0.1:1", DataDir: "/tmp/d", MockAddr: "127.0.0.1:2"}); strings.Contains(string(data), "combos:") ||
		strings.Contains(string(data), "admin_token") {
		t.Errorf("a plain shape has combos or an admin token:\n%s", data)
	}
}

func TestFireGatewayConfigIsValid(t *testing.T) {
	data := FireGatewayConfig(FireConfig{Listen: "127.0.0.1:18081", DataDir: "/tmp/bench/data-fire",
		MockAddr: "127.0.0.1:19090", BreakerResetMS: 5000, ContentStallTimeoutMS: 500})
	cfg, err := config.Parse(data, "fire.yaml")
	if err != nil {
		t.Fatalf("config.Parse rejected the under-fire configuration: %v\n%s", err, data)
	}
	if cfg.Server.Listen != "127.0.0.1:18081" || cfg.Server.AdminToken.Value() != FireAdminToken {
		t.Errorf("server = %q with admin token %q", cfg.Server.Listen, cfg.Server.AdminToken.Value())
	}
	if len(cfg.Providers) != 2 || cfg.Providers[0].ID != FireDownProvider || cfg.Providers[1].ID != FireUpProvider {
		t.Fatalf("providers = %+v, want down then up", cfg.Providers)
	}
	for i, prefix := range []string{FireDownKeyPrefix, FireUpKeyPrefix} {
		p := cfg.Providers[i]
		if p.BaseURL != "http://127.0.0.1:19090/v1" || len(p.Models) != 1 || p.Models[0] != FireModel {
			t.Errorf("provider %s: base %s, models %v", p.ID, p.BaseURL, p.Models)
		}
		if len(p.Connections) != 2 {
			t.Fatalf("provider %s: %d connections, want 2", p.ID, len(p.Connections))
		}
		for j, key := range FireKeys(prefix) {
			if got := p.Connections[j].APIKey.Value(); got != key {
				t.Errorf("provider %s connection %d key = %q, want %q", p.ID, j, got, key)
			}
		}
	}
	r := cfg.Resilience
	if got := r.CircuitBreaker["apikey"].ResetMS; got != 5000 {
		t.Errorf("apikey reset_ms = %d, want 5000", got)
	}
	if r.RequestQueue.AutoEnableAPIKeyProviders == nil || *r.RequestQueue.AutoEnableAPIKeyProviders {
		t.Errorf("request_queue.auto_enable_api_key_providers = %v, want false", r.RequestQueue.AutoEnableAPIKeyProviders)
	}
	if r.StreamRecovery.ContentStallTimeoutMS != 500 {
		t.Errorf("content_stall_timeout_ms = %d, want 500", r.StreamRecovery.ContentStallTimeoutMS)
	}
}

func TestLogSummary(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/gw.log"
	log := "2026-01-01T00:00:00Z [INFO]  breakwater.server: listening: addr=127.0.0.1:1\n" +
		"2026-01-01T00:00:01Z [INFO]  breakwater.access: request: request_id=1 status=200\n" +
		"2026-01-01T00:00:01Z [WARN]  breakwater.engine: connection cooling: id=a\n" +
		"2026-01-01T00:00:02Z [INFO]  breakwater.access: request: request_id=2 status=200\n" +
		"panic: something\n" +
		"2026-01-01T00:00:03Z [ERROR] breakwater.server: upstream failed\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Child{logPath: path}
	access, other, tail := c.LogSummary(2)
	if access != 2 || other != 3 {
		t.Errorf("access %d, other %d; want 2 access lines and 3 warnings, errors and others", access, other)
	}
	if want := "panic: something\n2026-01-01T00:00:03Z [ERROR] breakwater.server: upstream failed"; tail != want {
		t.Errorf("tail = %q, want %q", tail, want)
	}
}
