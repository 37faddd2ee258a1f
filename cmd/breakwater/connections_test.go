package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// TestConnectionsResetCommand runs `breakwater connections reset` against a
// real gateway in front of the mock: a 402 makes a1 credits_exhausted, the
// command brings it back.
func TestConnectionsResetCommand(t *testing.T) {
	base, _ := cliGateway(t, `rules: [{key: sk-a1, responses: [{status: 402}]}]`, "[m1]")
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"alpha/m1","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if state := a1State(t, base); state != "credits_exhausted" {
		t.Fatalf("a1 after a 402: %q", state)
	}

	run := func(args ...string) (string, error) {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	t.Setenv("CLI_ADMIN_TOKEN", "cli-admin-token-0123456789")
	// A wrong connection is refused with the gateway's message.
	out, err := run("connections", "reset", "--provider", "alpha", "--connection", "zz", "--admin-url", base, "--admin-token-env", "CLI_ADMIN_TOKEN")
	if err == nil || !strings.Contains(out, `admin API answered 400`) || !strings.Contains(out, `has no connection`) {
		t.Fatalf("unknown connection: %v %q", err, out)
	}
	out, err = run("connections", "reset", "--provider", "alpha", "--connection", "a1", "--admin-url", base, "--admin-token-env", "CLI_ADMIN_TOKEN")
	if err != nil || strings.TrimSpace(out) != "alpha/a1: reset (was credits_exhausted, 0 model lockouts cleared)" {
		t.Fatalf("reset: %v %q", err, out)
	}
	if state := a1State(t, base); state != "" {
		t.Fatalf("a1 after the reset: %q, want clean", state)
	}
	// Without the token variable the command refuses before calling.
	if _, err := run("connections", "reset", "--provider", "alpha", "--admin-url", base, "--admin-token-env", "CLI_UNSET_TOKEN"); err == nil {
		t.Fatal("ran without an admin token")
	}
}

// cliGateway runs the mock with script and a gateway in front of it with
// one provider alpha (openai, models, keys sk-a1 and sk-a2), admin token
// cli-admin-token-0123456789; it returns the gateway's base URL and the
// mock.
func cliGateway(t *testing.T, script, models string) (string, *mock.Server) {
	t.Helper()
	sc, err := mock.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	m := mock.New(sc, nil)
	maddr, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	cfg, err := config.Parse([]byte(`
server: {listen: 127.0.0.1:0, admin_token: cli-admin-token-0123456789}
state: {backend: memory}
providers:
  - id: alpha
    kind: openai
    base_url: http://`+maddr+`/v1
    models: `+models+`
    connections: [{id: a1, api_key: sk-a1}, {id: a2, api_key: sk-a2}]
`), "cli.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.Start(context.Background(), cfg, gateway.Options{Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Close(ctx)
	})
	return "http://" + gw.Addr(), m
}

// a1State is a1's test status in the cooldowns view, "" when it holds no
// state.
func a1State(t *testing.T, base string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/resilience/cooldowns?provider=alpha", nil)
	req.Header.Set("Authorization", "Bearer cli-admin-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Connections []struct {
			Connection string `json:"connection"`
			TestStatus string `json:"test_status"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	for _, c := range body.Connections {
		if c.Connection == "a1" {
			return c.TestStatus
		}
	}
	return ""
}

// TestConnectionsTestCommand runs `breakwater connections test` against a
// real gateway in front of the mock: a healthy connection passes, a
// failing one prints the reason and exits 1, an unknown one gets the
// gateway's 404.
func TestConnectionsTestCommand(t *testing.T) {
	base, m := cliGateway(t, `rules: [{key: sk-a2, responses: [{status: 500}]}]`, "[m1, m2]")
	run := func(args ...string) (string, error) {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, "--admin-url", base, "--admin-token-env", "CLI_ADMIN_TOKEN"))
		err := cmd.Execute()
		return out.String(), err
	}
	t.Setenv("CLI_ADMIN_TOKEN", "cli-admin-token-0123456789")
	out, err := run("connections", "test", "--provider", "alpha", "--connection", "a1", "--model", "m2")
	if err != nil || !regexp.MustCompile(`^alpha/a1: test passed on m2 \(status 200, \d+ ms\); breaker CLOSED -> CLOSED\n$`).MatchString(out) {
		t.Fatalf("healthy a1: %v %q", err, out)
	}
	if n := m.Stats().ByKeyModel["sk-a1|m2"]; n != 1 {
		t.Fatalf("the mock saw %d calls of a1 on m2, want 1", n)
	}
	out, err = run("connections", "test", "--provider", "alpha", "--connection", "a2")
	if err == nil || !strings.HasPrefix(out, "alpha/a2: test failed on m1: status 500, server_error: ") {
		t.Fatalf("failing a2: %v %q", err, out)
	}
	out, err = run("connections", "test", "--provider", "alpha", "--connection", "zz")
	if err == nil || !strings.Contains(out, "admin API answered 404") || !strings.Contains(out, `has no connection "zz"`) {
		t.Fatalf("unknown connection: %v %q", err, out)
	}
	if _, err := run("connections", "test", "--provider", "alpha"); err == nil {
		t.Fatal("ran without --connection")
	}
}
