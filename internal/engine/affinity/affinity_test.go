package affinity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
)

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newPins() (*Pins, *memStore, *clocktest.Clock) {
	clock := clocktest.NewClock(epoch)
	store := newMemStore(clock)
	return New(store, clock), store, clock
}

func storeKey(session string) string {
	sum := sha256.Sum256([]byte(session))
	return "affinity/" + hex.EncodeToString(sum[:])
}

func TestSessionID(t *testing.T) {
	long := strings.Repeat("s", 257)
	longSum := sha256.Sum256([]byte(long))
	tests := []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"none", nil, ""},
		{"X-Session-Id", map[string]string{"X-Session-Id": "a"}, "a"},
		{"codex", map[string]string{"x-codex-session-id": "b"}, "b"},
		{"breakwater", map[string]string{"x-breakwater-session": "c"}, "c"},
		{"precedence", map[string]string{"X-Session-Id": "a", "x-codex-session-id": "b", "x-breakwater-session": "c"}, "a"},
		{"precedence codex over breakwater", map[string]string{"x-codex-session-id": "b", "x-breakwater-session": "c"}, "b"},
		{"blank first is skipped", map[string]string{"X-Session-Id": "  ", "x-breakwater-session": "c"}, "c"},
		{"trimmed", map[string]string{"X-Session-Id": "  abc \t"}, "abc"},
		{"256 bytes verbatim", map[string]string{"X-Session-Id": strings.Repeat("s", 256)}, strings.Repeat("s", 256)},
		{"257 bytes hashed", map[string]string{"X-Session-Id": long}, "sha256:" + hex.EncodeToString(longSum[:])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			if got := SessionID(h.Get); got != tt.want {
				t.Fatalf("SessionID = %q, want %q", got, tt.want)
			}
		})
	}
	if len(Headers) != 3 || Headers[0] != "X-Session-Id" || Headers[1] != "x-codex-session-id" || Headers[2] != "x-breakwater-session" {
		t.Fatalf("Headers = %v", Headers)
	}
}

