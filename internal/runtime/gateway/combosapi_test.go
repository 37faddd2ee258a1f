package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestCombosAdminAPI(t *testing.T) {
	dir := t.TempDir()
	h := start(t, strings.Replace(comboConfig, "state: {backend: memory}", fmt.Sprintf("state: {backend: badger, path: %q}", dir), 1))
	code, body := h.admin("GET", "/api/combos", "")
	if code != 200 || len(body["combos"].([]any)) != 7 || body["combos"].([]any)[0].(map[string]any)["source"] != "config" {
		t.Fatalf("list: %d %v", code, body)
	}
	// Define a combo at run time; it routes at once and is listed in /v1/models.
	code, body = h.admin("PUT", "/api/combos/quick", `{"strategy":"priority","targets":[{"model":"pb/mb"},{"model":"pc/mc"}]}`)
	if code != 200 {
		t.Fatalf("put: %d %v", code, body)
	}
	resp := h.post("/v1/chat/completions", chat("quick", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "pb" {
		t.Fatalf("runtime combo: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"))
	}
	mr, _ := http.Get(h.url + "/v1/models")
	if !strings.Contains(string(readBody(t, mr)), `"quick"`) {
		t.Fatal("/v1/models does not list the runtime combo")
	}
	// A cycle or an unknown target is refused naming the field; nothing changes.
	code, _ = h.admin("PUT", "/api/combos/loop1", `{"targets":[{"model":"loop2"}]}`)
	if code != 400 {
		t.Fatalf("a combo pointing at an unknown model: %d", code)
	}
	code, body = h.admin("PUT", "/api/combos/rr", `{"strategy":"round-robin","targets":[{"model":"quick"}]}`)
	if code != 200 {
		t.Fatalf("override of a file combo: %d %v", code, body)
	}
	code, body = h.admin("PUT", "/api/combos/quick", `{"targets":[{"model":"rr"}]}`)
	if code != 400 || !strings.Contains(fmt.Sprint(body["error"]), "circular combo reference: rr -> quick -> rr") {
		t.Fatalf("cycle must be refused: %d %v", code, body)
	}
	code, body = h.admin("PUT", "/api/combos/bad", `{"strategy":"nonsense","targets":[{"model":"pa/ma"}]}`)
	if code != 400 || !strings.Contains(fmt.Sprint(body["error"]), "strategy") {
		t.Fatalf("bad strategy: %d %v", code, body)
	}
	// Survives a restart on the same data dir.
	h.stopGateway()
	h.startGateway()
	resp = h.post("/v1/chat/completions", chat("quick", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "pb" {
		t.Fatalf("runtime combo after restart: %d via %s", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"))
	}
	// Deleting restores the file's rr and removes quick.
	if code, _ := h.admin("DELETE", "/api/combos/quick", ""); code != 400 {
		t.Fatalf("quick is still used by rr: deleting it must be refused, got %d", code)
	}
	if code, _ := h.admin("DELETE", "/api/combos/rr", ""); code != 200 {
		t.Fatal("delete rr override")
	}
	if code, _ := h.admin("DELETE", "/api/combos/quick", ""); code != 200 {
		t.Fatal("delete quick")
	}
	if code, _ := h.admin("DELETE", "/api/combos/panel", ""); code != 400 {
		t.Fatal("a file combo cannot be deleted through the API")
	}
	resp = h.post("/v1/chat/completions", chat("quick", ""))
	readBody(t, resp)
	if resp.StatusCode != 404 {
		t.Fatalf("deleted combo still routes: %d", resp.StatusCode)
	}
}

// A combo name that needs escaping in a path arrives percent-encoded (as
// the console sends it): PUT defines "team mix", which routes by its
// name, and DELETE removes it.
func TestCombosAdminAPIEscapedName(t *testing.T) {
	h := start(t, comboConfig)
	code, body := h.admin("PUT", "/api/combos/team%20mix", `{"strategy":"priority","targets":[{"model":"pb/mb"}]}`)
	if code != 200 {
		t.Fatalf("put: %d %v", code, body)
	}
	resp := h.post("/v1/chat/completions", chat("team mix", ""))
	readBody(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Provider") != "pb" {
		t.Fatalf("combo %q: %d via %s", "team mix", resp.StatusCode, resp.Header.Get("X-Breakwater-Provider"))
	}
	if code, body := h.admin("DELETE", "/api/combos/team%20mix", ""); code != 200 {
		t.Fatalf("delete: %d %v", code, body)
	}
	resp = h.post("/v1/chat/completions", chat("team mix", ""))
	readBody(t, resp)
	if resp.StatusCode != 404 {
		t.Fatalf("deleted combo still routes: %d", resp.StatusCode)
	}
}
