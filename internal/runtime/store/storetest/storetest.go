// Package storetest is the conformance suite every engine.Store backend
// runs: the same assertions against memstore, badgerstore and redisstore.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
)

// Epoch is the time every suite clock starts at. It has a sub-millisecond
// part on purpose, so backends that round expiry would fail the TTL tests.
var Epoch = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC)

// TTL is the time-to-live the suite's expiry tests use.
const TTL = 30 * time.Second

// Opener opens a fresh, empty store judged against clock. Run closes the
// store when the subtest ends; backends may also register their own cleanup
// since Close is idempotent.
type Opener func(t *testing.T, clock *clocktest.Clock) engine.Store

// Run runs the conformance suite, one subtest per behaviour, each on a fresh
// store from open.
func Run(t *testing.T, open Opener) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s engine.Store, clock *clocktest.Clock)
	}{
		{"GetAbsent", testGetAbsent},
		{"PutGetOverwrite", testPutGetOverwrite},
		{"ValuesAreCopied", testValuesAreCopied},
		{"Delete", testDelete},
		{"ScanOrderAndPrefix", testScanOrderAndPrefix},
		{"ScanGlobCharacters", testScanGlobCharacters},
		{"TTLGet", testTTLGet},
		{"TTLScan", testTTLScan},
		{"TTLCompareAndSet", testTTLCompareAndSet},
		{"TTLReplacedByPut", testTTLReplacedByPut},
		{"CompareAndSet", testCompareAndSet},
		{"CompareAndSetRace", testCompareAndSetRace},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.NewClock(Epoch)
			s := open(t, clock)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s, clock)
		})
	}
}

func testGetAbsent(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	v, ok, err := s.Get(context.Background(), "missing")
	if err != nil || ok || v != nil {
		t.Fatalf("Get(missing) = (%q, %v, %v), want (nil, false, nil)", v, ok, err)
	}
}

func testPutGetOverwrite(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	ctx := context.Background()
	tests := []struct {
		key   string
		value []byte
	}{
		{"plain", []byte("v1")},
		{"plain", []byte("v2")}, // overwrite
		{"empty", []byte{}},
		{"nil-is-empty", nil},
		{"binary", []byte{0, 1, 2, 0xff, 0}},
		{"unicode/clé/⚡", []byte("ünïcødé")},
		{"big", bytes.Repeat([]byte("x"), 64<<10)},
	}
	for _, tt := range tests {
		mustPut(t, s, tt.key, tt.value, 0)
		v, ok, err := s.Get(ctx, tt.key)
		if err != nil || !ok {
			t.Fatalf("Get(%q) = (_, %v, %v), want present", tt.key, ok, err)
		}
		if v == nil || !bytes.Equal(v, tt.value) {
			t.Fatalf("Get(%q) = %q (nil=%v), want %q as a non-nil slice", tt.key, short(v), v == nil, short(tt.value))
		}
	}
}

func testValuesAreCopied(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	in := []byte("abc")
	mustPut(t, s, "k", in, 0)
	in[0] = 'X'
	out := mustGet(t, s, "k")
	if string(out) != "abc" {
		t.Fatalf("store kept the caller's slice: got %q", out)
	}
	out[0] = 'Y'
	if got := mustGet(t, s, "k"); string(got) != "abc" {
		t.Fatalf("store returned its own slice: got %q", got)
	}
}

func testDelete(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	ctx := context.Background()
	mustPut(t, s, "k", []byte("v"), 0)
	mustPut(t, s, "k2", []byte("v"), 0)
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	mustAbsent(t, s, "k")
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatalf("Delete of absent key: %v", err)
	}
	if err := s.Delete(ctx, "never-existed"); err != nil {
		t.Fatalf("Delete of never-existing key: %v", err)
	}
	if got := mustGet(t, s, "k2"); string(got) != "v" {
		t.Fatalf("Delete touched another key: %q", got)
	}
}

func testScanOrderAndPrefix(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	// Inserted out of order; prefixes nest ("a" < "a/" < "ab/").
	keys := []string{"b/2", "a/3", "ab/1", "a/1", "b/1", "a", "a/2", "a/10", "c"}
	for _, k := range keys {
		mustPut(t, s, k, []byte("v:"+k), 0)
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"a/", []string{"a/1", "a/10", "a/2", "a/3"}},
		{"a", []string{"a", "a/1", "a/10", "a/2", "a/3", "ab/1"}},
		{"ab", []string{"ab/1"}},
		{"b/", []string{"b/1", "b/2"}},
		{"c", []string{"c"}},
		{"", []string{"a", "a/1", "a/10", "a/2", "a/3", "ab/1", "b/1", "b/2", "c"}},
		{"d", nil},
		{"a/1/", nil},
	}
	for _, tt := range tests {
		got := mustScan(t, s, tt.prefix)
		assertKVs(t, tt.prefix, got, tt.want)
	}
}

