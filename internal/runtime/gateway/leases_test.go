package gateway_test

import (
	"strings"
	"sync"
	"testing"
	"time"
)

const leaseConfig = `
server:
  listen: 127.0.0.1:0
  admin_token: test-admin-token-0123456789
state: {backend: memory}
resilience:
  request_queue: {auto_enable_api_key_providers: false}
  session_affinity_ttl_ms: 600000
providers:
  - id: alpha
    kind: openai
    base_url: MOCK_URL/v1
    models: [m1]
    connections:
      - {id: a1, api_key: sk-a1}
      - {id: a2, api_key: sk-a2}
keys:
  - {id: k1, key: key-one, scopes: [lease:exclusive], allowed_connections: [alpha/a1]}
  - {id: k2, key: key-two, scopes: [lease:exclusive], allowed_connections: [alpha/a1]}
  - {id: plain, key: key-plain}
`

func owner(c byte) string { return "vlo_" + strings.Repeat(string(c), 43) }

func TestLeaseAPIErrorTable(t *testing.T) {
	h := start(t, leaseConfig)
	cases := []struct {
		name   string
		body   string
		hdr    []string
		status int
		code   string
	}{
		{"no auth", `{"action":"acquire"}`, []string{"X-Breakwater-Lease-Owner", owner('A')}, 401, ""},
		{"missing scope", `{"action":"acquire"}`, []string{"x-api-key", "key-plain", "X-Breakwater-Lease-Owner", owner('A')}, 403, ""},
		{"missing owner", `{"action":"acquire"}`, []string{"x-api-key", "key-one"}, 400, "LEASE_CONTEXT_REQUIRED"},
		{"malformed owner", `{"action":"acquire"}`, []string{"x-api-key", "key-one", "X-Breakwater-Lease-Owner", "vlo_short"}, 400, "LEASE_CONTEXT_INVALID"},
		{"wrong content type", `{"action":"acquire"}`, []string{"x-api-key", "key-one", "X-Breakwater-Lease-Owner", owner('A'), "Content-Type", "text/plain"}, 415, ""},
		{"acquire", `{"action":"acquire","model":"alpha/m1"}`, []string{"x-api-key", "key-one", "X-Breakwater-Lease-Owner", owner('A')}, 200, ""},
		{"stale renew", `{"action":"renew","generation":7}`, []string{"x-api-key", "key-one", "X-Breakwater-Lease-Owner", owner('A')}, 409, "LEASE_FENCE_STALE"},
		{"foreign key release", `{"action":"release"}`, []string{"x-api-key", "key-two", "X-Breakwater-Lease-Owner", owner('A')}, 409, ""},
		{"renew", `{"action":"renew","generation":1}`, []string{"x-api-key", "key-one", "X-Breakwater-Lease-Owner", owner('A')}, 200, ""},
	}
	for _, tc := range cases {
		resp := h.post("/api/v1/session-leases", tc.body, tc.hdr...)
		m := decode(t, resp)
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d, want %d: %v", tc.name, resp.StatusCode, tc.status, m)
		}
		if tc.code != "" && m["error"].(map[string]any)["code"] != tc.code {
			t.Fatalf("%s: %v, want code %s", tc.name, m, tc.code)
		}
		if tc.status == 200 && (m["state"] != "ACTIVE" || m["generation"].(float64) != 1 || m["connection"] != nil) {
			t.Fatalf("%s: %v", tc.name, m)
		}
	}
	for i := 0; i < 2; i++ { // release is idempotent
		resp := h.post("/api/v1/session-leases", `{"action":"release"}`, "x-api-key", "key-one", "X-Breakwater-Lease-Owner", owner('A'))
		if m := decode(t, resp); resp.StatusCode != 200 || m["state"] != "RELEASED" {
			t.Fatalf("release %d: %d %v", i, resp.StatusCode, m)
		}
	}
}

