package redisstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/breakwater-dev/breakwater/internal/runtime/store/redisstore/redisproc"
)

// testServer is the redis-server process TestMain started, or why there is
// none.
var testServer struct {
	srv        *redisproc.Server
	dir        string
	skipReason string
}

func TestMain(m *testing.M) {
	os.Exit(runWithServer(m))
}

func runWithServer(m *testing.M) int {
	if err := redisproc.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "redisstore tests:", err, "(CI=true)")
			return 1
		}
		testServer.skipReason = err.Error()
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "breakwater-redis-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testServer.dir = dir
	srv, err := redisproc.Start(filepath.Join(dir, "single"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Kill()
	testServer.srv = srv
	defer stopCluster()
	return m.Run()
}

// requireServer returns the test server's URL or skips t.
func requireServer(t testing.TB) string {
	t.Helper()
	if testServer.skipReason != "" {
		t.Skip(testServer.skipReason)
	}
	return testServer.srv.URL()
}

var cluster struct {
	once sync.Once
	c    *redisproc.Cluster
	err  error
}

// requireCluster returns a 3-node Redis Cluster shared by the tests.
func requireCluster(t testing.TB) *redisproc.Cluster {
	t.Helper()
	requireServer(t)
	cluster.once.Do(func() {
		cluster.c, cluster.err = redisproc.StartCluster(filepath.Join(testServer.dir, "cluster"), 3)
	})
	if cluster.err != nil {
		t.Fatal(cluster.err)
	}
	return cluster.c
}

func stopCluster() {
	if cluster.c != nil {
		cluster.c.Close()
	}
}
