package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/internal/clock/clocktest"
	"github.com/breakwater-dev/breakwater/internal/engine"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/internal/envelope"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
	"github.com/breakwater-dev/breakwater/internal/runtime/store/storetest"
)

var prefixSeq atomic.Int64

// uniquePrefix isolates one test's keys on the shared server.
func uniquePrefix() string {
	return fmt.Sprintf("bwtest:%d:%d:", time.Now().UnixNano(), prefixSeq.Add(1))
}

// open opens a Store on the test server under prefix ("" = the default).
func open(t testing.TB, clock engine.Clock, prefix string) *Store {
	t.Helper()
	return openWith(t, clock, Options{URL: requireServer(t), KeyPrefix: prefix})
}

// openWith opens a Store with o, closed when the test ends.
func openWith(t testing.TB, clock engine.Clock, o Options) *Store {
	t.Helper()
	s, err := Open(o, clock, nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", o.describe(), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func rawClient(t *testing.T) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(requireServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T, clock *clocktest.Clock) engine.Store {
		return open(t, clock, uniquePrefix())
	})
}

func TestPersistence(t *testing.T) {
	requireServer(t)
	storetest.RunPersistence(t, func(t *testing.T, clock *clocktest.Clock, name string) engine.Store {
		return open(t, clock, "bwtest:"+name+":")
	})
}

// TestSharedAcrossInstances runs the CAS counter race over two Stores, as two
// gateway instances sharing one Redis would.
func TestSharedAcrossInstances(t *testing.T) {
	const perInstance = 50
	prefix := uniquePrefix()
	clock := clocktest.NewClock(storetest.Epoch)
	stores := []*Store{open(t, clock, prefix), open(t, clock, prefix)}
	ctx := context.Background()
	if err := stores[0].Put(ctx, "counter", []byte{0}, 0); err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
	)
	for _, s := range stores {
		for range perInstance {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					cur, ok, err := s.Get(ctx, "counter")
					if err != nil || !ok {
						failed.Add(1)
						return
					}
					if swapped, err := s.CompareAndSet(ctx, "counter", cur, []byte{cur[0] + 1}, 0); err != nil {
						failed.Add(1)
						return
					} else if swapped {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d workers failed", failed.Load())
	}
	got, _, err := stores[1].Get(ctx, "counter")
	if err != nil || len(got) != 1 || got[0] != 2*perInstance {
		t.Fatalf("counter = %v, %v; want [%d]", got, err, 2*perInstance)
	}
}

func TestDefaultKeyPrefixAndGCExpiry(t *testing.T) {
	clock := clocktest.NewClock(storetest.Epoch)
	s := open(t, clock, "")
	raw := rawClient(t)
	ctx := context.Background()
	key := "test/" + uniquePrefix()
	full := DefaultKeyPrefix + "{test}:" + key
	t.Cleanup(func() { raw.Del(context.Background(), full) })

	if err := s.Put(ctx, key, []byte("v"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	stored, err := raw.Get(ctx, full).Bytes()
	if err != nil {
		t.Fatalf("raw GET %s: %v", full, err)
	}
	stamp, payload, err := envelope.Decode(stored)
	if err != nil || string(payload) != "v" || stamp != envelope.Stamp(storetest.Epoch.Add(10*time.Second)) {
		t.Fatalf("stored envelope = %q (%v)", stored, err)
	}
	assertPTTL(t, raw, full, 10*time.Second+GCGrace)

	if _, err := s.CompareAndSet(ctx, key, []byte("v"), []byte("w"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	assertPTTL(t, raw, full, 20*time.Second+GCGrace)

	if err := s.Put(ctx, key, []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if d := raw.PTTL(ctx, full).Val(); d != -1 {
		t.Fatalf("PTTL after Put with ttl 0 = %v, want no expiry (-1)", d)
	}
}

func assertPTTL(t *testing.T, raw *redis.Client, key string, want time.Duration) {
	t.Helper()
	d, err := raw.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d > want || d < want-5*time.Second {
		t.Fatalf("PTTL(%s) = %v, want about %v", key, d, want)
	}
}

func TestOpenErrorsHidePassword(t *testing.T) {
	url := requireServer(t)
	const secret = "s3cr3t-Pa55"
	closedPort, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		url  string
	}{
		{"unreachable", fmt.Sprintf("redis://user:%s@127.0.0.1:%d/0", secret, closedPort)},
		{"unparseable", fmt.Sprintf("redis://user:%s@127.0.0.1:notaport/0", secret)},
		{"bad database", fmt.Sprintf("redis://user:%s@127.0.0.1:%d/x", secret, closedPort)},
		{"bad scheme", fmt.Sprintf("http://user:%s@127.0.0.1/", secret)},
		{"wrong password", strings.Replace(url, "redis://", "redis://nobody:"+secret+"@", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			s, err := Open(Options{URL: tt.url}, engine.SystemClock{}, nil)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded, want an error")
			}
			t.Log(err)
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("Open took %v to fail", took)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error leaks the password: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "redisstore: ") {
				t.Fatalf("error lacks context: %v", err)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:pw@h:1/0", "redis://:xxxxx@h:1/0"},
		{"redis://u:pw@h:bad/0", "redis://xxxxx@h:bad/0"},
		{"redis://u:p@w@h:bad/0", "redis://xxxxx@h:bad/0"},
		{"%zz", "[unparseable URL]"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEscapeGlob(t *testing.T) {
	if got, want := escapeGlob(`a*b?c[d]e\f`), `a\*b\?c\[d\]e\\f`; got != want {
		t.Fatalf("escapeGlob = %q, want %q", got, want)
	}
}

func TestClosedStoreErrors(t *testing.T) {
	s := open(t, engine.SystemClock{}, uniquePrefix())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSet(context.Background(), "k", nil, []byte("v"), 0); !errors.Is(err, errClosed) {
		t.Fatalf("CAS after Close err = %v", err)
	}
}
