package badgerstore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/breakwater-dev/breakwater/engine"
)

func rss() string {
	b, _ := os.ReadFile("/proc/self/status")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return strings.Join(out, " | ") + fmt.Sprintf(" | heapInuse %d MB sys %d MB", ms.HeapInuse>>20, ms.Sys>>20)
}

func TestZZRSS(t *testing.T) {
	runtime.GC()
	t.Log("start", rss())
	var s *Store
	if os.Getenv("RSS_DEFAULT") != "" {
		db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).WithSyncWrites(true))
		if err != nil { t.Fatal(err) }
		s = &Store{db: db, clock: engine.SystemClock{}, unlock: func() error { return nil }, logger: nil}
	} else {
		s = open(t, t.TempDir(), engine.SystemClock{})
	}
	t.Log("open", rss())
	ctx := context.Background()
	v := make([]byte, 200)
	n := 20000
	if os.Getenv("RSS_N") != "" { fmt.Sscan(os.Getenv("RSS_N"), &n) }
	wb := s.db.NewWriteBatch()
	for i := 0; i < n; i++ {
		_ = wb.Set([]byte(fmt.Sprintf("k/%d", i)), v)
	}
	wb.Flush()
	for i := 0; i < 2000; i++ {
		s.Put(ctx, fmt.Sprintf("k/%d", i), v, 0)
	}
	for i := 0; i < n; i += 7 {
		s.Get(ctx, fmt.Sprintf("k/%d", i))
	}
	runtime.GC()
	t.Log("after keys", rss())
}
