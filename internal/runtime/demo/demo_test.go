package demo_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/runtime/config"
	"github.com/breakwater-dev/breakwater/internal/runtime/demo"
	"github.com/breakwater-dev/breakwater/internal/runtime/gateway"
	"github.com/breakwater-dev/breakwater/internal/runtime/mock"
)

// TestDemoShowsFailuresWithinAMinute runs the embedded demo (its mock
// script and its configuration) and 20 of its background requests: the
// flaky provider's breaker opens, demo-a is rate limited (a cooldown and a
// model lockout), and every request is still answered by failing over.
func TestDemoShowsFailuresWithinAMinute(t *testing.T) {
	m := mock.New(demo.Script(), hclog.NewNullLogger())
	addr, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg, err := config.Parse(demo.Config("http://"+addr, "127.0.0.1:0"), "demo.yaml")
	if err != nil {
		t.Fatalf("the demo configuration is invalid: %v", err)
	}
	cfg.Server.AdminToken = config.Secret("demo-test-token")
	gw, err := gateway.Start(context.Background(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Close(ctx)
	}()

	if n := demo.Traffic(context.Background(), "http://"+gw.Addr(), time.Millisecond, 20); n != 20 {
		t.Fatalf("sent %d requests, want 20", n)
	}
	h := gw.Engine.Health()
	opened := false
	for _, tr := range h.Providers["demo-flaky"].Transitions {
		opened = opened || tr.To == "OPEN"
	}
	if !opened {
		t.Fatalf("demo-flaky's breaker never opened: %+v", h.Providers["demo-flaky"].Transitions)
	}
	if h.CoolingConnections == 0 && h.Lockouts == 0 {
		t.Fatal("no cooldown and no lockout after 20 demo requests: the console's cooldown panels would stay empty")
	}
	st := m.Stats()
	if st.ByKey["demo-key-f"].Calls == 0 || st.ByKey["demo-key-a"].Calls == 0 || st.ByKey["demo-key-b"].Calls == 0 || st.ByKey["demo-key-c"].Calls == 0 {
		t.Fatalf("the demo traffic must reach every connection: %v", st.ByKey)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n := demo.Traffic(ctx, "http://"+gw.Addr(), time.Millisecond, 40); n != 0 {
		t.Fatalf("a cancelled traffic loop sent %d requests, want 0", n)
	}
}
