package gateway_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
)

// capacityRule classifies alpha's 503 "capacity" as a 45 s connection
// cooldown, with its test.
var capacityRule = map[string]string{
	"breakwater/operator/alpha.rego": `package breakwater.operator

classify := {"id": "alpha.capacity", "reason": "rate_limit", "scope": "connection", "cooldown_ms": 45000} if {
	input.provider == "alpha"
	input.status == 503
	contains(lower(input.body), "capacity")
}
`,
	"breakwater/operator/alpha_test.rego": `package breakwater.operator_test

import data.breakwater.operator

test_capacity if {
	operator.classify.id == "alpha.capacity" with input as {"provider": "alpha", "status": 503, "body": "At capacity"}
}
`,
}

// bundleTarball builds an unsigned bundle with OPA's bundle writer.
func bundleTarball(t *testing.T, revision string, files map[string]string) []byte {
	t.Helper()
	roots := []string{"breakwater/operator", "breakwater/operator_test"}
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: revision, Roots: &roots}, Data: map[string]any{}}
	for name, text := range files {
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: "/" + name, Path: "/" + name, Raw: []byte(text)})
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGatewayPolicyBundleAndDecisionLog starts the gateway with its
// operator policies on a bundle server and its decision log on a file and
// an OPA decision log service: a failed attempt is judged by the bundle's
// rule, and the decision shows in GET /api/policies/decisions, the file
// and the service.
func TestGatewayPolicyBundleAndDecisionLog(t *testing.T) {
	tarball := bundleTarball(t, "fleet-7", capacityRule)
	bundles := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer bundle-s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("ETag", `"fleet-7"`)
		if r.Header.Get("If-None-Match") == `"fleet-7"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(tarball)
	}))
	defer bundles.Close()
	var mu sync.Mutex
	var events []map[string]any
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var batch []map[string]any
		if err := json.NewDecoder(zr).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		events = append(events, batch...)
		mu.Unlock()
	}))
	defer collector.Close()
	logFile := filepath.Join(t.TempDir(), "decisions.jsonl")
	t.Setenv("BUNDLE_TOKEN", "Bearer bundle-s3cret")
	h := start(t, baseConfig+fmt.Sprintf(`
policies:
  bundle: {url: %q, headers: {Authorization: "env:BUNDLE_TOKEN"}}
  decision_log: {file: %q, url: %q, flush_interval_ms: 100}
`, bundles.URL+"/breakwater.tar.gz", logFile, collector.URL+"/logs"))

	code, body := h.admin("GET", "/api/policies", "")
	st, _ := body["status"].(map[string]any)
	b, _ := st["bundle"].(map[string]any)
	if code != 200 || st["source"] != "bundle" || !strings.HasSuffix(fmt.Sprint(st["revision"]), "+bundle.fleet-7") ||
		b["revision"] != "fleet-7" || b["etag"] != `"fleet-7"` || b["last_error"] != nil || b["last_poll"] == nil {
		t.Fatalf("GET /api/policies: %d %v", code, st)
	}
	if strings.Contains(fmt.Sprint(body), "s3cret") {
		t.Fatal("GET /api/policies shows the bundle token")
	}

	// a1 answers 503 "capacity": the bundle's rule cools it for 45 s and
	// the request fails over to a2.
	h.setScript(`rules: [{key: sk-alpha-1-secret, responses: [{status: 503, body: '{"error":{"message":"model at capacity"}}', headers: {set-cookie: "sid=s3cret-cookie"}}]}]`)
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Connection") != "a2" {
		t.Fatalf("failover: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Connection"))
	}
	code, body = h.admin("GET", "/api/policies/decisions?limit=5", "")
	ds, _ := body["decisions"].([]any)
	if code != 200 || len(ds) != 1 {
		t.Fatalf("decisions: %d %v", code, body)
	}
	d := ds[0].(map[string]any)
	if d["provider"] != "alpha" || d["connection"] != "a1" || d["status"] != float64(503) || d["rule_id"] != "alpha.capacity" ||
		d["rule_source"] != "operator" || d["scope"] != "connection" || d["cooldown_ms"] != float64(45000) ||
		d["bundle_revision"] != "fleet-7" || d["reason"] != "rate_limit" {
		t.Errorf("decision %v", d)
	}
	if hs, _ := d["headers"].(map[string]any); hs["set-cookie"] != "[redacted]" || fmt.Sprint(d["erased"]) != "[/body]" {
		t.Errorf("decision headers %v, erased %v", d["headers"], d["erased"])
	}
	if code, body := h.admin("GET", "/api/policies/decisions?limit=0", ""); code != 400 || !strings.Contains(fmt.Sprint(body), "limit") {
		t.Errorf("limit=0: %d %v", code, body)
	}
	// Shutting down flushes the file and the service.
	h.stopGateway()
	raw, err := os.ReadFile(logFile)
	if err != nil || !strings.Contains(string(raw), `"rule_id":"alpha.capacity"`) || strings.Contains(string(raw), "s3cret") ||
		strings.Contains(string(raw), "model at capacity") {
		t.Errorf("decision log file (%v):\n%s", err, raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0]["result"].(map[string]any)["rule_id"] != "alpha.capacity" ||
		events[0]["labels"].(map[string]any)["version"] != "test" {
		t.Errorf("service events %v", events)
	}
}

func TestPolicyOptionsFromConfig(t *testing.T) {
	src := `
providers:
  - {id: p, kind: openai, base_url: "https://api.example.com", models: [m], connections: [{id: c}]}
policies:
  dir: /etc/breakwater/policies.d
  bundle:
    url: https://bundles.example.com/b.tar.gz
    poll_interval_ms: 2000
    public_key: "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n"
    key_id: ops
    algorithm: ES256
    headers: {Authorization: "Bearer t"}
  decision_log: {buffer: 50, file: /tmp/d.jsonl, file_max_bytes: 8192, url: "https://c.example.com/logs", batch_size: 7, flush_interval_ms: 300, queue_size: 9}
`
	cfg, err := config.Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := gateway.PolicyOptions(cfg, nil, nil, nil, gateway.Options{Version: "1.2.3"})
	b, d := o.Bundle, o.DecisionLog
	if o.Dir != "/etc/breakwater/policies.d" || b == nil || b.URL != "https://bundles.example.com/b.tar.gz" || b.PollInterval != 2*time.Second ||
		!strings.HasPrefix(b.PublicKey, "-----BEGIN PUBLIC KEY-----") || b.KeyID != "ops" || b.Algorithm != "ES256" || !b.SigningRequired ||
		b.Headers["Authorization"] != "Bearer t" {
		t.Errorf("bundle %+v", b)
	}
	if d == nil || d.Buffer != 50 || d.File != "/tmp/d.jsonl" || d.FileMaxBytes != 8192 || d.URL != "https://c.example.com/logs" ||
		d.BatchSize != 7 || d.FlushInterval != 300*time.Millisecond || d.QueueSize != 9 || d.Labels["version"] != "1.2.3" {
		t.Errorf("decision log %+v", d)
	}
	cfg, _ = config.Parse([]byte("providers: [{id: p, kind: openai, base_url: 'https://a.example', models: [m], connections: [{id: c}]}]\n"), "t.yaml")
	if o := gateway.PolicyOptions(cfg, nil, nil, nil, gateway.Options{}); o.Bundle != nil || o.DecisionLog == nil || o.DecisionLog.Buffer != 1000 {
		t.Errorf("defaults: bundle %+v, decision log %+v", o.Bundle, o.DecisionLog)
	}
}

// TestExampleFamilyQuotaRule runs the guide's per-model quota family
// example (examples/policies/per-model-quota) as the operator policy
// directory of a real gateway: codex's usage_limit_reached 429 on c1 locks
// the gpt-5 family on c1 until the reset (8100 s), not the key: gpt-5-mini
// goes to c2 without a call on c1, o4-mini still flows through c1.
func TestExampleFamilyQuotaRule(t *testing.T) {
	dir, err := filepath.Abs("../../../examples/policies/per-model-quota")
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(filepath.Join(dir, "body.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := startWith(t, fmt.Sprintf(`
server: {listen: 127.0.0.1:0, admin_token: test-admin-token-0123456789}
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
policies: {dir: %q}
providers:
  - id: codex
    kind: openai
    base_url: MOCK_URL/v1
    models: [gpt-5-codex, gpt-5-mini, o4-mini]
    quota_families: {gpt-5: ["gpt-5*"]}
    connections: [{id: c1, api_key: sk-c1}, {id: c2, api_key: sk-c2}]
`, dir), newFakeClock())
	h.setScript(fmt.Sprintf(`rules: [{key: sk-c1, model: gpt-5-codex, responses: [{status: 429, body: '%s'}]}]`,
		strings.ReplaceAll(strings.TrimSpace(string(body)), "'", "''")))
	via := func(model string) string {
		t.Helper()
		resp := h.post("/v1/chat/completions", chat("codex/"+model, ""))
		readBody(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", model, resp.StatusCode)
		}
		return resp.Header.Get("X-Breakwater-Connection")
	}
	if c := via("gpt-5-codex"); c != "c2" {
		t.Fatalf("gpt-5-codex via %s, want a failover to c2", c)
	}
	_, locks := h.admin("GET", "/api/resilience/model-cooldowns", "")
	list, _ := locks["lockouts"].([]any)
	if len(list) != 1 {
		t.Fatalf("lockouts %v", locks)
	}
	l := list[0].(map[string]any)
	if l["connection"] != "c1" || l["family"] != "gpt-5" || l["remaining_ms"].(float64) != 8100000 {
		t.Fatalf("lockout %v, want the gpt-5 family on c1 for 8100000 ms", l)
	}
	before := h.mock.Stats().ByKey["sk-c1"].Calls
	if c := via("gpt-5-mini"); c != "c2" {
		t.Errorf("gpt-5-mini via %s, want c2 (the family is locked on c1)", c)
	}
	if after := h.mock.Stats().ByKey["sk-c1"].Calls; after != before {
		t.Errorf("c1 was called %d times for a locked family", after-before)
	}
	if c := via("o4-mini"); c != "c1" {
		t.Errorf("o4-mini via %s, want c1 (the key itself is not cooled)", c)
	}
}
