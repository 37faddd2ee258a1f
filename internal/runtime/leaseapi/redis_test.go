package leaseapi

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/engine/lease"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
)

// TestLeasesFailClosedWhileRedisIsDown (docs/deployment.md, "Redis down"):
// on the Redis store, with a real redis-server killed, acquire and renew
// through the lease API are refused with a 500 internal_error, a leased
// request's fence check fails with ErrStoreUnavailable, and nothing is
// granted: once Redis is back the renew made during the outage did not
// extend the lease, the owner refused during the outage holds no lease,
// and acquiring works again.
func TestLeasesFailClosedWhileRedisIsDown(t *testing.T) {
	redisproc.Require(t)
	srv, err := redisproc.Start(filepath.Join(t.TempDir(), "leases"), "--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	st, err := redisstore.Open(redisstore.Options{URL: srv.URL(), Timeout: 200 * time.Millisecond, CheckInterval: 50 * time.Millisecond},
		engine.SystemClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	clock := clocktest.NewClock(epoch)
	m := lease.New(st, clock, lease.Options{})
	call := func(o, body string) Response {
		t.Helper()
		return Handle(ctx, m, app1, "application/json", o, []byte(body))
	}
	held, waiting := owner(1), owner(2)

	if r := call(held, `{"action":"acquire","model":"m1"}`); r.Status != 200 {
		t.Fatalf("acquire before the outage: %d %s", r.Status, r.Body)
	}
	first, err := m.Fence(ctx, "app1", held, 1)
	if err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	clock.Advance(time.Minute)
	refused := func(what string, r Response) {
		t.Helper()
		a := decode(t, r)
		if r.Status != 500 || a.Error == nil || a.Error.Code != "internal_error" || a.Generation != 0 {
			t.Fatalf("%s during the outage = %d %s, want 500 internal_error and no lease", what, r.Status, r.Body)
		}
		if !errors.Is(r.Err, engine.ErrStoreUnavailable) {
			t.Fatalf("%s during the outage: cause %v, want ErrStoreUnavailable", what, r.Err)
		}
		if strings.Contains(string(r.Body), "redis") || strings.Contains(string(r.Body), srv.Addr) {
			t.Fatalf("%s: the answer shows the store: %s", what, r.Body)
		}
	}
	// The first call detects the outage, the others fail fast: each kind twice.
	for range 2 {
		refused("acquire", call(waiting, `{"action":"acquire","model":"m1"}`))
		refused("renew", call(held, `{"action":"renew","generation":1}`))
		refused("re-acquire", call(held, `{"action":"acquire"}`))
		if _, err := m.Fence(ctx, "app1", held, 1); !errors.Is(err, engine.ErrStoreUnavailable) {
			t.Fatalf("fence during the outage: %v, want ErrStoreUnavailable", err)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The store probes once per CheckInterval; wait until a read succeeds.
	deadline := time.Now().Add(5 * time.Second)
	var got lease.Lease
	for {
		got, err = m.Fence(ctx, "app1", held, 1)
		if err == nil || !errors.Is(err, engine.ErrStoreUnavailable) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("fence after Redis returned: %v", err)
	}
	if !got.ExpiresAt.Equal(first.ExpiresAt) || got.Generation != 1 {
		t.Fatalf("lease after the outage = %+v, want the pre-outage lease (expires %v): a refused renew extended it", got, first.ExpiresAt)
	}
	if _, err := m.Fence(ctx, "app1", waiting, 1); !errors.Is(err, lease.ErrFenceStale) {
		t.Fatalf("fence of the owner refused during the outage: %v, want LEASE_FENCE_STALE (no lease granted)", err)
	}
	r := call(waiting, `{"action":"acquire","model":"m1"}`)
	if a := decode(t, r); r.Status != 200 || a.Generation != 1 || a.State != lease.StateActive {
		t.Fatalf("acquire after Redis returned = %d %s, want 200 generation 1", r.Status, r.Body)
	}
	r = call(held, `{"action":"renew","generation":1}`)
	if a := decode(t, r); r.Status != 200 || a.ExpiresAt != "2025-06-01T12:06:00Z" {
		t.Fatalf("renew after Redis returned = %d %s, want expiry now+5m", r.Status, r.Body)
	}
}