func testScanGlobCharacters(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	keys := []string{`g*1`, `g*2`, `gx1`, `g?a`, `gza`, `g[ab]c`, `gac`, `g\x`, `g\\x`, `gx`}
	for _, k := range keys {
		mustPut(t, s, k, []byte("v:"+k), 0)
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{`g*`, []string{`g*1`, `g*2`}},
		{`g?`, []string{`g?a`}},
		{`g[ab]`, []string{`g[ab]c`}},
		{`g[`, []string{`g[ab]c`}},
		{`g\`, []string{`g\\x`, `g\x`}},
		{`g\x`, []string{`g\x`}},
	}
	for _, tt := range tests {
		assertKVs(t, tt.prefix, mustScan(t, s, tt.prefix), tt.want)
	}
}

func testTTLGet(t *testing.T, s engine.Store, clock *clocktest.Clock) {
	mustPut(t, s, "ttl", []byte("v"), TTL)
	mustPut(t, s, "forever", []byte("f"), 0)
	clock.Advance(TTL - time.Millisecond)
	if got := mustGet(t, s, "ttl"); string(got) != "v" {
		t.Fatalf("at ttl-1ms: Get = %q, want alive", got)
	}
	clock.Advance(time.Millisecond)
	mustAbsent(t, s, "ttl")
	clock.Advance(1000 * time.Hour)
	if got := mustGet(t, s, "forever"); string(got) != "f" {
		t.Fatalf("ttl 0 expired: Get = %q", got)
	}
	mustAbsent(t, s, "ttl") // stays gone after the lazy deletion
}

func testTTLScan(t *testing.T, s engine.Store, clock *clocktest.Clock) {
	mustPut(t, s, "p/short", []byte("v:p/short"), TTL)
	mustPut(t, s, "p/long", []byte("v:p/long"), 2*TTL)
	mustPut(t, s, "p/forever", []byte("v:p/forever"), 0)
	mustPut(t, s, "q/short", []byte("v:q/short"), 0)
	clock.Advance(TTL - time.Millisecond)
	assertKVs(t, "p/", mustScan(t, s, "p/"), []string{"p/forever", "p/long", "p/short"})
	clock.Advance(time.Millisecond)
	assertKVs(t, "p/", mustScan(t, s, "p/"), []string{"p/forever", "p/long"})
	clock.Advance(TTL)
	assertKVs(t, "p/", mustScan(t, s, "p/"), []string{"p/forever"})
	mustAbsent(t, s, "p/short")
}

func testTTLCompareAndSet(t *testing.T, s engine.Store, clock *clocktest.Clock) {
	for _, k := range []string{"absent-required", "match-alive", "match-expired", "delete-expired"} {
		mustPut(t, s, k, []byte("v"), TTL)
	}
	clock.Advance(TTL - time.Millisecond)
	// Alive at ttl-1ms: it blocks an absent-required CAS and can be matched.
	mustCAS(t, s, "absent-required", nil, []byte("new"), 0, false)
	mustCAS(t, s, "match-alive", []byte("v"), []byte("w"), 0, true)
	clock.Advance(time.Millisecond)
	// Gone at ttl: absent-required succeeds, matching the old value fails.
	mustCAS(t, s, "absent-required", nil, []byte("new"), 0, true)
	if got := mustGet(t, s, "absent-required"); string(got) != "new" {
		t.Fatalf("after CAS over expired key: %q", got)
	}
	mustCAS(t, s, "match-expired", []byte("v"), []byte("w"), 0, false)
	mustCAS(t, s, "delete-expired", []byte("v"), nil, 0, false)
	mustAbsent(t, s, "match-expired")
	mustAbsent(t, s, "delete-expired")
	if got := mustGet(t, s, "match-alive"); string(got) != "w" {
		t.Fatalf("CAS with ttl 0 kept the old expiry: %q", got)
	}

	// A CAS with a ttl sets the expiry of the new value.
	mustCAS(t, s, "cas-ttl", nil, []byte("c"), TTL, true)
	clock.Advance(TTL - time.Millisecond)
	if got := mustGet(t, s, "cas-ttl"); string(got) != "c" {
		t.Fatalf("CAS ttl: at ttl-1ms Get = %q, want alive", got)
	}
	clock.Advance(time.Millisecond)
	mustAbsent(t, s, "cas-ttl")
	mustCAS(t, s, "cas-ttl", nil, []byte("again"), 0, true)
}

func testTTLReplacedByPut(t *testing.T, s engine.Store, clock *clocktest.Clock) {
	mustPut(t, s, "k", []byte("v1"), TTL)
	mustPut(t, s, "k", []byte("v2"), 0) // no expiry any more
	mustPut(t, s, "k2", []byte("v1"), 0)
	mustPut(t, s, "k2", []byte("v2"), TTL) // gains an expiry
	clock.Advance(TTL)
	if got := mustGet(t, s, "k"); string(got) != "v2" {
		t.Fatalf("Put with ttl 0 kept the old expiry: %q", got)
	}
	mustAbsent(t, s, "k2")
}

func testCompareAndSet(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	mustPut(t, s, "present", []byte("v"), 0)
	mustPut(t, s, "empty", []byte{}, 0)
	tests := []struct {
		name      string
		key       string
		old, val  []byte
		wantOK    bool
		wantValue []byte // nil: absent afterwards
	}{
		{"absent required, absent", "new", nil, []byte("n"), true, []byte("n")},
		{"absent required, present", "present", nil, []byte("x"), false, []byte("v")},
		{"mismatch", "present", []byte("other"), []byte("x"), false, []byte("v")},
		{"mismatch on absent key", "nope", []byte("v"), []byte("x"), false, nil},
		{"empty old is not absent", "nope2", []byte{}, []byte("x"), false, nil},
		{"empty old matches empty value", "empty", []byte{}, []byte("e"), true, []byte("e")},
		{"match", "present", []byte("v"), []byte("v2"), true, []byte("v2")},
		{"match to empty value", "present", []byte("v2"), []byte{}, true, []byte{}},
		{"delete mismatch", "present", []byte("zz"), nil, false, []byte{}},
		{"delete via nil", "present", []byte{}, nil, true, nil},
		{"absent required, delete", "still-absent", nil, nil, true, nil},
	}
	for _, tt := range tests {
		ok, err := s.CompareAndSet(context.Background(), tt.key, tt.old, tt.val, 0)
		if err != nil || ok != tt.wantOK {
			t.Fatalf("%s: CAS = (%v, %v), want (%v, nil)", tt.name, ok, err, tt.wantOK)
		}
		v, present, err := s.Get(context.Background(), tt.key)
		if err != nil {
			t.Fatal(err)
		}
		if tt.wantValue == nil {
			if present {
				t.Fatalf("%s: key %q = %q, want absent", tt.name, tt.key, v)
			}
		} else if !present || !bytes.Equal(v, tt.wantValue) {
			t.Fatalf("%s: key %q = (%q, %v), want %q", tt.name, tt.key, v, present, tt.wantValue)
		}
	}
}

// testCompareAndSetRace has 100 goroutines increment one counter through
// CompareAndSet; exactly 100 swaps must succeed and the counter must read 100.
func testCompareAndSetRace(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	const workers = 100
	ctx := context.Background()
	mustPut(t, s, "counter", []byte("0"), 0)
	var (
		wg        sync.WaitGroup
		successes atomic.Int64
		errs      = make(chan error, workers)
		start     = make(chan struct{})
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				cur, ok, err := s.Get(ctx, "counter")
				if err != nil || !ok {
					errs <- fmt.Errorf("get counter = (%v, %v)", ok, err)
					return
				}
				n, err := strconv.Atoi(string(cur))
				if err != nil {
					errs <- err
					return
				}
				swapped, err := s.CompareAndSet(ctx, "counter", cur, []byte(strconv.Itoa(n+1)), 0)
				if err != nil {
					errs <- err
					return
				}
				if swapped {
					successes.Add(1)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := successes.Load(); got != workers {
		t.Fatalf("successful swaps = %d, want %d", got, workers)
	}
	if got := mustGet(t, s, "counter"); string(got) != strconv.Itoa(workers) {
		t.Fatalf("counter = %s, want %d", got, workers)
	}
}

func testClose(t *testing.T, s engine.Store, _ *clocktest.Clock) {
	mustPut(t, s, "k", []byte("v"), 0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := s.Get(context.Background(), "k"); err == nil {
		t.Fatal("Get after Close succeeded, want an error")
	}
	if err := s.Put(context.Background(), "k", []byte("v"), 0); err == nil {
		t.Fatal("Put after Close succeeded, want an error")
	}
}

func mustPut(t *testing.T, s engine.Store, key string, value []byte, ttl time.Duration) {
	t.Helper()
	if err := s.Put(context.Background(), key, value, ttl); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, s engine.Store, key string) []byte {
	t.Helper()
	v, ok, err := s.Get(context.Background(), key)
	if err != nil || !ok {
		t.Fatalf("Get(%q) = (_, %v, %v), want present", key, ok, err)
	}
	return v
}

func mustAbsent(t *testing.T, s engine.Store, key string) {
	t.Helper()
	v, ok, err := s.Get(context.Background(), key)
	if err != nil || ok || v != nil {
		t.Fatalf("Get(%q) = (%q, %v, %v), want absent", key, v, ok, err)
	}
}

func mustScan(t *testing.T, s engine.Store, prefix string) []engine.KV {
	t.Helper()
	kvs, err := s.Scan(context.Background(), prefix)
	if err != nil {
		t.Fatalf("Scan(%q): %v", prefix, err)
	}
	return kvs
}

func mustCAS(t *testing.T, s engine.Store, key string, old, value []byte, ttl time.Duration, want bool) {
	t.Helper()
	ok, err := s.CompareAndSet(context.Background(), key, old, value, ttl)
	if err != nil || ok != want {
		t.Fatalf("CAS(%q, %q -> %q) = (%v, %v), want (%v, nil)", key, old, value, ok, err, want)
	}
}

// assertKVs checks that got holds exactly the keys want, in that order, each
// with the value "v:"+key.
func assertKVs(t *testing.T, prefix string, got []engine.KV, want []string) {
	t.Helper()
	keys := make([]string, len(got))
	for i, kv := range got {
		keys[i] = kv.Key
	}
	if fmt.Sprint(keys) != fmt.Sprint(want) || len(keys) != len(want) {
		t.Fatalf("Scan(%q) keys = %q, want %q", prefix, keys, want)
	}
	for _, kv := range got {
		if want := "v:" + kv.Key; string(kv.Value) != want {
			t.Fatalf("Scan(%q): %q = %q, want %q", prefix, kv.Key, kv.Value, want)
		}
	}
}

func short(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}

// Reopener opens the store named name, judged against clock. Two calls with
// the same name must reach the same data (the same Badger directory, the same
// Redis server and key prefix); different names must not share data. name is
// unique per scenario and safe as a file name and a key prefix. The suite
// closes each store it opens.
type Reopener func(t *testing.T, clock *clocktest.Clock, name string) engine.Store

var reopenSeq atomic.Int64

// RunPersistence checks that data written before Close is read back after
// reopening: plain values, empty values, deletions, CompareAndSet results and
// expiries (still judged against the clock after the reopen).
func RunPersistence(t *testing.T, open Reopener) {
	t.Helper()
	t.Run("Reopen", func(t *testing.T) {
		name := fmt.Sprintf("persist-%d-%d", time.Now().UnixNano(), reopenSeq.Add(1))
		clock := clocktest.NewClock(Epoch)

		first := open(t, clock, name)
		t.Cleanup(func() { _ = first.Close() })
		s := first
		mustPut(t, s, "keep", []byte("v:keep"), 0)
		mustPut(t, s, "ttl", []byte("v:ttl"), TTL)
		mustPut(t, s, "gone", []byte("v:gone"), 0)
		if err := s.Delete(context.Background(), "gone"); err != nil {
			t.Fatal(err)
		}
		mustCAS(t, s, "cas", nil, []byte("v:cas"), 0, true)
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}

		clock.Advance(TTL - time.Millisecond)
		s = open(t, clock, name)
		t.Cleanup(func() { _ = s.Close() })
		assertKVs(t, "", mustScan(t, s, ""), []string{"cas", "keep", "ttl"})
		mustAbsent(t, s, "gone")
		clock.Advance(time.Millisecond)
		mustAbsent(t, s, "ttl")
		mustCAS(t, s, "cas", []byte("v:cas"), []byte("v:cas2"), 0, true)
	})
	t.Run("Isolated", func(t *testing.T) {
		clock := clocktest.NewClock(Epoch)
		base := fmt.Sprintf("iso-%d-%d", time.Now().UnixNano(), reopenSeq.Add(1))
		a := open(t, clock, base+"-a")
		t.Cleanup(func() { _ = a.Close() })
		mustPut(t, a, "k", []byte("v:k"), 0)
		b := open(t, clock, base+"-b")
		t.Cleanup(func() { _ = b.Close() })
		mustAbsent(t, b, "k")
	})
}
