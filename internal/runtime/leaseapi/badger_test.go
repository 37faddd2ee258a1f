package leaseapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine/lease"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/badgerstore"
)

// TestLeasesSurviveReopen: a lease and its connection hold, written to a
// real Badger store, are intact after the store is closed and reopened.
func TestLeasesSurviveReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := clocktest.NewClock(epoch)
	o := owner(1)

	st, err := badgerstore.Open(dir, clock, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	m := lease.New(st, clock, lease.Options{})
	if r := Handle(ctx, m, app1, "application/json", o, []byte(`{"action":"acquire","model":"gpt-4o"}`)); r.Status != 200 {
		t.Fatalf("acquire: %d %s", r.Status, r.Body)
	}
	l, err := m.Fence(ctx, "app1", o, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Bind(ctx, l, connA); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(time.Minute)
	st, err = badgerstore.Open(dir, clock, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m = lease.New(st, clock, lease.Options{})

	got, err := m.Fence(ctx, "app1", o, 1)
	if err != nil || got.Connection != connA || got.Model != "gpt-4o" || !got.ExpiresAt.Equal(epoch.Add(lease.DefaultTTL)) {
		t.Fatalf("fence after reopen = %+v, %v", got, err)
	}
	if sha, until, held := m.Holder(ctx, connA); !held || sha != l.OwnerHash() || !until.Equal(got.ExpiresAt) {
		t.Fatalf("holder after reopen = %s %v %v", sha, until, held)
	}
	other, err := m.Acquire(ctx, "app1", owner(2), "")
	if err != nil {
		t.Fatal(err)
	}
	var he *lease.HeldError
	if err := m.Bind(ctx, other, connA); !errors.As(err, &he) {
		t.Fatalf("bind by another owner after reopen = %v, want HeldError", err)
	}
	// Re-acquire after the restart keeps the generation.
	a := decode(t, Handle(ctx, m, app1, "application/json", o, []byte(`{"action":"acquire"}`)))
	if a.Generation != 1 {
		t.Fatalf("re-acquire after reopen = %+v, want generation 1", a)
	}
}

// TestBadgerBindRace: the exclusive bind holds on the real store's
// compare-and-set too.
func TestBadgerBindRace(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(epoch)
	st, err := badgerstore.Open(t.TempDir(), clock, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := lease.New(st, clock, lease.Options{})
	var leases []lease.Lease
	for i := range 2 {
		l, err := m.Acquire(ctx, fmt.Sprintf("app%d", i+1), owner(i+1), "")
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	for round := range 20 {
		conn := fmt.Sprintf("openai/key-%d", round)
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, l := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = m.Bind(ctx, l, conn)
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			var he *lease.HeldError
			switch {
			case err == nil:
				wins++
			case !errors.As(err, &he):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d owners bound %s, want exactly 1", round, wins, conn)
		}
		for _, l := range leases {
			if err := m.Bind(ctx, l, "private/"+l.KeyID); err != nil {
				t.Fatal(err)
			}
		}
	}
}
