package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/policies"
	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const gwConfig = `
server: {listen: "127.0.0.1:0"}
state:
  backend: redis
  redis_url: REDIS
  redis_key_prefix: "PREFIX"
providers:
  - id: p
    kind: openai
    base_url: http://127.0.0.1:1/v1
    models: [m]
    connections: [{id: c, api_key: k}]
`

// startGateway runs one in-process gateway on Redis and returns it with
// its log.
func startGateway(t *testing.T, redisURL, prefix string) (*gateway.Gateway, *syncBuffer) {
	t.Helper()
	cfg, err := config.Parse([]byte(strings.NewReplacer("REDIS", redisURL, "PREFIX", prefix).Replace(gwConfig)), "gw.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Policies.Dir = t.TempDir()
	logs := &syncBuffer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.Start(context.Background(), cfg, gateway.Options{Listener: ln,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Errorf("closing the gateway: %v", err)
		}
	})
	return g, logs
}

func requireRedis(t *testing.T) *redisproc.Server {
	t.Helper()
	redisproc.Require(t)
	srv, err := redisproc.Start(filepath.Join(t.TempDir(), "redis"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return srv
}

// waitLog waits until logs contain want.
func waitLog(t *testing.T, logs *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log never said %q:\n%s", want, logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPluginReloadReachesTheOtherInstances: a plugin reload through one
// instance's admin path makes the others reload their plugin files once;
// the reloading instance does not reload again, and nothing echoes back.
func TestPluginReloadReachesTheOtherInstances(t *testing.T) {
	srv := requireRedis(t)
	prefix := fmt.Sprintf("bwsync:%d:", time.Now().UnixNano())
	a, logsA := startGateway(t, srv.URL(), prefix)
	_, logsB := startGateway(t, srv.URL(), prefix)
	_, logsC := startGateway(t, srv.URL(), prefix)
	if err := a.Plugins.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	const reloaded = "plugins reloaded as another instance did"
	waitLog(t, logsB, reloaded)
	waitLog(t, logsC, reloaded)
	time.Sleep(1500 * time.Millisecond) // a version check or more
	for name, logs := range map[string]*syncBuffer{"a": logsA, "b": logsB, "c": logsC} {
		want := 1
		if name == "a" {
			want = 0
		}
		if n := strings.Count(logs.String(), reloaded); n != want {
			t.Errorf("instance %s reloaded its plugins %d times for one reload, want %d", name, n, want)
		}
	}
}

// TestOperatorRulesAndSettingsReachTheOtherInstance: in-process, the
// operator rules and a settings patch set on one instance are in force on
// the other, and so is the removal of the rules.
func TestOperatorRulesAndSettingsReachTheOtherInstance(t *testing.T) {
	srv := requireRedis(t)
	prefix := fmt.Sprintf("bwsync:%d:", time.Now().UnixNano())
	a, _ := startGateway(t, srv.URL(), prefix)
	b, _ := startGateway(t, srv.URL(), prefix)
	ctx := context.Background()
	rule := policies.OperatorRule{Provider: "p", Status: 400, Match: "quota", Scope: "connection", Reason: "quota_exhausted"}
	if err := a.Policies.SetOperatorRules(ctx, []policies.OperatorRule{rule}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Engine.UpdateSettings(ctx, []byte(`{"max_attempts_per_request": 4}`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(b.Policies.OperatorRules()) != 1 || b.Engine.Settings().MaxAttemptsPerRequest != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("instance b: rules %v, max_attempts_per_request %d", b.Policies.OperatorRules(), b.Engine.Settings().MaxAttemptsPerRequest)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := b.Policies.OperatorRules()[0]; got.Match != "quota" || got.Reason != "quota_exhausted" {
		t.Fatalf("instance b rule = %+v", got)
	}
	if err := a.Policies.SetOperatorRules(ctx, nil); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Second)
	for len(b.Policies.OperatorRules()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("instance b still has %v after the rules were removed", b.Policies.OperatorRules())
		}
		time.Sleep(2 * time.Millisecond)
	}
}
