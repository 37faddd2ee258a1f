package gateway_test

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
)

// A Start that fails after the store, plugin host, engine, request loop and
// server are built (the listen address is taken) closes all of them: no
// goroutine is left, and the Badger directory can be opened again.
func TestFailedStartLeaksNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	cfgYAML := strings.NewReplacer("LISTEN", taken.Addr().String(), "DIR", filepath.Join(dir, "data")).Replace(`
server: {listen: LISTEN}
state: {backend: badger, path: DIR}
providers:
  - {id: p, kind: openai, base_url: http://127.0.0.1:9/v1, models: [m], connections: [{id: c, api_key: sk-c}]}
`)
	cfg, err := config.Parse([]byte(cfgYAML), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ignore := goleak.IgnoreCurrent()
	for range 2 { // the second run finds the Badger directory unlocked
		g, err := gateway.Start(context.Background(), cfg, gateway.Options{})
		if err == nil || g != nil || !strings.Contains(err.Error(), "listening on server.listen") {
			t.Fatalf("Start on a taken address: %v, %v", g, err)
		}
	}
	goleak.VerifyNone(t, ignore)
}

// Close is idempotent.
func TestCloseTwice(t *testing.T) {
	h := start(t, baseConfig)
	if err := h.gw.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := h.gw.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	h.gw = nil
}

// namesLogger records the full name of every sub-logger made from it.
type namesLogger struct {
	hclog.Logger
	mu    *sync.Mutex
	names *[]string
}

func (l namesLogger) wrap(n hclog.Logger) hclog.Logger {
	l.mu.Lock()
	*l.names = append(*l.names, n.Name())
	l.mu.Unlock()
	return namesLogger{Logger: n, mu: l.mu, names: l.names}
}

func (l namesLogger) Named(name string) hclog.Logger      { return l.wrap(l.Logger.Named(name)) }
func (l namesLogger) ResetNamed(name string) hclog.Logger { return l.wrap(l.Logger.ResetNamed(name)) }
func (l namesLogger) With(args ...any) hclog.Logger {
	return namesLogger{Logger: l.Logger.With(args...), mu: l.mu, names: l.names}
}

// Every subsystem's logger is named once, by its caller: no name repeats a
// segment (no breakwater.engine.engine, no breakwater.store.store.badger).
func TestLoggerNamesNeverRepeatASegment(t *testing.T) {
	var names []string
	log := namesLogger{Logger: hclog.New(&hclog.LoggerOptions{Name: "breakwater", Output: &syncBuffer{}}), mu: &sync.Mutex{}, names: &names}
	cfgYAML := strings.ReplaceAll(baseConfig, "state:\n  backend: memory", "state:\n  backend: badger\n  path: "+filepath.Join(t.TempDir(), "data"))
	cfg, err := config.Parse([]byte(strings.ReplaceAll(cfgYAML, "MOCK_URL", "http://127.0.0.1:9")), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.Start(context.Background(), cfg, gateway.Options{Logger: log, Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"breakwater.engine", "breakwater.store", "breakwater.store.badger", "breakwater.policies",
		"breakwater.proxy", "breakwater.access", "breakwater.server"} {
		if !slices.Contains(names, want) {
			t.Errorf("no logger %s among %v", want, names)
		}
	}
	for _, n := range names {
		segs := strings.Split(n, ".")
		for i := range segs {
			if slices.Contains(segs[i+1:], segs[i]) {
				t.Errorf("logger %q repeats %q", n, segs[i])
			}
		}
	}
}