func TestLeaseFencesDispatchAndCapacity(t *testing.T) {
	h := start(t, leaseConfig)
	acquire := func(key string, o byte) {
		resp := h.post("/api/v1/session-leases", `{"action":"acquire"}`, "x-api-key", key, "X-Breakwater-Lease-Owner", owner(o))
		if m := decode(t, resp); resp.StatusCode != 200 {
			t.Fatalf("acquire: %v", m)
		}
	}
	acquire("key-one", 'A')
	acquire("key-two", 'B')
	send := func(key string, o byte, gen string) (int, map[string]any, string) {
		resp := h.post("/v1/chat/completions", chat("alpha/m1", ""), "x-api-key", key, "X-Breakwater-Lease-Owner", owner(o), "X-Breakwater-Lease-Generation", gen)
		conn := resp.Header.Get("X-Breakwater-Connection")
		ra := resp.Header.Get("Retry-After")
		m := decode(t, resp)
		_ = ra
		return resp.StatusCode, m, conn
	}
	// Owner A binds the only allowed connection.
	if st, m, conn := send("key-one", 'A', "1"); st != 200 || conn != "a1" {
		t.Fatalf("owner A: %d %v via %s", st, m, conn)
	}
	// Owner B, allowed the same single connection, waits for capacity.
	resp := h.post("/v1/chat/completions", chat("alpha/m1", ""), "x-api-key", "key-two", "X-Breakwater-Lease-Owner", owner('B'), "X-Breakwater-Lease-Generation", "1")
	ra := resp.Header.Get("Retry-After")
	m := decode(t, resp)
	e := m["error"].(map[string]any)
	if resp.StatusCode != 429 || e["code"] != "LEASE_CAPACITY_UNAVAILABLE" || e["state"] != "WAITING_FOR_CAPACITY" || ra != "300" {
		t.Fatalf("owner B: %d %v Retry-After=%q", resp.StatusCode, e, ra)
	}
	// Stale generation is refused before any upstream call.
	calls := h.mock.Stats().Total
	if st, m, _ := send("key-one", 'A', "2"); st != 409 || m["error"].(map[string]any)["code"] != "LEASE_FENCE_STALE" {
		t.Fatalf("stale generation: %d %v", st, m)
	}
	if h.mock.Stats().Total != calls {
		t.Fatal("a stale lease reached upstream")
	}
	// An unleased request never uses the leased connection.
	for i := 0; i < 3; i++ {
		resp := h.post("/v1/chat/completions", chat("alpha/m1", ""), "x-api-key", "key-plain")
		readBody(t, resp)
		if resp.Header.Get("X-Breakwater-Connection") != "a2" {
			t.Fatalf("unleased request used %s", resp.Header.Get("X-Breakwater-Connection"))
		}
	}
}

func TestTwoOwnersRaceForOneConnection(t *testing.T) {
	h := start(t, leaseConfig)
	for _, kv := range []struct {
		key string
		o   byte
	}{{"key-one", 'A'}, {"key-two", 'B'}} {
		readBody(t, h.post("/api/v1/session-leases", `{"action":"acquire"}`, "x-api-key", kv.key, "X-Breakwater-Lease-Owner", owner(kv.o)))
	}
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, kv := range []struct {
		key string
		o   byte
	}{{"key-one", 'A'}, {"key-two", 'B'}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := h.post("/v1/chat/completions", chat("alpha/m1", ""), "x-api-key", kv.key, "X-Breakwater-Lease-Owner", owner(kv.o), "X-Breakwater-Lease-Generation", "1")
			readBody(t, resp)
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	if !(statuses[0] == 200 && statuses[1] == 429 || statuses[0] == 429 && statuses[1] == 200) {
		t.Fatalf("exactly one owner must win the connection: %v", statuses)
	}
}

func TestAffinityPinsAndRepins(t *testing.T) {
	clk := newFakeClock()
	h := startWith(t, leaseConfig, clk)
	send := func(session string) string {
		resp := h.post("/v1/chat/completions", chat("alpha/m1", ""), "x-api-key", "key-plain", "X-Session-Id", session)
		readBody(t, resp)
		return resp.Header.Get("X-Breakwater-Connection")
	}
	// a1 answers first and the session pins to it.
	if c := send("agent-42"); c != "a1" {
		t.Fatalf("first request via %s", c)
	}
	// a1 starts failing: the session fails over to a2 and re-pins there.
	h.setScript(`rules: [{key: sk-a1, responses: [{status: 401}]}]`)
	if c := send("agent-42"); c != "a2" {
		t.Fatalf("failover via %s", c)
	}
	h.setScript(`rules: []`)
	clk.Advance(5 * time.Minute) // a1 cooldown over, pin (10 min) still live
	for i := 0; i < 3; i++ {
		if c := send("agent-42"); c != "a2" {
			t.Fatalf("the re-pinned session moved to %s", c)
		}
	}
	// Another session starts on the first healthy connection.
	if c := send("agent-7"); c != "a1" {
		t.Fatalf("a new session went to %s", c)
	}
}
