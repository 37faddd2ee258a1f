package lease

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
)

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// owner returns a valid owner value derived from n.
func owner(n int) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(n*31 + i)
	}
	return OwnerPrefix + base64.RawURLEncoding.EncodeToString(b)
}

type fixture struct {
	clock *clocktest.Clock
	store engine.Store
	m     *Manager
}

func newFixture() *fixture {
	clock := clocktest.NewClock(epoch)
	store := newMemStore(clock)
	return &fixture{clock: clock, store: store, m: New(store, clock, Options{})}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var le *Error
	if !errors.As(err, &le) || le.Code != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}

func TestOwnerHash(t *testing.T) {
	valid := owner(1)
	sum := sha256.Sum256([]byte(valid))
	tests := []struct {
		name, owner, code string
	}{
		{"valid", valid, ""},
		{"valid with - and _", OwnerPrefix + strings.Repeat("-", 21) + strings.Repeat("_", 22), ""},
		{"missing", "", CodeContextRequired},
		{"wrong prefix", "vlx_" + valid[4:], CodeContextInvalid},
		{"no prefix", valid[4:] + "abcd", CodeContextInvalid},
		{"42 chars", valid[:len(valid)-1], CodeContextInvalid},
		{"44 chars", valid + "A", CodeContextInvalid},
		{"padding", valid[:len(valid)-1] + "=", CodeContextInvalid},
		{"std base64 plus", valid[:len(valid)-1] + "+", CodeContextInvalid},
		{"std base64 slash", valid[:len(valid)-1] + "/", CodeContextInvalid},
		{"space", valid[:len(valid)-1] + " ", CodeContextInvalid},
		{"non-ascii", valid[:len(valid)-2] + "é", CodeContextInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := OwnerHash(tt.owner)
			if tt.code != "" {
				wantCode(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatalf("OwnerHash: %v", err)
			}
			if tt.owner == valid && h != hex.EncodeToString(sum[:]) {
				t.Fatalf("hash = %s, want sha256 hex", h)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	o := owner(1)

	l, err := f.m.Acquire(ctx, "app1", o, "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	if l.Generation != 1 || !l.ExpiresAt.Equal(epoch.Add(5*time.Minute)) || l.KeyID != "app1" || l.Model != "gpt-4o" {
		t.Fatalf("acquire = %+v, want generation 1 expiring in 5 min", l)
	}

	f.clock.Advance(time.Minute)
	l, err = f.m.Renew(ctx, "app1", o, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.Generation != 1 || !l.ExpiresAt.Equal(epoch.Add(6*time.Minute)) {
		t.Fatalf("renew = %+v, want generation 1 expiring at +6 min", l)
	}
	// Renew without a generation is allowed.
	if _, err := f.m.Renew(ctx, "app1", o, 0); err != nil {
		t.Fatal(err)
	}

	// Re-acquire by the same owner keeps the generation (and the model
	// may switch: the lease owns a connection, not a model).
	f.clock.Advance(time.Minute)
	l, err = f.m.Acquire(ctx, "app1", o, "gpt-5")
	if err != nil {
		t.Fatal(err)
	}
	if l.Generation != 1 || l.Model != "gpt-5" || !l.ExpiresAt.Equal(epoch.Add(7*time.Minute)) {
		t.Fatalf("re-acquire = %+v, want generation 1, model gpt-5, +7 min", l)
	}
	if _, err := f.m.Fence(ctx, "app1", o, 1); err != nil {
		t.Fatalf("fence generation 1: %v", err)
	}

	// Release is idempotent.
	for i := range 3 {
		if err := f.m.Release(ctx, "app1", o, 0); err != nil {
			t.Fatalf("release #%d: %v", i+1, err)
		}
	}
	_, err = f.m.Renew(ctx, "app1", o, 1)
	wantCode(t, err, CodeNotActive)
	if le := (*Error)(nil); errors.As(err, &le) && le.State != StateReleased {
		t.Fatalf("renew after release state = %q, want RELEASED", le.State)
	}
	_, err = f.m.Fence(ctx, "app1", o, 1)
	wantCode(t, err, CodeFenceStale)

	// Acquire after release continues at the next generation, fencing out
	// requests still carrying generation 1.
	l, err = f.m.Acquire(ctx, "app1", o, "")
	if err != nil {
		t.Fatal(err)
	}
	if l.Generation != 2 {
		t.Fatalf("acquire after release generation = %d, want 2", l.Generation)
	}
	_, err = f.m.Fence(ctx, "app1", o, 1)
	wantCode(t, err, CodeFenceStale)
	if _, err := f.m.Fence(ctx, "app1", o, 2); err != nil {
		t.Fatalf("fence generation 2: %v", err)
	}

	// Release of an owner never seen is fine too.
	if err := f.m.Release(ctx, "app1", owner(99), 0); err != nil {
		t.Fatalf("release unknown owner: %v", err)
	}
}

func TestOwnerValueNeverStored(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	o := owner(7)
	l, err := f.m.Acquire(ctx, "app1", o, "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Bind(ctx, l, "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	kvs, _ := f.store.Scan(ctx, "")
	if len(kvs) != 2 {
		t.Fatalf("store holds %d keys, want owner record and connection claim", len(kvs))
	}
	secret := o[len(OwnerPrefix):]
	sha, _ := OwnerHash(o)
	for _, kv := range kvs {
		if strings.Contains(kv.Key, secret) || strings.Contains(string(kv.Value), secret) {
			t.Fatalf("owner value stored in %s", kv.Key)
		}
	}
	if kvs[1].Key != "lease/owner/"+sha || kvs[0].Key != "lease/conn/openai/key-a" {
		t.Fatalf("keys = %s, %s", kvs[0].Key, kvs[1].Key)
	}
	if l.OwnerHash() != sha {
		t.Fatalf("OwnerHash = %s, want %s", l.OwnerHash(), sha)
	}
}

func TestForeignKey(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	o := owner(1)
	if _, err := f.m.Acquire(ctx, "app1", o, ""); err != nil {
		t.Fatal(err)
	}
	_, err := f.m.Acquire(ctx, "app2", o, "")
	wantCode(t, err, CodeOwnerMismatch)
	_, err = f.m.Renew(ctx, "app2", o, 1)
	wantCode(t, err, CodeOwnerMismatch)
	wantCode(t, f.m.Release(ctx, "app2", o, 0), CodeOwnerMismatch)
	_, err = f.m.Fence(ctx, "app2", o, 1)
	wantCode(t, err, CodeOwnerMismatch)
	// The lease is untouched.
	if _, err := f.m.Fence(ctx, "app1", o, 1); err != nil {
		t.Fatalf("owner's own fence after foreign attempts: %v", err)
	}
	// Still the other key's owner after release and expiry (for Retention).
	if err := f.m.Release(ctx, "app1", o, 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, f.m.Release(ctx, "app2", o, 0), CodeOwnerMismatch)
	_, err = f.m.Acquire(ctx, "app2", o, "")
	wantCode(t, err, CodeOwnerMismatch)
	// Past Retention the record is gone and the owner starts afresh.
	f.clock.Advance(DefaultRetention + time.Second)
	l, err := f.m.Acquire(ctx, "app2", o, "")
	if err != nil || l.Generation != 1 {
		t.Fatalf("acquire after retention = %+v, %v; want generation 1", l, err)
	}
}

func TestFence(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(f *fixture, o string)
		key   string
		gen   int64
		code  string
		state string
	}{
		{name: "active exact generation", key: "app1", gen: 1},
		{name: "stale generation", key: "app1", gen: 2, code: CodeFenceStale},
		{name: "no generation", key: "app1", gen: 0, code: CodeContextInvalid},
		{name: "foreign key", key: "app2", gen: 1, code: CodeOwnerMismatch},
		{name: "no lease", setup: func(f *fixture, o string) {
			_ = f.m.Release(ctx, "app1", o, 0)
			f.clock.Advance(DefaultRetention + time.Minute)
		},
			key: "app1", gen: 1, code: CodeFenceStale},
		{name: "released", setup: func(f *fixture, o string) { _ = f.m.Release(ctx, "app1", o, 0) },
			key: "app1", gen: 1, code: CodeFenceStale, state: StateReleased},
		{name: "expired", setup: func(f *fixture, _ string) { f.clock.Advance(DefaultTTL) },
			key: "app1", gen: 1, code: CodeFenceStale, state: StateExpired},
		{name: "just before expiry", setup: func(f *fixture, _ string) { f.clock.Advance(DefaultTTL - time.Millisecond) },
			key: "app1", gen: 1},
		{name: "old generation after re-acquire", setup: func(f *fixture, o string) {
			_ = f.m.Release(ctx, "app1", o, 0)
			_, _ = f.m.Acquire(ctx, "app1", o, "")
		}, key: "app1", gen: 1, code: CodeFenceStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			o := owner(3)
			if _, err := f.m.Acquire(ctx, "app1", o, ""); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(f, o)
			}
			l, err := f.m.Fence(ctx, tt.key, o, tt.gen)
			if tt.code == "" {
				if err != nil || l.Generation != tt.gen {
					t.Fatalf("fence = %+v, %v", l, err)
				}
				return
			}
			wantCode(t, err, tt.code)
			var le *Error
			errors.As(err, &le)
			if le.State != tt.state {
				t.Fatalf("state = %q, want %q", le.State, tt.state)
			}
		})
	}
}

func TestStaleGenerationOnRenewAndRelease(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	o := owner(1)
	if _, err := f.m.Acquire(ctx, "app1", o, ""); err != nil {
		t.Fatal(err)
	}
	_, err := f.m.Renew(ctx, "app1", o, 2)
	wantCode(t, err, CodeFenceStale)
	wantCode(t, f.m.Release(ctx, "app1", o, 5), CodeFenceStale)
	if _, err := f.m.Fence(ctx, "app1", o, 1); err != nil {
		t.Fatalf("a stale release must not end the lease: %v", err)
	}
	if err := f.m.Release(ctx, "app1", o, 1); err != nil {
		t.Fatal(err)
	}
	// Released: a later release, even with a stale generation, is a no-op.
	if err := f.m.Release(ctx, "app1", o, 5); err != nil {
		t.Fatalf("release of a released lease: %v", err)
	}
}

func TestCallerValidation(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	_, err := f.m.Acquire(ctx, "", owner(1), "")
	wantCode(t, err, CodeUnauthenticated)
	_, err = f.m.Acquire(ctx, "app1", "", "")
	wantCode(t, err, CodeContextRequired)
	_, err = f.m.Renew(ctx, "app1", "vlo_short", 0)
	wantCode(t, err, CodeContextInvalid)
	wantCode(t, f.m.Release(ctx, "app1", "nope", 0), CodeContextInvalid)
	_, err = f.m.Fence(ctx, "app1", "", 1)
	wantCode(t, err, CodeContextRequired)
}

func TestBindHoldsConnection(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	a, _ := f.m.Acquire(ctx, "app1", owner(1), "")
	b, _ := f.m.Acquire(ctx, "app1", owner(2), "")

	if _, _, held := f.m.Holder(ctx, "openai/key-a"); held {
		t.Fatal("fresh connection reads as held")
	}
	if err := f.m.Bind(ctx, a, "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	// Binding again is a no-op.
	if err := f.m.Bind(ctx, a, "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	sha, until, held := f.m.Holder(ctx, "openai/key-a")
	if !held || sha != a.OwnerHash() || !until.Equal(a.ExpiresAt) {
		t.Fatalf("holder = %s %v %v, want a until %v", sha, until, held, a.ExpiresAt)
	}
	err := f.m.Bind(ctx, b, "openai/key-a")
	var he *HeldError
	if !errors.As(err, &he) || !he.Until.Equal(a.ExpiresAt) {
		t.Fatalf("bind by other owner = %v, want HeldError until %v", err, a.ExpiresAt)
	}
	l, _ := f.m.Fence(ctx, "app1", owner(1), 1)
	if l.Connection != "openai/key-a" {
		t.Fatalf("fenced lease connection = %q", l.Connection)
	}

	// Release frees the connection at once.
	if err := f.m.Release(ctx, "app1", owner(1), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, held := f.m.Holder(ctx, "openai/key-a"); held {
		t.Fatal("connection still held after release")
	}
	if _, ok, _ := f.store.Get(ctx, "lease/conn/openai/key-a"); ok {
		t.Fatal("connection claim still stored after release")
	}
	if err := f.m.Bind(ctx, b, "openai/key-a"); err != nil {
		t.Fatalf("bind after release: %v", err)
	}
}

func TestBindRejectsStaleLease(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	old, _ := f.m.Acquire(ctx, "app1", owner(1), "")
	_ = f.m.Release(ctx, "app1", owner(1), 0)
	if _, err := f.m.Acquire(ctx, "app1", owner(1), ""); err != nil {
		t.Fatal(err)
	}
	wantCode(t, f.m.Bind(ctx, old, "openai/key-a"), CodeFenceStale)
	if _, _, held := f.m.Holder(ctx, "openai/key-a"); held {
		t.Fatal("stale bind left a claim")
	}
	if err := f.m.Bind(ctx, Lease{Generation: 1}, "openai/key-a"); err == nil {
		t.Fatal("Bind with a Lease not from the Manager succeeded")
	}
}

// TestBindRace: two owners race for one connection; in each of 100 rounds
// exactly one wins and the other sees the winner's hold.
func TestBindRace(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	a, _ := f.m.Acquire(ctx, "app1", owner(1), "")
	b, _ := f.m.Acquire(ctx, "app2", owner(2), "")
	wins := map[string]int{}
	for round := range 100 {
		conn := fmt.Sprintf("openai/key-%d", round)
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, l := range []Lease{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = f.m.Bind(ctx, l, conn)
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			var he *HeldError
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: both owners bound %s", round, conn)
				}
				winner = i
			case errors.As(err, &he):
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody bound %s", round, conn)
		}
		w := []Lease{a, b}[winner]
		if sha, _, held := f.m.Holder(ctx, conn); !held || sha != w.OwnerHash() {
			t.Fatalf("round %d: holder = %s, want the winner", round, sha)
		}
		wins[w.KeyID]++
		// Each owner holds one connection: move both back to a private one
		// so the next round starts from two free owners of one connection.
		for _, l := range []Lease{a, b} {
			if err := f.m.Bind(ctx, l, "private/"+l.KeyID); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, held := f.m.Holder(ctx, conn); held {
			t.Fatalf("round %d: moving the winner away did not free %s", round, conn)
		}
	}
	t.Logf("wins: %v", wins)
}

// TestAcquireRace: concurrent acquires of one new owner agree on
// generation 1.
func TestAcquireRace(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	var wg sync.WaitGroup
	gens := make([]int64, 8)
	for i := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := f.m.Acquire(ctx, "app1", owner(1), "")
			if err != nil {
				t.Error(err)
			}
			gens[i] = l.Generation
		}()
	}
	wg.Wait()
	for _, g := range gens {
		if g != 1 {
			t.Fatalf("generations = %v, want all 1", gens)
		}
	}
}

func TestBindMovesGeneration(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	a, _ := f.m.Acquire(ctx, "app1", owner(1), "")
	b, _ := f.m.Acquire(ctx, "app1", owner(2), "")
	if err := f.m.Bind(ctx, a, "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Bind(ctx, a, "openai/key-b"); err != nil {
		t.Fatal(err)
	}
	if _, _, held := f.m.Holder(ctx, "openai/key-a"); held {
		t.Fatal("previous connection still held after the move")
	}
	if _, ok, _ := f.store.Get(ctx, "lease/conn/openai/key-a"); ok {
		t.Fatal("previous connection claim still stored")
	}
	if sha, _, held := f.m.Holder(ctx, "openai/key-b"); !held || sha != a.OwnerHash() {
		t.Fatal("new connection not held by the moved lease")
	}
	l, err := f.m.Fence(ctx, "app1", owner(1), 1)
	if err != nil || l.Generation != 1 || l.Connection != "openai/key-b" {
		t.Fatalf("after move fence = %+v, %v; want generation 1 on key-b", l, err)
	}
	if err := f.m.Bind(ctx, b, "openai/key-a"); err != nil {
		t.Fatalf("other owner binding the freed connection: %v", err)
	}
}

func TestExpiryFreesConnection(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	a, _ := f.m.Acquire(ctx, "app1", owner(1), "")
	if err := f.m.Bind(ctx, a, "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(DefaultTTL - time.Second)
	b, _ := f.m.Acquire(ctx, "app1", owner(2), "")
	var he *HeldError
	if err := f.m.Bind(ctx, b, "openai/key-a"); !errors.As(err, &he) {
		t.Fatalf("bind 1 s before expiry = %v, want HeldError", err)
	}
	f.clock.Advance(time.Second)
	if _, _, held := f.m.Holder(ctx, "openai/key-a"); held {
		t.Fatal("connection held at the lease's expiry")
	}
	if err := f.m.Bind(ctx, b, "openai/key-a"); err != nil {
		t.Fatalf("bind after expiry: %v", err)
	}
	_, err := f.m.Renew(ctx, "app1", owner(1), 1)
	wantCode(t, err, CodeNotActive)
	l, err := f.m.Acquire(ctx, "app1", owner(1), "")
	if err != nil || l.Generation != 2 || l.Connection != "" {
		t.Fatalf("acquire after expiry = %+v, %v; want generation 2, unbound", l, err)
	}
	if err := f.m.Bind(ctx, l, "openai/key-a"); !errors.As(err, &he) {
		t.Fatalf("expired owner rebinding its old connection = %v, want HeldError", err)
	}
}

func TestRenewKeepsConnection(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	a, _ := f.m.Acquire(ctx, "app1", owner(1), "")
	if err := f.m.Bind(ctx, a, "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(4 * time.Minute)
	r, err := f.m.Renew(ctx, "app1", owner(1), 1)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(4 * time.Minute) // past the first expiry
	_, until, held := f.m.Holder(ctx, "openai/key-a")
	if !held || !until.Equal(r.ExpiresAt) || !until.Equal(epoch.Add(9*time.Minute)) {
		t.Fatalf("holder after renew = %v %v, want held until +9 min", until, held)
	}
	// Acquire (same owner, active) keeps the binding too.
	l, err := f.m.Acquire(ctx, "app1", owner(1), "")
	if err != nil || l.Connection != "openai/key-a" || l.Generation != 1 {
		t.Fatalf("re-acquire = %+v, %v", l, err)
	}
	f.clock.Advance(4*time.Minute + 59*time.Second)
	if _, _, held := f.m.Holder(ctx, "openai/key-a"); !held {
		t.Fatal("re-acquire did not extend the connection hold")
	}
}

func TestReopenKeepsLeases(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	a, _ := f.m.Acquire(ctx, "app1", owner(1), "")
	if err := f.m.Bind(ctx, a, "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	m2 := New(f.store, f.clock, Options{})
	l, err := m2.Fence(ctx, "app1", owner(1), 1)
	if err != nil || l.Connection != "openai/key-a" {
		t.Fatalf("fence on a new manager = %+v, %v", l, err)
	}
	if sha, _, held := m2.Holder(ctx, "openai/key-a"); !held || sha != a.OwnerHash() {
		t.Fatal("connection not held on a new manager")
	}
}

func TestOptionsTTL(t *testing.T) {
	clock := clocktest.NewClock(epoch)
	m := New(newMemStore(clock), clock, Options{TTL: 30 * time.Second})
	l, err := m.Acquire(context.Background(), "app1", owner(1), "")
	if err != nil || !l.ExpiresAt.Equal(epoch.Add(30*time.Second)) {
		t.Fatalf("acquire = %+v, %v; want expiry +30 s", l, err)
	}
}

func TestCapacity(t *testing.T) {
	now := epoch
	tests := []struct {
		name    string
		holders []time.Time
		want    time.Duration
	}{
		{"earliest expiry", []time.Time{now.Add(200 * time.Second), now.Add(90 * time.Second), now.Add(120 * time.Second)}, 90 * time.Second},
		{"single", []time.Time{now.Add(42 * time.Second)}, 42 * time.Second},
		{"clamped up to 1 s", []time.Time{now.Add(200 * time.Millisecond)}, time.Second},
		{"already past", []time.Time{now.Add(-time.Minute)}, time.Second},
		{"clamped down to 300 s", []time.Time{now.Add(time.Hour)}, 300 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Capacity(tt.holders, now)
			if e == nil || e.Status != 429 || e.Code != "LEASE_CAPACITY_UNAVAILABLE" || e.State != "WAITING_FOR_CAPACITY" {
				t.Fatalf("Capacity = %+v", e)
			}
			if e.RetryAfter != tt.want {
				t.Fatalf("RetryAfter = %v, want %v", e.RetryAfter, tt.want)
			}
			if !errors.Is(e, ErrCapacityUnavailable) {
				t.Fatal("errors.Is(capacity error, ErrCapacityUnavailable) = false")
			}
		})
	}
	if e := Capacity(nil, now); e != nil {
		t.Fatalf("Capacity with no holders = %+v, want nil (not lease contention)", e)
	}
}

// TestCapacityFromHolds: the router's view, holds read through Holder.
func TestCapacityFromHolds(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	a, _ := f.m.Acquire(ctx, "app1", owner(1), "")
	_ = f.m.Bind(ctx, a, "p/c1")
	f.clock.Advance(time.Minute)
	b, _ := f.m.Acquire(ctx, "app1", owner(2), "")
	_ = f.m.Bind(ctx, b, "p/c2")
	f.clock.Advance(time.Minute)
	var holds []time.Time
	for _, c := range []string{"p/c1", "p/c2"} {
		if _, until, held := f.m.Holder(ctx, c); held {
			holds = append(holds, until)
		}
	}
	e := Capacity(holds, f.clock.Now())
	if e == nil || e.RetryAfter != 3*time.Minute {
		t.Fatalf("capacity = %+v, want Retry-After 180 s (first lease expires at +5 min, now +2 min)", e)
	}
}

func TestErrorStatuses(t *testing.T) {
	tests := []struct {
		err    *Error
		status int
		code   string
	}{
		{ErrUnauthenticated, 401, "invalid_api_key"},
		{ErrNotPermitted, 403, "LEASE_NOT_PERMITTED"},
		{ErrContextRequired, 400, "LEASE_CONTEXT_REQUIRED"},
		{ErrContextInvalid, 400, "LEASE_CONTEXT_INVALID"},
		{ErrUnsupportedMediaType, 415, "unsupported_media_type"},
		{ErrFenceStale, 409, "LEASE_FENCE_STALE"},
		{ErrOwnerMismatch, 409, "LEASE_OWNER_MISMATCH"},
		{ErrNotActive, 409, "LEASE_NOT_ACTIVE"},
		{ErrCapacityUnavailable, 429, "LEASE_CAPACITY_UNAVAILABLE"},
	}
	for _, tt := range tests {
		if tt.err.Status != tt.status || tt.err.Code != tt.code {
			t.Errorf("%s: status %d code %s", tt.code, tt.err.Status, tt.err.Code)
		}
	}
	wrapped := fmt.Errorf("dispatch: %w", ErrFenceStale.with("x", ""))
	if !errors.Is(wrapped, ErrFenceStale) || errors.Is(wrapped, ErrOwnerMismatch) {
		t.Fatal("errors.Is does not match by code")
	}
}

// countingStore counts Gets, to pin how often Holder reads the store.
type countingStore struct {
	engine.Store
	mu   sync.Mutex
	gets int
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Store.Get(ctx, key)
}

func (c *countingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets
}

// TestHolderIsCachedAndForgotten: Holder reads the store once per
// connection and change (routing an unleased request costs no store read
// after that); this Manager's own writes drop the cached answer at once,
// another instance's when it is told (Forget), and a held answer lapses at
// the lease's expiry by itself.
func TestHolderIsCachedAndForgotten(t *testing.T) {
	clock := clocktest.NewClock(epoch)
	shared := newMemStore(clock)
	ca, cb := &countingStore{Store: shared}, &countingStore{Store: shared}
	a, b := New(ca, clock, Options{}), New(cb, clock, Options{})
	ctx := context.Background()
	const ref = "openai/key-a"

	if _, _, held := b.Holder(ctx, ref); held {
		t.Fatal("fresh connection reads as held")
	}
	reads := cb.count()
	for range 100 {
		b.Holder(ctx, ref)
	}
	if n := cb.count() - reads; n != 0 {
		t.Fatalf("100 cached Holder calls read the store %d times, want 0", n)
	}

	l, err := a.Acquire(ctx, "app1", owner(1), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, held := a.Holder(ctx, ref); held {
		t.Fatal("held before the bind")
	}
	if err := a.Bind(ctx, l, ref); err != nil {
		t.Fatal(err)
	}
	if _, _, held := a.Holder(ctx, ref); !held {
		t.Fatal("the binding instance's own cache was not dropped by its bind")
	}
	if _, _, held := b.Holder(ctx, ref); held {
		t.Fatal("instance b saw the bind before being told: its cache is not in use")
	}
	b.Forget("lease/conn/" + ref)
	sha, until, held := b.Holder(ctx, ref)
	if !held || sha != l.OwnerHash() || !until.Equal(l.ExpiresAt) {
		t.Fatalf("b after Forget: %s %v %v", sha, until, held)
	}

	// A renew on a moves the expiry; b learns it through the owner key.
	clock.Advance(time.Minute)
	r, err := a.Renew(ctx, "app1", owner(1), 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Forget("lease/owner/" + l.OwnerHash())
	if _, until, _ := b.Holder(ctx, ref); !until.Equal(r.ExpiresAt) {
		t.Fatalf("b after the renew: until %v, want %v", until, r.ExpiresAt)
	}

	// The held answer lapses at the expiry without any store read.
	reads = cb.count()
	clock.Set(r.ExpiresAt)
	if _, _, held := b.Holder(ctx, ref); held {
		t.Fatal("held past the lease's expiry")
	}
	if n := cb.count() - reads; n != 0 {
		t.Fatalf("the lapse read the store %d times", n)
	}
	b.ForgetAll()
	if b.Holder(ctx, ref); cb.count() == reads {
		t.Fatal("ForgetAll kept the cached answer")
	}
}
