package server

import (
	"testing"
	"time"
)

// BenchmarkScope is a request's scope when it is answered at once: open,
// settle, end, with a watchable connection and the default deadline, from
// every core at once.
func BenchmarkScope(b *testing.B) {
	srv, _ := connPair(&testing.T{})
	set := newScopeSet()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := time.Now()
			sc := set.open(srv, now, now.Add(15*time.Minute))
			sc.settle()
			sc.end()
		}
	})
}