func TestPinGetTTL(t *testing.T) {
	p, store, clock := newPins()
	ctx := context.Background()
	if _, ok := p.Get(ctx, "s1"); ok {
		t.Fatal("unpinned session has a pin")
	}
	if err := p.Pin(ctx, "s1", "openai/key-a", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if c, ok := p.Get(ctx, "s1"); !ok || c != "openai/key-a" {
		t.Fatalf("Get = %q %v", c, ok)
	}
	if store.ttlOf(storeKey("s1")) != 10*time.Minute {
		t.Fatalf("stored ttl = %v, want 10 min", store.ttlOf(storeKey("s1")))
	}
	clock.Advance(10*time.Minute - time.Millisecond)
	if _, ok := p.Get(ctx, "s1"); !ok {
		t.Fatal("pin gone before its TTL")
	}
	clock.Advance(time.Millisecond)
	if _, ok := p.Get(ctx, "s1"); ok {
		t.Fatal("pin alive at its TTL")
	}
}

func TestPinOffAndEmpty(t *testing.T) {
	p, store, _ := newPins()
	ctx := context.Background()
	for _, tc := range []struct {
		session, conn string
		ttl           time.Duration
	}{{"s1", "p/c", 0}, {"s1", "p/c", -time.Second}, {"", "p/c", time.Minute}, {"s1", "", time.Minute}} {
		if err := p.Pin(ctx, tc.session, tc.conn, tc.ttl); err != nil {
			t.Fatal(err)
		}
	}
	if w, _ := store.stats(); w != 0 {
		t.Fatalf("ttl 0 (off) / empty ids wrote the store %d times", w)
	}
	if _, ok := p.Get(ctx, "s1"); ok {
		t.Fatal("pin exists with affinity off")
	}
}

func TestPinClampedTo24h(t *testing.T) {
	p, store, clock := newPins()
	ctx := context.Background()
	if err := p.Pin(ctx, "s1", "p/c", 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := store.ttlOf(storeKey("s1")); got != 24*time.Hour {
		t.Fatalf("stored ttl = %v, want 24h", got)
	}
	clock.Advance(24*time.Hour - time.Second)
	if _, ok := p.Get(ctx, "s1"); !ok {
		t.Fatal("pin gone before 24 h")
	}
	clock.Advance(time.Second)
	if _, ok := p.Get(ctx, "s1"); ok {
		t.Fatal("pin alive at 24 h despite a 48 h ttl")
	}
}

func TestReconfirmAvoidsWrites(t *testing.T) {
	p, store, clock := newPins()
	ctx := context.Background()
	ttl := 8 * time.Minute
	_ = p.Pin(ctx, "s1", "p/c", ttl)
	w0, _ := store.stats()
	clock.Advance(ttl/4 - time.Second)
	_ = p.Pin(ctx, "s1", "p/c", ttl)
	if w, _ := store.stats(); w != w0 {
		t.Fatalf("re-confirm within ttl/4 wrote the store (%d writes)", w-w0)
	}
	clock.Advance(time.Second) // now exactly ttl/4 after the write
	_ = p.Pin(ctx, "s1", "p/c", ttl)
	if w, _ := store.stats(); w != w0+1 {
		t.Fatalf("re-confirm at ttl/4 writes = %d, want 1", w-w0)
	}
	// The expiry slid: the pin lives ttl after the second write.
	clock.Advance(ttl - time.Second)
	if _, ok := p.Get(ctx, "s1"); !ok {
		t.Fatal("re-confirmed pin expired early")
	}
	// A different connection or ttl always writes.
	w1, _ := store.stats()
	_ = p.Pin(ctx, "s1", "p/other", ttl)
	_ = p.Pin(ctx, "s1", "p/other", 2*ttl)
	if w, _ := store.stats(); w != w1+2 {
		t.Fatalf("re-pin to another connection / ttl writes = %d, want 2", w-w1)
	}
	if c, _ := p.Get(ctx, "s1"); c != "p/other" {
		t.Fatalf("Get = %q after re-pin", c)
	}
}

func TestPinsPersisted(t *testing.T) {
	p, store, clock := newPins()
	ctx := context.Background()
	_ = p.Pin(ctx, "s1", "claude/oauth-1", time.Hour)
	// A restart: a new Pins on the same store loads lazily, once.
	p2 := New(store, clock)
	_, r0 := store.stats()
	for range 3 {
		if c, ok := p2.Get(ctx, "s1"); !ok || c != "claude/oauth-1" {
			t.Fatalf("after reopen Get = %q %v", c, ok)
		}
	}
	if _, r := store.stats(); r != r0+1 {
		t.Fatalf("store reads = %d, want 1 (cached after the first)", r-r0)
	}
	// TTL is still judged on the clock for a loaded pin.
	clock.Advance(time.Hour)
	if _, ok := p2.Get(ctx, "s1"); ok {
		t.Fatal("loaded pin alive past its TTL")
	}
}

// TestSoftRepin: the pinned connection fails, the session is unpinned and
// re-pins to a healthy connection; the new pin is what a restart sees.
func TestSoftRepin(t *testing.T) {
	p, store, clock := newPins()
	ctx := context.Background()
	ttl := time.Hour
	_ = p.Pin(ctx, "agent", "openai/key-a", ttl)

	// key-a fails: soft unpin.
	if err := p.UnpinIf(ctx, "agent", "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Get(ctx, "agent"); ok {
		t.Fatal("session still pinned to the failed connection")
	}
	_ = p.Pin(ctx, "agent", "openai/key-b", ttl)
	if c, _ := p.Get(ctx, "agent"); c != "openai/key-b" {
		t.Fatalf("re-pinned to %q, want key-b", c)
	}

	// A late failure report for key-a must not drop the new pin.
	if err := p.UnpinIf(ctx, "agent", "openai/key-a"); err != nil {
		t.Fatal(err)
	}
	if c, ok := p.Get(ctx, "agent"); !ok || c != "openai/key-b" {
		t.Fatalf("late unpin of key-a dropped the key-b pin: %q %v", c, ok)
	}
	if c, ok := New(store, clock).Get(ctx, "agent"); !ok || c != "openai/key-b" {
		t.Fatalf("after reopen Get = %q %v, want key-b", c, ok)
	}

	// Unpin drops any pin, in memory and in the store.
	if err := p.Unpin(ctx, "agent"); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Get(ctx, "agent"); ok {
		t.Fatal("pin survived Unpin")
	}
	if _, ok, _ := store.Get(ctx, storeKey("agent")); ok {
		t.Fatal("pin still stored after Unpin")
	}
}

func TestSessionsIndependent(t *testing.T) {
	p, _, _ := newPins()
	ctx := context.Background()
	_ = p.Pin(ctx, "s1", "p/a", time.Hour)
	_ = p.Pin(ctx, "s2", "p/b", time.Hour)
	_ = p.Unpin(ctx, "s1")
	if c, ok := p.Get(ctx, "s2"); !ok || c != "p/b" {
		t.Fatalf("s2 = %q %v", c, ok)
	}
}

func TestStoreErrorReadsAsNoPin(t *testing.T) {
	p, store, clock := newPins()
	ctx := context.Background()
	_ = p.Pin(ctx, "s1", "p/a", time.Hour)
	store.failRead.Store(true)
	// Cached: still served.
	if _, ok := p.Get(ctx, "s1"); !ok {
		t.Fatal("cached pin lost on a store error")
	}
	if _, ok := New(store, clock).Get(ctx, "s1"); ok {
		t.Fatal("store error read as a pin")
	}
}

func TestConcurrentUse(t *testing.T) {
	p, _, clock := newPins()
	ctx := context.Background()
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				s := []string{"s1", "s2"}[i%2]
				switch (i + g) % 4 {
				case 0:
					_ = p.Pin(ctx, s, "p/a", time.Minute)
				case 1:
					p.Get(ctx, s)
				case 2:
					_ = p.UnpinIf(ctx, s, "p/a")
				case 3:
					clock.Advance(time.Second)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	// After the dust settles, cache and store agree.
	_ = p.Pin(ctx, "s1", "p/z", time.Minute)
	if c, _ := p.Get(ctx, "s1"); c != "p/z" {
		t.Fatalf("Get = %q", c)
	}
}

// TestForgetDropsAPinAnotherInstanceChanged: two instances on one store;
// the second keeps its cached pin after the first moves the session
// until it is told (Forget with the store key, or ForgetAll), then reads
// the new pin.
func TestForgetDropsAPinAnotherInstanceChanged(t *testing.T) {
	a, store, clock := newPins()
	b := New(store, clock)
	ctx := context.Background()
	_ = a.Pin(ctx, "s1", "p/conn-1", time.Hour)
	if c, _ := b.Get(ctx, "s1"); c != "p/conn-1" {
		t.Fatalf("b reads %q", c)
	}
	_ = a.Pin(ctx, "s1", "p/conn-2", time.Hour)
	if c, _ := b.Get(ctx, "s1"); c != "p/conn-1" {
		t.Fatalf("b read %q before being told: its cache is not in use", c)
	}
	b.Forget("lease/unrelated")
	if c, _ := b.Get(ctx, "s1"); c != "p/conn-1" {
		t.Fatal("an unrelated key dropped the pin")
	}
	b.Forget(storeKey("s1"))
	if c, _ := b.Get(ctx, "s1"); c != "p/conn-2" {
		t.Fatalf("b after Forget reads %q, want p/conn-2", c)
	}
	_ = a.Unpin(ctx, "s1")
	b.ForgetAll()
	if c, ok := b.Get(ctx, "s1"); ok {
		t.Fatalf("b after ForgetAll still reads %q", c)
	}
}
