package storetest

import (
	"context"
	"strconv"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/engine"
)

// benchKeys is the number of distinct keys the benchmarks spread over.
const benchKeys = 1024

// benchValue is a value the size of a typical breaker or cooldown record.
var benchValue = []byte(`{"state":"OPEN","failure_count":5,"opened_at":1767225600000,"level":2}`)

// BenchmarkGet measures Get of existing keys on s, which it closes at the
// end.
func BenchmarkGet(b *testing.B, s engine.Store) {
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	keys := benchKeyNames()
	for _, k := range keys {
		if err := s.Put(ctx, k, benchValue, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok, err := s.Get(ctx, keys[i%benchKeys]); err != nil || !ok {
			b.Fatalf("Get = (%v, %v)", ok, err)
		}
	}
}

// BenchmarkPut measures durable Put (with a TTL) on s, which it closes at
// the end.
func BenchmarkPut(b *testing.B, s engine.Store) {
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	keys := benchKeyNames()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := s.Put(ctx, keys[i%benchKeys], benchValue, TTL); err != nil {
			b.Fatal(err)
		}
	}
}

func benchKeyNames() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "bench/breaker/provider-" + strconv.Itoa(i)
	}
	return keys
}
