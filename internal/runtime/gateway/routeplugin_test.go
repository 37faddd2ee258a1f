package gateway_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
)

// buildGuest builds a WebAssembly plugin guest (a main package of plain Go
// with //go:wasmexport) into dir, skipping the test when the Go toolchain
// cannot target wasip1.
func buildGuest(t *testing.T, src, dir string) string {
	t.Helper()
	if raceEnabled() {
		t.Skip("loads WebAssembly guests: run without -race (make test does)")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: WebAssembly guests are not built")
	}
	if out, err := exec.Command(gobin, "tool", "dist", "list").Output(); err != nil || !bytes.Contains(out, []byte("wasip1/wasm")) {
		t.Skip("this Go toolchain cannot target wasip1/wasm")
	}
	dst := filepath.Join(dir, filepath.Base(src)+".wasm")
	cmd := exec.Command(gobin, "build", "-buildmode=c-shared", "-o", dst, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", src, err, out)
	}
	return dst
}

// routeConfig routes two combos with plugins: "smart" with the example
// route plugin (examples/route-plugin: a header names the provider to try
// first), "panic" with a guest whose route hook panics for that combo.
const routeConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
providers:
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1]
    connections: [{id: a1, api_key: sk-a1}]
  - id: beta
    kind: openai
    base_url: MOCK_URL/v1
    models: [m2]
    connections: [{id: b1, api_key: sk-b1}]
combos:
  - name: smart
    strategy: plugin:tod
    targets: [{model: alpha/m1, price_in: 5, price_out: 15}, {model: beta/m2, price_in: 5, price_out: 15}]
  - name: panic
    strategy: plugin:faulty
    targets: [{model: alpha/m1}, {model: beta/m2}]
plugins:
  - {name: tod, path: ROUTE_WASM, hooks: [route]}
  - {name: faulty, path: FAULTY_WASM, hooks: [route]}
`

// Issue 20 item 4, end to end with the example route plugin under wazero:
// the x-route-provider header changes the chosen target; a plugin whose
// hook panics falls back to the configured order; the request log says
// which rule decided or why the plugin was not followed.
func TestRoutingPluginEndToEnd(t *testing.T) {
	dir := t.TempDir()
	route := buildGuest(t, "../../../examples/route-plugin", dir)
	faulty := buildGuest(t, "../../plugins/testdata/faulty", dir)
	h := start(t, strings.NewReplacer("ROUTE_WASM", route, "FAULTY_WASM", faulty).Replace(routeConfig))

	resp := h.post("/v1/chat/completions", chat("smart", ""), "x-route-provider", "beta")
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "beta" {
		t.Fatalf("x-route-provider beta: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"))
	}
	resp = h.post("/v1/chat/completions", chat("smart", ""), "x-route-provider", "alpha")
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "alpha" {
		t.Fatalf("x-route-provider alpha: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"))
	}
	_, rq := h.admin("GET", "/api/console/requests?limit=1", "")
	if r := rq["requests"].([]any)[0].(map[string]any); r["route_plugin"] != "tod" || r["route_rule"] != "route.header" || r["route_fallback"] != nil {
		t.Fatalf("request log %v", r)
	}

	// The faulty guest panics for the combo "panic": configured order.
	resp = h.post("/v1/chat/completions", chat("panic", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "alpha" {
		t.Fatalf("faulty plugin: %d via %s, want the configured order (alpha)", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"))
	}
	_, rq = h.admin("GET", "/api/console/requests?limit=1", "")
	if r := rq["requests"].([]any)[0].(map[string]any); r["route_plugin"] != "faulty" || r["route_fallback"] == nil {
		t.Fatalf("request log after a faulty plugin: %v", r)
	}
	_, pl := h.admin("GET", "/api/plugins", "")
	var stats map[string]any
	for _, s := range pl["route_strategies"].([]any) {
		if s := s.(map[string]any); s["combo"] == "panic" {
			stats = s
		}
	}
	if stats == nil || stats["plugin"] != "faulty" || stats["calls"] != float64(1) || stats["fallbacks"] != float64(1) {
		t.Fatalf("route strategy stats %v", pl["route_strategies"])
	}
}

// A combo whose "plugin:<name>" strategy names a plugin whose module has
// no route hook (configured without a hooks list, which the configuration
// cannot check) is refused at start, naming the combo and the plugin.
func TestRoutePluginWithoutTheHookIsRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	quota := buildGuest(t, "../../../examples/quota-header-plugin", dir)
	faulty := buildGuest(t, "../../plugins/testdata/faulty", dir)
	cfgYAML := strings.NewReplacer("{name: tod, path: ROUTE_WASM, hooks: [route]}", "{name: tod, path: "+quota+"}",
		"FAULTY_WASM", faulty, "MOCK_URL", "http://127.0.0.1:1").Replace(routeConfig)
	cfg, err := config.Parse([]byte(cfgYAML), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gw, err := gateway.Start(context.Background(), cfg, gateway.Options{Listener: ln})
	if err == nil {
		_ = gw.Close(context.Background())
		t.Fatal("a plugin strategy without the route hook was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, `combo "smart"`) || !strings.Contains(msg, `plugin "tod" has no route hook`) {
		t.Fatalf("error %q does not name the combo and the plugin", msg)
	}
}
